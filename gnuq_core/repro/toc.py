"""Which chapters the book's table of contents (``_toc.yml``) includes."""

from __future__ import annotations

from pathlib import Path

import yaml

from gnuq_core.repro.paths import REPO_ROOT


def toc_files(toc: Path = REPO_ROOT / "_toc.yml") -> list[str]:
    """Every ``file:`` entry of a Jupyter Book ``_toc.yml``, root first, in order."""
    data = yaml.safe_load(toc.read_text())
    files = [data["root"]]

    def walk(node: object) -> None:
        if isinstance(node, dict):
            if "file" in node:
                files.append(node["file"])
            for value in node.values():
                walk(value)
        elif isinstance(node, list):
            for item in node:
                walk(item)

    walk(data.get("parts", data.get("chapters", [])))
    return files


def toc_chapters(toc: Path = REPO_ROOT / "_toc.yml") -> list[str]:
    """Stems of the executed chapters (``book/_generated/<stem>``) in the table of contents."""
    return [Path(f).name for f in toc_files(toc) if "_generated/" in f]
