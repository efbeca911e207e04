"""The author's shuffle-gap lead (SPEC 9.1) beside ours: the logged columns against a plain loop that
redoes the training by hand, gap_lead under l1_0.9 against a hand computation from a metrics log, the
author's statistic, and bad input (unknown definitions, old runs without the columns)."""

import json
import math

import numpy as np
import pandas as pd
import pytest
import torch
import torch.nn.functional as F

from interp.errors import InterpError
from interp.model import build_model
from interp.runs import Run
from interp.seeding import step_generator, torch_generator
from interp.summary import lead_under
from interp.task import VOCAB_SIZE
from interp.train import train
from interp.transition import facts, parse_lead_definition
from tests.helpers import DEMO, copy_run, interp_cli, small_spec, snapshot


@pytest.fixture(scope="module")
def logged_run(tmp_path_factory):
    """A run of 12 steps, rows at 1, 2, 4, 5, 8, 10, 12 (early checkpoints, eval_every 5): the author's
    columns at 5 and 10 only (his log's cadence: the grid of eval_every)."""
    spec = small_spec(steps=12, eval_every=5, checkpoint_every=4)
    run = Run.create(tmp_path_factory.mktemp("author") / "run", spec)
    train(run, progress=False)
    return Run.open(run.path)


def test_logged_columns_equal_a_plain_loop(logged_run):
    """Redo every step by hand (torch.optim.AdamW, plain forward): train_loss_first is the mean over the
    eval_every steps since the previous grid row of each batch's first-token CE before its update; batch_shuffled_loss_first
    is that row's batch after its update with z permuted row by row; the weights are the run's."""
    run, spec = logged_run, logged_run.spec
    task, lay, t = run.task, run.task.layout, spec.train
    first, last, d = lay.loss_pos[0], lay.loss_pos[-1], lay.decision_pos
    model = build_model(spec.model, lay.length, VOCAB_SIZE, seed=spec.seed)
    opt = torch.optim.AdamW(model.parameters(), lr=t.lr, betas=(t.beta1, t.beta2), weight_decay=t.weight_decay)
    gen = torch_generator(spec.seed, "batches")
    rows = {r["step"]: r for r in run.metric_rows()}
    assert sorted(rows) == [0, 1, 2, 4, 5, 8, 10, 12]
    author = [s for s in rows if "train_loss_first" in rows[s] or "batch_shuffled_loss_first" in rows[s]]
    assert author == [5, 10]
    window: list[float] = []
    was = torch.are_deterministic_algorithms_enabled()
    torch.use_deterministic_algorithms(True)
    try:
        for step in range(1, t.steps + 1):
            idx = torch.randint(task.size, (t.batch_size,), generator=gen)
            tokens = task.tokens[idx]
            logits = model(tokens[:, : last + 1])[:, first: last + 1]
            targets = tokens[:, first + 1: last + 2]
            window.append(float(F.cross_entropy(logits[:, 0].detach(), targets[:, 0])))
            opt.zero_grad()
            F.cross_entropy(logits.reshape(-1, logits.shape[-1]), targets.reshape(-1)).backward()
            opt.step()
            if step not in author:
                continue
            assert len(window) == t.eval_every
            assert rows[step]["train_loss_first"] == pytest.approx(sum(window) / len(window), rel=1e-5)
            window = []
            perm = torch.randperm(t.batch_size, generator=step_generator(spec.seed, "inbatch_shuffle", step))
            shuffled = tokens.clone()
            for i in range(t.batch_size):  # a plain loop: row i takes row perm[i]'s z (maybe its own)
                for p in lay.z_pos:
                    shuffled[i, p] = tokens[perm[i], p]
            model.eval()
            with torch.no_grad():
                hand = float(F.cross_entropy(model(shuffled[:, : d + 1])[:, d], shuffled[:, d + 1]))
            model.train()
            assert rows[step]["batch_shuffled_loss_first"] == pytest.approx(hand, rel=1e-5)
    finally:
        torch.use_deterministic_algorithms(was)
    kept = run.state_dict(t.steps)
    assert all(torch.allclose(v, kept[k], atol=1e-6) for k, v in model.state_dict().items() if k in kept)


def _hand_lead(rows: list[dict], log_k: float) -> tuple[int, int, float]:
    """The author's lead from a metrics log by hand: the first row whose running-mean first-token loss is
    below 0.9 log K, the first whose in-batch dz exceeds 0.1 nats."""
    t = next(r["step"] for r in rows if r.get("train_loss_first") is not None and r["train_loss_first"] < 0.9 * log_k)
    gap = next(r["step"] for r in rows if r.get("batch_shuffled_loss_first") is not None
               and r["batch_shuffled_loss_first"] - r["train_loss_first"] > 0.1)
    return gap, t, (t - gap) / t


