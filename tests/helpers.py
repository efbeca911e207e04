"""What the tests share (no test module imports another): the small and tiny specs and models, reference
models and brute-force loops that the vectorised code is checked against, the browser, and the copies,
snapshots, damage and command lines of run folders."""

from __future__ import annotations

import json
import math
import os
import re
import shutil
import subprocess
import sys
from collections import Counter, defaultdict
from pathlib import Path

import pytest
import torch
from torch import nn

from interp.model import ModelSpec, build_model
from interp.spec import RunSpec, TrainSpec
from interp.runs import Run
from interp.task import VOCAB_SIZE, Task, TaskSpec
from interp.transition import plateau_span, snap_step

DEMO = Path(__file__).resolve().parents[1] / "checkpoints" / "demo"  # shipped with the repository


def small_spec(**overrides) -> RunSpec:
    """A run that trains in seconds: 2 layers of width 32 on K = 4, 24 bases."""
    spec = RunSpec(
        seed=0,
        task=TaskSpec(k=4, n_bases=24),
        model=ModelSpec(n_layers=2, n_heads=2, d_model=32, d_head=16, d_mlp=64),
        train=TrainSpec(steps=40, batch_size=16, eval_every=10, eval_size=64, checkpoint_every=20),
    )
    return spec.override(**overrides)


# a small run that snaps within seconds: tau ~ 130 of 300 steps (tests/conftest.py's session `snapping_run`)
SNAPPING = dict(steps=300, lr=3e-3, checkpoint_every=50, early_checkpoints=False)

# `interp train` flags of a run that trains in about a second: 1 layer of width 16 on K = 4, 24 bases
TINY_FLAGS = ["--k", "4", "--n-bases", "24", "--n-layers", "1", "--d-model", "16", "--d-head", "8", "--d-mlp", "32",
              "--eval-every", "5", "--eval-size", "16", "--checkpoint-every", "10", "--batch-size", "8", "--quiet"]


def tiny_spec(n_bases: int, n_layers: int, d_model: int) -> RunSpec:
    """The smallest run the exact-curvature tests take apart: K = 2 sequences of 2 + 1 + 2 tokens, a model
    of 2 heads of width d_model / 2 and an MLP of 2 d_model (small enough for a dense Hessian)."""
    return RunSpec(seed=0, task=TaskSpec(k=2, n_bases=n_bases, len_b=2, len_z=1, len_a=2),
                   model=ModelSpec(n_layers=n_layers, n_heads=2, d_model=d_model, d_head=d_model // 2,
                                   d_mlp=2 * d_model),
                   train=TrainSpec(steps=2))


def random_model(task: Task, spec: ModelSpec, seed: int = 0, dtype: torch.dtype = torch.float32) -> nn.Module:
    """An untrained model of shape `spec` for `task`, in eval mode and `dtype`: the tiny models whose
    random weights the analyses are checked on (each test module keeps its own shape: its tolerances
    and known values were set for it)."""
    model = build_model(spec, task.layout.length, VOCAB_SIZE, seed=seed)
    return (model if dtype == torch.float32 else model.to(dtype, print_details=False)).eval()


def cloned_params(model: nn.Module) -> dict[str, torch.Tensor]:
    """Every parameter by name, detached and copied: the weights as they are now, whatever trains next."""
    return {n: p.detach().clone() for n, p in model.named_parameters()}


NEG = -1e4  # logit for "impossible": exp(-1e4) underflows to exactly 0 in float64


