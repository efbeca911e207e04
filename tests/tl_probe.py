"""The demo's numbers under whatever TransformerLens is installed (issue 35): `python tests/tl_probe.py OUT.npz`.

tests/integration/test_tl_versions.py runs it under TL 3.9 and under TL 4 and compares the two files.
Each section that fails is recorded with its error (OUT.npz.errors.json) and the others go on, so one
run says everything that differs. Not a test module (no test_ prefix): a script for a subprocess.
"""

from __future__ import annotations

import json
import sys
import tempfile
import traceback
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

STEPS = ["mid", "post"]  # the analyses' steps (relative to the demo's transition)
ANALYSES = ("sensitivity", "attention", "groups", "ablation", "patching", "usage", "trajectory", "spectra",
            "representations", "lens", "hessian")


def _logits(run, tokens):
    steps = run.steps
    return {f"{s}": run.model(s)(tokens) for s in (steps[0], steps[len(steps) // 2], steps[-1])}


def _cache(run, tokens):
    _, cache = run.model("last").run_with_cache(tokens)
    names = [f"blocks.{l}.{h}" for l in range(run.spec.model.n_layers)
             for h in ("attn.hook_z", "attn.hook_pattern", "attn.hook_q", "hook_resid_mid", "hook_resid_post", "mlp.hook_post")]
    return {n: cache[n] for n in names}


def _tl_patching(run, tokens):
    """TransformerLens's own patching functions on the model (clean: the first 8 examples, corrupted: the next 8)."""
    from transformer_lens import patching

    model = run.model("last")
    dec = run.task.layout.decision_pos
    clean, corrupt = tokens[:8], tokens[8:16]
    target = clean[:, dec + 1]

    def metric(logits):
        return logits[:, dec].log_softmax(-1).gather(-1, target[:, None]).mean()

    _, clean_cache = model.run_with_cache(clean)
    return {"resid_pre": patching.get_act_patch_resid_pre(model, corrupt, clean_cache, metric),
            "head_out_all_pos": patching.get_act_patch_attn_head_out_all_pos(model, corrupt, clean_cache, metric),
            "head_out_by_pos": patching.get_act_patch_attn_head_out_by_pos(model, corrupt, clean_cache, metric)}


def _analysis(run, name):
    import numpy as np

    from interp.analysis.suite import run_suite

    steps = [run.steps[len(run.steps) // 2]] if name == "hessian" else STEPS
    result = run_suite(run, only=[name], steps=steps, progress=False, cache=False)
    if result.problems or not result.tables:
        raise RuntimeError(f"{name}: problems {result.problems}, tables {list(result.tables)}")
    out = {}
    for table, frame in result.tables.items():
        for column in frame.columns:
            values = frame[column].to_numpy()
            if values.dtype.kind in "fiub":
                out[f"{table}.{column}"] = values.astype(np.float64)
    return out


def _curvature(run):
    """The ported curvature and optimizer analyses (issue 35): the Hessian's extreme directions (vectors in the
    checkpoint layout), the gradients' noise along them, one-step AdamW updates from the demo's kept state (no
    replay, which needs the demo's 2 threads), and a short LLC where devinterp is installed."""
    from interp.analysis import gradients, updates
    from interp.analysis.directions import extreme_directions

    step = run.steps[len(run.steps) // 2]
    found = extreme_directions(run, step, n_examples=128)
    out = {"lambda_max": found.lambda_max, "lambda_min": found.lambda_min}
    out |= {f"{kind}.{name}": t for kind in ("vmax", "vmin") for name, t in found.vector(kind).items()}
    row = gradients.at_step(run, step, curvature=True, curvature_examples=128, n_examples=64, n_batches=2, n_random=2)
    out |= {f"gradients.{c}": float(row[c].iloc[0]) for c in row.columns}
    from interp.run_states import kept_steps

    row = updates.at_step(run, kept_steps(run)[0], n_draws=4)
    out |= {f"updates.{c}": float(row[c].iloc[0]) for c in row.columns if c != "source"}
    return out


def _llc(run):
    import importlib.util

    if importlib.util.find_spec("devinterp") is None:
        raise SkipSection("devinterp is not installed here (pip install -e '.[landscape]')")
    from interp.analysis import llc

    table = llc.at_step(run, run.steps[len(run.steps) // 2], restrict=["full", "L0H0"], chains=2, draws=12)
    return {c: table[c].to_numpy() for c in ("chain", "llc", "llc_mean", "drift", "init_loss", "n_params")}


class SkipSection(Exception):
    """A section that cannot run under this interpreter (an extra not installed): recorded, not compared."""


def _training(run_dir):
    from interp.model import tl_params
    from interp.runs import Run
    from interp.train import train
    from tests.helpers import small_spec

    run = Run.create(run_dir / "trained", small_spec(steps=20))
    train(run, progress=False)
    model = run.model("last")
    return {f"last.{n}": p for n, p in tl_params(model).items()}


def main(out: Path) -> None:
    import numpy as np
    import torch

    from interp.model import tl_major
    from interp.runs import Run
    from tests.helpers import DEMO, copy_run

    torch.set_num_threads(1)
    arrays, errors, skipped = {}, {}, {}
    with tempfile.TemporaryDirectory() as tmp:
        run = Run.open(copy_run(DEMO, Path(tmp) / "demo", cache=False))
        tokens = run.task.tokens[:64]
        sections = {"logits": lambda: _logits(run, tokens), "cache": lambda: _cache(run, tokens),
                    "tl_patching": lambda: _tl_patching(run, tokens), "training": lambda: _training(Path(tmp))}
        sections |= {f"analysis.{name}": (lambda name=name: _analysis(run, name)) for name in ANALYSES}
        sections |= {"curvature": lambda: _curvature(run), "llc": lambda: _llc(run)}
        for section, compute in sections.items():
            try:
                with torch.no_grad() if section in ("logits", "cache") else torch.enable_grad():
                    values = compute()
                for key, value in values.items():
                    value = value.detach().double().numpy() if isinstance(value, torch.Tensor) else value
                    arrays[f"{section}/{key}"] = np.asarray(value, dtype=np.float64)
            except SkipSection as exc:
                skipped[section] = str(exc)
            except Exception as exc:  # recorded, compared by the test
                errors[section] = f"{type(exc).__name__}: {exc}"[:500] + "\n" + traceback.format_exc()[-1500:]
    np.savez(out, **arrays)
    Path(f"{out}.errors.json").write_text(json.dumps({"tl_major": tl_major(), "errors": errors, "skipped": skipped}, indent=1))


if __name__ == "__main__":
    main(Path(sys.argv[1]))
