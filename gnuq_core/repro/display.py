"""How the book shows figures and tables: one size convention, real HTML tables.

Figures are drawn at the size they are shown. The book's content column is
:data:`COLUMN_PX` pixels wide and figures are rendered at :data:`DPI`, so a figure
:data:`COLUMN_WIDTH_IN` inches wide is shown 1:1 and a 9 pt font stays 9 pt on the page.
Use :func:`subplots` (or :func:`figsize`) instead of hand-picked ``figsize=(13, 6)``:
a 13-inch figure squeezed into the column shrinks its 10 pt labels to 5 px.

On a phone the column is narrower than the figure, and the browser shrinks it: a
672-px figure on a 390-px phone would show its 9 pt labels 6.6 px tall. So every glued
figure (:class:`BookFigure`) also carries a **narrow rendering**, the same Figure drawn
:data:`NARROW_PNG_PX` pixels wide (constrained layout reflows it), which the browser shows
instead on screens up to :data:`NARROW_SCREEN_PX` wide (a ``<picture>`` element written by
:mod:`gnuq_core.repro.picture`), so that no text is shown under :data:`MIN_TEXT_PX`.

Tables are HTML ``<table>`` elements with an explicit format and a human name per
column (:func:`table`), so the page never shows ``iso_f`` or ``0.000000``, and a wide
table scrolls inside its own box (the ``gnuq-table`` class, styled in
``book/_static/gnuq.css``).
"""

from __future__ import annotations

import base64
import html
import math
import numbers
import re
import struct
from dataclasses import dataclass
from typing import Any, Callable, Mapping

import numpy as np

COLUMN_PX = 672
"""Width of the book's content column in CSS pixels (sphinx-book-theme at ≥ 1200 px)."""
DPI = 100
"""Dots per inch of every figure (the inline backend renders PNGs at the figure's dpi)."""
COLUMN_WIDTH_IN = COLUMN_PX / DPI
"""A figure this wide (inches) is shown at its natural size in the column."""
MIN_FONT_PT = 9.0
"""Smallest font size (points) any text in a figure may have."""
MAX_PANELS_PER_ROW = 3
"""More panels side by side than this are unreadable in one column: use more rows."""
MIN_FONT_PX = MIN_FONT_PT * DPI / 72
"""The smallest font in image pixels (12.5 px: 9 pt at :data:`DPI`)."""
MIN_TEXT_PX = 9.0
"""Smallest height (CSS px) a figure's text may have as a reader sees it, on any screen."""
PHONE_PX = 360
"""Width (CSS px) of the narrowest phone screen the narrow rendering is drawn for (most
Android phones; iPhones are 375 to 430 px wide, where its text is larger)."""
PHONE_MARGIN_PX = 48
"""The page's margins below 576 px: a figure may be the screen's width less 48 px
(sphinx-book-theme; measured 342 px at 390 px, 312 px at 360 px)."""
NARROW_PNG_PX = math.floor((PHONE_PX - PHONE_MARGIN_PX) * MIN_FONT_PX / MIN_TEXT_PX)
"""Widest narrow rendering (image pixels) whose :data:`MIN_FONT_PX` text still shows at
:data:`MIN_TEXT_PX` when scaled into a :data:`PHONE_PX` phone's column: 433 px (on a
390-px phone its 9 pt text shows at 9.9 px)."""
NARROW_SCREEN_PX = 575
"""Screens up to this width (CSS px, the theme's small-screen breakpoint) get the narrow
rendering. From 576 px on a figure may be at least 528 px wide (608 px at 1200 px, where
the sidebar appears), where a 690-px wide rendering still shows 9 pt text at 9.6 px."""
NARROW_MEDIA = f"(max-width: {NARROW_SCREEN_PX}.98px)"
"""The media query under which the browser picks the narrow rendering."""
NARROW_KEY = "gnuq/narrow"
"""Output-metadata key of a glued figure's narrow rendering (:meth:`BookFigure._repr_mimebundle_`)."""
MADE_BY_KEY = "gnuq/made_by"
"""Output-metadata key of the function that drew a glued figure (the book prints it under the figure)."""

