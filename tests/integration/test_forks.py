"""Forks (`interp.forks`): a `continue` fork is its parent bit for bit; a replayed state is the
saved checkpoint, and the kept one; a replay that does not reproduce, or that another thread
count or a GPU made, is refused; each explicit arm's first update is the one computed here
independently (the full gradient chunk by chunk, the two minibatches, AdamW by hand); the
realised update power is exactly 0 for the clean arm and agrees with a recomputation from the
logged updates; a fork that never escapes within its horizon is censored; bad `interp fork`
input ends in one error line and writes nothing; a kick moves the state by eps along a unit
direction (the Hessian's bottom eigenvector, cached, or a random one).

Fixtures: `parents` holds two 60-step runs of a tiny model that stay on the plateau
(checkpoints at 0, 1, 2, 4, 8, 10, 20, ..., 60; D = 520 examples, so the library's full-gradient
pass runs in two uneven chunks, 512 + 8, and their weighting counts): `plain` (float32 checkpoints, no kept states)
and `kept` (the same training with `save_optimizer` and float16 checkpoints). `arms` holds the
explicit arms forked from `plain` at step 30 and trained one step, with their starting states;
`gamma` a clean and a noisy fork that log the realised update power.
"""

from __future__ import annotations

import json
import math
import os
import shutil
from pathlib import Path

import pytest
import torch

from interp.checkpoints import read, read_resume, serialize
from interp.cli import main
from interp.errors import InterpError
from interp.files import sha256_bytes
from interp.forks.arm_steps import build_stepper, fork_stepper
from interp.forks.arms import make_arm
from interp.forks.family import escapes
from interp.forks.fork import create_fork, fork
from interp.replay import replay, state_at, verify
from interp.run_states import kept_state, kept_steps
from interp.runs import MANIFEST_FILE, RESUME_FILE, RUN_FILE, Run
from interp.train import train
from tests.fork_arithmetic import EVERY_STEP, _adamw, _gradient, _model, _moments, _names, _spec
from tests.helpers import copy_run, snapshot

AT = 30  # the fork step of the arm and gamma forks
ARMS = {"full_batch": {}, "measured_noise": {"c": 0.5}, "isotropic_noise": {"c": 0.5}, "v_only_noise": {},
        "m_only_noise": {"s": 0.5}}


@pytest.fixture(scope="module")
def parents(tmp_path_factory) -> dict[str, Run]:
    torch.set_num_threads(2)  # as every test runs (tests/conftest.py): replays must match it
    root = tmp_path_factory.mktemp("forks")
    for name, extra in (("plain", {}), ("kept", {"save_optimizer": True, "checkpoint_dtype": "float16"})):
        train(Run.create(root / name, _spec(**extra)), progress=False)
    made = {name: Run.open(root / name) for name in ("plain", "kept")}
    assert made["plain"].steps == [0, 1, 2, 4, 8, 10, 20, 30, 40, 50, 60]
    assert kept_steps(made["kept"]) == made["kept"].steps
    assert min(made["plain"].metric_series("loss_cand")["loss_cand"]) > 0.5 * made["plain"].log_k  # on the plateau
    return made


# ---------------------------------------------------------------------------- independent arithmetic
def _sq(tensors) -> float:
    return float(sum((t.double() ** 2).sum() for t in tensors))


def _noise(run: Run, start) -> dict[str, torch.Tensor]:
    """xi = (g_B1 - g_B2) / sqrt(2) of the first two minibatches of the state's batch stream."""
    gen = torch.Generator()
    gen.set_state(start.generators["batches"])
    size, bs = run.task.size, run.spec.train.batch_size
    b1 = torch.randint(size, (bs,), generator=gen)
    b2 = torch.randint(size, (bs,), generator=gen)
    g1 = _gradient(run, start.params, run.task.tokens[b1])
    g2 = _gradient(run, start.params, run.task.tokens[b2])
    return {n: (g1[n] - g2[n]) / math.sqrt(2) for n in g1}


def _isotropic(run: Run, start, norm: float) -> dict[str, torch.Tensor]:
    """Gaussian draws from the state's noise stream (parameter order), scaled to `norm`."""
    gen = torch.Generator()
    gen.set_state(start.generators["noise"])
    draws = {n: torch.randn(start.params[n].shape, generator=gen) for n in _names(run)}
    scale = norm / math.sqrt(_sq(draws.values()))
    return {n: d.double() * scale for n, d in draws.items()}


