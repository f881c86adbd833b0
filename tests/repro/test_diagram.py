"""The method diagram is drawn at the column width with legible fonts."""

from __future__ import annotations

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import pytest  # noqa: E402

from gnuq_core.repro.diagram import method_diagram, method_diagram_svg  # noqa: E402
from gnuq_core.repro.display import COLUMN_PX, shown_width_px, small_fonts  # noqa: E402


def test_method_diagram() -> None:
    fig = method_diagram()
    assert shown_width_px(fig) == pytest.approx(COLUMN_PX)
    assert small_fonts(fig) == []
    texts = " ".join(t.get_text() for t in fig.findobj(matplotlib.text.Text))
    assert "aleatoric" in texts and "epistemic" in texts and "isotropy" in texts
    plt.close(fig)


def test_method_diagram_svg_scales_with_the_column() -> None:
    svg = method_diagram_svg()
    assert svg.startswith('<div class="gnuq-diagram"') and "<?xml" not in svg
    assert '<svg' in svg and 'width="100%"' in svg and "viewBox=" in svg
