"""Where things live: the repository root, the generated-book folder, the cache, folders named by the environment."""

from __future__ import annotations

import os
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[2]


def env_path(name: str) -> Path | None:
    """The folder an environment variable names, ``~`` expanded; None where it is unset, empty
    or blank (``GNUQ_CACHE_DIR=`` or ``=' '`` must not mean the current folder or one named ' ')."""
    value = os.environ.get(name, "").strip()
    return Path(value).expanduser() if value else None


def generated_dir() -> Path:
    """Folder for executed chapters and their side files.

    ``GNUQ_OUTPUT_DIR`` (set by the chapter runner) wins; otherwise ``book/_generated``.
    """
    return env_path("GNUQ_OUTPUT_DIR") or REPO_ROOT / "book" / "_generated"


def chapter_name() -> str:
    """Name of the chapter being executed (``GNUQ_CHAPTER``), or ``"interactive"``."""
    return os.environ.get("GNUQ_CHAPTER", "interactive")


def cache_dir() -> Path:
    """Cache for heavy results: ``GNUQ_CACHE_DIR`` or ``$XDG_CACHE_HOME/gnuq`` or ``~/.cache/gnuq``.

    An empty or blank variable counts as unset (`env_path`: ``GNUQ_CACHE_DIR=`` must not put
    hundreds of MB of weights into the current folder); ``~`` is expanded.
    """
    path = env_path("GNUQ_CACHE_DIR") or (env_path("XDG_CACHE_HOME") or Path.home() / ".cache") / "gnuq"
    path.mkdir(parents=True, exist_ok=True)
    return path
