"""The built book in a real browser (Playwright driving Debian's Chromium).

Every page of ``_toc.yml`` loads from a local server; math is typeset by the locally
served MathJax; every image decodes; no request leaves the machine; no page error; no
traceback or error output in the page. And it reads like a book (:func:`reading_problems`,
checked at 1280 px and on a 390-px phone): tables are rendered tables, never raw
``| --- |`` pipe text; no page is wider than the viewport; no ``glue(`` code and no
parameter cell is visible; every chapter page carries the profile banner under its title.
The checker itself is tested on small hand-made pages, so it can be seen to fail.
"""

from __future__ import annotations

import functools
import http.server
import os
import re
import threading
from pathlib import Path
from typing import Iterator
from urllib.parse import urlparse

import pytest

from gnuq_core.repro.toc import toc_files

pytestmark = pytest.mark.browser

CHROMIUM = os.environ.get("GNUQ_CHROMIUM", "/usr/lib/chromium/chromium")
CHROMIUM_ARGS = ["--no-sandbox", "--disable-gpu", "--disable-background-networking",
                 "--disable-component-update", "--disable-sync", "--no-first-run", "--disable-quic"]
LOCAL_HOSTS = {"127.0.0.1", "localhost", "[::1]", "::1"}
# Page errors we accept, each with the reason. Empty: none are expected today.
ALLOWED_PAGE_ERRORS: dict[str, str] = {}


def chromium_or_fail() -> str:
    if not Path(CHROMIUM).exists():
        pytest.fail(f"Chromium not found at {CHROMIUM}. Install Debian's chromium "
                    "(`sudo apt-get install chromium`; `make setup` does it when run as root) "
                    "or point GNUQ_CHROMIUM at a Chromium binary.")
    return CHROMIUM


class QuietHandler(http.server.SimpleHTTPRequestHandler):
    def log_message(self, *args: object) -> None:  # keep pytest's output readable
        pass


@pytest.fixture(scope="module")
def server(smoke_book: Path) -> Iterator[str]:
    handler = functools.partial(QuietHandler, directory=str(smoke_book))
    httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{httpd.server_address[1]}"
    httpd.shutdown()


@pytest.fixture(scope="module")
def browser() -> Iterator[object]:
    from playwright.sync_api import sync_playwright

    executable = chromium_or_fail()
    with sync_playwright() as pw:
        b = pw.chromium.launch(executable_path=executable, args=CHROMIUM_ARGS, headless=True)
        yield b
        b.close()


PHONE = {"width": 390, "height": 844}
DESKTOP = {"width": 1280, "height": 900}
# Markdown table rows left as text: `| --- |`, `|---|`, `| :-- |`, and the dashes that smart
# quotes make of them (`| — |`).
RAW_TABLE = re.compile(r"\|\s*:?[-\u2013\u2014]+:?\s*\|")


