"""The shipped demo run: intact, reproducible from its documented command, and showing the circuit.

The findings asserted here are those the analyses issue asks of the demo: a layer-0 head
carries z after the snap (largest z-share), zero-ablating it after the snap costs more than
0.5 log K of candidate loss, and its z-sensitivity rises before tau.
"""


import pytest

from interp.analysis import ablation, sensitivity
from interp.presets import preset
from interp.runs import Run
from interp.timelines import timeline
from interp.transition import rise_onset, tau
from tests.helpers import DEMO, assert_plateau_then_snap, copy_run

# the documented command: interp train --preset tiny --out checkpoints/demo --checkpoint-dtype float16
#   --checkpoint-every 100 --no-early-checkpoints --no-densify --dense-until 350 --save-optimizer
# and then drop_states(run, [500]) (only the state at tau/2 is shipped) and drop_checkpoints(run, KEPT)
KEPT = [*range(0, 351, 50), *range(400, 1001, 100), 1200, 1400]  # and the last step, 1625
DEMO_FLAGS = dict(checkpoint_dtype="float16", checkpoint_every=100, early_checkpoints=False, densify=False,
                  dense_until=350, save_optimizer=True)


@pytest.fixture(scope="module")
def demo() -> Run:
    return Run.open(DEMO)


@pytest.fixture(scope="module")
def sens(demo):
    return sensitivity.across(demo)


def test_demo_is_the_tiny_preset_with_its_documented_flags(demo):
    assert demo.spec == preset("tiny").override(**DEMO_FLAGS)
    assert demo.task.sha256() == demo.info["task_sha256"]


def test_every_demo_checkpoint_loads_and_is_verified(demo):
    assert demo.steps == [*KEPT, 1625]  # onsets timed to 50 steps, the transition to 100 up to step 1000
    for step in demo.steps:
        demo.state_dict(step)  # raises on a hash mismatch
    total = sum(p.stat().st_size for p in (DEMO / "checkpoints").iterdir())
    assert total < 15 * 2**20  # 18 float16 checkpoints of 0.8 MB (the snap comes at step 1525)


def test_the_shipped_demo_is_within_its_20_mib():
    """What the repository ships under checkpoints/ (the run's files; a local cache/ is not shipped)."""
    shipped = [p for p in DEMO.rglob("*") if p.is_file() and "cache" not in p.relative_to(DEMO).parts
               and p.name != "resume.safetensors"]
    assert sum(p.stat().st_size for p in shipped) <= 20 * 2**20


def test_the_demo_keeps_one_state_at_tau_half_so_its_forks_replay_nothing(demo):
    """Replaying the demo from step 0 reproduces its checkpoints only on a CPU whose float rounding
    matches the one that trained it, so the state forks start from (tau/2) is shipped."""
    from interp.forks.fork import resolve_at
    from interp.replay import state_at
    from interp.run_states import kept_steps

    assert kept_steps(demo) == [resolve_at(demo, "tau/2")] == [500]
    state, how = state_at(demo, 500)
    assert how == "kept" and state.step == 500
    saved = demo.state_dict(500)
    assert all(state.params[n].half().equal(t) for n, t in saved.items())


def test_demo_metrics_show_plateau_then_snap(demo):
    assert_plateau_then_snap(demo)


def test_a_layer_0_head_carries_z_after_the_snap(demo, sens):
    head = sensitivity.routing_head(sens)
    last = sens[sens["step"] == sens["step"].max()].set_index("head_name")
    assert last.loc[head, "layer"] == 0, f"the routing head is {head}"
    assert last.loc[head, "z_share"] > 0.9
    assert last.loc[head, "attn_to_z"] > 0.5


def test_routing_head_rises_before_tau(demo, sens):
    head = sensitivity.routing_head(sens)
    series = sens[sens["head_name"] == head].sort_values("step")
    start = rise_onset(series["step"], series["z_share"])
    assert start is not None and start < tau(demo)


def test_zero_ablating_the_routing_head_after_the_snap_costs_more_than_half_log_k(demo, sens):
    head = sensitivity.routing_head(sens)
    post = demo.steps[-1]  # 2 tau lies beyond the demo: its last step is after the snap
    table = ablation.at_step(demo, post, methods="zero", n_examples=128)
    row = table.set_index("component").loc[head]
    assert row["delta_loss_cand"] > 0.5 * demo.log_k
    # and it is the head whose removal hurts most when it is replaced by its mean (zeroing it is off
    # the distribution: on the demo of 2026-12-04 zeroing L0H2 costs as much, 5.12 against 5.09 nats)
    mean = ablation.at_step(demo, post, methods="mean", n_examples=128)
    heads_only = mean[mean["head"].notna()]
    assert heads_only.loc[heads_only["delta_loss_cand"].idxmax(), "component"] == head


@pytest.fixture(scope="module")
def tl(demo, tmp_path_factory):
    # the routing head's events (the decodable onset's own tests: tests/unit/test_probes.py)
    return timeline(Run.open(copy_run(DEMO, tmp_path_factory.mktemp("demo") / "demo")), with_probes=False)


def test_the_routing_head_carries_z_before_z_is_used(tl):
    carried = [tl.event("carried_attn"), tl.event("carried_share")]
    used = [tl.event("used_ablation"), tl.event("used_patching")]
    assert None not in carried + used, tl.events
    assert max(carried) < min(used) < tl.tau
    events = tl.events.set_index("event")
    for name, step in zip(("carried_attn", "carried_share", "used_ablation", "used_patching"), carried + used):
        assert events.loc[name, "lead"] == pytest.approx((tl.tau - step) / tl.tau)


def test_the_timeline_marks_the_events_where_the_analysis_puts_them(tl):
    from interp.plots import timeline_figure

    fig = timeline_figure(tl)
    marks = {s.name[len("event "):]: s.x0 for s in fig.layout.shapes if (s.name or "").startswith("event ")}
    assert marks == {r.event: int(r.step) for r in tl.events.dropna(subset=["step"]).itertuples()}
    usage = tl.usage.sort_values("step")
    first = usage[usage["resample_delta_loss_cand"] > 0.1]["step"].min()
    assert tl.event("used_ablation") >= first  # held for the onset's checkpoints, so never earlier