STYLE: dict[str, Any] = {
    "figure.dpi": DPI,
    "savefig.dpi": DPI,
    "figure.figsize": (COLUMN_WIDTH_IN, 3.6),
    "figure.constrained_layout.use": True,
    "font.size": 10.0,
    "axes.titlesize": 10.0,
    "axes.labelsize": 10.0,
    "xtick.labelsize": 9.0,
    "ytick.labelsize": 9.0,
    "legend.fontsize": 9.0,
    "legend.title_fontsize": 9.0,
    "figure.titlesize": 11.0,
}
"""Matplotlib rc settings of the book (:func:`use_book_style` applies them)."""


def use_book_style() -> None:
    """Apply :data:`STYLE` to matplotlib's rc parameters (call once per chapter)."""
    import matplotlib as mpl

    mpl.rcParams.update(STYLE)


def figsize(height_in: float = 3.6, width_fraction: float = 1.0) -> tuple[float, float]:
    """``(width, height)`` in inches for a figure ``width_fraction`` of the column wide.

    Parameters
    ----------
    height_in : float
        Height in inches (at :data:`DPI`, 1 inch is 100 px on the page).
    width_fraction : float
        Share of the column the figure fills, in (0, 1].
    """
    if not 0 < width_fraction <= 1:
        raise ValueError(f"width_fraction={width_fraction}: must be in (0, 1]; a wider figure is shrunk "
                         "on the page and its labels become unreadable")
    if height_in <= 0:
        raise ValueError(f"height_in={height_in}: must be positive")
    return (COLUMN_WIDTH_IN * width_fraction, float(height_in))


def subplots(nrows: int = 1, ncols: int = 1, *, panel_height: float = 2.8, **kwargs: Any) -> tuple[Any, Any]:
    """``plt.subplots`` at the column's width, ``panel_height`` inches per row, book style.

    At most :data:`MAX_PANELS_PER_ROW` panels side by side; more is refused (use rows).
    Other keyword arguments go to ``plt.subplots`` (``sharey``, ``squeeze``, ...).
    """
    import matplotlib.pyplot as plt

    if ncols > MAX_PANELS_PER_ROW:
        raise ValueError(f"ncols={ncols}: at most {MAX_PANELS_PER_ROW} panels fit side by side in a "
                         f"{COLUMN_PX}-px column; use nrows={math.ceil(ncols / MAX_PANELS_PER_ROW)} instead")
    if "figsize" in kwargs:
        raise ValueError("figsize is set by the book's convention; pass panel_height (inches per row)")
    use_book_style()
    return plt.subplots(nrows, ncols, figsize=figsize(panel_height * nrows), **kwargs)


def small_fonts(fig: Any, minimum: float = MIN_FONT_PT) -> list[str]:
    """Visible texts of ``fig`` smaller than ``minimum`` points, as ``"text (size pt)"``."""
    from matplotlib.text import Text

    small = []
    for text in fig.findobj(Text):
        if text.get_visible() and text.get_text().strip() and text.get_fontsize() < minimum - 1e-9:
            small.append(f"{text.get_text()!r} ({text.get_fontsize():.1f} pt)")
    return small


def shown_width_px(fig: Any) -> float:
    """Width in pixels of ``fig``'s PNG as the inline backend renders it."""
    return float(fig.get_figwidth() * fig.dpi)


def min_font_px(fig: Any, *, draw: bool = True) -> float | None:
    """Height in image pixels of the smallest visible text of ``fig`` (its size in points at
    ``fig.dpi``); ``None`` when the figure has no text. Draws the figure first (tick labels
    get their text when drawn) unless ``draw`` is false."""
    from matplotlib.text import Text

    if draw:
        fig.draw_without_rendering()
    sizes = [t.get_fontsize() for t in fig.findobj(Text) if t.get_visible() and t.get_text().strip()]
    return min(sizes) * fig.dpi / 72 if sizes else None


def render_png(fig: Any) -> bytes:
    """``fig`` as a PNG, as Jupyter's inline backend renders it (at ``fig.dpi``, cropped to
    its contents with ``bbox_inches="tight"``)."""
    from IPython.core.pylabtools import print_figure

    return print_figure(fig, "png", bbox_inches="tight")