def _expected(run: Run, start, arm: str, params: dict) -> dict[str, tuple]:
    """The arm's first update from `start`, computed independently."""
    g = _gradient(run, start.params)
    lr = run.spec.train.lr_at(start.step + 1)
    if arm == "full_batch":
        return _adamw(run, start, g, g, lr)
    xi = _noise(run, start)
    if arm == "measured_noise":
        noisy = {n: g[n] + params["c"] * xi[n] for n in g}
        return _adamw(run, start, noisy, noisy, lr)
    if arm == "isotropic_noise":
        iso = _isotropic(run, start, params["c"] * math.sqrt(_sq(xi.values())))
        noisy = {n: g[n] + iso[n] for n in g}
        return _adamw(run, start, noisy, noisy, lr)
    if arm == "m_only_noise":  # the noise in the first moment only, the second fed the clean g
        return _adamw(run, start, {n: g[n] + params["s"] * xi[n] for n in g}, g, lr)
    assert arm == "v_only_noise"
    return _adamw(run, start, g, {n: g[n] + params.get("s", 1.0) * xi[n] for n in g}, lr)


def _rel(a: dict, b: dict) -> float:
    """||a - b|| / ||b|| over every tensor."""
    return math.sqrt(_sq(a[n].double() - b[n].double() for n in b) / _sq(b.values()))


# ---------------------------------------------------------------------------- files
def _edit_json(path: Path, edit) -> None:
    blob = json.loads(path.read_text())
    edit(blob)
    path.write_text(json.dumps(blob, indent=2))


def _refused(capsys, argv: list[str], *fragments: str) -> str:
    """Exit status 2 and exactly one line on stderr, "interp: error: ..." holding every fragment."""
    try:
        code = main(argv)
    except SystemExit as exc:  # argparse's usage errors
        code = exc.code
    err = capsys.readouterr().err
    assert code == 2, err[-2000:]
    lines = err.strip().splitlines()
    assert "Traceback" not in err and len(lines) == 1 and lines[0].startswith("interp: error:"), err[-2000:]
    assert all(f in lines[0] for f in fragments), lines[0]
    return lines[0]


# ---------------------------------------------------------------------------- 1. continue
def test_continue_fork_reproduces_the_parent_bit_for_bit(parents, tmp_path):
    parent = parents["plain"]
    run = fork(parent, 20, "continue", steps=30, out=tmp_path / "cont", progress=False)
    assert run.steps[0] == 20 and run.steps[-1] == 50 and run.spec.train.steps == 50
    assert (run.status or {}).get("state") == "done"
    block = run.fork
    assert block["parent"] == os.path.abspath(parent.path) and block["parent_step"] == 20
    assert block["parent_checkpoint_sha256"] == parent.manifest()[20]["sha256"]
    assert block["arm"] == "continue" and block["params"] == {} and block["state"].startswith("replayed from step 0")
    shared = [s for s in run.steps if s > 20 and s in parent.steps]
    assert shared == [30, 40, 50]
    for step in shared:
        mine, theirs = run.state_dict(step), parent.state_dict(step)
        assert mine.keys() == theirs.keys()
        assert all(torch.equal(mine[n], theirs[n]) for n in theirs), f"step {step} differs from the parent's"
        assert run.manifest()[step]["sha256"] == parent.manifest()[step]["sha256"]
    ours = {r["step"]: r for r in run.metric_rows()}
    for row in parent.metric_rows():
        if row["step"] in shared:
            assert all(ours[row["step"]][k] == row[k] for k in ("loss", "loss_cand", "train_loss", "shuffle_gap"))

    # the control: a new batch stream (minibatch) does not give the parent's weights, so the test can fail
    other = fork(parent, 20, "minibatch", steps=10, out=tmp_path / "mb", progress=False)
    assert not torch.equal(other.state_dict(30)["embed.W_E"], parent.state_dict(30)["embed.W_E"])


