"""gnuq_core.chapters.base: the values an exercise quotes come from the profiles themselves."""

from __future__ import annotations

import os
import types

import pytest

from gnuq_core.chapters import MODULES, derivation, module_for
from gnuq_core.chapters.base import profile_values


def test_profile_values_are_the_profiles_own() -> None:
    values = profile_values(derivation.Params())
    assert values["smoke_n_mc"] == derivation.Params.for_profile("smoke").n_mc
    assert values["quick_n_mc"] == derivation.Params.for_profile("quick").n_mc
    assert set(values) == {f"{p}_{n}" for p in ("smoke", "quick") for n in derivation.Params.names()}


def test_every_chapter_can_quote_its_profiles() -> None:
    for stem in MODULES:
        params = module_for(stem).Params()
        values = profile_values(params)
        assert all(isinstance(v, (int, float, str, bool)) for v in values.values()), stem


def test_value_words_read_what_zero_means_from_the_parameter_doc() -> None:
    from gnuq_core.chapters import cross_checks, efficiency, qa

    assert qa.Params.value_words({"n_truthfulqa": 0, "n_triviaqa": 5, "n_mc": 0}) == {
        "n_truthfulqa": "all (817)", "n_mc": "all"}
    assert efficiency.Params.value_words({"threads": 0, "memory": False}) == {"threads": "0 (torch's default)"}
    assert cross_checks.Params.value_words({"glm_samples": 0}) == {"glm_samples": "0 (no such row)"}


def _line_figure():
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(3, 2))
    ax.plot([0, 1], [0, 1])
    return fig


charts = types.ModuleType("gnuq_core.chapters.charts")  # a chapter module, as a notebook imports it
charts.figure_line = _line_figure


def test_glue_figure_records_the_function_that_drew_it(monkeypatch) -> None:
    from gnuq_core.chapters import base

    glued: dict = {}
    monkeypatch.setattr(base, "glue", lambda name, value: glued.update({name: value}))
    base.glue_figure("fig_line", charts.figure_line())
    assert glued["fig_line"].made_by == "gnuq_core.chapters.charts.figure_line"
    fig = _line_figure()
    base.glue_figure("fig_plain", fig)  # not drawn by a chapter's figure function: nothing claimed
    assert glued["fig_plain"].made_by == ""


def test_a_chapters_set_up_is_one_call_and_every_notebook_makes_it(monkeypatch, tmp_path) -> None:
    """`start` resolves the Params (refusing a bad value), opens the profile's store and starts the
    provenance; every chapter notebook's set-up is that one call, with the same quiet kernel."""
    import warnings

    from gnuq_core.chapters import derivation, proxy_bias
    from gnuq_core.chapters.base import QUIET_ENVIRONMENT, QUIET_WARNINGS, ChapterError, start
    from gnuq_core.repro.profiles import chapters

    monkeypatch.setenv("GNUQ_CACHE_DIR", str(tmp_path))
    for name in QUIET_ENVIRONMENT:  # start() sets them where unset; given back after the test
        monkeypatch.delenv(name, raising=False)
    with warnings.catch_warnings():
        params, store, prov = start(proxy_bias, "smoke", {"seed": 3})
        assert params == proxy_bias.Params.for_profile("smoke", {"seed": 3})
        assert store.label == "the local cache" and prov.parameters["seed"] == 3
        assert all(os.environ[k] == v for k, v in QUIET_ENVIRONMENT.items())
        assert start(derivation, "quick", store=False)[1] is None
        with pytest.raises(ChapterError, match="unknown parameter"):
            start(derivation, "quick", {"no_such": 1})
        quieted = {(f[1].pattern if f[1] else "", f[2]) for f in warnings.filters if f[0] == "ignore"}
        assert {(m, c) for m, _, c in QUIET_WARNINGS} <= quieted
    for source in chapters():
        text = source.read_text()
        assert text.count("start(") == 1 and "warnings." not in text and "Provenance" not in text, source.name


def test_the_notebooks_narrate_and_call_in_few_code_lines() -> None:
    """Architecture II's budget: every notebook's code (blank and comment lines aside, the
    parameters cells included) is at most 150 lines in all; a table is shown by name
    (`Result.show`), so a page never tests for a table itself."""
    from gnuq_core.repro.profiles import chapters

    total = 0
    for source in chapters():
        kind = None
        for line in source.read_text().splitlines():
            if line.startswith("# %%"):
                kind = "markdown" if "[markdown]" in line else "code"
            elif kind == "code" and line.strip() and not line.lstrip().startswith("#"):
                total += 1
                assert "in result.tables" not in line, f"{source.name}: {line.strip()} (use result.show(optional=...))"
    assert total <= 150, f"the notebooks hold {total} code lines (at most 150)"


def test_show_displays_tables_by_name_and_refuses_a_missing_one(monkeypatch) -> None:
    import IPython.display

    from gnuq_core.chapters.base import Result

    shown: list = []
    monkeypatch.setattr(IPython.display, "display", lambda *objs: shown.append(objs))
    result = Result(tables={"a": "A", "b": "B", "maybe": "M"})
    result.show("b", "a", optional=["absent", "maybe"])
    assert shown == [("B", "A", "M")]
    with pytest.raises(KeyError, match="no table 'c'; it made a, b, maybe"):
        result.show("c")
