"""`interp doctor --ray`: whether a local Ray starts, said in the answer (and in its exit status)."""

import pytest

from tests.helpers import run_main


@pytest.mark.slow
def test_doctor_starts_a_local_ray_only_when_asked(capsys):
    import json

    code, out, _ = run_main(["doctor", "--json", "--ray"], capsys)
    found = json.loads(out)
    assert code == 0 and found["ray"]["starts"] is True and found["ray"]["cpus"] == 1.0
    import ray

    assert not ray.is_initialized()  # stopped again


def test_doctor_says_when_ray_is_not_installed(monkeypatch, capsys):
    from interp import cli_doctor

    real = cli_doctor._version
    monkeypatch.setattr(cli_doctor, "_version", lambda p: None if p == "ray" else real(p))
    code, out, _ = run_main(["doctor", "--ray"], capsys)
    assert code == 1
    assert "ray               does not start: ray is not installed (pip install -e '.[ray]')" in out
    assert "ray - (pip install -e '.[ray]')" in out
