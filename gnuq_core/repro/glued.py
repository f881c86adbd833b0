"""Glued values: the numbers, tables and figures a chapter's text quotes.

In the book a chapter glues each one (`glue`, ``myst_nb.glue``) and its Markdown quotes it
(``{glue:text}`rho:.2f```, a ``{glue:figure}`` block); :func:`glued_text` reads them back
out of an executed notebook. A runnable notebook (`gnuq_core.book.runnable`) runs in a
plain Jupyter or Colab kernel, where nothing renders those roles: there `glue` keeps each
value in this kernel (:data:`GLUED`) and :func:`show` writes the Markdown with the values
filled in, figures displayed as PNG images and tables as HTML.
"""

from __future__ import annotations

import json
import os
import re
from pathlib import Path
from typing import Any, Callable

__all__ = ["glue", "show", "fill", "block_options", "glued_text", "GLUED", "RUNNABLE_ENV", "GLUE_ROLE", "GLUE_BLOCK"]

_TEXT = "application/papermill.record/text/plain"

RUNNABLE_ENV = "GNUQ_RUNNABLE"
"""Set to ``1`` by a runnable notebook's first cell: `glue` keeps values in the kernel."""

GLUED: dict[str, Any] = {}
"""What this kernel glued, by name (in a runnable notebook)."""

_PENDING: list[tuple[set[str], Callable[[], Any], Any]] = []
"""Text shown before the values it quotes were glued: (names, render, display handle)."""

GLUE_ROLE = re.compile(r"\{glue(?::(text|md))?\}`([^`]+)`")
"""An inline ``{glue}``, ``{glue:text}`` or ``{glue:md}`` role: (kind, ``name[:format]``)."""

GLUE_BLOCK = re.compile(r"^(?P<fence>`{3,})\{glue(?P<figure>:figure)?\}[ \t]*(?P<name>\S+)[ \t]*\n"
                        r"(?P<body>.*?)^(?P=fence)[ \t]*$", re.M | re.S)
"""A ``{glue}`` or ``{glue:figure}`` block: its name, options (``:alt: …``) and caption."""


def glue(name: str, value: Any, display: bool = False) -> None:
    """Glue ``value`` under ``name``: for the book (``myst_nb.glue``; ``display`` also shows it
    where the cell runs), or, in a runnable notebook, into :data:`GLUED` for :func:`show`."""
    if os.environ.get(RUNNABLE_ENV) == "1":
        GLUED[name] = value
        for entry in [e for e in _PENDING if e[0] <= GLUED.keys()]:  # text above that quotes it: fill it in
            _PENDING.remove(entry)
            entry[2].update(entry[1]())
        if display:
            from IPython.display import display as show_here

            show_here(value)
        return
    from myst_nb import glue as myst_glue

    myst_glue(name, value, display=display)


def _text(value: Any, spec: str) -> str:
    """A glued value as ``{glue:text}`` writes it: ``format(value, spec)`` with a spec, else its text."""
    if spec:
        return format(value, spec)
    return value if isinstance(value, str) else str(value)


def fill(markdown: str, glued: dict[str, Any] | None = None) -> str:
    """``markdown`` with every inline glue role replaced by its value's text (``{glue:md}``: as
    Markdown). A name not glued yet reads "(not computed in this run)"."""
    glued = GLUED if glued is None else glued

    def one(match: re.Match[str]) -> str:
        name, _, spec = match.group(2).partition(":")
        if name not in glued:
            return f"({name}: not computed in this run)"
        return _text(glued[name], spec if match.group(1) == "text" else "")

    return GLUE_ROLE.sub(one, markdown)


def block_options(body: str) -> tuple[dict[str, str], str]:
    """A MyST block's options (``:alt: text`` lines at its top) and the rest (its caption or body)."""
    options: dict[str, str] = {}
    lines = body.splitlines()
    while lines and re.match(r"^:[\w-]+:", lines[0]):
        key, _, value = lines.pop(0)[1:].partition(":")
        options[key] = value.strip()
    return options, "\n".join(lines).strip()


def show(markdown: str) -> None:
    """Display a chapter's Markdown in a plain Jupyter kernel: glue roles filled in (`fill`),
    each ``{glue}`` block as its value (a table as HTML) and each ``{glue:figure}`` block as
    its PNG image with its caption below. Text that quotes a value glued further down (the
    book allows that) is filled in where it stands once the value is glued."""
    from IPython.display import HTML, Image, Markdown, display

    def part(render: Callable[[], Any], names: set[str]) -> None:
        if names <= GLUED.keys():
            display(render())
        else:
            handle = display(Markdown("*(filled in when the cell that computes it has run)*"), display_id=True)
            _PENDING.append((names, render, handle))

    def text(chunk: str) -> None:
        if chunk.strip():
            part(lambda: Markdown(fill(chunk)), {m.group(2).partition(":")[0] for m in GLUE_ROLE.finditer(chunk)})

    def value(name: str, alt: str | None, figure: bool) -> Callable[[], Any]:
        def render() -> Any:
            glued = GLUED[name]
            if figure and hasattr(glued, "wide"):  # a BookFigure: its column-wide PNG
                return Image(data=glued.wide, format="png", alt=alt)
            if isinstance(glued, str):
                return Markdown(glued)
            return HTML(glued._repr_html_()) if hasattr(glued, "_repr_html_") else glued
        return render

    end = 0
    for block in GLUE_BLOCK.finditer(markdown):
        text(markdown[end:block.start()])
        end = block.end()
        name = block.group("name")
        options, caption = block_options(block.group("body"))
        part(value(name, options.get("alt"), bool(block.group("figure"))), {name})
        if block.group("figure"):
            text(caption)
    text(markdown[end:])


def glued_text(notebook: Path) -> dict[str, str]:
    """Glue key → the plain-text form of the value (figures give their repr)."""
    nb = json.loads(Path(notebook).read_text())
    values = {}
    for cell in nb["cells"]:
        for output in cell.get("outputs", []):
            record = output.get("metadata", {}).get("scrapbook")
            if record:
                values[record["name"]] = output["data"].get(_TEXT, "")
    return values
