"""--precision bf16 is accepted where the hardware has bfloat16 matrix units and refused where it has none, read from
the real capability (torch's CPU probes, CUDA's device query), not from a flag: here with the capability faked both
ways on the CPU and on a CUDA device, and against this machine's own /proc/cpuinfo."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from interp.devices import check_fits
from interp.errors import InterpError
from interp.precision import EMULATION_ENV, bf16_hardware, check_precision
from tests.helpers import small_spec


@pytest.fixture(autouse=True)
def no_emulation(monkeypatch):
    monkeypatch.delenv(EMULATION_ENV, raising=False)


def fake_cpu(monkeypatch, avx512_bf16: bool, amx: bool) -> None:
    monkeypatch.setattr(torch.cpu, "_is_avx512_bf16_supported", lambda: avx512_bf16, raising=False)
    monkeypatch.setattr(torch.cpu, "_is_amx_tile_supported", lambda: amx, raising=False)


def fake_cuda(monkeypatch, bf16: bool) -> None:
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 1)
    monkeypatch.setattr(torch.cuda, "get_device_name", lambda device=None: "Fake GPU")
    monkeypatch.setattr(torch.cuda, "is_bf16_supported", lambda including_emulation=True: bf16 or including_emulation)


@pytest.mark.parametrize("avx512_bf16,amx,found", [(True, False, "avx512_bf16"), (False, True, "amx_bf16"),
                                                   (True, True, "avx512_bf16, amx_bf16")])
def test_a_cpu_with_bf16_units_accepts_bf16(monkeypatch, avx512_bf16, amx, found):
    fake_cpu(monkeypatch, avx512_bf16, amx)
    assert bf16_hardware("cpu") == (True, found)
    check_precision("bf16", "cpu")
    check_fits(small_spec(precision="bf16"), "cpu")


def test_a_cpu_without_bf16_units_refuses_bf16_unless_emulation_is_asked_for(monkeypatch):
    fake_cpu(monkeypatch, False, False)
    units, found = bf16_hardware("cpu")
    assert not units and "neither avx512_bf16 nor amx_bf16" in found
    with pytest.raises(InterpError, match="precision bf16 needs bfloat16 matrix units on cpu; found a CPU with"):
        check_precision("bf16", "cpu")
    with pytest.raises(InterpError, match="needs bfloat16 matrix units"):
        check_fits(small_spec(precision="bf16"), "cpu")
    check_precision("float32", "cpu")
    monkeypatch.setenv(EMULATION_ENV, "1")
    check_precision("bf16", "cpu")


@pytest.mark.parametrize("bf16", [True, False])
def test_a_cuda_device_is_judged_by_its_own_units_not_by_emulation(monkeypatch, bf16):
    fake_cuda(monkeypatch, bf16)
    fake_cpu(monkeypatch, not bf16, not bf16)  # the host CPU says the opposite: it must not be what is read
    assert bf16_hardware("cuda") == (bf16, "CUDA device Fake GPU")
    if bf16:
        check_precision("bf16", "cuda:0")
    else:
        with pytest.raises(InterpError, match="needs bfloat16 matrix units on cuda:0; found CUDA device Fake GPU"):
            check_precision("bf16", "cuda:0")


def test_other_devices_have_no_bf16_units(monkeypatch):
    assert bf16_hardware("mps") == (False, "device type mps")
    with pytest.raises(InterpError, match="needs bfloat16 matrix units on mps"):
        check_precision("bf16", "mps")


def _cpu_flags() -> set[str]:
    cpuinfo = Path("/proc/cpuinfo")
    if not cpuinfo.exists():
        pytest.skip("this machine has no /proc/cpuinfo to read its CPU flags from")
    for line in cpuinfo.read_text().splitlines():
        if line.startswith("flags"):
            return set(line.split(":", 1)[1].split())
    pytest.skip("/proc/cpuinfo has no flags line")


def _assert_answer_matches(flags: set[str], units: bool, found: str) -> None:
    """The answer names exactly the bf16 units among `flags` (as a list of names), or says it found neither."""
    present = sorted(flags & {"avx512_bf16", "amx_bf16"})
    assert units == bool(present)
    if present:
        assert set(found.split(", ")) == set(present), found
    else:  # "a CPU with AVX2 and neither avx512_bf16 nor amx_bf16": the names appear, negated
        assert found.startswith("a CPU with ") and found.endswith(" and neither avx512_bf16 nor amx_bf16"), found


def test_this_machines_answer_is_its_cpu_flags():
    """On this machine, whatever its kind (AVX2 without bf16 units, AVX-512 with avx512_bf16, with AMX too)."""
    units, found = bf16_hardware("cpu")
    _assert_answer_matches(_cpu_flags(), units, found)


# the CPU kinds the suite runs on, as torch and /proc/cpuinfo would describe them
CPU_KINDS = {
    "avx2": ("AVX2", {"avx2", "fma"}),
    "avx512": ("AVX512", {"avx2", "avx512f", "avx512bw"}),
    "avx512-bf16": ("AVX512", {"avx2", "avx512f", "avx512_bf16"}),
    "avx512-amx": ("AVX512", {"avx2", "avx512f", "avx512_bf16", "amx_bf16", "amx_tile"}),
}


@pytest.mark.parametrize("kind", CPU_KINDS)
def test_every_cpu_kind_gets_the_answer_its_flags_give(monkeypatch, kind):
    """Both branches of the check above on one machine: each kind's probes faked from its flags."""
    capability, flags = CPU_KINDS[kind]
    fake_cpu(monkeypatch, "avx512_bf16" in flags, "amx_bf16" in flags)
    monkeypatch.setattr(torch.backends.cpu, "get_cpu_capability", lambda: capability)
    units, found = bf16_hardware("cpu")
    _assert_answer_matches(flags, units, found)
    if not units:
        assert f"a CPU with {capability} and neither" in found