def reading_problems(page: object, *, chapter: bool, has_table: bool) -> list[str]:
    """What keeps the open ``page`` from reading like a book, at its current viewport size.

    Parameters
    ----------
    page : playwright Page
        A loaded page.
    chapter : bool
        An executed chapter (``book/_generated/``): it must carry the profile banner
        (``div.admonition.gnuq-banner``) right under its title.
    has_table : bool
        The page is known to hold a table: at least one rendered ``<table>`` must be visible.
    """
    problems = []
    text = page.inner_text("body")  # rendered text only: folded code is not in it
    raw = RAW_TABLE.findall(text)
    if raw:
        problems.append(f"raw Markdown table text in the page: {raw[:3]}")
    if "glue(" in text:
        problems.append("glue( code is visible")
    width = page.evaluate("() => document.documentElement.scrollWidth")
    viewport = page.viewport_size["width"]
    if width > viewport + 1:
        wide = page.evaluate("""(vw) => Array.from(document.querySelectorAll('body *'))
            .filter(e => e.getBoundingClientRect().right > vw + 1 && e.offsetParent !== null)
            .slice(-3).map(e => e.tagName.toLowerCase() + '.' + (e.className || '').toString().split(' ')[0])""", viewport)
        problems.append(f"page is {width} px wide in a {viewport}-px viewport (widest: {wide})")
    params = page.locator("div.cell.tag_parameters, div.cell.tag_injected-parameters")
    if params.count():
        problems.append(f"{params.count()} parameter cell(s) shown")
    hidden = page.evaluate("""() => Array.from(document.querySelectorAll('table')).filter(t => {
            let box = t.parentElement;
            while (box && box !== document.body && !['auto', 'scroll'].includes(getComputedStyle(box).overflowX)) {
                box = box.parentElement;
            }
            if (!box || box === document.body || box.scrollWidth <= box.clientWidth + 1) return false;
            const hint = box.previousElementSibling;
            return !(hint && hint.classList.contains('gnuq-scroll-hint') && !hint.hidden && hint.offsetParent !== null);
        }).length""")
    if hidden:
        problems.append(f"{hidden} table(s) wider than their box with no visible cue to scroll sideways")
    cut = page.evaluate("""(vw) => Array.from(document.querySelectorAll('caption, p.gnuq-table-caption'))
        .filter(c => c.offsetParent !== null && c.getBoundingClientRect().right > vw + 1).length""", viewport)
    if cut:
        problems.append(f"{cut} table caption(s) run past the {viewport}-px viewport (cut mid-word)")
    if has_table and not page.locator("table").filter(has=page.locator("td")).count():
        problems.append("no rendered <table>")
    if chapter:
        banner = page.locator("div.admonition.gnuq-banner")
        if banner.count() != 1:
            problems.append(f"{banner.count()} profile banners (expected 1)")
        elif not page.evaluate("""() => {
                const b = document.querySelector('div.admonition.gnuq-banner');
                let prev = b.previousElementSibling;
                while (prev && prev.tagName === 'SPAN') prev = prev.previousElementSibling;  // anchors
                return prev !== null && prev.tagName === 'H1';
            }"""):
            problems.append("the profile banner is not right under the title")
        elif not banner.is_visible():
            problems.append("the profile banner is hidden")
        elif "No provenance" in banner.inner_text():
            problems.append("no provenance record (the chapter did not call prov.show())")
    return problems


GOOD_PAGE = """<html><body><article><section><h1>Chapter</h1>
<div class="admonition gnuq-banner"><p>Preview (profile quick)</p></div>
<p>Text.</p><div class="gnuq-scroll-hint">scroll sideways</div>
<div class="gnuq-table" style="overflow-x:auto;max-width:100%">
<table style="width:900px"><tr><td>wide but scrolls in its box</td></tr></table></div>
<details><summary>Show code</summary><pre>glue("x", 1, display=False)</pre></details>
</section></article></body></html>"""


@pytest.mark.parametrize("regression, expected", [
    (("<p>Text.</p>", "<p>| claim | verdict |<br>| --- | --- |</p>"), "raw Markdown table"),
    (("<p>Text.</p>", "<p>| a | b |<br>| \u2014 | \u2014 |</p>"), "raw Markdown table"),
    (('style="overflow-x:auto;max-width:100%"', ""), "px wide"),
    (("<details><summary>Show code</summary><pre>", "<div><pre>"), "glue( code is visible"),
    (('<div class="admonition gnuq-banner"><p>Preview (profile quick)</p></div>', ""), "0 profile banners"),
    (('<h1>Chapter</h1>\n<div class="admonition gnuq-banner"><p>Preview (profile quick)</p></div>\n<p>Text.</p>',
      '<h1>Chapter</h1>\n<p>Text.</p><div class="admonition gnuq-banner"><p>Preview</p></div>'), "not right under"),
    (("<p>Text.</p>", '<div class="cell tag_injected-parameters"><pre>seed = 1</pre></div>'), "parameter cell"),
    (("<table", "<div"), "no rendered <table>"),
    (('<div class="gnuq-scroll-hint">scroll sideways</div>', ""), "no visible cue to scroll sideways"),
    (('<table style="width:900px"><tr>', '<table style="width:900px"><caption>as wide as its table</caption><tr>'),
     "cut mid-word"),
    (("<p>Preview (profile quick)</p>", "<p>No provenance for this page</p>"), "no provenance record"),
])
def test_reading_checker_fails_on_a_regressed_page(browser, regression: tuple[str, str], expected: str) -> None:  # type: ignore[no-untyped-def]
    page = browser.new_page(viewport=PHONE)
    page.set_content(GOOD_PAGE)
    assert reading_problems(page, chapter=True, has_table=True) == [], "the good page passes"
    old, new = regression
    assert old in GOOD_PAGE
    page.set_content(GOOD_PAGE.replace(old, new))
    problems = reading_problems(page, chapter=True, has_table=True)
    assert any(expected in p for p in problems), problems
    page.close()


