"""What a chapter page glues, read from its Jupytext source (shared by the chapter tests)."""

from __future__ import annotations

import re
from pathlib import Path


def glued_names(notebook: Path) -> set[str]:
    """Every value name the notebook's prose glues (``{glue:text}`` / ``{glue:md}`` roles and
    ``{glue}`` blocks), figures and other chapters' values (a block with ``:doc:``) left out."""
    text = notebook.read_text()
    names = set(re.findall(r"\{glue(?::text|:md)?\}`([A-Za-z0-9_]+)", text))
    names |= set(re.findall(r"```\{glue\} ([A-Za-z0-9_]+)\n(?!# :doc:)", text))
    return {n for n in names if not n.startswith("fig_")}
