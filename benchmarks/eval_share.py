"""Evaluation's share of a training run's wall time at large K (issue 53), and where it goes.

    python benchmarks/eval_share.py                      # K = 20, n_bases 200, 300 steps, 1 thread, 1 run
    python benchmarks/eval_share.py --workers 2          # two runs at once, 1 thread each (as the sweep runs)
    python benchmarks/eval_share.py --k 13 --steps 200

The run is the K point of the `landauer-dense-wide-tiny` sweep preset (the lead family: the tiny model at
n_bases = 200, its eval_every and eval_size), cut to --steps and without its stop after the snap. Inside
`interp.train` the timers wrap what an evaluation row costs beyond the training steps: the evaluation set's
metrics (`evaluate_examples`: the K candidates' shared-prefix tree, the shuffle gap's forward, the assembly),
the author's in-batch shuffle column and the AdamW columns; checkpoints are timed apart. The share is evaluation
over the training loop's wall time (`TrainResult.seconds`, the model built and the first evaluation included).

Then, on the run's own evaluation set and final weights, alone: the parts of one `evaluate_examples` (median
of --repeats), and one training step for scale. Prints one JSON line.

Run it from another checkout with PYTHONPATH=THAT/CHECKOUT to time that code on the same machine (the
before/after table of benchmarks/README.md was made so).
"""

from __future__ import annotations

import argparse
import json
import multiprocessing as mp
import platform
import statistics
import tempfile
import time
from dataclasses import replace
from pathlib import Path


def _spec(k: int, steps: int, seed: int):
    from interp.sweeps.presets import SWEEP_PRESETS

    sweep = SWEEP_PRESETS["landauer-dense-wide-tiny"]
    point = next((p for p in sweep.points if p["task.k"] == k), {"task.k": k, "train.eval_every": 25})
    base = sweep.base
    return replace(base, seed=seed, task=replace(base.task, k=k),
                   train=replace(base.train, steps=steps, stop_after_snap=None, eval_every=point["train.eval_every"]))


def _timed(module, name: str, totals: dict, key: str) -> None:
    inner = getattr(module, name)

    def wrapper(*args, **kwargs):
        began = time.perf_counter()
        try:
            return inner(*args, **kwargs)
        finally:
            totals[key] = totals.get(key, 0.0) + time.perf_counter() - began
            totals[f"n_{key}"] = totals.get(f"n_{key}", 0) + 1

    setattr(module, name, wrapper)


def one_run(args: tuple) -> dict:
    k, steps, seed, threads, folder = args
    import torch

    torch.set_num_threads(threads)
    import interp.train as T
    from interp.runs import Run

    totals: dict = {}
    _timed(T, "evaluate_examples", totals, "evaluation")
    _timed(T, "inbatch_shuffled_first_loss", totals, "author_shuffle")
    _timed(T, "optimizer_columns", totals, "adamw_columns")
    _timed(Run, "save_checkpoint", totals, "checkpoints")
    _timed(Run, "save_resume", totals, "checkpoints")
    run = Run.create(Path(folder) / f"k{k}-s{seed}", _spec(k, steps, seed))
    result = T.train(run, progress=False)
    evaluation = totals.get("evaluation", 0.0) + totals.get("author_shuffle", 0.0) + totals.get("adamw_columns", 0.0)
    return {"seed": seed, "wall_s": result.seconds, "evaluations": totals.get("n_evaluation", 0),
            "evaluate_examples_s": round(totals.get("evaluation", 0.0), 3),
            "author_shuffle_s": round(totals.get("author_shuffle", 0.0), 3),
            "adamw_columns_s": round(totals.get("adamw_columns", 0.0), 3),
            "checkpoints_s": round(totals.get("checkpoints", 0.0), 3),
            "eval_share": round(evaluation / result.seconds, 4), "path": str(run.path)}


def parts(path: str, threads: int, repeats: int) -> dict:
    """One evaluation's parts on the run's evaluation set and weights, and one training step."""
    import torch

    torch.set_num_threads(threads)
    from interp import metrics as M
    from interp.runs import Run
    from interp.train import eval_subset

    run = Run.open(path)
    task, layout = run.task, run.task.layout
    model = run.model("last")
    model.eval()
    idx, alt = eval_subset(task, run.spec.train, run.spec.seed)

    def median(fn) -> float:
        fn()
        times = []
        for _ in range(repeats):
            began = time.perf_counter()
            fn()
            times.append(time.perf_counter() - began)
        return round(statistics.median(times), 4)

    with torch.no_grad():
        shuffled = task.with_selector(idx, alt)
        out = {"examples": len(idx), "k": task.k,
               "candidate_tree_s": median(lambda: M.candidate_logprobs(model, task, idx)),
               "shuffle_forward_s": median(lambda: M.output_logprobs(model, shuffled, layout.loss_pos)),
               "evaluate_examples_s": median(lambda: M.evaluate_examples(model, task, idx, alt))}
    model.train()
    optimizer = torch.optim.AdamW(model.parameters(), lr=run.spec.train.lr)
    batch = task.train_tokens[torch.randint(0, len(task.train_tokens), (run.spec.train.batch_size,),
                                            generator=torch.Generator().manual_seed(0))]

    def step():
        loss, _ = M.batch_loss_and_first(model, batch, layout.loss_pos)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()

    torch.use_deterministic_algorithms(True)
    out["train_step_s"] = median(step)
    out["eval_every"] = run.spec.train.eval_every
    out["eval_per_step"] = round(out["evaluate_examples_s"] / (out["eval_every"] * out["train_step_s"]), 4)
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--k", type=int, default=20)
    parser.add_argument("--steps", type=int, default=300)
    parser.add_argument("--workers", type=int, default=1, help="runs at once, seeds 0.. (the sweep's 2)")
    parser.add_argument("--threads", type=int, default=1, help="torch threads of each run")
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as folder:
        jobs = [(args.k, args.steps, seed, args.threads, folder) for seed in range(args.workers)]
        if args.workers == 1:
            runs = [one_run(jobs[0])]
        else:
            with mp.get_context("spawn").Pool(args.workers) as pool:
                runs = pool.map(one_run, jobs)
        split = parts(runs[0]["path"], args.threads, args.repeats)
    for r in runs:
        r.pop("path")
    import interp

    print(json.dumps({"machine": platform.processor() or platform.machine(), "code": str(Path(interp.__file__).parent),
                      "k": args.k, "steps": args.steps, "workers": args.workers, "threads": args.threads,
                      "runs": runs, "mean_eval_share": round(statistics.mean(r["eval_share"] for r in runs), 4),
                      "parts": split}))


if __name__ == "__main__":
    main()
