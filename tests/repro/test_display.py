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
    # the caption above the scroll box (a <caption> is as wide as a table that scrolls: cut on a phone)
    assert html.startswith('<div class="gnuq-table"><p class="gnuq-table-caption">A &amp; B</p><div class="gnuq-scroll"')
    assert '<table class="table gnuq" aria-label="A &amp; B">' in html and "<caption>" not in html
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
    assert '<p class="gnuq-table-caption">This build&#x27;s parameters</p>' in html
    assert '<td class="text">widths</td><td class="text">4, 8</td>' in html


def test_key_value_table_without_headers_has_no_empty_header_row() -> None:
    html = display.key_value_table([("git commit", "abc"), ("wall time", "3.0 s")]).html
    assert "<thead>" not in html and '<td class="text">git commit</td><td class="text">abc</td>' in html


def test_nowrap_column() -> None:
    html = display.table(pd.DataFrame({"ci": ["0.76 [0.73, 0.80]"]}), {"ci": ("measured", "", True)}).html
    assert '<td class="text nowrap">0.76 [0.73, 0.80]</td>' in html


# The narrow rendering: a second PNG of every glued figure, for phones.


def test_narrow_width_keeps_text_at_least_min_text_px_on_a_phone() -> None:
    column = display.PHONE_PX - display.PHONE_MARGIN_PX
    assert display.MIN_FONT_PX == pytest.approx(12.5)
    assert display.MIN_FONT_PX * column / display.NARROW_PNG_PX >= display.MIN_TEXT_PX
    assert display.MIN_FONT_PX * column / (display.NARROW_PNG_PX + 1) < display.MIN_TEXT_PX + 0.05, "needlessly narrow"
    # above the breakpoint a figure is at least 576 - 48 px wide: a wide PNG (683 px) keeps 9 pt at 9 px
    assert display.MIN_FONT_PX * (display.NARROW_SCREEN_PX + 1 - display.PHONE_MARGIN_PX) / 690 >= display.MIN_TEXT_PX


def test_book_figure_carries_a_narrow_rendering() -> None:
    from IPython.core.formatters import format_display_data

    fig, axes = display.subplots(1, 2, panel_height=2.5, sharey=True)
    for ax in axes:
        ax.plot([0, 1], [0, 1], label="a line")
        ax.set_xlabel("proxy shift δ")
    fig_repr = repr(fig)
    bf = display.BookFigure(fig)
    plt.close(fig)
    data, meta = format_display_data(bf)
    assert set(data) == {"image/png", "text/plain"} and data["text/plain"] == fig_repr
    narrow = meta[display.NARROW_KEY]
    assert narrow["media"] == display.NARROW_MEDIA and narrow["min_font_px"] == pytest.approx(12.5)
    assert narrow["overlaps"] == {"wide": [], "narrow": []}
    wide_w, wide_h = display.png_size(bf.wide)
    assert wide_w == pytest.approx(display.COLUMN_PX, abs=15), "the wide PNG is the one shown today"
    assert (narrow["width"], narrow["height"]) == display.png_size(bf.narrow)
    assert display.NARROW_PNG_PX - 6 <= narrow["width"] <= display.NARROW_PNG_PX
    assert narrow["height"] > 1.8 * wide_h, "two panels side by side are stacked"


def test_narrow_layout_stacks_panels_and_gives_shared_y_its_labels_back() -> None:
    fig, axes = display.subplots(2, 2, panel_height=2.0, sharey=True)
    for i, ax in enumerate(axes.flat):
        ax.set_title(f"panel {i}")
    display.narrow_png(fig)
    tops = [ax.get_position().y0 for ax in axes.flat]
    assert tops == sorted(tops, reverse=True), "stacked in reading order"
    assert len({round(ax.get_position().x0, 3) for ax in axes.flat}) == 1, "one column"
    for ax in axes.flat:
        assert any(t.get_visible() and t.get_text() for t in ax.get_yticklabels()), "y tick labels shown"
    assert [ax.get_title() for ax in axes.flat] == ["(top left) panel 0", "(top right) panel 1",
                                                    "(bottom left) panel 2", "(bottom right) panel 3"]
    assert fig.get_figheight() == pytest.approx(8.0)
    plt.close(fig)


