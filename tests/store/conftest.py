"""Shared pieces of the store tests: a demo kind, and a fingerprint of another machine."""

from __future__ import annotations

from gnuq_core.store.contracts import Contract, Exact
from gnuq_core.store.kinds import Kind


def another_platform(fingerprint: dict) -> dict:
    """A fingerprint that differs from ``fingerprint`` in its CPU and instruction sets, whatever
    this machine is (a test that wrote "AVX2" passed natively and failed under a simulated AVX2 CPU)."""
    def other(isa: str | None, alternative: str) -> str:
        return alternative if isa != alternative else "SSE4_2"

    return {**fingerprint, "cpu": f"{fingerprint.get('cpu', '')} (another machine)",
            "cpu_isa": other(fingerprint.get("cpu_isa"), "AVX2"), "jax_isa": other(fingerprint.get("jax_isa"), "AVX2"),
            "torch_isa": other(fingerprint.get("torch_isa"), "AVX2")}


def demo_kind(contract: Contract | None = None, name: str = "demo", version: int = 1, **kw) -> Kind:
    """A kind ``name`` (not registered) at ``version``."""
    return Kind(name, version, contract or Exact(rtol=1e-6, atol=1e-12), "one demo item", ("00_demo",), **kw)
