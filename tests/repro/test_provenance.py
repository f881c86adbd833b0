"""Provenance records."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from gnuq_core.repro.provenance import Provenance, git_state, package_versions


def test_record_has_every_field(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("GNUQ_OUTPUT_DIR", str(tmp_path))
    monkeypatch.setenv("GNUQ_CHAPTER", "01_derivation")
    monkeypatch.setenv("GNUQ_PARAMETERS", json.dumps({"profile": "smoke", "seed": 3, "n": 5}))
    prov = Provenance.start()
    text = prov.markdown()
    rec = json.loads((tmp_path / "01_derivation.provenance.json").read_text())
    for key in ("commit", "dirty", "profile", "seed", "parameters", "python", "packages", "machine",
                "built_at", "wall_time_s"):
        assert key in rec
    assert rec["profile"] == "smoke" and rec["seed"] == 3 and rec["parameters"]["n"] == 5
    assert "`n=5`" in text and "wall time" in text


def test_explicit_parameters_override_the_runner(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("GNUQ_PARAMETERS", json.dumps({"seed": 1}))
    assert Provenance.start(seed=2).parameters == {"seed": 2}


def test_git_state_and_versions() -> None:
    state = git_state()
    assert state["commit"] == "unknown" or len(state["commit"]) == 40
    assert "numpy" in package_versions()
