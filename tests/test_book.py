"""The book: every chapter runs in the smoke profile and the HTML builds with -W -n."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from gnuq_core.repro.chapters import chapters
from gnuq_core.repro.toc import toc_chapters, toc_files

pytestmark = pytest.mark.book


def test_every_chapter_is_in_the_toc() -> None:
    in_toc = set(toc_chapters())
    missing = [p.stem for p in chapters() if p.stem not in in_toc]
    assert not missing, f"chapters not listed in _toc.yml: {missing}"


def test_every_toc_page_was_built(smoke_book: Path) -> None:
    for page in toc_files():
        assert (smoke_book / f"{page}.html").exists(), f"{page}.html missing from the built book"


def test_no_error_output_in_html(smoke_book: Path) -> None:
    for page in toc_files():
        html = (smoke_book / f"{page}.html").read_text()
        assert "Traceback (most recent call last)" not in html, f"{page}: a traceback is in the HTML"
        assert not re.search(r'class="[^"]*output error', html), f"{page}: an error output is in the HTML"
        assert "stderr" not in re.findall(r'class="[^"]*output (\w+)', html), f"{page}: stderr output in the HTML"


def test_derivation_has_figures_and_glued_numbers(smoke_book: Path) -> None:
    html = (smoke_book / "book/_generated/01_derivation.html").read_text()
    assert len(re.findall(r"<img ", html)) >= 4
    assert html.count('class="pasted-text"') >= 10, "glued numbers missing from the derivation chapter"


def test_intro_shows_build_commit_and_claim_counts(smoke_book: Path) -> None:
    html = (smoke_book / "book/intro.html").read_text()
    assert re.search(r'pasted-text">[0-9a-f]{12}<', html), "the intro does not show the build commit"
    assert html.count('class="pasted-text"') >= 7