def png_size(png: bytes) -> tuple[int, int]:
    """``(width, height)`` in pixels of a PNG, from its header."""
    if png[:8] != b"\x89PNG\r\n\x1a\n":
        raise ValueError("not a PNG")
    return struct.unpack(">II", png[16:24])


_PLACES = {1: [""], 2: ["{0}", "{1}"], 3: ["{0}", "middle", "{1}"]}


def _place(index: int, span: int, count: int, ends: tuple[str, str], name: str) -> str:
    """Where a cell sits along one direction of a grid: "left", "middle", "right" (or "row 4")."""
    if span != 1 or count == 1:
        return ""
    if count in _PLACES:
        return _PLACES[count][index].format(*ends)
    return f"{name} {index + 1}"


def _stack_panels(fig: Any) -> float:
    """Put the panels of ``fig``'s grid under one another, in reading order (in place).

    Each panel keeps its height and its colour bar; a panel that shared its y axis with its
    left neighbour gets its own y tick labels back (it now stands alone in its row). Each
    panel's title starts with where it was, "(left)", "(top right)", so that a caption
    written for the wide figure ("Left: ...") still finds it. Returns the factor by which the
    figure must grow in height (1 when nothing moved: one column already, or panels on
    nested or several grids).
    """
    from matplotlib.gridspec import GridSpec

    panels = [ax for ax in fig.axes if ax.get_subplotspec() is not None]
    grids = {id(ax.get_subplotspec().get_gridspec()) for ax in panels}
    if len(grids) != 1:
        return 1.0
    grid = panels[0].get_subplotspec().get_gridspec()
    if type(grid) is not GridSpec or grid.ncols == 1:
        return 1.0
    ratios = list(grid.get_height_ratios() or [1.0] * grid.nrows)
    cells = sorted({(ss.rowspan.start, ss.colspan.start, ss.rowspan.stop, ss.colspan.stop)
                    for ss in (ax.get_subplotspec() for ax in panels)})
    heights = [sum(ratios[r0:r1]) for r0, _, r1, _ in cells]
    column = fig.add_gridspec(len(cells), 1, height_ratios=heights)
    titled = set()
    for ax in panels:
        ss = ax.get_subplotspec()
        cell = (ss.rowspan.start, ss.colspan.start, ss.rowspan.stop, ss.colspan.stop)
        ax.set_subplotspec(column[cells.index(cell), 0])
        if len(ax.get_shared_y_axes().get_siblings(ax)) > 1 and ax.yaxis.get_label_position() == "left":
            ax.yaxis.set_tick_params(which="both", labelleft=True)
        if cell not in titled:  # twin axes share a cell: one mark
            titled.add(cell)
            where = " ".join(w for w in (
                _place(cell[0], cell[2] - cell[0], grid.nrows, ("top", "bottom"), "row"),
                _place(cell[1], cell[3] - cell[1], grid.ncols, ("left", "right"), "column")) if w)
            where = "centre" if where == "middle middle" else where
            if where:
                ax.title.set_text(f"({where}) {ax.get_title()}".rstrip())
    return sum(heights) / sum(ratios)


def _text_width(text: Any, s: str, renderer: Any) -> float:
    """Width in pixels of ``s`` set in ``text``'s font, unrotated."""
    from matplotlib.text import Text

    probe = Text(text=s, fontproperties=text.get_fontproperties())
    probe.set_figure(text.get_figure(root=True))
    return probe.get_window_extent(renderer).width


def _wrapped(text: Any, s: str, max_px: float, renderer: Any) -> str:
    """``s`` with its lines wider than ``max_px`` (in ``text``'s font) broken at spaces, each
    line as full as fits; never inside ``$...$``, and a lone sign ("·", "=") stays with the
    word before it."""
    lines = []
    for line in s.split("\n"):
        words: list[str] = []
        for word in re.findall(r"(?:\$[^$]*\$|[^\s$])+", line):
            if words and len(word) == 1 and not word.isalnum():
                words[-1] += f" {word}"
            else:
                words.append(word)
        if len(words) < 2 or _text_width(text, line, renderer) <= max_px:
            lines.append(line)
            continue
        current = words[0]
        for word in words[1:]:
            if _text_width(text, f"{current} {word}", renderer) <= max_px:
                current = f"{current} {word}"
            else:
                lines.append(current)
                current = word
        lines.append(current)
    return "\n".join(lines)


