"""Sphinx extension: a glued figure is a ``<picture>``, its narrow rendering served to phones.

A figure glued by `gnuq_core.chapters.base.glue_figure` carries, besides its column-wide
PNG, a narrow rendering in its output metadata (`gnuq_core.repro.display.BookFigure`).
This extension replaces myst-nb's ``{glue:figure}`` directive by one that writes the
narrow PNG beside the wide one and wraps the figure's image in a `picture` node, written
to HTML as::

    <picture class="gnuq-figure" data-min-font-px="12.5">
      <source media="(max-width: 575.98px)" srcset="../../_images/<narrow>.png" type="image/png" />
      <img alt="..." src="../../_images/<wide>.png" />
    </picture>

so that the browser itself picks the narrow image on a phone and the wide one elsewhere;
alt text, caption, numbering and references stay those of the figure. Both images are
ordinary image nodes, so Sphinx copies both into ``_images/``. ``data-min-font-px`` is
the figure's smallest text in image pixels (the browser test reads it). Builders other
than HTML get the wide image alone.
"""

from __future__ import annotations

import base64
import hashlib
import posixpath
import urllib.parse
from typing import Any

from docutils import nodes
from myst_nb.core.variables import RetrievalError
from myst_nb.ext.glue.directives import PasteFigureDirective
from myst_nb.ext.glue.utils import retrieve_glue_data
from sphinx.transforms.post_transforms import SphinxPostTransform

from gnuq_core.repro.display import MADE_BY_KEY, NARROW_KEY


class picture(nodes.General, nodes.Element):  # noqa: N801 (docutils names nodes in lower case)
    """A figure's wide image (first child) and its narrow rendering (second child)."""


def _image_node(container: nodes.Element) -> nodes.image | None:
    """The ``image/png`` rendering of a glued output (inside myst-nb's mime bundle)."""
    for node in container.findall(nodes.container):
        if node.get("mime_type") == "image/png":
            return next(iter(node.findall(nodes.image)), None)
    return next(iter(container.findall(nodes.image)), None)


class PasteFigureWithNarrow(PasteFigureDirective):
    """``{glue:figure}``, with the glued figure's narrow rendering as a `picture`."""

    def run(self) -> list[nodes.Node]:
        result = super().run()
        try:
            data = retrieve_glue_data(self.document, self.arguments[0])
        except RetrievalError:
            return result  # super() has said so
        narrow = data.metadata.get(NARROW_KEY)
        figures = [n for n in result if isinstance(n, nodes.figure)]
        if not narrow or not figures:
            return result
        wide = _image_node(figures[0])
        if wide is None:
            return result
        png = base64.b64decode(narrow["image/png"])
        uri = data.nb_renderer.write_file([f"{hashlib.sha256(png).hexdigest()}.png"], png, overwrite=False,
                                          exists_ok=True)
        node = picture(media=narrow["media"], min_font_px=narrow.get("min_font_px"), classes=["gnuq-figure"])
        wide.replace_self(node)
        node += wide
        node += nodes.image(uri=uri, alt=wide.get("alt", ""), classes=["gnuq-narrow"])
        if data.metadata.get(MADE_BY_KEY):
            result.append(self._made_by(data.metadata[MADE_BY_KEY]))
        return result

    def _made_by(self, function: str) -> nodes.paragraph:
        """"Drawn by `gnuq_core.chapters.qa.figure_roc` in this build; to redraw it: `gnuq chapter run 06
        --profile full`" (the page's profile, from its provenance record)."""
        import json
        from pathlib import Path

        env = self.state.document.settings.env
        doc = Path(env.doc2path(env.docname))
        record = doc.with_name(f"{doc.stem}.provenance.json")
        profile = json.loads(record.read_text()).get("profile", "full") if record.exists() else "full"
        command = f"gnuq chapter run {doc.stem.split('_')[0]} --profile {profile}"
        para = nodes.paragraph(classes=["gnuq-figure-source"])
        para += [nodes.Text("Drawn by "), nodes.literal(text=function), nodes.Text(" in this build, from the "
                 "results of this chapter; to redraw it: "), nodes.literal(text=command), nodes.Text(".")]
        return para


def visit_picture_html(self: Any, node: picture) -> None:
    wide, narrow = node.children
    uri = narrow["uri"]
    if uri in self.builder.images:
        uri = posixpath.join(self.builder.imgpath, urllib.parse.quote(self.builder.images[uri]))
    attributes = {} if node.get("min_font_px") is None else {"data-min-font-px": f"{node['min_font_px']:g}"}
    self.body.append(self.starttag(node, "picture", "", **attributes))
    self.body.append(self.emptytag({}, "source", "", media=node["media"], srcset=uri, type="image/png"))
    wide.walkabout(self)
    self.body.append("</picture>\n")
    raise nodes.SkipNode


def depart_picture_html(self: Any, node: picture) -> None:
    """Not reached: the visit writes the whole element."""


class WideImageOnly(SphinxPostTransform):
    """Builders other than HTML: the `picture` becomes its wide image."""

    default_priority = 5  # after myst-nb has chosen the mime type (4)

    def is_supported(self) -> bool:
        return self.app.builder.format != "html"

    def run(self, **kwargs: Any) -> None:
        for node in list(self.document.findall(picture)):
            node.replace_self(node.children[0])


def setup(app: Any) -> dict[str, bool]:
    app.setup_extension("myst_nb")
    app.add_directive_to_domain("glue", "figure", PasteFigureWithNarrow, override=True)
    app.add_node(picture, html=(visit_picture_html, depart_picture_html))
    app.add_post_transform(WideImageOnly)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
