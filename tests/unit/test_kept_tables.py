"""A measured family's numbers kept as a CSV (interp.mechanisms.kept) re-judge to the very table `reconcile` gives
on the folder itself; the kept tables of docs/data/ never call a row reproduced outside its margin."""

import math
from pathlib import Path

import pytest

from interp.errors import InterpError
from interp.mechanisms import reconcile_rules as R
from interp.mechanisms.kept import keep, rejudge
from interp.mechanisms.reconcile import reconcile
from tests.helpers import DEMO, copy_run

DATA = Path(__file__).resolve().parents[2] / "docs" / "data"


def _same(a, b):
    for x, y in zip(a.rows, b.rows):
        assert x["key"] == y["key"]
        assert (x["verdict"], x["n_runs"]) == (y["verdict"], y["n_runs"]), (x, y)
        assert x["command"] == y["command"], (x["key"], x["command"], y["command"])  # never a command naming the CSV
        for col in ("value", "low", "high"):
            assert (math.isnan(x[col]) and math.isnan(y[col])) or x[col] == pytest.approx(y[col]), (x["key"], col)


def test_a_kept_sweep_rejudges_to_its_reconciliation(tmp_path):
    from interp.sweeps.sweep import SweepSpec
    from tests.helpers import small_spec
    from tests.synthetic_sweeps import write_sweep_folder

    spec = SweepSpec(base=small_spec(steps=6000, n_bases=24), grid=(("task.k", (3, 5, 8)), ("seed", (0, 1))),
                     name="k")
    sweep = write_sweep_folder(tmp_path / "k", spec, lambda s, rng: 20.0 * (s.task.k * 24) ** 0.9
                               * math.exp(0.05 * rng.standard_normal()),
                               gap_of=lambda s, rng, tau: 0.5 * tau)
    csv = keep(sweep.path, tmp_path / "k.csv")
    live, kept = reconcile(sweep.path), rejudge(csv)
    _same(live, kept)
    scaling = next(r for r in kept.rows if r["key"] == "scaling")
    assert scaling["n_runs"] == 6 and math.isfinite(scaling["value"])


def test_a_kept_run_rejudges_to_its_reconciliation(tmp_path):
    run = copy_run(DEMO, tmp_path / "demo")  # with whatever the demo's cache holds (after the main command: most)
    csv = keep(run, tmp_path / "demo.csv")
    _same(reconcile(run), rejudge(csv))


def test_a_missing_or_foreign_file_is_one_clear_error(tmp_path):
    with pytest.raises(InterpError, match="not a file"):
        rejudge(tmp_path / "none.csv")
    (tmp_path / "x.csv").write_text("a,b\n1,2\n")
    with pytest.raises(InterpError, match="not a kept table"):
        rejudge(tmp_path / "x.csv")


@pytest.mark.parametrize("csv", sorted(DATA.glob("*.csv")), ids=lambda p: p.stem)
def test_no_kept_row_is_reproduced_outside_its_margin(csv):
    table = rejudge(csv)
    for r in table.rows:
        if r["verdict"] != R.REPRODUCED:
            continue
        c = R.claim(r["key"])
        low, high = ((r["author_low"], r["author_high"]) if math.isfinite(r["author_value"]) else (r["low"], r["high"]))
        assert c.margin.low <= low and high <= c.margin.high, r
        assert r["n_runs"] >= c.evidence.n, r


def test_unfinished_forks_are_named_and_the_familys_design_trains_them(tmp_path):
    """A kept family whose isotropic forks were interrupted says so, and recommends the family's own design
    (kept beside its rows), never the generic fork command on the CSV's path."""
    import pandas as pd

    table = pd.read_csv(DATA / "forks-tiny.csv")
    iso = table["arm"] == "isotropic_noise"
    assert iso.sum() >= 2
    table.loc[iso, "status"] = "interrupted"
    table = table.assign(source="runs/parent", replicate="interp fork runs/parent --at 100 --arm full_batch,"
                         "isotropic_noise --seed 0,1,2 --steps 500 --out runs/fam-seeds --workers 2")
    csv = tmp_path / "fam.csv"
    table.to_csv(csv, index=False)
    row = next(r for r in rejudge(csv).rows if r["key"] == "fork_isotropic")
    assert row["verdict"] == R.NOT_MEASURED
    assert f"its {int(iso.sum())} are not finished ({int(iso.sum())} interrupted)" in row["why"], row["why"]
    assert row["command"] == table["replicate"].iloc[0] and str(csv) not in row["command"]