def _has_table(page_file: str, html: str) -> bool:
    """Pages that must show a table: every chapter (its provenance footer) and any page
    whose HTML holds one."""
    return "_generated/" in page_file or "<table" in html


@pytest.mark.parametrize("page_file", toc_files())
@pytest.mark.parametrize("viewport", [DESKTOP, PHONE], ids=["desktop", "phone"])
def test_page_reads_like_a_book(browser, server: str, smoke_book: Path, page_file: str,  # type: ignore[no-untyped-def]
                                viewport: dict) -> None:
    page = browser.new_page(viewport=viewport)
    page.goto(f"{server}/{page_file}.html", wait_until="networkidle")
    html = (smoke_book / f"{page_file}.html").read_text()
    problems = reading_problems(page, chapter="_generated/" in page_file, has_table=_has_table(page_file, html))
    page.close()
    assert not problems, f"{page_file} at {viewport['width']} px: " + "; ".join(problems)


def test_ledger_labels_preview_verdicts(browser, server: str, smoke_book: Path) -> None:  # type: ignore[no-untyped-def]
    page = browser.new_page(viewport=DESKTOP)
    page.goto(f"{server}/book/_generated/90_claims_ledger.html", wait_until="networkidle")
    banner = page.inner_text("div.admonition.gnuq-banner")
    cells = page.evaluate("""() => Array.from(document.querySelectorAll('table')).flatMap(t => {
            const heads = Array.from(t.querySelectorAll('thead th')).map(h => h.innerText.trim());
            const col = heads.indexOf('verdict');
            return col < 0 ? [] : Array.from(t.querySelectorAll('tbody tr')).map(r => r.children[col].innerText.trim());
        })""")
    page.close()
    judged = [c for c in cells if not c.startswith("not yet measured")]
    assert judged, "the ledger shows no verdicts"
    if "Paper edition" in banner:
        assert not any("(preview)" in c for c in judged)
    else:
        assert all(c.endswith("(preview)") for c in judged), f"unlabelled preview verdicts: {judged}"


@pytest.mark.parametrize("page_file", toc_files())
def test_page(browser, server: str, smoke_book: Path, page_file: str) -> None:  # type: ignore[no-untyped-def]
    page = browser.new_page()
    requests: list[str] = []
    errors: list[str] = []
    page.on("request", lambda r: requests.append(r.url))
    page.on("pageerror", lambda e: errors.append(str(e)))
    response = page.goto(f"{server}/{page_file}.html", wait_until="networkidle")
    assert response is not None and response.ok, f"{page_file}: HTTP {response and response.status}"

    foreign = [u for u in requests if urlparse(u).scheme in ("http", "https", "ws", "wss")
               and urlparse(u).hostname not in LOCAL_HOSTS]
    assert not foreign, f"{page_file}: requests to non-local hosts: {foreign[:5]}"
    unexpected = [e for e in errors if not any(re.search(p, e) for p in ALLOWED_PAGE_ERRORS)]
    assert not unexpected, f"{page_file}: page errors: {unexpected}"

    html = (smoke_book / f"{page_file}.html").read_text()
    if re.search(r'class="math|\\\(|\\\[', html):
        page.wait_for_selector("mjx-container", state="attached", timeout=90_000)  # some sit in collapsed blocks
        assert page.locator("mjx-container").count() > 0, f"{page_file}: MathJax did not typeset the math"
        assert page.locator("mjx-merror").count() == 0, f"{page_file}: MathJax reported a TeX error"

    broken = page.evaluate("""() => Array.from(document.images)
        .filter(img => !(img.complete && img.naturalWidth > 0)).map(img => img.src)""")
    assert not broken, f"{page_file}: images that did not load: {broken}"

    text = page.inner_text("body")
    assert "Traceback (most recent call last)" not in text, f"{page_file}: traceback in the page"
    assert page.locator("div.output.error, div.output.stderr").count() == 0, f"{page_file}: error output"
    page.close()