# ---------------------------------------------------------------------------- 2. replayed = saved = kept
def test_replayed_state_is_the_checkpoint_and_the_kept_state(parents):
    plain, kept = parents["plain"], parents["kept"]
    state, source = state_at(plain, 30)
    assert source.startswith("replayed") and state.step == 30
    saved = plain.state_dict(30)
    assert saved.keys() == state.params.keys()
    assert all(torch.equal(state.params[n].to(t.dtype), t) for n, t in saved.items())

    held, how = state_at(kept, 30)
    assert how == "kept"
    # the same training with --save-optimizer: its kept state is the plain run's replayed one, exactly
    _assert_same_state(held, state)
    # and a replay of the kept run (to its float16 checkpoints, compared after the cast) gives it too
    again = replay(kept, kept_state(kept, 20), 30)
    verify(kept, again, 30, 20)
    _assert_same_state(again, held)
    assert all(torch.equal(held.params[n].half(), t) for n, t in kept.state_dict(30).items())


def test_dropping_states_keeps_the_chosen_one_and_forks_from_it(parents, tmp_path, capsys):
    from interp.run_states import drop_states

    run = Run.open(copy_run(parents["kept"].path, tmp_path / "kept"))
    before = kept_steps(run)
    held = kept_state(run, 20)
    assert drop_states(run, [20]) == [s for s in before if s != 20]
    assert kept_steps(run) == [20] and sorted(p.name for p in (run.path / "states").iterdir()) == ["step_0000020.safetensors"]
    _assert_same_state(state_at(run, 20)[0], held)  # kept, not replayed
    assert state_at(run, 20)[1] == "kept" and state_at(run, 30)[1] == "replayed from step 20 (kept)"
    with pytest.raises(InterpError, match="keeps no state at step 30; it keeps states at 20"):
        drop_states(run, [30])
    assert kept_steps(run) == [20]  # a refused drop changes nothing


def _assert_same_state(a, b, stream: bool = True) -> None:
    assert a.step == b.step
    assert a.params.keys() == b.params.keys() and all(torch.equal(a.params[n], b.params[n]) for n in a.params)
    assert a.optimizer["state"].keys() == b.optimizer["state"].keys()
    for i, slot in a.optimizer["state"].items():
        other = b.optimizer["state"][i]
        assert int(slot["step"]) == int(other["step"]) == a.step
        assert torch.equal(slot["exp_avg"], other["exp_avg"]) and torch.equal(slot["exp_avg_sq"], other["exp_avg_sq"])
    assert not stream or torch.equal(a.generators["batches"], b.generators["batches"])


# ---------------------------------------------------------------------------- 3. mismatches refused
def test_a_replay_that_does_not_reproduce_the_checkpoint_is_refused(parents, tmp_path, capsys):
    copy = copy_run(parents["plain"].path, tmp_path / "edited")
    entry = Run.open(copy).manifest()[30]
    path = copy / entry["file"]
    tensors, meta = read(path, entry["sha256"])
    assert serialize(tensors, meta) == path.read_bytes()  # written as checkpoints are
    name = sorted(tensors)[0]
    edited = tensors[name].clone()
    flat = edited.view(-1)
    flat[0] = torch.nextafter(flat[0], torch.tensor(math.inf))
    assert not torch.equal(edited, tensors[name])
    data = serialize({**tensors, name: edited}, meta)
    path.write_bytes(data)
    _edit_json(copy / MANIFEST_FILE, lambda b: b["checkpoints"]["30"].update(sha256=sha256_bytes(data),
                                                                            bytes=len(data)))
    run = Run.open(copy)
    assert int((run.state_dict(30)[name] != tensors[name]).sum()) == 1  # the hash check passes

    with pytest.raises(InterpError, match="does not reproduce") as caught:
        state_at(run, 30)
    assert "1 of" in str(caught.value)

    before = snapshot(copy)
    out = tmp_path / "x"
    _refused(capsys, ["fork", str(copy), "--at", "30", "--arm", "minibatch", "--steps", "5", "--out", str(out),
                      "--quiet"], "does not reproduce")
    assert not out.exists()
    assert snapshot(copy) == before


def _sessions(folder: Path, sessions: list[dict]) -> None:
    """Rewrite run.json's record of training sessions (it is not part of the hashed spec)."""
    _edit_json(folder / RUN_FILE, lambda info: info.update(training=sessions))


def _session(from_step: int, **changes) -> dict:
    return {"from_step": from_step, "device": "cpu", "threads": torch.get_num_threads(), "compile": False, **changes}


