"""The machine fingerprint: stable within a process, changed by every simulated CPU."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from gnuq_core.repro import fingerprint as fp


def _in_subprocess(env: dict[str, str], code: str) -> str:
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    return out.stdout.strip()


def test_the_fingerprint_names_the_platform() -> None:
    f = fp.fingerprint()
    assert set(f) >= {"vendor", "cpu", "cpu_isa", "jax_isa", "torch_isa", "blas", "cores", "versions"}
    assert f["versions"]["python"] and "numpy" in f["versions"]
    assert len(fp.fingerprint_id(f)) == 12 and fp.fingerprint_id(f) == fp.fingerprint_id(dict(f))
    assert f["cpu_isa"] in fp.ISA_LEVELS and f["cpu"] in fp.describe(f)


@pytest.mark.subprocess
def test_importing_libraries_does_not_change_it() -> None:
    code = ("from gnuq_core.repro.fingerprint import fingerprint_id as i; a = i(); "
            "import scipy.linalg, torch, jax; print(a == i())")
    assert _in_subprocess(dict(os.environ), code) == "True"


@pytest.mark.subprocess
@pytest.mark.parametrize("name", sorted(fp.SIMULATIONS))
def test_a_simulated_cpu_has_another_fingerprint(name: str) -> None:
    code = "import json; from gnuq_core.repro.fingerprint import fingerprint; print(json.dumps(fingerprint()))"
    native = json.loads(_in_subprocess(dict(os.environ), code))
    simulated = json.loads(_in_subprocess(fp.simulated_env(name), code))
    if native["cpu_isa"] in ("SSE4_2", "unknown"):
        pytest.skip("this CPU has nothing to simulate away")
    if native["jax_isa"] == simulated["jax_isa"] and native["mkl_isa"] == simulated["mkl_isa"]:
        pytest.skip(f"this process already runs as the {name} simulation (e.g. the suite under `gnuq store simulate`)")
    assert fp.fingerprint_id(simulated) != fp.fingerprint_id(native)
    assert simulated["jax_isa"] == fp.SIMULATIONS[name]["XLA_FLAGS"].split("=")[1]
    assert simulated["mkl_isa"] == fp.SIMULATIONS[name]["MKL_ENABLE_INSTRUCTIONS"]


@pytest.mark.subprocess
def test_the_torch_level_is_what_torch_reports() -> None:
    code = ("import torch; from gnuq_core.repro.fingerprint import fingerprint; "
            "print(torch.backends.cpu.get_cpu_capability() == fingerprint()['torch_isa'])")
    assert _in_subprocess(dict(os.environ), code) == "True"
    assert _in_subprocess(fp.simulated_env("avx2"), code) == "True"


def test_levels_are_capped_by_the_simulation_variables() -> None:
    flags = frozenset({"sse4_2", "avx", "avx2", "fma", "avx512f", "avx512bw", "avx512vl", "avx512dq"})
    assert fp.cpu_isa(flags) == "AVX512"
    assert fp._jax_isa({"XLA_FLAGS": "--foo --xla_cpu_max_isa=AVX2"}, "AVX512") == "AVX2"
    assert fp._jax_isa({}, "AVX512") == "AVX512"
    assert fp._torch_isa({"ATEN_CPU_CAPABILITY": "default"}, flags) == "DEFAULT"
    assert fp._torch_isa({}, frozenset({"avx2", "fma"})) == "AVX2"


def test_simulated_env_extends_xla_flags() -> None:
    env = fp.simulated_env("avx2", {"XLA_FLAGS": "--xla_cpu_max_isa=SSE4_2 --other"})
    assert env["XLA_FLAGS"] == "--other --xla_cpu_max_isa=AVX2" and env["ATEN_CPU_CAPABILITY"] == "avx2"
    with pytest.raises(ValueError, match="unknown simulation 'arm'"):
        fp.simulated_env("arm")
