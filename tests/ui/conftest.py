"""The dashboard in a real browser: Debian's headless Chromium, driven by Playwright, against a
real `spamsift serve` on a SQLite file. Nothing here downloads a browser: without Chromium
(or the playwright package) every test skips with the reason.

Screenshots of each page, at 1280 and 390 px wide, go to $SPAMSIFT_SCREENSHOTS (default
tests/ui/screenshots/, ignored by git).
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.faults.servers import Server

ADMIN_KEY = "ui-test-admin-key-0f3c9a7e5b1d2f4a6c8e0b2d4f6a8c0e"
CHROMIUM_CANDIDATES = ("/usr/bin/chromium", "/usr/bin/chromium-browser")
WIDE = {"width": 1280, "height": 900}
NARROW = {"width": 390, "height": 844}
SCREENSHOTS = Path(
    os.environ.get("SPAMSIFT_SCREENSHOTS", Path(__file__).resolve().parent / "screenshots")
)


def chromium_path() -> str | None:
    found = os.environ.get("SPAMSIFT_CHROMIUM") or shutil.which("chromium")
    if found:
        return found
    return next((path for path in CHROMIUM_CANDIDATES if Path(path).exists()), None)


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    executable = chromium_path()
    if executable is None:
        pytest.skip("no Chromium: apt-get install chromium (the tests never download one)")
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        pytest.skip("the playwright package is not installed (pip install -e '.[test]')")
    with sync_playwright() as playwright:
        launched = playwright.chromium.launch(
            executable_path=executable,
            headless=True,
            # --no-sandbox: CI runs as root, where Chromium's sandbox refuses to start.
            args=["--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage"],
        )
        yield launched
        launched.close()


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    workdir = tmp_path_factory.mktemp("ui-server")
    running = Server(
        f"sqlite:///{workdir / 'spamsift.db'}",
        workdir,
        name="ui",
        cli=True,
        settings={"admin_key": ADMIN_KEY},
    )
    running.start()
    yield running
    running.stop()


@pytest.fixture(scope="module")
def api(server: Server) -> Iterator[httpx.Client]:
    """An admin client of the same server, to set up data and check what the page did."""
    with httpx.Client(
        base_url=server.url, headers={"Authorization": f"Bearer {ADMIN_KEY}"}, timeout=30
    ) as client:
        yield client


class Page:
    """One browser tab at 1280 px, with the console errors and dialogs it met."""

    def __init__(self, context: Any, base_url: str) -> None:
        self.context = context
        self.tab = context.new_page()
        self.base_url = base_url
        self.errors: list[str] = []
        self.dialogs: list[str] = []
        self.tab.on("pageerror", lambda error: self.errors.append(str(error)))
        self.tab.on("console", self._on_console)

        def on_dialog(dialog: Any) -> None:
            self.dialogs.append(dialog.message)
            if dialog.type == "confirm":
                dialog.accept()
            else:
                dialog.dismiss()

        self.tab.on("dialog", on_dialog)

    def _on_console(self, message: Any) -> None:
        # The browser logs each 4xx answer ("Failed to load resource"): the tests expect some.
        if message.type == "error" and not message.text.startswith("Failed to load resource"):
            self.errors.append(message.text)

    def open(self, hash_route: str = "") -> None:
        self.tab.goto(f"{self.base_url}/ui/{hash_route}")

    def sign_in(self, key: str) -> None:
        self.open()
        self.tab.get_by_label("API key").fill(key)
        self.tab.get_by_role("button", name="Sign in").click()
        self.tab.get_by_role("button", name="Sign out").wait_for()

    def go(self, hash_route: str) -> None:
        self.tab.evaluate("route => { location.hash = route; }", hash_route)

    def shoot(self, name: str) -> None:
        """Save the page at 1280 px and at 390 px wide (then back to 1280); at 390 px nothing
        may stick out sideways (wide tables scroll in their own box)."""
        SCREENSHOTS.mkdir(parents=True, exist_ok=True)
        self.tab.screenshot(path=str(SCREENSHOTS / f"{name}-1280.png"), full_page=True)
        self.tab.set_viewport_size(NARROW)
        self.tab.wait_for_timeout(100)
        self.tab.screenshot(path=str(SCREENSHOTS / f"{name}-390.png"), full_page=True)
        page_width = self.tab.evaluate("document.documentElement.scrollWidth")
        self.tab.set_viewport_size(WIDE)
        assert page_width <= NARROW["width"], f"{name}: {page_width} px wide at 390 px"


@pytest.fixture
def open_page(browser: Any, server: Server) -> Iterator[Any]:
    """Make pages (each its own context: its own sessionStorage); closed after the test."""
    contexts: list[Any] = []

    def make() -> Page:
        context = browser.new_context(viewport=WIDE)
        contexts.append(context)
        return Page(context, server.url)

    yield make
    for context in contexts:
        context.close()