def test_another_thread_count_or_a_gpu_is_refused(parents, tmp_path):
    threads = torch.get_num_threads()
    assert Run.open(parents["plain"].path).info["training"] == [_session(0)]

    copy = copy_run(parents["plain"].path, tmp_path / "threads")
    _sessions(copy, [_session(0, threads=threads + 1)])
    with pytest.raises(InterpError, match=f"trained with {threads + 1} CPU threads") as caught:
        state_at(Run.open(copy), 30)
    assert f"--threads {threads + 1}" in str(caught.value)

    gpu = copy_run(parents["plain"].path, tmp_path / "gpu")
    _sessions(gpu, [_session(0, device="cuda")])
    with pytest.raises(InterpError, match="trained on cuda"):
        state_at(Run.open(gpu), 30)
    # a GPU run that kept its states forks from them: nothing is replayed
    kept_gpu = copy_run(parents["kept"].path, tmp_path / "kept-gpu")
    _sessions(kept_gpu, [_session(0, device="cuda")])
    state, how = state_at(Run.open(kept_gpu), 30)
    assert how == "kept" and state.step == 30


def test_the_sessions_a_replay_crosses_are_the_ones_checked(parents, tmp_path):
    """A replay from a kept state at step 20 to step 50 covers steps 21..50: a session that began
    before step 20 and ran past it is checked; one that ended before step 20 is not."""
    threads = torch.get_num_threads()
    kept = parents["kept"]
    expected = kept_state(kept, 50)

    def only_kept_upto(folder: Path, last: int) -> None:
        def edit(blob):
            for step, entry in blob["checkpoints"].items():
                if int(step) > last:
                    entry.pop("state", None)
        _edit_json(folder / MANIFEST_FILE, edit)

    crossing = copy_run(kept.path, tmp_path / "crossing")
    only_kept_upto(crossing, 20)
    _sessions(crossing, [_session(0, threads=threads + 1), _session(40)])
    assert kept_steps(Run.open(crossing))[-1] == 20
    with pytest.raises(InterpError, match=f"trained with {threads + 1} CPU threads"):
        state_at(Run.open(crossing), 50)

    ended = copy_run(kept.path, tmp_path / "ended")
    only_kept_upto(ended, 20)
    _sessions(ended, [_session(0, threads=threads + 1), _session(10)])
    state, how = state_at(Run.open(ended), 50)
    assert how == "replayed from step 20 (kept)"
    _assert_same_state(state, expected)


# ---------------------------------------------------------------------------- 4. explicit arms
@pytest.fixture(scope="module")
def arms(parents, tmp_path_factory) -> dict[str, dict]:
    """Each explicit arm forked from `plain` at step 30 (its state replayed by create_fork) and
    trained one step: the run, its starting state (read before training) and its state after."""
    root = tmp_path_factory.mktemp("arms")
    parent = parents["plain"]
    out = {}
    for name, params in ARMS.items():
        folder = root / name
        create_fork(parent, AT, make_arm(name, **params), 5, folder, settings=EVERY_STEP)
        shutil.copy(folder / RESUME_FILE, root / f"{name}-start.safetensors")
        start = read_resume(root / f"{name}-start.safetensors")
        train(Run.open(folder), stop_at=AT + 1, progress=False, stepper=fork_stepper)
        run = Run.open(folder)
        assert run.steps == [AT, AT + 1] and run.status is None  # stopped, not finished
        out[name] = {"run": run, "start": start, "after": read_resume(folder / RESUME_FILE)}
    return out


