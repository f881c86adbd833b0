"""Same profile, same seed → identical numbers."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from gnuq_core.repro.glued import glued_text
from gnuq_core.repro.paths import REPO_ROOT

pytestmark = pytest.mark.book
TIME_DEPENDENT = {"build_time", "build_commit", "build_dirty"}


@pytest.mark.skipif(bool(os.environ.get("GNUQ_BOOK_HTML")), reason="checks a freshly executed smoke book")
def test_derivation_chapter_twice_gives_identical_numbers(smoke_book: Path, tmp_path: Path) -> None:
    first = smoke_book.parent.parent / "book" / "_generated" / "01_derivation.ipynb"
    run = subprocess.run([sys.executable, "-m", "gnuq_core.book.runner", "run", "01", "--profile", "smoke",
                          "--out", str(tmp_path)], capture_output=True, text=True, timeout=900, cwd=REPO_ROOT)
    assert run.returncode == 0, run.stderr[-3000:]
    a, b = glued_text(first), glued_text(tmp_path / "01_derivation.ipynb")
    numbers = {k: v for k, v in a.items() if not v.startswith("<Figure") and k not in TIME_DEPENDENT}
    assert len(numbers) >= 10
    assert numbers == {k: b[k] for k in numbers}
