"""Edge attribution on the demo: EAP and EAP-IG at one checkpoint, exact edge patching, the faithfulness curve, EAP
over every checkpoint, and auto-circuit's own EAP on the same model and pairs in the same process.

    python benchmarks/bench_edges.py                                  # ours only
    python benchmarks/bench_edges.py --auto-circuit-python /tmp/ac/bin/python   # and auto-circuit, in that venv

auto-circuit (1.0.1) is never a dependency of interp: give the interpreter of a throwaway venv that has it (and sees
interp and torch). On TransformerLens 3.9 it cannot be imported as it is (it imports `HookedTransformerKeyValueCache`,
gone from TL 3); its child process puts a stand-in class under that name first (only its optional kv-cache argument
names it; none is passed). Its EAP is run on our corrupted prompts as its "clean" ones and our clean ones as its
"corrupt" ones, so that its mask gradient at mask 0 is our EAP score up to sign; its integrated gradients interpolate
the edge masks, not the inputs (EAP-IG-activations), so only its ranking is compared.

Each measurement runs in a child process of its own (peak RSS above the process's state after loading the model and
the pairs); times are the best of `--repeat` after one untimed run. Prints one JSON line.
"""

from __future__ import annotations

import argparse
import json
import resource
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
DEMO = ROOT / "checkpoints" / "demo"
if str(ROOT) not in sys.path:  # another venv's interpreter (auto-circuit's) sees interp from the repository
    sys.path.insert(1, str(ROOT))


def _rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def _setup(step: int, n_pairs: int):
    import torch

    from interp.analysis import edge_graph as eg
    from interp.analysis.patching import make_pairs
    from interp.runs import Run

    torch.set_num_threads(2)
    run = Run.open(DEMO)
    model = run.model(step)
    pos = run.task.layout.decision_pos
    pairs = make_pairs(run.task, n_pairs, run.spec.seed)
    tokens = {k: pairs[k][:, : pos + 1] for k in ("clean", "corrupt")}
    return run, model, tokens, pairs["good"], pairs["bad"], eg


def _best(fn, repeat: int) -> tuple[float, object]:
    """The best time of `repeat` runs after an untimed one; with `repeat` 0, the one run's time."""
    if repeat == 0:
        t0 = time.perf_counter()
        out = fn()
        return time.perf_counter() - t0, out
    out = fn()
    best = float("inf")
    for _ in range(repeat):
        t0 = time.perf_counter()
        out = fn()
        best = min(best, time.perf_counter() - t0)
    return best, out


def ours(step: int, n_pairs: int, repeat: int, what: str) -> dict:
    run, model, tokens, good, bad, eg = _setup(step, n_pairs)
    g = eg.EdgeGraph.of(model)
    base = _rss_mb()

    def scores(m: int):
        batch = eg.prepare(model, tokens["clean"], tokens["corrupt"], good, bad)
        return eg.attribution(model, g, batch, m)

    if what in ("eap", "eap-ig"):
        seconds, _ = _best(lambda: scores(1 if what == "eap" else 5), repeat)
    elif what == "exact":
        batch = eg.prepare(model, tokens["clean"], tokens["corrupt"], good, bad)
        seconds, _ = _best(lambda: eg.exact_patching(model, g, batch), 0)
    elif what == "curve":
        batch = eg.prepare(model, tokens["clean"], tokens["corrupt"], good, bad)
        order = scores(5)[tuple(zip(*g.edges))].abs().argsort(descending=True)
        seconds, _ = _best(lambda: eg.faithfulness_curve(model, g, batch, order), 0)
    else:  # every checkpoint: read it, then EAP
        def every():
            for s in run.steps:
                m = run.model(s)
                batch = eg.prepare(m, tokens["clean"], tokens["corrupt"], good, bad)
                eg.attribution(m, g, batch, 1)
        seconds, _ = _best(every, 0)
        return {"seconds": round(seconds, 3), "checkpoints": len(run.steps),
                "peak_rss_mb_above_setup": round(_rss_mb() - base, 1)}
    return {"seconds": round(seconds, 3), "peak_rss_mb_above_setup": round(_rss_mb() - base, 1)}


def _stand_in() -> None:
    import types

    import transformer_lens

    class HookedTransformerKeyValueCache:  # never built: auto-circuit names it for an optional argument
        pass

    module = types.ModuleType("transformer_lens.past_key_value_caching")
    module.HookedTransformerKeyValueCache = HookedTransformerKeyValueCache
    sys.modules.setdefault("transformer_lens.past_key_value_caching", module)
    if not hasattr(transformer_lens, "HookedTransformerKeyValueCache"):
        transformer_lens.HookedTransformerKeyValueCache = HookedTransformerKeyValueCache


AC_NAMES = {"Resid Start": "embed", "Resid End": "logits"}


