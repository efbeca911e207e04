"""Tracking without training: the guard training holds its sink in, the reduction of cached tables to
scalars, the extra's one-line refusal, and `interp doctor`."""

from __future__ import annotations

import json
import math
import subprocess
import sys

import pandas as pd
import pytest

from interp.errors import InterpError
from interp.sinks import Guarded
from interp.tracking import require
from interp.tracking.scalars import Reduce, metric_values, reduce_table, scalars
from tests.helpers import run_main


class Recording:
    def __init__(self, fail_at: int | None = None):
        self.rows, self.closed, self.fail_at = [], 0, fail_at

    def log(self, row):
        if self.fail_at is not None and len(self.rows) == self.fail_at:
            raise OSError("disk full")
        self.rows.append(row)

    def close(self):
        self.closed += 1


def test_a_sink_is_made_with_the_first_row_and_told_every_row():
    made = []

    def factory(run, start):
        made.append((run, start))
        return sink

    sink = Recording()
    guarded = Guarded(factory, "RUN", 7)
    assert made == []  # a session that logs nothing makes no sink (no empty W&B run)
    guarded.log({"step": 8})
    guarded.log({"step": 9})
    guarded.close()
    assert made == [("RUN", 7)] and sink.rows == [{"step": 8}, {"step": 9}] and sink.closed == 1


def test_a_failing_sink_is_one_warning_and_is_dropped(capsys):
    sink = Recording(fail_at=1)
    guarded = Guarded(lambda run, start: sink, None, 0)
    for step in range(5):
        guarded.log({"step": step})
    guarded.close()
    err = capsys.readouterr().err
    assert err.count("interp: warning: tracking stopped: disk full") == 1, err
    assert sink.rows == [{"step": 0}] and sink.closed == 1  # closed once, when dropped


def test_a_sink_that_cannot_be_made_is_one_warning(capsys):
    def factory(run, start):
        raise RuntimeError("no such project")

    guarded = Guarded(factory, None, 0)
    guarded.log({"step": 0})
    guarded.log({"step": 1})
    guarded.close()
    assert capsys.readouterr().err.count("tracking stopped: no such project") == 1


def test_the_tracker_pickles_for_a_sweeps_workers():
    import pickle

    from interp.tracking.sinks import Tracker

    assert pickle.loads(pickle.dumps(Tracker("wandb", "sweeps-k"))) == Tracker("wandb", "sweeps-k")


