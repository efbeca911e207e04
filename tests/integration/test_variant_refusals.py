"""Bad input to the author's variants (issue 51, "Bad input"): one line on stderr, exit status 2, nothing written."""

from __future__ import annotations

import pytest

from tests.helpers import TINY_FLAGS, run_main

CASES = [
    (["--optimizer", "lion"], "invalid choice: 'lion'"),
    (["--momentum", "0.9"], "momentum 0.9 is SGD's and RMSProp's; optimizer adamw's first moment decays with beta1"),
    (["--optimizer", "sgd", "--no-bias-correction"], "--no-bias-correction applies to Adam's moments"),
    (["--optimizer", "adam"], "optimizer adam takes no weight decay (got 0.01): give --weight-decay 0"),
    (["--betas", "0.9"], "give two numbers B1,B2"),
    (["--betas", "0.8,0.99", "--beta1", "0.9"], "--betas 0.8,0.99 and --beta1 0.9 disagree"),
    (["--k", "6", "--hierarchy", "4x2"], "hierarchy 4x2 does not factor k = 6"),
    (["--label-noise", "1"], "label_noise must be < 1"),
    (["--label-noise", "-0.5"], "label_noise must be >= 0"),
    (["--holdout-fraction", "1"], "would hold out every pair and leave none to train on"),
    (["--holdout-fraction", "0.001"], "holds out none"),
    (["--k", "40"], "--unique-prefix 2 (K up to 1296)"),
]


@pytest.mark.parametrize("flags,message", CASES, ids=[" ".join(c[0]) for c in CASES])
def test_train_refuses_in_one_line(tmp_path, capsys, flags, message):
    out = tmp_path / "run"
    code, _, err = run_main(["train", "--preset", "tiny", *TINY_FLAGS, "--steps", "5", *flags, "--out", str(out)],
                            capsys)
    lines = err.strip().splitlines()
    assert code == 2 and "Traceback" not in err, err
    assert message in lines[-1], err
    assert len([line for line in lines if "error" in line]) == 1, err
    assert not out.exists()


def test_the_analyses_refuse_a_k1_run(tmp_path, capsys):
    run = tmp_path / "k1"
    code, _, err = run_main(["train", "--preset", "tiny", *[f for f in TINY_FLAGS if f != "--quiet"], "--k", "1",
                             "--steps", "10", "--quiet", "--out", str(run)], capsys)
    assert code == 0, err
    before = sorted(p.name for p in run.rglob("*"))
    for only in ("sensitivity", "patching", "ablation"):
        code, _, err = run_main(["analyze", str(run), "--only", only], capsys)
        assert code == 2 and err.strip().count("\n") == 0, err
        assert "has K = 1, the control with nothing to disambiguate" in err
    assert sorted(p.name for p in run.rglob("*")) == before  # nothing written