def _wrap(text: Any, max_px: float, renderer: Any) -> None:
    """Wrap ``text`` to ``max_px`` pixels (:func:`_wrapped`)."""
    text.set_text(_wrapped(text, text.get_text(), max_px, renderer))


def _drawn_tick_labels(axis: Any) -> list[Any]:
    """The tick labels of ``axis`` that are drawn: visible, not empty, at a tick inside the view
    (compared in the axis's scale: on a log axis a linear margin would be decades wide)."""
    scale = axis.get_transform()
    lo, hi = sorted(scale.transform(np.asarray(axis.get_view_interval(), dtype=float)))
    slack = (hi - lo) * 1e-9
    labels = []
    ticks = axis.get_major_ticks(len(axis.get_majorticklocs())) + axis.get_minor_ticks(len(axis.get_minorticklocs()))
    with np.errstate(divide="ignore", invalid="ignore"):
        places = scale.transform(np.asarray([tick.get_loc() for tick in ticks], dtype=float))
    for tick, place in zip(ticks, places):
        if lo - slack <= place <= hi + slack:
            labels += [t for t in (tick.label1, tick.label2) if t.get_visible() and t.get_text().strip()]
    return labels


def _drawn_texts(fig: Any) -> list[Any]:
    """Every text of ``fig`` that a reader sees: tick labels inside the view, axis labels,
    titles, legend entries and titles, free texts (as last drawn)."""
    from matplotlib.text import Text

    ticks = {id(t) for ax in fig.axes for axis in (ax.xaxis, ax.yaxis) for t in (
        [tick.label1 for tick in axis.get_major_ticks() + axis.get_minor_ticks()]
        + [tick.label2 for tick in axis.get_major_ticks() + axis.get_minor_ticks()])}
    drawn = [t for ax in fig.axes for axis in (ax.xaxis, ax.yaxis) for t in _drawn_tick_labels(axis)]
    drawn += [t for t in fig.findobj(Text) if id(t) not in ticks and t.get_visible() and t.get_text().strip()]
    return drawn


def _overlap(a: Any, b: Any, slack: float = 1.0) -> bool:
    return a.x0 < b.x1 - slack and b.x0 < a.x1 - slack and a.y0 < b.y1 - slack and b.y0 < a.y1 - slack


def text_overlaps(fig: Any, *, draw: bool = True) -> list[str]:
    """Pairs of texts of ``fig`` that overlap as drawn (by more than a pixel each way), as
    ``"'a' over 'b'"``: labels a reader cannot tell apart. Draws the figure first unless
    ``draw`` is false."""
    if draw:
        fig.draw_without_rendering()
    renderer = fig.canvas.get_renderer()
    texts = _drawn_texts(fig)
    boxes = [t.get_window_extent(renderer) for t in texts]
    found = []
    for i in range(len(texts)):
        for j in range(i + 1, len(texts)):
            if _overlap(boxes[i], boxes[j]):
                found.append(f"{texts[i].get_text()!r} over {texts[j].get_text()!r}")
    return found


def _set_legend_columns(legend: Any, ncols: int) -> None:
    """Pack the entries of ``legend`` into ``ncols`` columns (column by column, as matplotlib
    fills them). ``Legend.set_ncols`` alone does not re-pack a legend that exists; its
    entries are moved into new columns of its (private) box of columns."""
    from matplotlib.offsetbox import VPacker

    box = legend._legend_handle_box
    columns = box.get_children()
    items = [item for column in columns for item in column.get_children()]
    size, extra = divmod(len(items), ncols)
    packed, start = [], 0
    for i in range(ncols):
        stop = start + size + (i < extra)
        if stop > start:
            column = VPacker(pad=0, sep=columns[0].sep, align=columns[0].align, children=items[start:stop])
            column.set_figure(legend.get_figure(root=False))
            packed.append(column)
        start = stop
    box._children = packed
    legend.set_ncols(ncols)