def test_wandb_is_offline_unless_configured(monkeypatch, tmp_path):
    from interp.tracking.writers import wandb_mode

    for var in ("WANDB_MODE", "WANDB_API_KEY", "WANDB_BASE_URL", "WANDB_CONFIG_DIR"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("HOME", str(tmp_path))
    assert wandb_mode() == "offline"
    (tmp_path / ".netrc").write_text("machine api.wandb.ai\n  login user\n  password 0123456789\n")
    (tmp_path / ".netrc").chmod(0o600)
    assert wandb_mode() is None  # `wandb login` was run: W&B decides, as it would for the user
    (tmp_path / ".netrc").unlink()
    monkeypatch.setenv("WANDB_MODE", "disabled")
    assert wandb_mode() is None


def test_metric_values_are_the_rows_numbers_under_their_names():
    row = {"step": 5, "loss": 1.5, "lr": 3e-3, "train_loss": None, "grad_norm": math.nan, "eff_step.L0.attn": 2,
           "flag": True, "note": "x", "seconds": 0.25}
    assert metric_values(row) == {"loss": 1.5, "lr": 3e-3, "eff_step.L0.attn": 2.0, "seconds": 0.25}


def _sensitivity():
    rows = [{"step": s, "layer": 0, "head": h, "head_name": f"L0H{h}", "attn_to_z": 0.1 * h + s, "z_share": z,
             "z_var": 0.0, "out_norm": 1.0, "n_groups": 4}
            for s, shares in ((0, (0.1, 0.2)), (10, (0.3, 0.9))) for h, z in enumerate(shares)]
    df = pd.DataFrame(rows)
    df["z_share"] = df["z_share"].astype("float32")
    df["head_name"] = df["head_name"].astype("string")
    return df


def test_a_table_reduces_to_one_series_per_head_with_its_own_numbers():
    df = _sensitivity()
    out = reduce_table("sensitivity", df, Reduce(("head_name",), ("z_share",)))
    got = {(r.step, r.tag): r.value for r in out.itertuples()}
    assert got == {(s, f"sensitivity/z_share/{h}"): float(v) for s, h, v in df[["step", "head_name", "z_share"]].values}
    assert got[(10, "sensitivity/z_share/L0H1")] == float(pd.array([0.9], dtype="float32")[0])  # exact, not rounded


def test_rows_repeating_a_value_give_it_once_and_where_filters():
    df = pd.DataFrame({"step": [0, 0, 5, 5], "which": ["top", "bottom", "top", "bottom"], "restrict": ["all"] * 4,
                       "lambda_max": [2.0, 2.0, 3.0, 3.0], "eigenvalue": [2.0, -1.0, 3.0, -0.5]})
    out = reduce_table("hessian", df, Reduce(("restrict",), ("lambda_max",)))
    assert list(out.itertuples(index=False, name=None)) == [(0, "hessian/lambda_max/all", 2.0),
                                                            (5, "hessian/lambda_max/all", 3.0)]
    low = reduce_table("hessian", df, Reduce((), ("eigenvalue",), {"which": "bottom"}))
    assert list(low["value"]) == [-1.0, -0.5]


def test_scalars_of_cached_tables_special_ones_and_the_routing_head():
    groups = pd.DataFrame({"step": [0, 0, 0, 0], "group_id": [0, 1, 2, 3], "acc_cand": [1.0, 0.8, 0.5, 0.0],
                           "loss_cand": [0.1, 0.2, 0.3, 0.4]})
    edges = pd.DataFrame({"step": [0, 0, 10, 10], "edge": ["a->b", "c->d"] * 2, "score": [0.5, 0.1, 0.7, -0.2],
                          "in_circuit": [False, False, True, False]})
    ablation = pd.DataFrame({"step": [10, 10], "method": ["zero", "zero"], "component": ["L0H0", "L0H1"],
                             "delta_loss_cand": [0.01, 0.5]})
    unknown = pd.DataFrame({"step": [0, 10], "site": ["x", "x"], "width": [1.5, 2.5], "count": [1, 2]})
    tables = {"sensitivity": {"sensitivity": _sensitivity()}, "groups": {"groups": groups},
              "edges": {"edges": edges}, "ablation": {"ablation": ablation}, "new": {"new_table": unknown}}
    got = {(r.step, r.tag): r.value for r in scalars(tables).itertuples()}
    assert got[(0, "groups_summary/share_above_80")] == 0.5  # 1.0 and 0.8 are at least 80%
    assert got[(0, "groups_summary/mean_acc_cand")] == pytest.approx(0.575)
    assert {t for _, t in got if t.startswith("edges/")} == {"edges/score/a->b"}  # only edges ever in the circuit
    assert got[(0, "edges/score/a->b")] == 0.5 and got[(10, "edges/score/a->b")] == 0.7
    assert got[(0, "new_table/width/x")] == 1.5 and not any("count" in t for _, t in got)  # a table no one named
    # the routing head: the largest z-share at the last step (L0H1), again under routing/ without its name
    assert got[(10, "routing/sensitivity/z_share")] == got[(10, "sensitivity/z_share/L0H1")]
    assert got[(10, "routing/ablation/delta_loss_cand/zero")] == 0.5


def test_a_missing_extra_is_one_line_naming_the_install(monkeypatch, tmp_path, capsys):
    monkeypatch.setitem(sys.modules, "tensorboard", None)
    with pytest.raises(InterpError, match=r"pip install 'interp\[track\]'"):
        require("tensorboard")
    out = tmp_path / "run"
    code, _, err = run_main(["train", "--out", str(out), "--steps", "5", "--track", "tensorboard"], capsys)
    assert code == 2 and len(err.strip().splitlines()) == 1 and "pip install 'interp[track]'" in err, err
    assert not out.exists()  # refused as the command line is read, before anything is written
    code, _, err = run_main(["train", "--out", str(out), "--track", "mlflow"], capsys)
    assert code == 2 and "allowed: tensorboard, wandb" in err and not out.exists()


def test_export_refuses_bad_input_in_one_line(tmp_path, capsys):
    code, _, err = run_main(["export", str(tmp_path / "nothing"), "--to", "tensorboard"], capsys)
    assert code == 2 and err.count("\n") == 1, err
    code, _, err = run_main(["export", "checkpoints/demo", "--to", "mlflow"], capsys)
    assert code == 2 and "--to 'mlflow': allowed: tensorboard, wandb, synass" in err and err.count("\n") == 1
    code, _, err = run_main(["export", "checkpoints/demo", "--to", "tensorboard", str(tmp_path / "x")], capsys)
    assert code == 2 and "only --to synass takes a folder" in err and not (tmp_path / "x").exists()
    code, _, err = run_main(["export", "checkpoints/demo", "--to", "wandb", "--report", str(tmp_path / "r.html")], capsys)
    assert code == 2 and "no such file" in err and not (tmp_path / "exports").exists()


def _installed(package: str) -> str | None:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version(package)
    except PackageNotFoundError:
        return None


def test_doctor_reports_this_machine_without_importing_what_it_need_not():
    code = ("import json, sys, contextlib, io\nfrom interp.cli import main\nbuf = io.StringIO()\n"
            "with contextlib.redirect_stdout(buf):\n    status = main(['doctor', '--json'])\n"
            "print(json.dumps({'status': status, 'found': json.loads(buf.getvalue()), 'loaded': sorted(m for m in "
            "('transformer_lens', 'ray', 'wandb', 'tensorboard', 'devinterp') if m in sys.modules)}))")
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr[-2000:]
    answer = json.loads(result.stdout.strip().splitlines()[-1])
    found = answer["found"]
    assert answer["status"] == 0 and answer["loaded"] == []
    from importlib.metadata import version

    import torch

    assert found["interp"]["version"] == version("interp") and found["torch"]["version"] == torch.__version__
    assert found["transformer_lens"]["version"] == version("transformer-lens")
    from interp.model import tl_major

    assert found["transformer_lens"]["model_class"].startswith("HookedTransformer" if tl_major() == 3 else "TransformerBridge")
    # each extra as installed in this environment (the TL 4 one of tests/tl4_env.sh has fewer): None where missing
    assert found["extras"] == {p: _installed(p) for p in ("ray", "devinterp", "tensorboard", "wandb")}
    cpu = found["devices"][0]
    flags = open("/proc/cpuinfo").read()
    assert cpu["device"] == "cpu" and cpu["bf16_units"] == ("avx512_bf16" in flags or "amx_bf16" in flags)
    assert [d["device"] for d in found["devices"][1:]] == [f"cuda:{i}" for i in range(torch.cuda.device_count())]
    assert "ray" not in found  # started only with --ray


def test_doctor_names_what_it_was_asked_to_check_and_failed(monkeypatch, capsys, tmp_path):
    """`--ray` without Ray is a problem in the JSON too (exit 1, never "problems": []), and a WANDB_MODE that W&B
    would refuse mid-run is a problem of the environment; --track wandb refuses it in one line (issue 54)."""
    import interp.cli_doctor as doctor

    real = doctor._version
    monkeypatch.setattr(doctor, "_version", lambda name: None if name == "ray" else real(name))
    code, out, _ = run_main(["doctor", "--ray", "--json"], capsys)
    found = json.loads(out)
    assert code == 1 and any(p.startswith("ray does not start: ray is not installed") for p in found["problems"])
    monkeypatch.setenv("WANDB_MODE", "bogus")
    code, out, _ = run_main(["doctor", "--json"], capsys)
    assert code == 1 and any("WANDB_MODE='bogus'" in p for p in json.loads(out)["problems"])
    out_dir = tmp_path / "never-made"
    code, _, err = run_main(["train", "--out", str(out_dir), "--steps", "2", "--track", "wandb"], capsys)
    assert code == 2 and "WANDB_MODE='bogus' is not a W&B mode" in err and len(err.strip().splitlines()) == 1
    assert not out_dir.exists()
