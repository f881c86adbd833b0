"""The machine fingerprint: what decides the last bits of a float computation here.

JAX/XLA, torch (ATen, MKL, oneDNN) and numpy's OpenBLAS pick their CPU kernels by the
instruction set they find, and different kernels sum in different orders. A result that
amplifies last-bit differences (training, Lanczos, MCMC, sampling) is therefore only
reproducible bit for bit on the same *platform*: the same CPU type, the same kernel
choices, the same library versions and core count. :func:`fingerprint` records exactly
those; :func:`fingerprint_id` names them (12 hex digits), and every stored record carries
the id of the platform that made it (`gnuq_core.store`), with the full fingerprints in
``results/fingerprints.jsonl``.

Kernel choices honour the variables that *simulate* another CPU on this one
(:data:`SIMULATIONS`): ``XLA_FLAGS=--xla_cpu_max_isa=…``, ``ATEN_CPU_CAPABILITY``,
``MKL_ENABLE_INSTRUCTIONS``, ``DNNL_MAX_CPU_ISA`` and ``OPENBLAS_CORETYPE``; the
fingerprint reads them, so a simulated run has another fingerprint, as a real other
machine would. Nothing here imports torch or JAX.
"""

from __future__ import annotations

import datetime as _dt
import functools
import hashlib
import json
import os
import platform
import re
from contextlib import suppress
from pathlib import Path
from typing import Any, Mapping

from gnuq_core.repro.provenance import package_versions

try:
    import fcntl
except ImportError:  # pragma: no cover - not POSIX
    fcntl = None  # type: ignore[assignment]

__all__ = ["ISA_LEVELS", "SIMULATIONS", "cpu_isa", "fingerprint", "fingerprint_id", "describe", "simulated_env",
           "registered", "register"]

ISA_LEVELS = ("SSE4_2", "AVX", "AVX2", "AVX512", "AVX512_VNNI", "AVX512_BF16", "AMX")
"""XLA's CPU instruction-set levels, lowest first (the values of ``--xla_cpu_max_isa``)."""

# the /proc/cpuinfo flag that admits each level
_LEVEL_FLAG = {"SSE4_2": "sse4_2", "AVX": "avx", "AVX2": "avx2", "AVX512": "avx512f", "AVX512_VNNI": "avx512_vnni",
               "AVX512_BF16": "avx512_bf16", "AMX": "amx_bf16"}
_TORCH_LEVELS = ("DEFAULT", "AVX2", "AVX512")  # ATen's dispatch levels on x86-64

VERSIONED = ("numpy", "scipy", "jax", "jaxlib", "torch", "numpyro", "transformers")
"""Packages whose version is part of the fingerprint (they do the arithmetic)."""

SIMULATIONS: dict[str, dict[str, str]] = {
    "avx2": {"XLA_FLAGS": "--xla_cpu_max_isa=AVX2", "ATEN_CPU_CAPABILITY": "avx2",
             "MKL_ENABLE_INSTRUCTIONS": "AVX2", "DNNL_MAX_CPU_ISA": "AVX2", "OPENBLAS_CORETYPE": "Haswell"},
    "sse4_2": {"XLA_FLAGS": "--xla_cpu_max_isa=SSE4_2", "ATEN_CPU_CAPABILITY": "default",
               "MKL_ENABLE_INSTRUCTIONS": "SSE4_2", "DNNL_MAX_CPU_ISA": "SSE41", "OPENBLAS_CORETYPE": "Nehalem"},
}
"""Environment settings that make this machine compute like another CPU: ``avx2`` like a machine
without AVX-512 (an AMD EPYC, an older Xeon), ``sse4_2`` like a machine without AVX."""


