"""Reading the table of contents."""

from __future__ import annotations

from pathlib import Path

from gnuq_core.repro.toc import toc_chapters, toc_files


def test_parts_and_chapters(tmp_path: Path) -> None:
    toc = tmp_path / "_toc.yml"
    toc.write_text("format: jb-book\nroot: book/intro\nparts:\n  - caption: A\n    chapters:\n"
                   "      - file: book/_generated/01_x\n      - file: book/other\n")
    assert toc_files(toc) == ["book/intro", "book/_generated/01_x", "book/other"]
    assert toc_chapters(toc) == ["01_x"]


def test_the_repository_toc_lists_the_ledger() -> None:
    assert "90_claims_ledger" in toc_chapters()