@pytest.mark.parametrize("relapsed", [False, True])
def test_a_family_of_relapse_depths_is_judged_at_its_deepest_step(tmp_path, relapsed):
    """Forks of one relapsed state at two depths are read where it sat relapsed longest (the author's state);
    any other family at its earliest fork step. The deeper step's isotropic forks escape 4x later here."""
    import pandas as pd

    shallow = pd.read_csv(DATA / "forks-tiny.csv")
    deep = shallow.assign(fork_step=600, run=shallow["run"].str.replace("at100", "at600"))
    iso = deep["arm"] == "isotropic_noise"
    deep.loc[iso, "escape"] = deep.loc[iso, "escape"] * 4
    table = pd.concat([shallow, deep]).assign(relapsed=relapsed)
    csv = tmp_path / "depths.csv"
    table.to_csv(csv, index=False)
    rows = {r["key"]: r for r in rejudge(csv).rows}
    one = rejudge(DATA / "forks-tiny.csv").rows
    base = next(r for r in one if r["key"] == "fork_isotropic")
    row = rows["fork_isotropic"]
    assert f"at fork step {600 if relapsed else 100}" in row["detail"], row["detail"]
    assert row["value"] == pytest.approx(base["value"] * (4 if relapsed else 1), rel=1e-6)
    assert f"at fork step {600 if relapsed else 100}" in rows["fork_full_batch"]["detail"]


def test_a_family_missing_an_arm_is_sent_to_its_own_design_with_that_arm(tmp_path):
    """A fork row a family cannot measure recommends the family's own command (its fork steps, relapse, escape and
    horizon) with the claim's arms, never the first-plateau `--at mid` command a relapse family is not."""
    import pandas as pd

    table = pd.read_csv(DATA / "forks-tiny.csv")
    table = table[table["arm"] != "isotropic_noise"].assign(relapsed=True)
    csv = tmp_path / "no-iso.csv"
    table.to_csv(csv, index=False)
    row = next(r for r in rejudge(csv).rows if r["key"] == "fork_isotropic")
    design = table["replicate"].iloc[0]
    assert row["verdict"] == R.NOT_MEASURED and "--at mid" not in row["command"], row["command"]
    assert "--arm full_batch,isotropic_noise" in row["command"] and "--at 100" in row["command"]
    assert row["command"].split("--arm")[0] == design.split("--arm")[0]
    assert "-arms --workers" in row["command"] and row["command"] in row["why"]


def test_forks_censored_at_their_horizon_are_sent_to_a_longer_one(tmp_path):
    """Neither arm escaped: the same horizon would censor them again, so the command quadruples it."""
    import pandas as pd

    table = pd.read_csv(DATA / "forks-tiny.csv")
    both = table["arm"].isin(["full_batch", "minibatch"])
    table.loc[both, ["escape", "escape_half"]] = float("nan")
    table.loc[both, ["censored_escape", "censored_escape_half"]] = True
    table.loc[both, "steps_run"] = table.loc[both, "horizon"]
    csv = tmp_path / "censored.csv"
    table.to_csv(csv, index=False)
    row = next(r for r in rejudge(csv).rows if r["key"] == "fork_full_batch")
    assert row["verdict"] == R.NOT_MEASURED and "censored at its horizon" in row["why"], row["why"]
    horizon = int(table["horizon"].iloc[0])
    assert f"--steps {4 * horizon}" in row["command"] and f"--steps {horizon} " not in row["command"], row["command"]


def test_a_sweep_stopped_partway_is_kept_with_its_unstarted_runs(tmp_path):
    """A sweep whose later runs never started (a budget ran out) is kept and re-judged from its done runs."""
    import shutil

    from interp.sweeps.sweep import SweepSpec
    from tests.helpers import small_spec
    from tests.synthetic_sweeps import write_sweep_folder

    spec = SweepSpec(base=small_spec(steps=6000, n_bases=24), grid=(("task.k", (3, 5, 8)), ("seed", (0, 1))),
                     name="k")
    sweep = write_sweep_folder(tmp_path / "k", spec, lambda s, rng: 20.0 * (s.task.k * 24) ** 0.9
                               * math.exp(0.05 * rng.standard_normal()),
                               gap_of=lambda s, rng, tau: 0.5 * tau)
    gone = [name for name, _, _ in sweep.points()][-1]
    shutil.rmtree(sweep.path / gone)
    csv = keep(sweep.path, tmp_path / "k.csv")
    import pandas as pd

    kept = pd.read_csv(csv)
    assert len(kept) == 6 and (kept["status"] != "done").sum() == 1
    _same(reconcile(sweep.path), rejudge(csv))
    scaling = next(r for r in rejudge(csv).rows if r["key"] == "scaling")
    assert scaling["n_runs"] == 5
