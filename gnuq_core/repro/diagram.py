"""The method on one page: a diagram drawn by code (matplotlib), rebuilt with the book.

:func:`method_diagram` draws the path from a trained model to the two uncertainties,
the two approximations it rests on (first-order Taylor expansion, isotropic covariance),
and the chapters that test each step. The claims-ledger chapter draws it and glues it;
the book's introduction shows it.
"""

from __future__ import annotations

from typing import Any

from gnuq_core.repro.display import COLUMN_WIDTH_IN, use_book_style

# (x, y) centres in axes units (0..1), box text, face colour
_BOXES: dict[str, tuple[float, float, str, str]] = {
    "model": (0.15, 0.88, "trained model $\\theta^*$\ninput $x$, answer $y$", "#e8eef7"),
    "forward": (0.50, 0.88, "forward pass\n$p = p(y\\mid x,\\theta^*)$", "#e8eef7"),
    "backward": (0.85, 0.88, "backward pass\n$\\nabla_\\theta \\log p$", "#e8eef7"),
    "aleatoric": (0.15, 0.42, "aleatoric\n$p\\,(1-p)$", "#fdf1dc"),
    "taylor": (0.47, 0.63, "Taylor (delta method)\n$\\mathrm{Var}[p] \\approx g^\\top \\Sigma\\, g$,"
               " $g = \\nabla_\\theta p$", "#f3f3f3"),
    "isotropy": (0.47, 0.40, "isotropy $\\Sigma = \\sigma^2 I$\n$\\Rightarrow \\mathrm{Var}[p]"
                 " \\propto \\Vert g\\Vert^2$", "#f3f3f3"),
    "epistemic": (0.47, 0.15, "epistemic\n$\\Vert\\nabla_\\theta p\\Vert^2 = "
                  "p^2\\,\\Vert\\nabla_\\theta \\log p\\Vert^2$", "#fdf1dc"),
}
_ARROWS = [("model", "forward"), ("forward", "backward"), ("forward", "aleatoric"),
           ("backward", "taylor"), ("taylor", "isotropy"), ("isotropy", "epistemic")]
# where the book tests each step: (box, text)
_TESTS = [("taylor", "tested in ch. 1:\nexact vs. first order"),
          ("isotropy", "ch. 2–3: proxy bias, spectra\nch. 4–5: against NUTS\nposteriors"),
          ("epistemic", "ch. 6: QA benchmarks\nch. 7: cost of one pass")]


def _edge_point(centre: tuple[float, float], towards: tuple[float, float], box: Any) -> tuple[float, float]:
    """Where the segment from ``centre`` to ``towards`` leaves the rectangle ``box`` ((x0, y0), (x1, y1))."""
    (x0, y0), (x1, y1) = box
    cx, cy = centre
    dx, dy = towards[0] - cx, towards[1] - cy
    scales = [s for s in ((x1 - cx) / dx if dx > 0 else (x0 - cx) / dx if dx < 0 else None,
                          (y1 - cy) / dy if dy > 0 else (y0 - cy) / dy if dy < 0 else None) if s is not None]
    t = min(scales) if scales else 0.0
    return (cx + t * dx, cy + t * dy)


def method_diagram() -> Any:
    """The method as a diagram (a matplotlib ``Figure``, the book's column width)."""
    import matplotlib.pyplot as plt
    from matplotlib.patches import FancyArrowPatch

    use_book_style()
    fig = plt.figure(figsize=(COLUMN_WIDTH_IN, 4.6), layout="none")
    ax = fig.add_axes((0, 0, 1, 1))
    ax.set_axis_off()
    boxes = {}
    for key, (x, y, text, colour) in _BOXES.items():
        boxes[key] = ax.text(x, y, text, ha="center", va="center", fontsize=10, zorder=2,
                             bbox=dict(boxstyle="round,pad=0.45", fc=colour, ec="#555555", lw=0.8))
    fig.canvas.draw()  # box extents are known only after a draw
    to_axes = ax.transAxes.inverted()
    extent = {k: to_axes.transform(t.get_bbox_patch().get_window_extent()) for k, t in boxes.items()}
    for a, b in _ARROWS:  # end points on the box edges, in axes units (the same at any dpi)
        start, end = _edge_point(_BOXES[a][:2], _BOXES[b][:2], extent[a]), _edge_point(_BOXES[b][:2], _BOXES[a][:2], extent[b])
        ax.add_patch(FancyArrowPatch(posA=start, posB=end, arrowstyle="-|>", mutation_scale=12, color="#333333",
                                     lw=1.0, shrinkA=3, shrinkB=3, zorder=3))
    for key, text in _TESTS:
        x, y = _BOXES[key][:2]
        ax.text(0.70, y, text, ha="left", va="center", fontsize=9, color="#1f4e8c", style="italic")
    ax.text(0.15, 0.25, "both from one forward\nand one backward pass\nof the unmodified model",
            ha="center", va="center", fontsize=9, color="#444444")
    ax.set_xlim(0, 1)
    ax.set_ylim(0, 1)
    return fig


def method_diagram_svg() -> str:
    """:func:`method_diagram` as inline SVG markup that scales with the column.

    Inline SVG travels through MyST-NB's cross-page glue (``{glue}`` with ``:doc:``) as
    HTML; a PNG glued across pages is referenced but never copied into the build.
    """
    import io
    import re

    import matplotlib.pyplot as plt

    fig = method_diagram()
    buf = io.StringIO()
    with plt.rc_context({"svg.fonttype": "path", "svg.hashsalt": "gnuq"}):  # text as paths; stable ids
        fig.savefig(buf, format="svg", metadata={"Date": None})
    plt.close(fig)
    svg = buf.getvalue()
    svg = svg[svg.index("<svg"):]  # drop the XML prologue and doctype: this is inline markup
    svg = re.sub(r'<svg([^>]*?) width="[^"]*" height="[^"]*"',
                 r'<svg\1 width="100%" role="img" aria-label="Diagram of the method"', svg, count=1)
    return f'<div class="gnuq-diagram" style="max-width:{COLUMN_WIDTH_IN * 100:.0f}px">{svg}</div>'
