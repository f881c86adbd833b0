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
    hundreds of MB of weights into the current folder); ``~`` is expanded. A folder that is a
    file, cannot be created or is read-only raises `CacheDirError` naming the variable.
    """
    own, xdg = env_path("GNUQ_CACHE_DIR"), env_path("XDG_CACHE_HOME")
    path = own or (xdg or Path.home() / ".cache") / "gnuq"
    where = (f"GNUQ_CACHE_DIR={own}" if own else f"the cache folder {path} (from XDG_CACHE_HOME)" if xdg
             else f"the cache folder {path}")
    try:
        path.mkdir(parents=True, exist_ok=True)
    except FileExistsError:
        raise CacheDirError(f"{where} is a file, not a folder: point GNUQ_CACHE_DIR to a folder") from None
    except OSError as err:
        raise CacheDirError(f"{where} cannot be created ({err.strerror}): point GNUQ_CACHE_DIR to a writable "
                            "folder") from None
    if not os.access(path, os.W_OK | os.X_OK):
        raise CacheDirError(f"{where} is read-only: point GNUQ_CACHE_DIR to a writable folder")
    return path


class CacheDirError(OSError, ValueError):
    """The cache folder cannot be used; the message names the variable and the fix (a
    `ValueError` too, so every entry point prints it as one line of bad input)."""