def _fit_legend(legend: Any, room: float, renderer: Any) -> bool:
    """Make ``legend`` at most ``room`` pixels wide: fewer columns, then, in one column,
    its widest labels wrapped. Measures it as last drawn; says whether it changed it."""
    fig = legend.get_figure(root=True)
    width = legend.get_window_extent(renderer).width
    changed = False
    while width > room and legend._ncols > 1:
        _set_legend_columns(legend, legend._ncols - 1)
        fig.draw_without_rendering()
        width, changed = legend.get_window_extent(renderer).width, True
    texts = [t for t in legend.texts if t.get_text().strip()]
    if width > room and texts:
        widest = max(_text_width(t, line, renderer) for t in texts for line in t.get_text().split("\n"))
        for t in texts:
            _wrap(t, widest - (width - room), renderer)
        changed = True
    return changed


def _crowded(labels: list[Any], renderer: Any) -> bool:
    boxes = [t.get_window_extent(renderer) for t in labels]
    return any(_overlap(a, b) for i, a in enumerate(boxes) for b in boxes[i + 1:])


def _named_ticks(axis: Any) -> tuple[list[float], list[str]] | None:
    """The positions and labels of ``axis``'s major ticks when they are fixed (as
    ``set_xticks(positions, labels)`` makes them), else ``None``."""
    from matplotlib.ticker import FixedLocator

    locator = axis.get_major_locator()
    if not isinstance(locator, FixedLocator):
        return None
    locs = list(locator.locs)
    return locs, list(axis.get_major_formatter().format_ticks(locs))


def _numbered(names: list[str]) -> list[bool]:
    """Which of ``names`` belong to the axis's numbered sequence (``33``, ``37``, … or ``block 00``,
    ``block 01``, …: the texts that are the same once their numbers are blanked, and hold a
    number): a reader can tell a hidden one from its neighbours. Other names are categories."""
    shapes = [re.sub(r"\d+", "#", s.strip()) for s in names]
    counted = [k for k in shapes if "#" in k]
    if not counted:
        return [False] * len(names)
    common = max(set(counted), key=counted.count)
    return [k == common for k in shapes]


def _thin_tick_labels(axis: Any, renderer: Any) -> None:
    """Show every second (third, ...) tick label of ``axis`` until none overlap.

    Of named ticks only the members of a numbered sequence are thinned (`_numbered`): a
    category's name is the only way to tell its bars apart, so it is never hidden; a crowded
    one stays crowded and the book's figure test names the overlap (lay that figure out
    otherwise, e.g. with the categories down the y axis)."""
    fig = axis.get_figure(root=True)
    vertical = axis.axis_name == "y"
    labels = sorted(_drawn_tick_labels(axis), key=lambda t: t.get_window_extent(renderer).y0 if vertical
                    else t.get_window_extent(renderer).x0)
    named = _named_ticks(axis)
    thinnable = _numbered(named[1]) if named else [True] * len(labels)
    if named and not any(thinnable):
        return
    rank = {i: r for r, i in enumerate(i for i, t in enumerate(thinnable) if t)}  # place among the thinnable
    beside = {j for i, t in enumerate(thinnable) if not t for j in (i - 1, i + 1)}  # a category's neighbours
    for step in range(2, len(labels)):
        if not _crowded(_drawn_tick_labels(axis), renderer):
            return
        if named:  # the formatter sets the labels' text at each draw: relabel
            axis.set_ticks(named[0], labels=[s if not thinnable[i] or (rank[i] % step == 0 and i not in beside)
                                             else "" for i, s in enumerate(named[1])])
        else:
            for i, t in enumerate(labels):
                t.set_visible(i % step == 0)
        fig.draw_without_rendering()