def test_gap_lead_under_l1_09_equals_a_hand_computation(tmp_path):
    """A planted metrics log (the demo's, with author columns written in) against the hand loop."""
    run_path = copy_run(DEMO, tmp_path / "run", cache=False)
    rows = [json.loads(line) for line in (run_path / "metrics.jsonl").read_text().splitlines()]
    log_k = Run.open(run_path).log_k
    for i, r in enumerate(rows):  # running mean: the evaluated L1 shifted by one row; in-batch dz: 0.9 x ours
        if r["step"] > 0:
            r["train_loss_first"] = rows[i - 1]["loss_first"] + 0.05
            r["batch_shuffled_loss_first"] = r["train_loss_first"] + 0.9 * (r["shuffle_gap"] or 0.0)
    (run_path / "metrics.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    gap, t, lead = _hand_lead(rows, log_k)
    found = facts(Run.open(run_path))
    assert found.gap_lead_at("l1_0.9", "inbatch") == {"gap_onset": gap, "t_loss": t, "gap_lead": pytest.approx(lead),
                                                     "censored": False}
    t_eval = next(r["step"] for r in rows if r["loss_first"] < 0.9 * log_k)
    assert found.gap_lead_at("l1_0.9_eval")["t_loss"] == t_eval
    assert found.gap_lead_at("l1_0.9_eval")["gap_onset"] == found.gap_onset  # the dz estimator is ours
    got = lead_under(Run.open(run_path), "author")
    assert got["not_measured"] is None and got["gap_lead"] == pytest.approx(lead)


def test_old_runs_say_so_and_bad_names_exit_2(demo_run, tmp_path):
    found = facts(demo_run)  # the demo was trained before the author's columns were logged
    for t_loss, dz, column in (("l1_0.9", "unbiased", "train_loss_first"), ("half", "inbatch", "batch_shuffled")):
        with pytest.raises(InterpError, match=f"cannot be computed for this run.*no {column}"):
            found.gap_lead_at(t_loss, dz)
    assert found.gap_lead_at("l1_0.9_eval")["t_loss"] is not None  # the evaluated variant needs no new column
    assert lead_under(demo_run, "author")["gap_lead"] is None and lead_under(demo_run, "author")["not_measured"]
    for bad in ("bogus", "half/biased", "l1_0.8/inbatch", "author/"):
        with pytest.raises(InterpError, match="unknown lead definition"):
            parse_lead_definition(bad)
    assert parse_lead_definition("author") == ("l1_0.9", "inbatch")
    with pytest.raises(InterpError, match="unknown dz estimator"):
        found.gap_lead_at("half", "batch")
    before = snapshot(DEMO, cache=False)
    out = interp_cli("show", str(DEMO), "--lead-definition", "nope")
    assert out.returncode == 2 and len(out.stderr.strip().splitlines()) == 1 and "unknown lead definition" in out.stderr
    assert snapshot(DEMO, cache=False) == before
    out = interp_cli("show", str(DEMO), "--lead-definition", "author", "--lead-definition", "l1_0.9_eval/unbiased")
    assert out.returncode == 0 and "cannot be computed for this run" in out.stdout
    assert "t_loss = l1_0.9_eval at step" in out.stdout


def test_author_statistic_and_share_under_both_definitions():
    """Positive leads only, mean +- np.std (ddof 0), OLS of log lead-in-steps on log K; a table without
    the author's columns logged is refused in one line."""
    from interp.sweeps.circuit_fits import author_statistic, lead_exponent, lead_share

    ks = [3, 5, 7, 10, 13, 3, 5, 7, 10, 13]
    ours = [0.5, 0.45, 0.55, 0.5, 0.52, 0.48, 0.5, 0.47, 0.53, 0.51]
    author = [-0.1, 0.2, 0.3, 0.45, 0.6, 0.1, 0.25, 0.35, 0.5, 0.62]
    tl = [100 * k ** 1.5 for k in ks]
    table = pd.DataFrame({"run": [f"r{i}" for i in range(10)], "k": ks, "status": "done", "direction": "bz_to_a",
                          "D": [300 * k for k in ks], "seed": [0] * 5 + [1] * 5, "gap_lead": ours,
                          "gap_lead_steps": [s * t for s, t in zip(ours, tl)], "gap_lead_author": author,
                          "gap_lead_steps_author": [s * t for s, t in zip(author, tl)], "author_logged": True,
                          "censored_tau_half": False, "censored": False})
    stat = author_statistic(table, "author")
    pos = np.array([a for a in author if a > 0])
    steps = np.array([a * t for a, t in zip(author, tl) if a > 0])
    kp = np.array([k for k, a in zip(ks, author) if a > 0], float)
    assert stat["n_positive"] == 9 and stat["n"] == 10
    assert stat["mean"] == pytest.approx(pos.mean()) and stat["sd"] == pytest.approx(pos.std(ddof=0))
    assert stat["exponent"] == pytest.approx(np.polyfit(np.log(kp), np.log(steps), 1)[0])
    share = lead_share(table, definition="author", n_boot=200)
    assert share.y == "gap_lead_author" and share.slope > 0 and share.author_values == stat
    assert "the author's statistic on the same runs" in share.summary()
    assert abs(lead_share(table, n_boot=200).slope) < share.slope
    assert lead_exponent(table, definition="author", n_boot=200).y == "gap_lead_steps_author"
    with pytest.raises(InterpError, match="unknown lead definition"):
        lead_share(table, definition="paper")
    old = table.assign(author_logged=False, gap_lead_author=math.nan)
    with pytest.raises(InterpError, match="cannot be computed for these runs"):
        lead_share(old, definition="author")