@pytest.mark.parametrize("arm", list(ARMS))
def test_explicit_arm_first_update_is_recomputed_independently(arms, parents, arm):
    run, start, after = arms[arm]["run"], arms[arm]["start"], arms[arm]["after"]
    assert start.step == AT and after.step == AT + 1
    replayed, _ = state_at(parents["plain"], AT)
    _assert_same_state(start, replayed, stream=False)  # the parent's state, the fork's own batch stream
    expected = _expected(run, start, arm, ARMS[arm])
    got = run.state_dict(AT + 1)
    assert got.keys() == expected.keys()
    # The key bias's gradient is zero analytically (a softmax ignores a shift shared by all keys): what
    # the loss gives is rounding error, which Adam scales up to an update of order lr, so another order
    # of summation gives another b_K update. It is checked to be that small, not to be equal.
    g = _gradient(run, start.params)
    norm = math.sqrt(_sq(g.values()))
    roundoff = {n for n in g if math.sqrt(_sq([g[n]])) < 1e-6 * norm}
    assert roundoff == {"blocks.0.attn.b_K"}
    lr = run.spec.train.lr_at(AT + 1)
    for name, (p, m, v, _) in expected.items():
        if name in roundoff:
            assert float((got[name].double() - p).abs().max()) < 2 * lr
            continue
        torch.testing.assert_close(got[name].double(), p, rtol=1e-5, atol=1e-7)
    # the update itself (params(31) - params(30)), not only the parameters, agrees
    mine = {n: expected[n][0] - start.params[n].double() for n in expected if n not in roundoff}
    theirs = {n: got[n].double() - start.params[n].double() for n in mine}
    assert _rel(theirs, mine) < 1e-4  # float32 parameters of order 1 round updates of order 1e-5
    for i, name in enumerate(_names(run)):
        slot = after.optimizer["state"][i]
        assert int(slot["step"]) == AT + 1
        torch.testing.assert_close(slot["exp_avg"].double(), expected[name][1], rtol=1e-5, atol=1e-9)
        torch.testing.assert_close(slot["exp_avg_sq"].double(), expected[name][2], rtol=1e-5, atol=1e-12)
    if arm != "full_batch":  # the noise matters: the clean update is far from this arm's
        clean = _expected(run, start, "full_batch", {})
        assert _rel(theirs, {n: clean[n][0] - start.params[n].double() for n in mine}) > 1e-2


def test_isotropic_noise_has_the_measured_noise_norm(arms):
    run, start = arms["isotropic_noise"]["run"], arms["isotropic_noise"]["start"]
    c = ARMS["isotropic_noise"]["c"]
    model = _model(run, start.params)
    t = run.spec.train
    optimizer = torch.optim.AdamW(model.parameters(), lr=t.lr, betas=(t.beta1, t.beta2), weight_decay=t.weight_decay)
    optimizer.load_state_dict(start.optimizer)
    stepper, generators = build_stepper(run, model, model, optimizer, run.task.tokens, "cpu")
    for key, gen in generators.items():
        gen.set_state(start.generators[key])
    _, g, g_m, g_v = stepper.gradients()
    assert all(torch.equal(a, b) for a, b in zip(g_m, g_v))
    noise = [a.double() - b.double() for a, b in zip(g_m, g)]
    xi = _noise(run, start)
    names = _names(run)
    assert math.sqrt(_sq(noise)) == pytest.approx(c * math.sqrt(_sq(xi.values())), rel=1e-4)
    # isotropic, not the measured noise rescaled: nearly orthogonal to xi
    dot = sum(float((a * xi[n]).sum()) for a, n in zip(noise, names))
    assert abs(dot) / math.sqrt(_sq(noise) * _sq(xi.values())) < 0.2
    # and the clean gradient is the independent one
    mine = _gradient(run, start.params)
    assert _rel({n: x for n, x in zip(names, g)}, mine) < 1e-5


def test_v_only_noise_changes_only_the_second_moment(arms):
    clean, v_only = arms["full_batch"]["after"], arms["v_only_noise"]["after"]
    assert clean.optimizer["state"].keys() == v_only.optimizer["state"].keys()
    differ = 0
    for i, slot in v_only.optimizer["state"].items():
        assert torch.equal(slot["exp_avg"], clean.optimizer["state"][i]["exp_avg"])
        differ += not torch.equal(slot["exp_avg_sq"], clean.optimizer["state"][i]["exp_avg_sq"])
    assert differ == len(v_only.optimizer["state"])


# ---------------------------------------------------------------------------- 5 and 6. gamma, censoring
@pytest.fixture(scope="module")
def gamma(parents, tmp_path_factory) -> dict[str, Run]:
    root = tmp_path_factory.mktemp("gamma")
    parent = parents["plain"]
    clean = fork(parent, AT, "full_batch", steps=5, out=root / "clean", gamma_every=1, gamma_window=5,
                 progress=False)
    noisy = fork(parent, AT, "measured_noise", steps=4, out=root / "noisy", gamma_every=1, gamma_window=3,
                 settings={**EVERY_STEP, "save_optimizer": True}, progress=False)
    return {"clean": clean, "noisy": noisy}


