"""Read the values a chapter glued (``myst_nb.glue``) back out of its executed notebook."""

from __future__ import annotations

import json
from pathlib import Path

_TEXT = "application/papermill.record/text/plain"


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