class LookupModel(nn.Module):
    """The Bayes-optimal predictor of the training set, optionally blind to z.

    With `blind_first=True` it ignores z only for the first output token (z is read later).
    With `see_z=False` it predicts, at every output position, the empirical distribution of the
    next token given the input without z and the output so far: the marginal the models
    learn first. Candidate loss and first-token loss are then exactly log K, the shuffle gap 0.
    """

    def __init__(self, task: Task, see_z: bool, blind_first: bool = False):
        super().__init__()
        self.task, self.see_z, self.blind_first = task, see_z, blind_first
        self.counts: dict[tuple, Counter] = defaultdict(Counter)
        lay = task.layout
        for row in task.tokens.tolist():
            for p in lay.loss_pos:
                self.counts[self._key(row, p)][row[p + 1]] += 1

    def _key(self, row: list[int], p: int) -> tuple:
        blind = not self.see_z or (self.blind_first and p == self.task.layout.decision_pos)
        hidden = set(self.task.layout.z_pos) if blind else set()
        return tuple(t for i, t in enumerate(row[: p + 1]) if i not in hidden)

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        n, t = tokens.shape
        logits = torch.zeros(n, t, VOCAB_SIZE, dtype=torch.float64)
        for i, row in enumerate(tokens.tolist()):
            for p in range(t):
                counts = self.counts.get(self._key(row, p))
                if counts is None:
                    continue
                total = sum(counts.values())
                logits[i, p] = NEG
                for tok, c in counts.items():
                    logits[i, p, tok] = math.log(c / total)
        return logits


def loop_metrics(model, task: Task, idx: torch.Tensor, alt: torch.Tensor) -> dict[str, list[float]]:
    """Every metric of `interp.metrics.evaluate_examples`, one example and one candidate at a time."""
    lay = task.layout
    out = defaultdict(list)
    for n, alt_sel in zip(idx.tolist(), alt.tolist()):
        row = task.tokens[n]
        logp = model(row.unsqueeze(0))[0].double().log_softmax(-1)
        own = [float(logp[p, row[p + 1]]) for p in lay.loss_pos]
        hits = [int(logp[p].argmax()) == int(row[p + 1]) for p in lay.loss_pos]
        out["loss"].append(-sum(own) / len(own))
        out["loss_first"].append(-own[0])
        out["acc_first"].append(float(hits[0]))
        out["acc_exact"].append(float(all(hits)))
        k_true = int(task.selector_id[n])
        g = int(task.group_id[n])
        scores, firsts = [], []
        for j in range(task.k):
            cand_row = row.clone()
            cand_row[list(lay.output_pos)] = task.outputs()[g, j]
            cand_logp = model(cand_row.unsqueeze(0))[0].double().log_softmax(-1)
            scores.append(sum(float(cand_logp[p, cand_row[p + 1]]) for p in lay.loss_pos))
            firsts.append(float(logp[lay.decision_pos, cand_row[lay.decision_pos + 1]]))
        lse = math.log(sum(math.exp(s - max(scores)) for s in scores)) + max(scores)
        out["loss_cand"].append(lse - scores[k_true])
        out["acc_cand"].append(float(max(range(task.k), key=lambda j: scores[j]) == k_true))
        lse_first = math.log(sum(math.exp(f - max(firsts)) for f in firsts)) + max(firsts)
        out["loss_cand_first"].append(lse_first - firsts[k_true])
        swapped = row.clone()
        swapped[list(lay.z_pos)] = task.selector_sets[task.supergroup[g], alt_sel]
        swapped_logp = model(swapped.unsqueeze(0))[0].double().log_softmax(-1)
        out["shuffle_gap"].append(
            -float(swapped_logp[lay.decision_pos, row[lay.decision_pos + 1]]) - out["loss_first"][-1]
        )
        swapped_full = [-float(swapped_logp[p, row[p + 1]]) for p in lay.loss_pos]
        out["shuffle_gap_full"].append(sum(swapped_full) / len(swapped_full) - out["loss"][-1])
    return dict(out)


# ---------------------------------------------------------------------------- browser (headless Chromium)
CHROMIUM = Path("/usr/bin/chromium")
FIGURE_DIV = re.compile(r'<div\b[^>]*\bid="(fig-[\w-]+)"[^>]*>')


def render(page: Path, tmp_path: Path, window: tuple[int, int] | None = None) -> str:
    """The DOM of `page` after headless Chromium has run its scripts (opened from disk), in a window of
    `window` (width, height) CSS pixels (default: Chromium's own)."""
    if not CHROMIUM.exists():
        pytest.fail(f"{CHROMIUM} is missing: the report test needs a real browser. "
                    "Install it with `apt-get install -y chromium` (CI's .ci/run installs it).")
    profile = tmp_path / f"chromium-profile-{page.stem}"
    cmd = [str(CHROMIUM), "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
           "--disable-background-networking", "--disable-component-update", "--disable-sync",
           "--disable-dev-shm-usage", f"--user-data-dir={profile}", "--virtual-time-budget=15000",
           *([f"--window-size={window[0]},{window[1]}"] if window else []), "--dump-dom", page.resolve().as_uri()]
    result = subprocess.run(cmd, capture_output=True, text=True, timeout=180)
    assert result.returncode == 0 and "</html>" in result.stdout, result.stderr[-3000:]
    return result.stdout