def simulated_env(name: str, base: Mapping[str, str] | None = None) -> dict[str, str]:
    """``base`` (default: this process's environment) with simulation ``name`` of :data:`SIMULATIONS`
    applied (``XLA_FLAGS`` extended, not replaced)."""
    if name not in SIMULATIONS:
        raise ValueError(f"unknown simulation {name!r}; choose one of {', '.join(SIMULATIONS)}")
    env = dict(os.environ if base is None else base)
    for key, value in SIMULATIONS[name].items():
        if key == "XLA_FLAGS":
            kept = [f for f in env.get(key, "").split() if not f.startswith("--xla_cpu_max_isa=")]
            value = " ".join(kept + [value])
        env[key] = value
    return env


@functools.lru_cache(maxsize=1)
def _cpuinfo() -> tuple[str, str, frozenset[str]]:
    """(vendor, model name, flags) of the first CPU in /proc/cpuinfo (empty outside Linux)."""
    vendor = model = ""
    flags: frozenset[str] = frozenset()
    try:
        with open("/proc/cpuinfo", encoding="utf-8", errors="replace") as f:
            for line in f:
                key, _, value = line.partition(":")
                key, value = key.strip(), value.strip()
                if key == "vendor_id" and not vendor:
                    vendor = value
                elif key == "model name" and not model:
                    model = value
                elif key == "flags" and not flags:
                    flags = frozenset(value.split())
                if vendor and model and flags:
                    break
    except OSError:
        pass
    return vendor or platform.processor() or "unknown", model or platform.machine(), flags


def cpu_isa(flags: frozenset[str] | None = None) -> str:
    """The highest of :data:`ISA_LEVELS` this CPU supports (from its flags)."""
    flags = _cpuinfo()[2] if flags is None else flags
    best = "unknown"
    for level in ISA_LEVELS:
        if _LEVEL_FLAG[level] in flags:
            best = level
    return best


def _at_most(level: str, cap: str | None, levels: tuple[str, ...]) -> str:
    """``level`` lowered to ``cap`` (both in ``levels``, case-insensitive); unknown caps are kept as given."""
    if not cap:
        return level
    upper = [x.upper() for x in levels]
    if cap.upper() not in upper or level.upper() not in upper:
        return f"{level} (capped: {cap})"
    return levels[min(upper.index(level.upper()), upper.index(cap.upper()))]


def _jax_isa(env: Mapping[str, str], hardware: str) -> str:
    match = re.search(r"--xla_cpu_max_isa=(\S+)", env.get("XLA_FLAGS", ""))
    return _at_most(hardware, match[1] if match else None, ISA_LEVELS)


def _torch_isa(env: Mapping[str, str], flags: frozenset[str]) -> str:
    """ATen's CPU capability: AVX512 needs avx512 f/bw/vl/dq, AVX2 needs avx2 and fma;
    ``ATEN_CPU_CAPABILITY`` lowers it (what ``torch.backends.cpu.get_cpu_capability()`` says)."""
    if {"avx512f", "avx512bw", "avx512vl", "avx512dq"} <= flags:
        level = "AVX512"
    elif {"avx2", "fma"} <= flags:
        level = "AVX2"
    else:
        level = "DEFAULT"
    return _at_most(level, env.get("ATEN_CPU_CAPABILITY") or None, _TORCH_LEVELS)


def _openblas() -> str:
    """The kernel set numpy's and scipy's OpenBLAS chose (``OPENBLAS_CORETYPE`` honoured), e.g.
    ``"openblas SkylakeX"``. Their versions follow from numpy's and scipy's, which are in
    ``versions``; which libraries are loaded (and in what order) must not change the answer."""
    try:
        import numpy  # noqa: F401  (threadpoolctl reports the libraries loaded in this process)
        from threadpoolctl import threadpool_info
    except ImportError:  # pragma: no cover - numpy and threadpoolctl come with the environment
        return "unknown"
    found = sorted({f"{lib.get('internal_api')} {lib.get('architecture')}" for lib in threadpool_info()
                    if lib.get("user_api") == "blas" and "numpy" in str(lib.get("filepath", ""))})
    if not found:
        found = sorted({f"{lib.get('internal_api')} {lib.get('architecture')}" for lib in threadpool_info()
                        if lib.get("user_api") == "blas"})
    return ", ".join(found) or "none"


