"""`interp mechanisms` on real folders: the demo (a copy), a synthetic sweep and bad input. The
numbers in the table equal the same quantities computed by hand from the analyses' tables."""

import json
import math

import numpy as np
import pytest

from interp.cli import main
from interp.mechanisms import mechanisms
from interp.mechanisms.rules import NOT_MEASURED, ROWS
from interp.runs import Run
from tests.helpers import DEMO, copy_run, run_main


@pytest.fixture(scope="module")
def demo_copy(tmp_path_factory):
    return copy_run(DEMO, tmp_path_factory.mktemp("mech") / "demo")


@pytest.mark.slow
def test_the_demo_table_equals_hand_computations(demo_copy, capsys):
    assert main(["mechanisms", str(demo_copy), "--json", "--quiet"]) == 0
    blob = json.loads(capsys.readouterr().out)
    rows = {r["key"]: r for r in blob["rows"]}
    assert list(rows) == [r.key for r in ROWS] and blob["kind"] == "run"

    run = Run.open(demo_copy)
    from interp.analysis import groups, trajectory
    from interp.transition import tau

    t = tau(run)
    # coverage: the share of probe groups >= 80% accurate at the checkpoint nearest tau/2
    acc = groups.across(run)
    share = groups.share_above(acc, t, fractions=(0.5,))
    assert rows["coverage"]["value"] == pytest.approx(float(share["share"].iloc[0]))
    # one exact interval over the groups (issue 42): the n it rests on is the probe's groups, not runs
    assert rows["coverage"]["n_runs"] == int(share["n_groups"].iloc[0]) > 1
    assert rows["coverage"]["low"] <= rows["coverage"]["value"] <= rows["coverage"]["high"]
    # direction consistency: the median cosine of the whole model over the checkpoints tau/4..0.9 tau
    traj = trajectory.across(run)
    whole = traj[(traj["component"] == "all") & traj["step"].between(0.25 * t, 0.9 * t)].dropna(subset=["cosine"])
    assert rows["random_walk"]["value"] == pytest.approx(float(np.median(whole["cosine"])))
    # the selector SNR is measured on the plateau (gradients, computed by the command)
    assert math.isfinite(rows["cancellation_snr"]["value"])
    # what one run cannot measure says what would
    for key in ("cancellation", "barrier", "drowning", "entropic_forks"):
        assert rows[key]["verdict"] == NOT_MEASURED and rows[key]["why"].startswith("needs"), key
    assert "selector_groups" in rows["cancellation"]["why"]
    assert rows["spinodal"]["verdict"] == NOT_MEASURED and "--only hessian" in rows["spinodal"]["why"]

    # a second call from the caches alone gives the same table
    assert main(["mechanisms", str(demo_copy), "--json", "--cached"]) == 0
    again = json.loads(capsys.readouterr().out)
    assert again["rows"] == blob["rows"]


def test_text_output_names_every_mechanism_and_its_verdict(demo_copy, capsys):
    assert main(["mechanisms", str(demo_copy), "--cached"]) == 0
    out = capsys.readouterr().out
    for r in ROWS:
        assert r.mechanism in out


def test_a_sweep_pools_its_runs_and_fits_the_noise_axis(tmp_path):
    from interp.sweeps.sweep import SweepSpec
    from tests.helpers import small_spec
    from tests.synthetic_sweeps import write_sweep_folder

    spec = SweepSpec(base=small_spec(steps=6000, n_bases=24), grid=(("train.lr", (1e-3, 2e-3, 4e-3)),
                                                                    ("seed", (0, 1))), name="noise")
    sweep = write_sweep_folder(tmp_path / "noise", spec, lambda s, rng: 500.0 * (s.train.lr / 1e-3) ** 0.7
                               * math.exp(0.05 * rng.standard_normal()))
    table = mechanisms(sweep.path, compute=False)
    assert table.kind == "sweep"
    barrier = next(r for r in table.rows if r["key"] == "barrier")
    assert barrier["low"] <= 0.7 <= barrier["high"] and barrier["verdict"] == "contradicted"
    assert barrier["n_runs"] == 6
    cancel = next(r for r in table.rows if r["key"] == "cancellation")
    assert cancel["verdict"] == NOT_MEASURED and "selector_groups" in cancel["why"]


def test_bad_input_exits_2_with_one_line(tmp_path, capsys):
    for args in (["mechanisms", str(tmp_path / "nowhere")], ["mechanisms", str(tmp_path)]):
        code, _, err = run_main(args, capsys)
        assert code == 2, err
        assert len(err.strip().splitlines()) == 1 and "Traceback" not in err