LAYOUT_PROBE = """<script>window.addEventListener("load", function () { setTimeout(function () {
  var at = {}; IDS.forEach(function (id) { var el = document.getElementById(id);
    if (el) { var r = el.getBoundingClientRect(); at[id] = {top: r.top + window.scrollY, bottom: r.bottom + window.scrollY}; } });
  var pre = document.createElement("pre"); pre.id = "layout-probe";
  pre.textContent = JSON.stringify({viewport: [window.innerWidth, window.innerHeight], at: at});
  document.body.appendChild(pre); }, 0); });</script>"""


def layout(page: Path, tmp_path: Path, ids: list[str], window: tuple[int, int] = (1280, 800)) -> dict:
    """Where the elements `ids` lie once headless Chromium has drawn `page` (its figures included) in a window of
    `window` CSS pixels: {"viewport": [width, height], "at": {id: {"top", "bottom"}}}, in pixels from the top of
    the page; an id that is not in the page is left out. The page is probed on a copy (a script added at its end)."""
    import html as _html

    probe = tmp_path / f"{page.stem}-layout.html"
    probe.write_text(page.read_text().replace("</body>", LAYOUT_PROBE.replace("IDS", json.dumps(ids)) + "</body>"))
    dom = render(probe, tmp_path, window=window)
    match = re.search(r'<pre id="layout-probe">(.*?)</pre>', dom, re.S)
    assert match, "the layout probe did not run"
    return json.loads(_html.unescape(match.group(1)))


def js_errors(dom: str) -> tuple[int, str]:
    match = re.search(r'<pre id="js-errors" data-count="(\d+)"[^>]*>(.*?)</pre>', dom, re.S)
    assert match, "the error recorder's element is missing from the page"
    return int(match.group(1)), match.group(2)


def figures(dom: str) -> dict[str, str]:
    """Each figure div's id -> its HTML up to the next figure div (figures are never nested)."""
    hits = list(FIGURE_DIV.finditer(dom))
    return {m.group(1): dom[m.start(): hits[i + 1].start() if i + 1 < len(hits) else len(dom)]
            for i, m in enumerate(hits)}


def assert_drawn(dom: str, ids: set[str]) -> dict[str, str]:
    """No JavaScript error, and each figure in `ids` handed to plotly and drawn as SVG; the page's figures."""
    count, text = js_errors(dom)
    assert count == 0 and not text.strip(), f"JavaScript errors:\n{text}"
    figs = figures(dom)
    assert ids <= set(figs), (sorted(ids), sorted(figs))
    for div_id in ids:
        html = figs[div_id]
        assert "js-plotly-plot" in FIGURE_DIV.search(html).group(0), f"{div_id} was never handed to plotly"
        assert 'class="main-svg"' in html, f"{div_id} has no rendered SVG"
    return figs


# ---------------------------------------------------------------------------- training outcomes
def assert_plateau_then_snap(run: Run) -> tuple[tuple[int, int], int]:
    df = run.metrics
    span = plateau_span(df["step"], df["loss_cand"], df["shuffle_gap"], run.log_k, tol=0.05, max_gap=0.05)
    assert span is not None, "no evaluation within 5% of log K with shuffle gap < 0.05"
    assert span[1] - span[0] >= 100, f"plateau only spans steps {span}"
    snap = snap_step(df["step"], df["loss_cand"], run.log_k)
    assert snap is not None, f"candidate loss never fell below 0.05 log K (last {df['loss_cand'].iloc[-1]:.3f})"
    assert snap > span[1]
    return span, snap