def _fit_tick_labels(ax: Any, renderer: Any) -> None:
    """Make the tick labels of ``ax`` stop overlapping (measured as last drawn). On the x
    axis, named ticks of several words are wrapped to the space between ticks and labels
    still too wide are turned upright; then, on either axis, labels still touching are
    thinned to every second (third, ...) label."""
    fig = ax.get_figure(root=True)
    labels = _drawn_tick_labels(ax.xaxis)
    if len(labels) > 1 and _crowded(labels, renderer):
        named = _named_ticks(ax.xaxis)
        upright = all(t.get_rotation() == 90 for t in labels)
        fitted = False
        if named and not upright and any(len(s.split()) > 1 for s in named[1]):
            centres = sorted((b.x0 + b.x1) / 2 for b in (t.get_window_extent(renderer) for t in labels))
            room = min(b - a for a, b in zip(centres, centres[1:])) - 4
            ax.xaxis.set_ticks(named[0], labels=[_wrapped(labels[0], " ".join(s.split()), room, renderer)
                                                 for s in named[1]])
            fig.draw_without_rendering()
            fitted = not _crowded(_drawn_tick_labels(ax.xaxis), renderer)
        if not fitted and not upright:
            ax.tick_params(axis="x", labelrotation=90)
            fig.draw_without_rendering()
        if not fitted:
            _thin_tick_labels(ax.xaxis, renderer)
    labels = _drawn_tick_labels(ax.yaxis)
    if len(labels) > 1 and _crowded(labels, renderer):
        _thin_tick_labels(ax.yaxis, renderer)


def _fit_texts(fig: Any) -> None:
    """Fit the texts of ``fig`` to its narrow layout: legends wider than the figure (a figure
    legend) or than their panel's cell (an axes legend) are narrowed (:func:`_fit_legend`),
    crowded tick labels are fitted (:func:`_fit_tick_labels`), then each axes' title and
    x label are wrapped to the axes' width and its y label to its height."""
    renderer = fig.canvas.get_renderer()
    fig.draw_without_rendering()
    legends = [(legend, fig.bbox.width * 0.98) for legend in fig.legends]
    for ax in fig.axes:  # an axes legend: the cell's width, not the axes' (a wide legend squeezes the axes)
        legend, ss = ax.get_legend(), ax.get_subplotspec()
        if legend is not None and ss is not None:
            legends.append((legend, ss.get_position(fig).width * fig.bbox.width * 0.8))
    if any([_fit_legend(legend, room, renderer) for legend, room in legends]):
        fig.draw_without_rendering()
    for ax in fig.axes:
        _fit_tick_labels(ax, renderer)
    for ax in fig.axes:
        box = ax.get_window_extent(renderer)
        for text, room in ((ax.title, box.width), (ax.xaxis.label, box.width), (ax.yaxis.label, box.height)):
            if text.get_visible() and text.get_text().strip():
                _wrap(text, room, renderer)


def narrow_png(fig: Any, max_px: int = NARROW_PNG_PX) -> bytes:
    """``fig`` laid out again for a phone and rendered at most ``max_px`` pixels wide.

    The panels of a grid are stacked in one column, each title starting with where the panel
    was, "(left)", for the captions (:func:`_stack_panels`); the figure is
    resized to ``max_px`` (its constrained layout reflows the panels, labels and colour
    bars), legends, titles and axis labels too long for it are narrowed or wrapped and
    crowded x tick labels wrapped, turned upright or thinned (:func:`_fit_texts`). Then it
    is rendered like :func:`render_png`, a little narrower than ``max_px`` so that its crop
    to its contents (which adds a margin) is ``max_px`` wide at most.

    This changes ``fig`` (it is left in its narrow layout): render the wide PNG first.
    """
    import matplotlib as mpl

    width, height = fig.get_size_inches()
    height = height * _stack_panels(fig)
    pad_px = 2 * mpl.rcParams["savefig.pad_inches"] * fig.dpi  # the crop's margin
    engine = fig.get_layout_engine()
    inset_px = 2 * engine.get().get("w_pad", 0) * fig.dpi if engine is not None else 0  # the layout's own
    target = min(float(width), (max_px - pad_px + inset_px) / fig.dpi)
    renderer = fig.canvas.get_renderer()
    for _ in range(4):
        fig.set_size_inches(target, height, forward=False)
        _fit_texts(fig)
        fig.draw_without_rendering()
        excess = math.ceil(fig.get_tightbbox(renderer).width * fig.dpi + pad_px) - max_px
        if excess <= 0:
            break
        target -= excess / fig.dpi
    png = render_png(fig)
    excess = png_size(png)[0] - max_px
    if excess > 0:  # the estimate of the crop was short
        fig.set_size_inches(target - excess / fig.dpi, height, forward=False)
        _fit_texts(fig)
        png = render_png(fig)
    return png


