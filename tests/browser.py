"""A real headless browser for the reports and the web UI: Playwright from PyPI driving Debian's chromium (`make` installs it).

Playwright's own browser download does not work here, so the tests name the
system chromium (``executable_path``). Screenshots go to ``test-artifacts/``
at the repository root (kept out of git), one per test.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
ARTIFACTS = Path(os.environ.get("MAXKERNEL_TEST_ARTIFACTS", REPO / "test-artifacts"))
CHROMIUM = os.environ.get("MAXKERNEL_CHROMIUM") or shutil.which("chromium") or shutil.which("chromium-browser")


@pytest.fixture(scope="module")
def browser():
    playwright = pytest.importorskip("playwright.sync_api", reason="pip install playwright (the test extra)")
    if not CHROMIUM:
        pytest.fail("no chromium here: `make browser` installs Debian's (apt-get install chromium), or set "
                    "MAXKERNEL_CHROMIUM to a chromium binary")
    with playwright.sync_playwright() as p:
        b = p.chromium.launch(executable_path=CHROMIUM, args=["--no-sandbox"])
        yield b
        b.close()


@pytest.fixture
def page(browser, request):
    context = browser.new_context(viewport={"width": 1300, "height": 900})
    page = context.new_page()
    page.dialogs = []
    page.on("dialog", lambda d: (page.dialogs.append(d.message), d.dismiss()))
    yield page
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(ARTIFACTS / f"{request.node.name}.png"), full_page=True)
    context.close()


def shot(page, name: str) -> None:
    """A named screenshot of what the page shows now (docs/ui.md shows these, copied to docs/images/)."""
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(ARTIFACTS / f"{name}.jpg"), type="jpeg", quality=70)
