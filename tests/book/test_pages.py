"""Executed chapters as book pages: cell visibility and the banner."""

from __future__ import annotations

import json

import pytest

from gnuq_core.book.pages import apply_cell_policy, insert_banner, parameter_words, prepare_notebook


def _nb() -> dict:
    def code(src: str, tags: list[str] | None = None) -> dict:
        return {"cell_type": "code", "metadata": {"tags": tags or []}, "source": src, "outputs": [],
                "execution_count": None}

    return {"nbformat": 4, "nbformat_minor": 5, "metadata": {}, "cells": [
        {"cell_type": "markdown", "metadata": {}, "source": "# Title\n\nIntro text."},
        code("seed = 0", ["parameters"]),
        code("seed = 1", ["injected-parameters"]),
        code("import numpy", ["remove-cell"]),
        code("plot()"),
        code("shown()", ["show-input"]),
    ]}


def test_cell_policy() -> None:
    cells = apply_cell_policy(_nb())["cells"]
    tags = [c["metadata"].get("tags") for c in cells]
    assert "remove-cell" in tags[1] and "remove-cell" in tags[2], "both parameter cells are removed"
    assert tags[3] == ["remove-cell"], "an author's tag is kept"
    assert tags[4] == ["hide-input"], "untagged code is folded"
    assert tags[5] == ["show-input"]


def test_banner_goes_under_the_title() -> None:
    nb = insert_banner(_nb(), "BANNER")
    sources = [c["source"] for c in nb["cells"][:3]]
    assert sources == ["# Title", "BANNER", "Intro text."]
    assert len(insert_banner(nb, "BANNER")["cells"]) == len(nb["cells"]), "inserted once"


def test_prepare_notebook_round_trip() -> None:
    record = {"profile": "quick", "parameters": {"seed": 0, "n_mc": 10}, "wall_time_s": 3.0, "commit": "a" * 40}
    out = json.loads(prepare_notebook(json.dumps(_nb()), record))
    banner = out["cells"][1]["source"]
    assert "preview" in banner and "`n_mc` = 10" in banner


def test_the_banner_says_all_where_zero_means_all() -> None:
    record = {"chapter": "06_qa_benchmarks", "profile": "full", "wall_time_s": 3.0, "commit": "a" * 40,
              "parameters": {"seed": 0, "n_truthfulqa": 0, "n_triviaqa": 0, "n_mc": 200, "n_boot": 0}}
    banner = json.loads(prepare_notebook(json.dumps(_nb()), record))["cells"][1]["source"]
    assert "`n_truthfulqa` = all (817)" in banner and "`n_triviaqa` = all (2,933)" in banner
    assert "| `n_triviaqa` | all (2,933) |" in banner and "`n_mc` = 200" in banner
    assert "`n_boot` = 0" in banner  # a 0 that means nothing else stays 0
    assert parameter_words({"chapter": "no_such_chapter", "parameters": {"n": 0}}) == {} == parameter_words(None)


def test_the_banner_states_reading_time_and_the_recorded_quick_time(tmp_path, monkeypatch) -> None:
    from gnuq_core.book import pages, runner as chapters
    from gnuq_core.repro import profiles

    words = " ".join(["word"] * 360)
    nb = {"cells": [{"cell_type": "markdown", "metadata": {}, "source": "# Title\n" + words},
                    {"cell_type": "code", "metadata": {}, "source": "x", "outputs": [
                        {"output_type": "display_data", "data": {"image/png": "…"}},
                        {"output_type": "display_data", "data": {"text/markdown": words}}]}]}
    assert pages.reading_minutes(nb) == round((2 + 720 + 40) / pages.READING_WORDS_PER_MINUTE)
    monkeypatch.setattr(profiles, "CHAPTER_TIMES", tmp_path / "times.json")
    record = {"chapter": "01_derivation", "profile": "full", "wall_time_s": 3.0, "commit": "a" * 40, "parameters": {}}
    assert "quick profile" not in pages.course_facts(nb, record)  # nothing recorded: nothing claimed
    profiles.save_chapter_time("01_derivation", "quick", 150.0)
    banner = json.loads(prepare_notebook(json.dumps(nb), record))["cells"][1]["source"]
    assert "**Time:** about 4 min to read; the quick profile runs in about 2 min (measured " in banner
    with pytest.raises(chapters.ChapterError, match="--record-times records a profile's own run time"):
        chapters.run_chapter("01", "quick", tmp_path, extra={"seed": 1}, record_time=True)
