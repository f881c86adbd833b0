"""Display conventions: figure sizes and fonts, HTML tables with explicit formats."""

from __future__ import annotations

import math

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import pandas as pd  # noqa: E402
import pytest  # noqa: E402

from gnuq_core.repro import display  # noqa: E402


def test_column_width_figure_is_shown_at_natural_size() -> None:
    fig, axes = display.subplots(1, 2, panel_height=2.5)
    assert display.shown_width_px(fig) == pytest.approx(display.COLUMN_PX)
    assert fig.get_figheight() == pytest.approx(2.5)
    axes[0].set_xlabel("x")
    axes[1].set_title("t")
    assert display.small_fonts(fig) == []
    plt.close(fig)


def test_small_fonts_are_found() -> None:
    fig, ax = display.subplots()
    ax.text(0.5, 0.5, "tiny", fontsize=6)
    assert display.small_fonts(fig) == ["'tiny' (6.0 pt)"]
    plt.close(fig)


def test_too_many_panels_and_figsize_are_refused() -> None:
    with pytest.raises(ValueError, match="nrows=2"):
        display.subplots(1, 4)
    with pytest.raises(ValueError, match="figsize is set"):
        display.subplots(figsize=(13, 6))
    with pytest.raises(ValueError, match="width_fraction"):
        display.figsize(3, width_fraction=1.5)


def test_table_renders_html_with_formats_and_names() -> None:
    df = pd.DataFrame({"iso_f": [1.23456e-6, 384.08687, math.nan], "n": [3, 40, 5], "model": ["a", "b<c", "d"],
                       "hidden": [0, 0, 0]})
    t = display.table(df, {"iso_f": ("isotropic f", ".3g"), "n": ("questions", "d"), "model": "model"},
                      caption="A & B")
    html = t._repr_html_()
    assert html.startswith('<div class="gnuq-table"><table')
    assert "<caption>A &amp; B</caption>" in html
    assert ">isotropic f</th>" in html and "iso_f" not in html and "hidden" not in html
    assert '<td class="num">1.23e-06</td>' in html and '<td class="num">384</td>' in html
    assert '<td class="num">—</td>' in html, "a missing value is shown as a dash"
    assert '<td class="text">b&lt;c</td>' in html, "cell text is escaped"
    assert "0.000000" not in html
    assert repr(t).splitlines()[1].split() == ["isotropic", "f", "questions", "model"]


def test_table_keeps_integer_columns_integer_next_to_floats() -> None:
    df = pd.DataFrame({"n": [1, 2], "x": [0.5, 0.25]})
    html = display.table(df, {"n": ("n", "d"), "x": ("x", ".2f")}).html
    assert '<td class="num">2</td>' in html and '<td class="num">0.25</td>' in html


def test_table_refuses_unknown_columns() -> None:
    with pytest.raises(KeyError, match="no column"):
        display.table(pd.DataFrame({"a": [1]}), {"b": "B"})


def test_parameters_table_lists_each_parameter() -> None:
    html = display.parameters_table({"seed": 0, "widths": [4, 8]}).html
    assert "<caption>This build&#x27;s parameters</caption>" in html
    assert '<td class="text">widths</td><td class="text">4, 8</td>' in html


def test_key_value_table_without_headers_has_no_empty_header_row() -> None:
    html = display.key_value_table([("git commit", "abc"), ("wall time", "3.0 s")]).html
    assert "<thead>" not in html and '<td class="text">git commit</td><td class="text">abc</td>' in html


def test_nowrap_column() -> None:
    html = display.table(pd.DataFrame({"ci": ["0.76 [0.73, 0.80]"]}), {"ci": ("measured", "", True)}).html
    assert '<td class="text nowrap">0.76 [0.73, 0.80]</td>' in html