def _versions() -> dict[str, str]:
    return {"python": platform.python_version(), **package_versions(VERSIONED)}


def _cores() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # pragma: no cover - not Linux
        return os.cpu_count() or 1


def fingerprint(env: Mapping[str, str] | None = None) -> dict[str, Any]:
    """This process's platform: CPU, the instruction sets the numeric libraries use, versions, cores.

    Parameters
    ----------
    env : mapping, optional
        The environment whose simulation variables count (default ``os.environ``). numpy's
        BLAS kernel set is read from the running process either way.

    Returns
    -------
    dict
        ``machine``, ``vendor``, ``cpu``, ``cpu_isa`` (the hardware's level), ``jax_isa``,
        ``torch_isa``, ``mkl_isa``, ``dnnl_isa``, ``blas``, ``cores``, ``versions``. Two
        processes with equal fingerprints run the same kernels on the same inputs.
    """
    env = os.environ if env is None else env
    vendor, model, flags = _cpuinfo()
    hardware = cpu_isa(flags)
    return {
        "machine": platform.machine(),
        "vendor": vendor,
        "cpu": model,
        "cpu_isa": hardware,
        "jax_isa": _jax_isa(env, hardware),
        "torch_isa": _torch_isa(env, flags),
        "mkl_isa": env.get("MKL_ENABLE_INSTRUCTIONS") or "auto",
        "dnnl_isa": env.get("DNNL_MAX_CPU_ISA") or "auto",
        "blas": _openblas(),
        "cores": _cores(),
        "versions": _versions(),
    }


def fingerprint_id(fp: Mapping[str, Any] | None = None) -> str:
    """12 hex digits naming a fingerprint (default: this process's)."""
    fp = fingerprint() if fp is None else fp
    return hashlib.sha256(json.dumps(dict(fp), sort_keys=True).encode()).hexdigest()[:12]


def describe(fp: Mapping[str, Any]) -> str:
    """One line: ``"GenuineIntel Xeon, x86_64, AVX512 (JAX AVX512, torch AVX512, …), 2 cores, torch 2.13.0, jax 0.10.2"``."""
    v = fp.get("versions", {})
    kernels = f"JAX {fp.get('jax_isa')}, torch {fp.get('torch_isa')}, OpenBLAS {str(fp.get('blas', '')).split(' ')[-1]}"
    for key, label in (("mkl_isa", "MKL"), ("dnnl_isa", "oneDNN")):
        if fp.get(key) not in (None, "auto"):
            kernels += f", {label} {fp[key]}"
    libs = ", ".join(f"{k} {v[k]}" for k in ("torch", "jax", "numpy") if k in v)
    return (f"{fp.get('vendor')} {fp.get('cpu')}, {fp.get('machine')}, {fp.get('cpu_isa')} ({kernels}), "
            f"{fp.get('cores')} cores, {libs}")


def registered(path: Path) -> dict[str, dict[str, Any]]:
    """The fingerprints a registry file (``results/fingerprints.jsonl``) holds: ``{id: fingerprint}``."""
    out: dict[str, dict[str, Any]] = {}
    if path.exists():
        for line in path.read_text(encoding="utf-8").splitlines():
            with suppress(ValueError, KeyError, TypeError):
                entry = json.loads(line)
                out[entry["id"]] = entry["fingerprint"]
    return out


def register(path: Path, fp: Mapping[str, Any]) -> str:
    """Add ``fp`` to the registry file ``path`` unless it is there (locked, fsynced); its id."""
    fid = fingerprint_id(fp)
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("a+", encoding="utf-8") as f:
        if fcntl is not None:
            fcntl.flock(f.fileno(), fcntl.LOCK_EX)
        f.seek(0)
        if fid not in {json.loads(line).get("id") for line in f if line.strip()}:
            entry = {"id": fid, "fingerprint": dict(fp), "first_seen": _dt.date.today().isoformat()}
            f.write(json.dumps(entry, sort_keys=True) + "\n")
            f.flush()
            os.fsync(f.fileno())
    return fid