# The smallest text of every figure, as the browser shows it: the figure's smallest font in
# image pixels (data-min-font-px on its <picture>, gnuq_core.repro.picture) scaled by the
# width the image is drawn at over the width of the image the browser chose (currentSrc).
FIGURE_TEXT = """() => Array.from(document.querySelectorAll('figure img')).map(img => {
    const picture = img.closest('picture');
    const link = img.closest('a');
    return {alt: img.alt.slice(0, 60), src: img.src, chosen: img.currentSrc, shown: img.getBoundingClientRect().width,
            natural: img.naturalWidth, minFontPx: picture ? parseFloat(picture.dataset.minFontPx) : NaN,
            narrowSrc: picture ? new URL(picture.querySelector('source').srcset, document.baseURI).href : null,
            link: link ? link.href : null};
})"""
MIN_TEXT_PX = 9.0


def figure_text_problems(page: object, *, phone: bool) -> list[str]:
    """Figures of the open ``page`` whose smallest text is shown under :data:`MIN_TEXT_PX`, or
    that show the wrong rendering for the screen (the narrow one on a phone, the wide one
    elsewhere), or whose enlarge link does not open the image shown."""
    page.wait_for_function("() => Array.from(document.querySelectorAll('figure img')).every(i => i.complete)")
    problems = []
    for f in page.evaluate(FIGURE_TEXT):
        if f["minFontPx"] != f["minFontPx"]:  # NaN: not a <picture>
            problems.append(f"figure {f['alt']!r} has no narrow rendering (no <picture> with data-min-font-px)")
            continue
        shown = f["minFontPx"] * f["shown"] / f["natural"]
        if shown < MIN_TEXT_PX:
            problems.append(f"figure {f['alt']!r}: smallest text {shown:.1f} px ({f['chosen'].rsplit('/', 1)[-1]}, "
                            f"{f['natural']} px drawn {f['shown']:.0f} px wide)")
        want = f["narrowSrc"] if phone else f["src"]
        if f["chosen"] != want:
            problems.append(f"figure {f['alt']!r}: the browser chose {f['chosen']}, not the "
                            f"{'narrow' if phone else 'wide'} rendering {want}")
        if f["link"] != f["chosen"]:
            problems.append(f"figure {f['alt']!r}: the enlarge link opens {f['link']}, not the image shown")
    return problems


def test_figure_checker_fails_on_small_text(browser, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from gnuq_core.repro import display

    fig, axes = display.subplots(1, 2)
    bf = display.BookFigure(fig)
    plt.close(fig)
    (tmp_path / "wide.png").write_bytes(bf.wide)
    (tmp_path / "narrow.png").write_bytes(bf.narrow)
    good = (f'<html><body><article style="margin:0 24px"><figure style="margin:0"><a><picture class="gnuq-figure" '
            f'data-min-font-px="{bf.min_font_px}"><source media="{display.NARROW_MEDIA}" srcset="narrow.png" '
            f'type="image/png" /><img alt="two empty panels" src="wide.png" style="max-width:100%"></picture></a>'
            f'</figure></article><script>const i = document.querySelector("img"), a = document.querySelector("a");'
            f'i.addEventListener("load", () => a.href = i.currentSrc);</script></body></html>')
    (tmp_path / "good.html").write_text(good)
    (tmp_path / "wide_only.html").write_text(good.replace('srcset="narrow.png"', 'srcset="wide.png"'))
    for viewport, phone in ((PHONE, True), (DESKTOP, False)):
        page = browser.new_page(viewport=viewport)
        page.goto((tmp_path / "good.html").as_uri())
        assert figure_text_problems(page, phone=phone) == [], "the good page passes"
        page.goto((tmp_path / "wide_only.html").as_uri())
        problems = figure_text_problems(page, phone=phone)
        if phone:
            assert any("smallest text 6." in p for p in problems), problems
        else:
            assert problems == []
        page.close()


FIGURE_PAGES = [p for p in toc_files() if "_generated/" in p]


@pytest.mark.parametrize("page_file", FIGURE_PAGES)
@pytest.mark.parametrize("viewport", [DESKTOP, PHONE], ids=["desktop", "phone"])
def test_figure_text_is_legible(browser, server: str, page_file: str, viewport: dict) -> None:  # type: ignore[no-untyped-def]
    """At 390 px the browser shows each figure's narrow rendering, at 1280 px its wide one,
    and either way its smallest text is at least 9 px tall on the screen."""
    page = browser.new_page(viewport=viewport)
    page.goto(f"{server}/{page_file}.html", wait_until="networkidle")
    problems = figure_text_problems(page, phone=viewport is PHONE)
    page.close()
    assert not problems, f"{page_file} at {viewport['width']} px: " + "; ".join(problems)
