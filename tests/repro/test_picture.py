"""The Sphinx extension that serves a glued figure's narrow rendering to phones (a tiny book)."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import nbformat  # noqa: E402
import pytest  # noqa: E402

from gnuq_core.repro import display  # noqa: E402

ALT = "Two panels of two lines, for the test of narrow figures."


def _glued_output(name: str) -> nbformat.NotebookNode:
    """What ``glue_figure(name, fig)`` leaves in a notebook (``myst_nb.glue`` of a BookFigure)."""
    from IPython.core.formatters import format_display_data
    from myst_nb.ext.glue import GLUE_PREFIX

    fig, axes = display.subplots(1, 2)
    for ax in axes:
        ax.plot([0, 1], [0, 1], label="a line")
        ax.set_xlabel("a label")
    data, metadata = format_display_data(display.BookFigure(fig, made_by="gnuq_core.chapters.qa.figure_roc"))
    plt.close(fig)
    metadata["scrapbook"] = {"name": name, "mime_prefix": GLUE_PREFIX}
    return nbformat.v4.new_output("display_data", data={GLUE_PREFIX + k: v for k, v in data.items()},
                                  metadata=metadata)


@pytest.fixture(scope="module")
def tiny_book(tmp_path_factory: pytest.TempPathFactory) -> Path:
    src = tmp_path_factory.mktemp("tiny_book")
    code = nbformat.v4.new_code_cell('glue_figure("fig_x", fig)')
    code.outputs = [_glued_output("fig_x")]
    nb = nbformat.v4.new_notebook(cells=[
        nbformat.v4.new_markdown_cell("# A page\n\nAs {numref}`fig-x` shows."), code,
        nbformat.v4.new_markdown_cell(f"```{{glue:figure}} fig_x\n:alt: {ALT}\n:name: fig-x\n\nThe caption.\n```")])
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    nbformat.write(nb, src / "page.ipynb")
    (src / "index.md").write_text("# Index\n\n```{toctree}\npage\n```\n")
    (src / "conf.py").write_text('extensions = ["myst_nb", "gnuq_core.repro.picture"]\n'
                                 'nb_execution_mode = "off"\nnumfig = True\n')
    return src


def _build(src: Path, builder: str) -> Path:
    out = src.parent / f"{src.name}_{builder}"
    run = subprocess.run([sys.executable, "-m", "sphinx", "-b", builder, "-W", "-n", "-q", str(src), str(out)],
                         capture_output=True, text=True, timeout=300)
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]
    return out


@pytest.mark.subprocess
def test_html_serves_the_narrow_rendering_to_narrow_screens(tiny_book: Path) -> None:
    out = _build(tiny_book, "html")
    html = (out / "page.html").read_text()
    figure = re.search(r'<figure class="[^"]*" id="fig-x">(.*?)</figure>', html, re.S)
    assert figure, "the figure keeps its name"
    picture = re.search(r'<picture class="gnuq-figure" data-min-font-px="([\d.]+)">\s*'
                        r'<source media="([^"]+)" srcset="([^"]+)" type="image/png" />\s*<img ([^>]*)/>\s*</picture>',
                        figure.group(1))
    assert picture, figure.group(1)
    min_px, media, narrow_src, img = picture.groups()
    assert float(min_px) == pytest.approx(display.MIN_FONT_PX)
    assert media == display.NARROW_MEDIA
    assert f'alt="{ALT}"' in img
    wide_src = re.search(r'src="([^"]+)"', img).group(1)
    assert narrow_src != wide_src and not narrow_src.startswith("data:")
    assert display.png_size((out / narrow_src).read_bytes())[0] <= display.NARROW_PNG_PX
    assert display.png_size((out / wide_src).read_bytes())[0] > display.COLUMN_PX - 15
    assert "Fig. 1" in figure.group(1) and "The caption." in figure.group(1)
    assert '<span class="std std-numref">Fig. 1</span>' in html, "references to the figure resolve"
    source = re.search(r'<p class="gnuq-figure-source">(.*?)</p>', html, re.S)
    assert source and html.index("gnuq-figure-source") > html.index("</figure>"), "under the figure"
    text = re.sub(r"<[^>]+>", "", source.group(1))
    assert text == ("Drawn by gnuq_core.chapters.qa.figure_roc in this build, from the results of this chapter; "
                    "to redraw it: gnuq chapter run page --profile full.")


@pytest.mark.subprocess
def test_other_builders_get_the_wide_image(tiny_book: Path) -> None:
    out = _build(tiny_book, "latex")
    tex = next(out.glob("*.tex")).read_text()
    assert tex.count("sphinxincludegraphics") == 1
