"""Reading glued values back from an executed notebook."""

from __future__ import annotations

import json
from pathlib import Path

from gnuq_core.repro import glued
from gnuq_core.repro.glued import fill, glued_text


def test_glued_text(tmp_path: Path) -> None:
    out = {"output_type": "display_data", "metadata": {"scrapbook": {"name": "rho"}},
           "data": {"application/papermill.record/text/plain": "0.5"}}
    nb = {"cells": [{"cell_type": "code", "outputs": [out]}, {"cell_type": "markdown"}]}
    (tmp_path / "a.ipynb").write_text(json.dumps(nb))
    assert glued_text(tmp_path / "a.ipynb") == {"rho": "0.5"}


def test_fill_writes_each_glued_value_as_the_book_would() -> None:
    values = {"rho": 0.12345, "n": 4000, "words": "**three** seeds"}
    text = "ρ = {glue:text}`rho:.2f` over {glue:text}`n:,` draws; {glue:md}`words`, {glue}`n`; {glue:text}`later`."
    assert fill(text, values) == "ρ = 0.12 over 4,000 draws; **three** seeds, 4000; (later: not computed in this run)."


def test_in_a_runnable_kernel_glue_keeps_the_value_for_show(monkeypatch, capsys) -> None:
    monkeypatch.setenv(glued.RUNNABLE_ENV, "1")
    monkeypatch.setattr(glued, "GLUED", {})
    glued.glue("rho", 0.5)
    assert glued.GLUED == {"rho": 0.5} and capsys.readouterr().out == ""  # nothing displayed, no myst_nb needed


def test_text_that_quotes_a_value_glued_further_down_is_filled_in_once_it_is(monkeypatch) -> None:
    import IPython.display as ipd

    monkeypatch.setenv(glued.RUNNABLE_ENV, "1")
    monkeypatch.setattr(glued, "GLUED", {})
    monkeypatch.setattr(glued, "_PENDING", [])
    shown: list[str] = []

    class Handle:
        def update(self, obj) -> None:
            shown.append(f"updated: {obj.data}")

    monkeypatch.setattr(ipd, "display", lambda obj, display_id=False: Handle() if display_id else shown.append(obj.data))
    glued.show("ρ = {glue:text}`rho:.2f`.")
    assert shown == [] and glued._PENDING
    glued.glue("rho", 0.5)
    assert shown == ["updated: ρ = 0.50."] and not glued._PENDING
