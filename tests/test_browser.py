"""The built book in a real browser (Playwright driving Debian's Chromium).

Every page of ``_toc.yml`` loads from a local server; math is typeset by the locally
served MathJax; every image decodes; no request leaves the machine; no page error; no
traceback or error output in the page.
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
def browser(server: str) -> Iterator[object]:
    from playwright.sync_api import sync_playwright

    executable = chromium_or_fail()
    with sync_playwright() as pw:
        b = pw.chromium.launch(executable_path=executable, args=CHROMIUM_ARGS, headless=True)
        yield b
        b.close()


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