def _ac_name(name: str) -> str:
    if name in AC_NAMES:
        return AC_NAMES[name]
    if name.startswith("MLP "):
        return f"MLP{name[4:]}"
    parts = name[1:].split(".")  # A0.3 or A0.3.Q
    return f"L{parts[0]}H{parts[1]}" + (f".{parts[2].lower()}" if len(parts) > 2 else "")


def auto_circuit(step: int, n_pairs: int, repeat: int, what: str) -> dict:
    """auto-circuit's mask-gradient EAP (mask 0) or its IG (`what` = ac-eap / ac-ig), timed in this process next to
    ours (same model, same pairs), with the equality of the EAP scores and the rank correlations."""
    import copy

    import torch
    from scipy.stats import spearmanr

    _stand_in()
    from auto_circuit.data import PromptDataLoader, PromptDataset
    from auto_circuit.prune_algos.mask_gradient import mask_gradient_prune_scores
    from auto_circuit.utils.graph_utils import patchable_model

    run, model, tokens, good, bad, eg = _setup(step, n_pairs)
    g = eg.EdgeGraph.of(model)
    names = g.edge_names()
    base = _rss_mb()
    m = 1 if what == "ac-eap" else 5
    ours_s, ours_scores = _best(lambda: eg.attribution(model, g, eg.prepare(model, tokens["clean"], tokens["corrupt"],
                                                                             good, bad), m), repeat)
    ours_vec = torch.stack([ours_scores[e] for e in g.edges])
    ac_model = copy.deepcopy(model)
    ac_model.set_use_attn_result(True)
    ac_model.set_use_split_qkv_input(True)
    ac_model.set_use_hook_mlp_in(True)
    ac_model = patchable_model(ac_model, factorized=True, slice_output="last_seq", separate_qkv=True,
                               device=torch.device("cpu"))
    # ours patches clean into corrupted: auto-circuit's "clean" run is our corrupted one
    data = PromptDataset(tokens["corrupt"], tokens["clean"], [a.view(1) for a in good], [b.view(1) for b in bad])
    loader = PromptDataLoader(data, seq_len=None, diverge_idx=0, batch_size=n_pairs, shuffle=False)
    kwargs = {"mask_val": 0.0} if what == "ac-eap" else {"integrated_grad_samples": 5}

    def theirs():
        ac_model.zero_grad(set_to_none=True)
        for wrapper in ac_model.dest_wrappers:
            wrapper.patch_mask.grad = None
        return mask_gradient_prune_scores(ac_model, loader, None, grad_function="logit", answer_function="avg_diff",
                                          **kwargs)

    ac_s, prune = _best(theirs, repeat)
    by_name = {f"{_ac_name(e.src.name)}->{_ac_name(e.dest.name)}": float(e.prune_score(prune)) for e in ac_model.edges}
    ac_vec = torch.tensor([by_name[n] for n in names], dtype=ours_vec.dtype)
    out = {"ours_seconds": round(ours_s, 3), "auto_circuit_seconds": round(ac_s, 3), "edges": len(by_name),
           "spearman_abs": round(float(spearmanr(ours_vec.abs(), ac_vec.abs())[0]), 4),
           "peak_rss_mb_above_setup": round(_rss_mb() - base, 1)}
    if what == "ac-eap":  # the same quantity: auto-circuit's score is minus ours
        out["max_abs_diff"] = float((ours_vec + ac_vec).abs().max())
        out["max_abs_score"] = float(ours_vec.abs().max())
    return out


MODES = ("eap", "eap-ig", "curve", "exact", "all-steps")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--step", type=int, default=900)
    parser.add_argument("--n-pairs", type=int, default=256)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--auto-circuit-python", default=None, help="a Python with auto-circuit installed")
    parser.add_argument("--modes", default=",".join(MODES + ("curve-64",)), help="what to measure (comma-separated)")
    parser.add_argument("--one", default=None, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.one is not None:  # a child: one measurement
        fn = auto_circuit if args.one.startswith("ac-") else ours
        print(json.dumps(fn(args.step, args.n_pairs, args.repeat, args.one)))
        return
    results = {"step": args.step, "n_pairs": args.n_pairs}
    modes = args.modes.split(",")
    plan = [(sys.executable, mode, args.n_pairs) for mode in MODES if mode in modes]
    plan += [(sys.executable, "curve", 64)] if "curve-64" in modes else []
    if args.auto_circuit_python:
        plan += [(args.auto_circuit_python, mode, args.n_pairs) for mode in ("ac-eap", "ac-ig")]
    for python, mode, n in plan:
        proc = subprocess.run([python, __file__, "--one", mode, "--step", str(args.step), "--n-pairs", str(n),
                               "--repeat", str(args.repeat)], capture_output=True, text=True, cwd=ROOT)
        key = mode if n == args.n_pairs else f"{mode}_{n}_pairs"
        results[key] = json.loads(proc.stdout.strip().splitlines()[-1]) if proc.returncode == 0 \
            else {"error": proc.stderr.strip().splitlines()[-1:]}
    print(json.dumps(results))


if __name__ == "__main__":
    main()
