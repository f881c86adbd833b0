"""How an executed chapter notebook becomes a book page: which cells show, and the banner.

The book is narrative first. When Sphinx reads an executed chapter (``book/_ext``'s
``book_pages`` extension calls :func:`prepare_notebook`), this module

- removes the ``parameters`` cell and papermill's ``injected-parameters`` cell (the
  banner shows the parameters once, as a table),
- hides the input of every other code cell that carries no visibility tag (the reader
  clicks to see the code; tag a cell ``show-input`` to keep its code visible, or
  ``remove-cell`` / ``remove-input`` to drop it), and
- puts the profile banner (:func:`gnuq_core.repro.provenance.banner_markdown`) right
  under the page title.

The executed ``.ipynb`` on disk is not changed: readers download it as it ran.
"""

from __future__ import annotations

import json
from typing import Any

from gnuq_core.chapters import module_for
from gnuq_core.repro.profiles import chapter_times
from gnuq_core.repro.provenance import banner_markdown

PARAMETER_TAGS = ("parameters", "injected-parameters")
"""Cells with these tags are removed from the page (the banner shows the parameters)."""
VISIBILITY_TAGS = ("remove-cell", "remove_cell", "remove-input", "remove_input", "hide-input",
                   "hide-cell", "show-input")
"""A code cell with any of these tags keeps its author's choice."""
BANNER_TAG = "gnuq-banner"


def _source(cell: dict[str, Any]) -> str:
    src = cell.get("source", "")
    return "".join(src) if isinstance(src, list) else src


def _tags(cell: dict[str, Any]) -> list[str]:
    return cell.setdefault("metadata", {}).setdefault("tags", [])


def apply_cell_policy(nb: dict[str, Any]) -> dict[str, Any]:
    """Tag ``nb``'s cells in place as the book shows them (see the module docstring)."""
    for cell in nb.get("cells", []):
        if cell.get("cell_type") != "code":
            continue
        tags = _tags(cell)
        if any(t in tags for t in PARAMETER_TAGS):
            if "remove-cell" not in tags:
                tags.append("remove-cell")
        elif not any(t in tags for t in VISIBILITY_TAGS):
            tags.append("hide-input")
    return nb


def insert_banner(nb: dict[str, Any], banner: str) -> dict[str, Any]:
    """Put a Markdown cell holding ``banner`` right under the page's ``# title`` (in place).

    The title's cell is split when text follows the title; a page without a title gets
    the banner first.
    """
    cells = nb.setdefault("cells", [])
    if any(BANNER_TAG in c.get("metadata", {}).get("tags", []) for c in cells):
        return nb
    banner_cell = {"cell_type": "markdown", "id": "gnuq-banner", "metadata": {"tags": [BANNER_TAG]},
                   "source": banner}
    for i, cell in enumerate(cells):
        if cell.get("cell_type") != "markdown":
            continue
        lines = _source(cell).split("\n")
        title = next((j for j, line in enumerate(lines) if line.startswith("# ")), None)
        if title is None:
            continue
        head, rest = "\n".join(lines[: title + 1]), "\n".join(lines[title + 1:]).strip("\n")
        new = [dict(cell, source=head), banner_cell]
        if rest:
            new.append({"cell_type": "markdown", "id": "gnuq-after-title", "metadata": {}, "source": rest})
        cells[i:i + 1] = new
        return nb
    cells.insert(0, banner_cell)
    return nb


def parameter_words(record: dict[str, Any] | None) -> dict[str, str]:
    """How the banner shows the record's parameters whose 0 means something else ("all (817)"),
    from its chapter's ``Params`` (nothing for a chapter without a module)."""
    module = module_for(str(record.get("chapter", ""))) if record else None
    return module.Params.value_words(record.get("parameters", {})) if module is not None else {}


READING_WORDS_PER_MINUTE = 180
"""Reading speed for technical prose with math (a figure or table counts as 40 words)."""


def reading_minutes(nb: dict[str, Any]) -> int:
    """Minutes to read a notebook's text, figures and tables (not its folded code)."""
    cells = nb.get("cells", [])
    outputs = [o.get("data", {}) for c in cells if c.get("cell_type") == "code" for o in c.get("outputs", [])]
    words = sum(len(_source(c).split()) for c in cells if c.get("cell_type") == "markdown")
    words += sum(len("".join(d["text/markdown"]).split()) for d in outputs if "text/markdown" in d)  # e.g. the ledger
    shown = sum(1 for d in outputs if {"image/png", "text/html"} & set(d) and "text/markdown" not in d)
    return max(1, round((words + 40 * shown) / READING_WORDS_PER_MINUTE))


def course_facts(nb: dict[str, Any], record: dict[str, Any] | None) -> str:
    """The banner's line for a course: reading time, and the quick profile's measured run time
    (`gnuq_core.repro.profiles.chapter_times`) where one is recorded."""
    text = f"about {reading_minutes(nb)} min to read"
    quick = chapter_times().get("quick", {}).get(str((record or {}).get("chapter", "")))
    if quick:
        text += (f"; the quick profile runs in about {max(1, round(quick['seconds'] / 60))} min "
                 f"(measured {quick['date']} on a {quick['machine']})")
    return text


def prepare_notebook(text: str, record: dict[str, Any] | None, *, source_link: str | None = None,
                     runnable_link: str | None = None, launch_link: str | None = None) -> str:
    """The ipynb JSON ``text`` as the book shows it: cell policy applied, banner inserted."""
    nb = json.loads(text)
    apply_cell_policy(nb)
    insert_banner(nb, banner_markdown(record, source_link=source_link, runnable_link=runnable_link,
                                       launch_link=launch_link,
                                       words=parameter_words(record), course=course_facts(nb, record)))
    return json.dumps(nb)