def test_narrow_layout_wraps_long_labels_and_narrows_legends() -> None:
    fig, ax = display.subplots()
    for i in range(3):
        ax.plot([0, 1], [i, i + 1], label=f"a rather long legend label {i}")
    ax.set_xlabel("Spearman ρ with the reference (head GGN on the fine-tuning data), a long label")
    fig.legend(loc="outside lower center", ncols=3)
    ax.set_xticks(range(4), [f"category number {i}" for i in range(4)])
    ax.set_xlim(-0.5, 3.5)
    assert display.text_overlaps(fig) == []  # at the column's width
    png = display.narrow_png(fig)
    assert display.png_size(png)[0] <= display.NARROW_PNG_PX
    assert "\n" in ax.get_xlabel()
    assert fig.legends[0]._ncols < 3 and fig.legends[0].get_window_extent().width <= fig.bbox.width
    assert all("\n" in t.get_text() for t in ax.get_xticklabels()), "category labels wrapped"
    assert display.text_overlaps(fig) == []
    plt.close(fig)


def test_text_overlaps_are_found() -> None:
    fig, ax = display.subplots()
    ax.text(0.5, 0.5, "one label")
    ax.text(0.52, 0.5, "another label")
    assert display.text_overlaps(fig) == ["'one label' over 'another label'"]
    plt.close(fig)


def test_overlapping_tick_labels_are_thinned_in_both_renderings() -> None:
    """A log axis over less than a factor of two labels its minor ticks, which overlap."""
    fig, axes = display.subplots(1, 3, panel_height=1.8)
    axes[2].plot([3e4, 1.5e6], [2.6e-2, 1.05e-2], "o")
    axes[2].set(xscale="log", yscale="log", title="model size\n(two lines)")
    fig.draw_without_rendering()
    assert display.text_overlaps(fig), "the case overlaps as drawn"
    bf = display.BookFigure(fig)
    plt.close(fig)
    assert bf.overlaps == {"wide": [], "narrow": []}


def test_category_names_are_never_thinned_away() -> None:
    """Hiding every second category name would leave bars nobody can identify: crowded names
    are wrapped or turned upright, never hidden (what still overlaps is reported, so the
    book's figure test names the figure)."""
    fig, ax = display.subplots()
    names = [f"{a} {b} baseline" for a in ("alpha", "beta", "gamma", "delta", "epsilon", "zeta")
             for b in ("red", "green", "blue", "grey")]
    ax.bar(range(24), range(1, 25))
    ax.set_xticks(range(24), labels=names, rotation=0)
    bf = display.BookFigure(fig)
    plt.close(fig)
    shown = [" ".join(t.get_text().split()) for t in ax.get_xticklabels() if t.get_visible()]
    assert shown == names
    assert bf.overlaps["narrow"], "24 upright names do not fit 433 px: the overlap is reported, not hidden"


def test_a_numbered_sequence_of_names_is_thinned_and_its_categories_kept() -> None:
    """``block 00`` … ``block 29`` can lose every second name (its neighbours tell it);
    ``embeddings`` and ``other`` at its ends are categories and stay."""
    fig, ax = display.subplots()
    names = ["embeddings", *(f"block {i:02d}" for i in range(30)), "other"]
    ax.bar(range(32), range(1, 33))
    ax.set_xticks(range(32), labels=names, rotation=90)
    bf = display.BookFigure(fig)
    plt.close(fig)
    assert bf.overlaps == {"wide": [], "narrow": []}
    shown = [t.get_text() for t in ax.get_xticklabels() if t.get_text()]
    assert "embeddings" in shown and "other" in shown and 2 < len(shown) < len(names)


def test_labels_of_log_ticks_outside_the_view_are_not_drawn_texts() -> None:
    # a log axis from 1.3e-7: its tick at 1e-8 lies a decade outside the view (chapter 04's
    # scatter: the out-of-view '10⁻⁸' of both axes were reported as overlapping)
    fig, ax = display.subplots(1, 1)
    ax.loglog([1.3e-7, 3e3], [1.3e-7, 3e3], ".")
    ax.set_xlim(1.3e-7, 3e3), ax.set_ylim(1.3e-7, 3e3)
    fig.draw_without_rendering()
    for axis in (ax.xaxis, ax.yaxis):
        assert 1e-8 in axis.get_majorticklocs()  # the tick exists, outside the view
        shown = [t.get_text() for t in display._drawn_tick_labels(axis)]
        assert shown and not any("{-8}" in s for s in shown), shown
        assert any("{-6}" in s for s in shown)
    assert display.text_overlaps(fig) == []
    plt.close(fig)
