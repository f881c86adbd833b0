"""The book: every chapter runs in the smoke profile and the HTML builds with -W -n."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from gnuq_core.repro import display
from gnuq_core.repro.profiles import chapters
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


def test_chapters_read_narrative_first(smoke_book: Path) -> None:
    """Every chapter has one profile banner, no parameter cell and no Markdown table left as text."""
    for page in toc_files():
        if "_generated/" not in page:
            continue
        html = (smoke_book / f"{page}.html").read_text()
        assert html.count("gnuq-banner") == 1, f"{page}: the profile banner is missing or repeated"
        assert not re.search(r'class="cell[^"]*tag_(injected-)?parameters', html), f"{page}: a parameter cell is shown"
        prose = re.sub(r"<pre.*?</pre>", "", html, flags=re.S)  # code (folded or not) may build tables
        assert not re.search(r"\|\s*:?-{3,}:?\s*\|", prose), f"{page}: a Markdown table is left as text"


def _text(html: str) -> str:
    return re.sub(r"\s+", " ", re.sub(r"<[^>]+>", "", html))


def test_no_page_repeats_a_heading(smoke_book: Path) -> None:
    """A section printed twice (its heading and introduction before and after the code that runs it)."""
    for page in toc_files():
        html = (smoke_book / f"{page}.html").read_text()
        article = re.search(r"<article\b.*?</article>", html, flags=re.S)  # not the theme's header
        html = article.group(0) if article else html
        heads = [_text(h).replace("#", "").strip() for h in re.findall(r"<h[1-4][^>]*>(.*?)</h[1-4]>", html, flags=re.S)]
        repeated = sorted({h for h in heads if heads.count(h) > 1})
        assert not repeated, f"{page}: headings printed more than once: {repeated}"


def test_no_sentence_glues_two_equal_ends(smoke_book: Path) -> None:
    """'goes from 1.00e-12 to 1.00e-12': a range whose two computed ends read the same says nothing."""
    for page in toc_files():
        html = (smoke_book / f"{page}.html").read_text()
        prose = re.sub(r"<(pre|table|script|style)\b.*?</\1>", "", html, flags=re.S)
        ends = [(a.rstrip(".,;:)"), b.rstrip(".,;:)"))
                for a, b in re.findall(r"\bfrom (\S+) (?:\([^)]*\) )?to (\S+)", _text(prose))]
        same = [a for a, b in ends if a == b and re.fullmatch(r"[-−]?\d[\d.,]*(e[-+]?\d+)?%?", a)]
        assert not same, f"{page}: a range whose two ends are equal: from {same[0]} to {same[0]}"


def test_intro_shows_the_method_diagram(smoke_book: Path) -> None:
    html = (smoke_book / "book/intro.html").read_text()
    assert 'class="gnuq-diagram"' in html and "<svg" in html, "the method diagram is not in the introduction"


def test_every_figure_describes_itself() -> None:
    """Each glued figure has alt text (a screen reader otherwise reads out the image's file path)."""
    for nb in chapters():
        lines = nb.read_text().splitlines()
        for i, line in enumerate(lines):
            if "{glue:figure}" in line:
                options = [ln for ln in lines[i + 1:i + 4] if ln.startswith("# :")]
                alt = [ln for ln in options if ln.startswith("# :alt: ")]
                assert alt and len(alt[0]) > 40, f"{nb.name}:{i + 1}: figure {line.split()[-1]} has no alt text"


def test_images_in_the_html_have_alt_text(smoke_book: Path) -> None:
    for page in toc_files():
        html = (smoke_book / f"{page}.html").read_text()
        for img in re.findall(r"<img [^>]*>", html):
            alt = re.search(r'alt="([^"]*)"', img)
            assert alt and alt.group(1) and not alt.group(1).endswith(".png"), f"{page}: {img[:120]}"


def test_every_glued_figure_has_a_narrow_rendering_without_overlapping_text(smoke_book: Path) -> None:
    """Each figure a page shows (``{glue:figure}``) carries its narrow rendering
    (`gnuq_core.repro.display.BookFigure`), no wider than a phone allows, with no text under
    9 pt and none overlapping in either rendering."""
    sources = {p.stem: p for p in chapters()}
    for nb in sorted((smoke_book.parent.parent / "book" / "_generated").glob("*.ipynb")):
        if nb.stem not in sources:
            continue  # the runnable copies
        shown = set(re.findall(r"\{glue:figure\} (\w+)", sources[nb.stem].read_text()))
        glued = {}
        for cell in json.loads(nb.read_text())["cells"]:
            for output in cell.get("outputs", []):
                meta = output.get("metadata", {})
                if meta.get("scrapbook", {}).get("name") in shown:
                    glued[meta["scrapbook"]["name"]] = meta.get(display.NARROW_KEY)
        assert set(glued) == shown, f"{nb.stem}: figures shown but not glued: {sorted(shown - set(glued))}"
        for name, narrow in glued.items():
            where = f"{nb.stem}:{name}"
            assert narrow, f"{where}: no narrow rendering (not glued with glue_figure?)"
            assert narrow["width"] <= display.NARROW_PNG_PX, f"{where}: narrow rendering {narrow['width']} px wide"
            assert narrow["min_font_px"] >= display.MIN_FONT_PX - 1e-6, f"{where}: text under 9 pt"
            assert narrow["overlaps"] == {"wide": [], "narrow": []}, f"{where}: overlapping texts {narrow['overlaps']}"


def test_every_glued_figure_is_a_picture_with_its_narrow_source(smoke_book: Path) -> None:
    for page in toc_files():
        html = (smoke_book / f"{page}.html").read_text()
        for figure in re.findall(r"<figure [^>]*>.*?</figure>", html, flags=re.S):
            if "<img " not in figure:
                continue
            picture = re.search(r'<picture class="gnuq-figure" data-min-font-px="[\d.]+"><source media="([^"]+)" '
                                r'srcset="([^"]+)" type="image/png" /><img [^>]*src="([^"]+)"', figure)
            assert picture, f"{page}: a figure without its narrow rendering: {figure[:200]}"
            media, narrow, wide = picture.groups()
            assert media == display.NARROW_MEDIA
            page_dir = (smoke_book / page).parent
            assert (page_dir / narrow).is_file() and (page_dir / wide).is_file(), f"{page}: {narrow} or {wide} missing"
