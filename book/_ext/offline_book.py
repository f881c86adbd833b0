"""Sphinx extension: keep the rendered book self-contained and offline.

Jupyter Book always loads sphinx-thebe (live code execution through Binder). This book
has no live kernels, and thebe's inline script names a CDN and is injected twice, which
the browser reports as a page error. We drop thebe's scripts from every page.
"""

from __future__ import annotations

from typing import Any


def _is_thebe(asset: Any) -> bool:
    text = f"{getattr(asset, 'filename', '')} {getattr(asset, 'attributes', {}).get('body', '')}"
    return "thebe" in text.lower()


def drop_thebe(app: Any, pagename: str, templatename: str, context: dict, doctree: Any) -> None:
    """Remove sphinx-thebe's JavaScript from the page context."""
    if "script_files" in context:
        context["script_files"] = [s for s in context["script_files"] if not _is_thebe(s)]


def setup(app: Any) -> dict[str, bool]:
    app.connect("html-page-context", drop_thebe, priority=900)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