class BookFigure:
    """A matplotlib Figure as the book glues it: the column-wide PNG and a narrow one for phones.

    Displayed (``myst_nb.glue``) as an ``image/png`` bundle, like the Figure itself, whose
    output metadata carries under :data:`NARROW_KEY` the narrow rendering
    (:func:`narrow_png`), the media query that selects it, the figure's smallest text in
    image pixels (:func:`min_font_px`) and the texts that overlap in either rendering
    (:func:`text_overlaps`; the book's tests want none). `gnuq_core.repro.picture` turns
    that into a ``<picture>`` in the HTML. Tick labels that overlap are thinned in the wide
    rendering too (:func:`_fit_tick_labels`). Both PNGs are rendered on creation (the
    Figure is left in its narrow layout), so the Figure may be closed afterwards.
    """

    def __init__(self, fig: Any, made_by: str = "") -> None:
        self.text = repr(fig)
        self.made_by = made_by
        fig.draw_without_rendering()
        self.min_font_px = min_font_px(fig, draw=False)
        renderer = fig.canvas.get_renderer()
        for ax in fig.axes:  # tick labels that overlap (a log axis over a factor of two labels its minor ticks)
            _fit_tick_labels(ax, renderer)
        self.overlaps = {"wide": text_overlaps(fig, draw=False)}
        self.wide = render_png(fig)
        self.narrow = narrow_png(fig)  # changes fig: after the wide one
        self.overlaps["narrow"] = text_overlaps(fig)

    def _repr_mimebundle_(self, include: Any = None, exclude: Any = None) -> tuple[dict, dict]:
        data = {"image/png": base64.b64encode(self.wide).decode("ascii"), "text/plain": self.text}
        narrow_w, narrow_h = png_size(self.narrow)
        metadata = {NARROW_KEY: {"image/png": base64.b64encode(self.narrow).decode("ascii"),
                                 "width": narrow_w, "height": narrow_h, "media": NARROW_MEDIA,
                                 "min_font_px": self.min_font_px, "overlaps": self.overlaps}}
        if self.made_by:
            metadata[MADE_BY_KEY] = self.made_by
        return data, metadata

    def __repr__(self) -> str:
        return self.text


Formatter = str | Callable[[Any], str]


@dataclass(frozen=True)
class Column:
    """How one DataFrame column is shown.

    Attributes
    ----------
    name : str
        The column header a reader sees (words, not code names).
    fmt : str or callable
        A format spec applied as ``format(value, fmt)`` (``".3f"``, ``".2e"``, ``"d"``,
        ``","``), or a function from the value to its text. ``""`` is ``str(value)``.
    nowrap : bool
        Keep each cell on one line (intervals such as ``0.76 [0.73, 0.80]``).
    """

    name: str
    fmt: Formatter = ""
    nowrap: bool = False


def _cell_text(value: Any, fmt: Formatter) -> str:
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "—"
    if callable(fmt):
        return str(fmt(value))
    if fmt == "":
        return str(value)
    if fmt.endswith("d") and isinstance(value, numbers.Real) and float(value).is_integer():
        value = int(value)
    return format(value, fmt)


def _is_numeric(values: list[Any]) -> bool:
    present = [v for v in values if v is not None and not (isinstance(v, float) and math.isnan(v))]
    return bool(present) and all(isinstance(v, numbers.Number) and not isinstance(v, bool) for v in present)


class Table:
    """A rendered HTML table (Jupyter shows it through ``_repr_html_``)."""

    def __init__(self, html_text: str, plain: str) -> None:
        self.html = html_text
        self.plain = plain

    def _repr_html_(self) -> str:
        return self.html

    def __repr__(self) -> str:
        return self.plain


def _as_column(key: str, spec: Column | tuple[str, Formatter] | str) -> Column:
    if isinstance(spec, Column):
        return spec
    if isinstance(spec, str):
        return Column(spec)
    if isinstance(spec, tuple) and len(spec) in (2, 3):
        return Column(*spec)
    raise TypeError(f"column {key!r}: give Column(name, fmt, nowrap), (name, fmt[, nowrap]) or a name, not {spec!r}")


