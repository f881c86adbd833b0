"""Shared pieces of the store tests: a kind whose code is a module written in a temporary folder."""

from __future__ import annotations

from pathlib import Path

import pytest

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


def demo_kind(source_root: Path, contract: Contract | None = None, name: str = "demo", **kw) -> Kind:
    """A kind ``name`` whose code is ``<source_root>/gnuq_core/demo.py`` (write it first: :func:`write_code`)."""
    return Kind(name, ("gnuq_core.demo",), contract or Exact(rtol=1e-6, atol=1e-12), "one demo item", "00_demo",
                source_root=source_root, **kw)


def write_code(source_root: Path, text: str = "def f(x):\n    return 2 * x\n") -> None:
    """The demo kind's code."""
    pkg = source_root / "gnuq_core"
    pkg.mkdir(parents=True, exist_ok=True)
    (pkg / "__init__.py").write_text("")
    (pkg / "demo.py").write_text(text)


@pytest.fixture()
def code_root(tmp_path: Path) -> Path:
    root = tmp_path / "src"
    write_code(root)
    return root