def edit_cached_table(path: Path, edit) -> None:
    """Change the table of one analysis-cache entry with `edit(df) -> None` (in place), as a hand
    edit or a bad disk would: the file stays valid JSON and keeps the content hash it was written with."""
    import json as _json

    from interp.analysis.cache import decode_table, encode_table

    blob = _json.loads(path.read_text())
    (name,) = blob["tables"]
    df = decode_table(blob["tables"][name])
    edit(df)
    text = encode_table(df)
    assert text != blob["tables"][name], "the edit changed nothing"
    blob["tables"][name] = text
    path.write_text(_json.dumps(blob))


def hide_module(monkeypatch, hidden: str) -> None:
    """Make `import hidden` fail as it does where the optional extra is not installed."""
    import builtins

    real = builtins.__import__

    def fake(name, *args, **kwargs):
        if name == hidden:
            raise ImportError(f"No module named {hidden!r}")
        return real(name, *args, **kwargs)

    monkeypatch.setattr(builtins, "__import__", fake)


# ---------------------------------------------------------------------------- folders, files, the command line
def copy_run(source: Path, dest: Path, *, cache: bool = True) -> Path:
    """A copy of a run, sweep or fork family folder to work on, without its lock file, and without its
    analysis cache when `cache` is False and always for the shipped demo: the demo's cache/ is whatever
    the user's own `interp report` left in the working tree, which no test may depend on (issue 30)."""
    skip = [".lock"] if cache and Path(source).resolve() != DEMO else [".lock", "cache"]
    return Path(shutil.copytree(source, dest, ignore=shutil.ignore_patterns(*skip)))


def snapshot(path: Path, *, cache: bool = True) -> dict[str, bytes]:
    """Every file of a folder by relative path, to show that a refused command wrote nothing: all but the
    lock (readers touch it) and, when `cache` is False, the analysis cache (readers may fill it)."""
    return {str(p.relative_to(path)): p.read_bytes() for p in sorted(path.rglob("*"))
            if p.is_file() and p.name != ".lock" and (cache or "cache" not in p.relative_to(path).parts)}


def garbage_line(path: Path, line: int) -> None:
    """Line `line` (from 1) of a JSON-lines file replaced by one that is not JSON, as a bad disk would leave it."""
    lines = path.read_text().splitlines(keepends=True)
    lines[line - 1] = "{garbage\n"
    path.write_text("".join(lines))


def cli_json(capsys, argv: list[str]) -> dict:
    """`interp ARGV` in this process, which must succeed: the JSON it printed."""
    from interp.cli import main

    capsys.readouterr()
    code = main(argv)
    out = capsys.readouterr().out
    assert code == 0, out
    return json.loads(out)


def run_main(argv: list[str], capsys) -> tuple[int, str, str]:
    """`interp ARGV` in this process: its exit status (argparse's usage errors included) and what it printed
    on stdout and stderr (nothing printed before it, e.g. by a fixture)."""
    from interp.cli import main

    capsys.readouterr()
    try:
        code = main(argv)
    except SystemExit as exc:
        code = exc.code
    out = capsys.readouterr()
    return code, out.out, out.err


MODEL_CODE = ("torch", "transformer_lens", "transformers", "IPython")  # seconds of imports each


def model_code_loaded(commands: list[list[str]]) -> list[str]:
    """Run interp's `commands` (each must exit 0) in one fresh interpreter, their output discarded: the modules of
    MODEL_CODE, interp.model and scipy.stats it imported, sorted."""
    code = f"""
import contextlib, io, sys
from interp.cli import main
with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
    for argv in {commands!r}:
        assert main(argv) == 0, argv
print(sorted(m for m in sys.modules if m.split(".")[0] in {MODEL_CODE!r} or m in ("interp.model", "scipy.stats")))
"""
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300,
                            cwd=DEMO.parents[1])
    assert result.returncode == 0, result.stderr[-3000:]
    return eval(result.stdout.strip().splitlines()[-1])


def interp_cli(*args, cwd=None, env: dict | None = None, timeout: float = 300) -> subprocess.CompletedProcess:
    """`interp ARGS` in a fresh Python process, as a user runs it (Python's warnings off, output captured)."""
    env = {**os.environ, "PYTHONWARNINGS": "ignore", **(env or {})}
    return subprocess.run([sys.executable, "-m", "interp.cli", *map(str, args)], capture_output=True, text=True,
                          cwd=cwd, env=env, timeout=timeout)