def table(df: Any, columns: Mapping[str, Column | tuple[str, Formatter] | str], *,
          caption: str | None = None, index: bool = False) -> Table:
    """``df`` as an HTML table showing ``columns`` (key → header and format), in that order.

    Parameters
    ----------
    df : pandas.DataFrame
        The data. Columns not named in ``columns`` are not shown.
    columns : mapping
        DataFrame column → :class:`Column`, ``(header, fmt[, nowrap])`` or just a header
        (shown with ``str``). Numeric columns are right-aligned.
    caption : str, optional
        A caption above the table (plain text; escaped).
    index : bool
        Show the DataFrame's index as the first column (its name as header).

    Returns
    -------
    Table
        Displayed as a real ``<table>`` in a scroll box; ``repr`` is plain text.
    """
    missing = [k for k in columns if k not in df.columns]
    if missing:
        raise KeyError(f"table: no column(s) {missing} in the DataFrame; it has {list(df.columns)}")
    if not columns:
        raise ValueError("table: name at least one column to show")
    specs = {k: _as_column(k, v) for k, v in columns.items()}
    values = {k: df[k].tolist() for k in specs}  # Python scalars, each column its own dtype
    numeric = {k: _is_numeric(values[k]) for k in specs}
    body = []
    plain_rows = [[c.name for c in specs.values()]]
    for i, idx in enumerate(df.index.tolist()):
        texts = [_cell_text(values[k][i], specs[k].fmt) for k in specs]
        plain_rows.append(texts)
        cells = ([f'<th scope="row">{html.escape(str(idx))}</th>'] if index else []) + [
            f'<td class="{"num" if numeric[k] else "text"}{" nowrap" if specs[k].nowrap else ""}">{html.escape(t)}</td>'
            for k, t in zip(specs, texts)]
        body.append("<tr>" + "".join(cells) + "</tr>")
    head = ([f'<th scope="col" class="text">{html.escape(str(df.index.name or ""))}</th>'] if index else []) + [
        f'<th scope="col" class="{"num" if numeric[k] else "text"}">{html.escape(c.name)}</th>' for k, c in specs.items()]
    head_cells = "".join(head)
    # the caption sits above the scroll box, not in the table: a <caption> is as wide as its
    # table and was cut mid-word on a phone where the table scrolls
    cap = f'<p class="gnuq-table-caption">{html.escape(caption)}</p>' if caption else ""
    label = f' aria-label="{html.escape(caption)}"' if caption else ""
    thead = f"<thead><tr>{head_cells}</tr></thead>" if any(c.name for c in specs.values()) else ""  # no empty header row
    html_text = (f'<div class="gnuq-table">{cap}<div class="gnuq-scroll" tabindex="0">'
                 f'<table class="table gnuq"{label}>{thead}<tbody>{"".join(body)}</tbody></table></div></div>')
    widths = [max(len(r[i]) for r in plain_rows) for i in range(len(specs))]
    plain = "\n".join("  ".join(t.ljust(w) for t, w in zip(r, widths)).rstrip() for r in plain_rows)
    return Table(html_text, (caption + "\n" if caption else "") + plain)


def key_value_table(rows: Mapping[str, Any] | list[tuple[str, Any]], *, caption: str | None = None,
                    headers: tuple[str, str] = ("", "")) -> Table:
    """A two-column table of labels and values (provenance, parameters), values as ``str``."""
    import pandas as pd

    items = list(rows.items()) if isinstance(rows, Mapping) else list(rows)
    df = pd.DataFrame({"key": [k for k, _ in items], "value": [_value_text(v) for _, v in items]})
    return table(df, {"key": headers[0], "value": headers[1]}, caption=caption)


def _value_text(value: Any) -> str:
    if isinstance(value, float):
        return f"{value:.6g}"
    if isinstance(value, (list, tuple)):
        return ", ".join(_value_text(v) for v in value) if value else "(none)"
    return str(value)


def parameters_table(parameters: Mapping[str, Any], *, caption: str = "This build's parameters") -> Table:
    """The parameters a chapter ran with, one row each, sorted by name."""
    return key_value_table(sorted((k, v) for k, v in parameters.items()), caption=caption,
                           headers=("parameter", "value"))
