"""How the book shows figures and tables: one size convention, real HTML tables.

Figures are drawn at the size they are shown. The book's content column is
:data:`COLUMN_PX` pixels wide and figures are rendered at :data:`DPI`, so a figure
:data:`COLUMN_WIDTH_IN` inches wide is shown 1:1 and a 9 pt font stays 9 pt on the page.
Use :func:`subplots` (or :func:`figsize`) instead of hand-picked ``figsize=(13, 6)``:
a 13-inch figure squeezed into the column shrinks its 10 pt labels to 5 px.

Tables are HTML ``<table>`` elements with an explicit format and a human name per
column (:func:`table`), so the page never shows ``iso_f`` or ``0.000000``, and a wide
table scrolls inside its own box (the ``gnuq-table`` class, styled in
``book/_static/gnuq.css``).
"""

from __future__ import annotations

import html
import math
import numbers
from dataclasses import dataclass
from typing import Any, Callable, Mapping

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
    cap = f"<caption>{html.escape(caption)}</caption>" if caption else ""
    thead = f"<thead><tr>{head_cells}</tr></thead>" if any(c.name for c in specs.values()) else ""  # no empty header row
    html_text = (f'<div class="gnuq-table"><table class="table gnuq">{cap}{thead}'
                 f'<tbody>{"".join(body)}</tbody></table></div>')
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
