"""Where things live: the repository root, the generated-book folder, the cache."""

from __future__ import annotations

import os
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[2]


def generated_dir() -> Path:
    """Folder for executed chapters and their side files.

    ``GNUQ_OUTPUT_DIR`` (set by the chapter runner) wins; otherwise ``book/_generated``.
    """
    return Path(os.environ.get("GNUQ_OUTPUT_DIR", REPO_ROOT / "book" / "_generated"))


def chapter_name() -> str:
    """Name of the chapter being executed (``GNUQ_CHAPTER``), or ``"interactive"``."""
    return os.environ.get("GNUQ_CHAPTER", "interactive")


def cache_dir() -> Path:
    """Cache for heavy results: ``GNUQ_CACHE_DIR`` or ``$XDG_CACHE_HOME/gnuq`` or ``~/.cache/gnuq``.

    An empty variable counts as unset (``GNUQ_CACHE_DIR=`` must not put hundreds of MB of
    weights into the current folder); ``~`` is expanded.
    """
    xdg = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    default = Path(xdg).expanduser() / "gnuq"
    path = Path(os.environ.get("GNUQ_CACHE_DIR") or default).expanduser()
    path.mkdir(parents=True, exist_ok=True)
    return path