def test_gamma_is_zero_for_the_clean_arm_and_positive_with_noise(gamma):
    clean = gamma["clean"]
    rows = [r for r in clean.metric_rows() if "gamma_num" in r]
    assert rows and all(r["gamma_num"] == 0 for r in rows) and all(r["gamma_den"] > 0 for r in rows)
    assert sum(r["gamma_samples"] for r in rows) == 5
    esc = escapes(clean, AT, "done")
    assert esc["gamma"] == 0 and esc["gamma_samples"] == 5
    noisy = escapes(gamma["noisy"], AT, "done")
    assert noisy["gamma"] > 0 and noisy["gamma_samples"] == 3  # the window: steps 31..33 of 31..34


def test_gamma_agrees_with_a_recomputation_from_the_logged_updates(gamma):
    """Gamma = sum ||u_t - s_t||^2 / sum ||s_t||^2 over the window: u_t the logged update
    params(t+1) - params(t), s_t the clean full-batch AdamW step from params(t) with the shadow's
    own moments, started from the fork's at step 30 and fed the full gradient g_t at each step."""
    run = gamma["noisy"]
    assert kept_steps(run) == [30, 31, 32, 33, 34]
    names, t = _names(run), run.spec.train
    rows = {r["step"]: r for r in run.metric_rows()}
    assert [rows[s].get("gamma_samples") for s in (31, 32, 33, 34)] == [1, 1, 1, 0]
    shadow = _moments(run, kept_state(run, AT))
    num = den = 0.0
    for step in (30, 31, 32):
        state = kept_state(run, step)
        before, after = run.state_dict(step), run.state_dict(step + 1)
        assert all(torch.equal(state.params[n], before[n]) for n in names)
        g = _gradient(run, before)
        taken = _adamw(run, state, g, g, t.lr_at(step + 1), params=before, moments=shadow)
        shadow = {n: taken[n][1:] for n in names}
        s = {n: taken[n][0] - before[n].double() for n in names}
        u = {n: after[n].double() - before[n].double() for n in names}
        step_num, step_den = _sq(u[n] - s[n] for n in names), _sq(s.values())
        row = rows[step + 1]
        assert step_num == pytest.approx(row["gamma_num"], rel=1e-3) and step_den == pytest.approx(row["gamma_den"],
                                                                                                   rel=1e-4)
        num, den = num + step_num, den + step_den
    assert num > 0
    assert escapes(run, AT, "done")["gamma"] == pytest.approx(num / den, rel=1e-4)


def test_a_fork_that_never_escapes_is_censored(gamma, arms):
    run = gamma["clean"]
    assert (run.status or {}).get("state") == "done"
    assert min(v for v in run.metric_series("loss_cand")["loss_cand"] if v == v) > 0.5 * run.log_k
    esc = escapes(run, AT, "done")
    assert math.isnan(esc["escape_half"]) and esc["censored_escape_half"] is True
    assert math.isnan(esc["escape_snap"]) and esc["censored_escape_snap"] is True
    assert esc["steps_run"] == 5
    # an unfinished fork has not been censored yet: it may still escape
    running = escapes(arms["full_batch"]["run"], AT, "interrupted")
    assert math.isnan(running["escape_half"]) and running["censored_escape_half"] is False
    assert running["steps_run"] == 1


# ---------------------------------------------------------------------------- 7. bad input
BAD = {
    "step not saved": ({"--at": "25"}, "step 25 is not saved"),
    "step beyond the run": ({"--at": "100"}, "step 100 is not saved"),
    "unknown arm": ({"--arm": "bogus"}, "unknown arm 'bogus'"),
    "unknown arm parameter": ({"--arm": "measured_noise:q=1"}, "has no parameter q"),
    "negative arm parameter": ({"--arm": "measured_noise:c=-1"}, "c must be a finite number >= 0"),
    "out inside the parent": ({"--out": "INSIDE"}, "lies inside the parent run"),
    "kick without a direction": ({"--arm": "kick:eps=0.01"}, "did not converge"),
}


