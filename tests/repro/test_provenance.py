"""Provenance records."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from gnuq_core.repro.provenance import (
    Provenance,
    banner_markdown,
    duration_text,
    git_state,
    package_versions,
    seeds_and_sizes,
)


@pytest.mark.subprocess
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
    assert "n=5" in text and "wall time" in text
    assert "| profile | smoke (preview) |" in text


@pytest.mark.subprocess
def test_footer_is_an_html_table(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("GNUQ_OUTPUT_DIR", str(tmp_path))
    shown = []
    monkeypatch.setattr("IPython.display.display", lambda obj: shown.append(obj))
    Provenance.start(profile="full", seed=0).show()
    html = shown[0]._repr_html_()
    assert "<table" in html and '<p class="gnuq-table-caption">Provenance of this page</p>' in html
    assert "| --- |" not in html and "(preview)" not in html


def test_explicit_parameters_override_the_runner(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("GNUQ_PARAMETERS", json.dumps({"seed": 1}))
    assert Provenance.start(seed=2).parameters == {"seed": 2}


def test_git_state_and_versions() -> None:
    state = git_state()
    assert state["commit"] == "unknown" or len(state["commit"]) == 40
    assert "numpy" in package_versions()


RECORD = {"profile": "quick", "commit": "0123456789abcdef", "dirty": False, "wall_time_s": 152.3,
          "built_at": "2026-12-01T01:38:41+00:00", "machine": {"cores": "2", "cpu": "AMD EPYC"},
          "parameters": {"profile": "quick", "seed": 0, "n_seeds": 2, "num_samples": 300, "width": 16,
                         "widths": [4, 8]}}


def test_seeds_and_sizes() -> None:
    seeds, sizes = seeds_and_sizes(RECORD["parameters"])
    assert seeds == {"n_seeds": 2, "seed": 0} and sizes == {"num_samples": 300}


def test_preview_banner_says_so() -> None:
    text = banner_markdown(RECORD, source_link="../../notebooks/01_derivation.py")
    assert text.startswith("::::{admonition} Preview (profile `quick`)") and "preview" in text
    assert "`num_samples` = 300" in text and "2 min 32 s on 2 cores (AMD EPYC)" in text and "`0123456789ab`" in text
    assert "2026-12-01 01:38 UTC" in text
    assert "{download}`01_derivation.py <../../notebooks/01_derivation.py>`" in text
    assert "| `widths` | [4, 8] |" in text, "the parameters table lists every parameter"


def test_the_banner_links_binder_only_where_the_book_names_its_repository() -> None:
    offline = banner_markdown(RECORD, runnable_link="01_derivation.runnable.ipynb")
    assert "{download}`a notebook in the quick profile <01_derivation.runnable.ipynb>`" in offline
    assert "Binder" not in offline
    published = banner_markdown(RECORD, runnable_link="01_derivation.runnable.ipynb",
                                launch_link="https://mybinder.org/v2/gh/a/b/main?urlpath=x")
    assert "[open it in Binder](https://mybinder.org/v2/gh/a/b/main?urlpath=x)" in published


def test_paper_edition_banner_is_not_a_preview() -> None:
    text = banner_markdown({**RECORD, "profile": "full"})
    assert "Paper edition" in text and "preview" not in text.lower()


def test_missing_record_banner() -> None:
    assert "No provenance" in banner_markdown(None)


def test_duration_text() -> None:
    assert [duration_text(s) for s in (None, 3.04, 152.3, 3725)] == ["unknown", "3.0 s", "2 min 32 s", "1 h 2 min"]