@pytest.mark.parametrize("case", list(BAD))
def test_bad_fork_input_is_one_line_and_writes_nothing(parents, tmp_path, capsys, monkeypatch, case):
    parent = parents["plain"]
    changes, fragment = BAD[case]
    options = {"--at": "30", "--arm": "minibatch", "--steps": "5", "--out": str(tmp_path / "x"), **changes}
    if options["--out"] == "INSIDE":
        options["--out"] = str(parent.path / "forks" / "x")
    if case == "kick without a direction":
        # the Lanczos run is given one restart and a tolerance it cannot meet (spectrum's keyword
        # defaults were bound from DEFAULTS at import, so patching DEFAULTS would change nothing)
        import interp.analysis.hessian as hessian

        real = hessian.spectrum
        monkeypatch.setattr(hessian, "spectrum", lambda *a, **kw: real(*a, **{**kw, "maxiter": 1, "tol": 1e-14}))
        monkeypatch.setitem(hessian.DEFAULTS, "n_examples", 64)  # read at call time: a quicker failure
    before = snapshot(parent.path)
    argv = ["fork", str(parent.path), *[x for kv in options.items() for x in kv], "--quiet"]
    _refused(capsys, argv, fragment)
    assert not Path(options["--out"]).exists()
    assert snapshot(parent.path) == before


# ---------------------------------------------------------------------------- kicks
KICK_AT = 40


@pytest.mark.slow
def test_a_kick_displaces_the_state_by_eps_along_a_cached_unit_direction(parents, tmp_path):
    """kick:eps=,direction=...: the fork's starting parameters are the parent's state plus eps times
    a unit vector; vmin is the Hessian's bottom eigenvector (a cached file, reused, pointing
    downhill), -vmin its opposite, random a unit direction from the fork seed."""
    from interp.analysis.hessian import DEFAULTS, sample_indices, spectrum
    from interp.forks.directions import CACHE

    parent = parents["plain"]  # at another step than the bad-input kick, whose direction must not be cached
    state, _ = state_at(parent, KICK_AT)
    eps = 0.05
    moved = {}
    for direction in ("vmin", "-vmin", "random"):
        out = tmp_path / direction.replace("-", "minus_")
        create_fork(parent, KICK_AT, make_arm("kick", eps=eps, direction=direction), 5, out,
                    settings={"checkpoint_dtype": "float32"})
        start = Run.open(out).state_dict(KICK_AT)
        delta = {n: start[n] - state.params[n] for n in start}
        norm = math.sqrt(sum(float((d.double() ** 2).sum()) for d in delta.values()))
        assert norm == pytest.approx(eps, rel=1e-4)
        moved[direction] = delta
    cached = parent.path / CACHE / f"vmin_step_{KICK_AT:07d}.safetensors"
    assert cached.exists()
    for n in moved["vmin"]:  # -vmin is the opposite displacement, random another one
        assert torch.allclose(moved["vmin"][n], -moved["-vmin"][n], atol=1e-6)
    cos = sum(float((moved["vmin"][n] * moved["random"][n]).sum()) for n in moved["vmin"]) / eps**2
    assert abs(cos) < 0.5
    # vmin is the bottom eigenvector of the Hessian analysis, computed again here, up to its sign
    model = _model(parent, state.params)
    idx = sample_indices(parent.task, DEFAULTS["n_examples"], parent.spec.seed)
    res = spectrum(model.eval(), parent.task.tokens[idx], parent.task.layout.loss_pos, k=1, seed=parent.spec.seed)
    v = torch.from_numpy(res["bottom"].vectors[:, 0].copy()).double()
    mine = torch.cat([moved["vmin"][n].reshape(-1).double() for n in _names(parent)]) / eps
    assert abs(float(v @ mine)) / float(v.norm()) == pytest.approx(1.0, abs=1e-3)
    assert float(res["grad"].double() @ mine) <= 0  # oriented downhill
    # a second kick at that step reads the cached direction (the file is not rewritten)
    before = cached.stat().st_mtime_ns
    create_fork(parent, KICK_AT, make_arm("kick", eps=eps, direction="vmin"), 5, tmp_path / "again",
                settings={"checkpoint_dtype": "float32"})
    assert cached.stat().st_mtime_ns == before
    again = Run.open(tmp_path / "again").state_dict(KICK_AT)
    assert all(torch.equal(again[n] - state.params[n], moved["vmin"][n]) for n in again)
