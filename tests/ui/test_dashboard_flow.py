"""The dashboard's flow in a real browser: one load per sign-in with a loading notice, no
focus ring around the page, tokens drawn in their class's colour, Settings with every
option's default and errors in words, Learn without a preselected class, the range switch
reading activity alone, a backed model's trust badge, keys that cannot lock their maker out,
and /redoc reaching no other host."""

from __future__ import annotations

import itertools
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import urlparse

import httpx
import pytest

from tests.faults.servers import Server
from tests.ui.conftest import ADMIN_KEY, Page
from tests.ui.test_dashboard import new_model, train

names = itertools.count(1)

pytestmark = pytest.mark.browser


def requests_to(page: Page, fragment: str) -> list[str]:
    """Every URL the tab requests from now on that contains `fragment` (a live list)."""
    seen: list[str] = []
    page.tab.on(
        "request", lambda request: seen.append(request.url) if fragment in request.url else None
    )
    return seen


def record_loading_notices(page: Page) -> None:
    """Remember every text put in the page's main element (window.__shown)."""
    page.tab.evaluate(
        """() => {
          window.__shown = [];
          new MutationObserver(() => window.__shown.push(document.getElementById('view').innerText))
            .observe(document.getElementById('view'), { childList: true, subtree: true });
        }"""
    )


def test_signing_in_loads_the_overview_once_showing_that_it_loads(open_page: Any) -> None:
    page = open_page()
    page.open()
    page.tab.get_by_label("API key").wait_for()
    stats = requests_to(page, "/v1/models/default/stats")
    record_loading_notices(page)
    page.tab.get_by_label("API key").fill(ADMIN_KEY)
    page.tab.get_by_role("button", name="Sign in").click()
    page.tab.get_by_role("heading", name="Overview").wait_for()
    page.tab.wait_for_timeout(500)  # a second load, if any, would have started by now

    assert len(stats) == 1
    assert any("Loading…" in text for text in page.tab.evaluate("window.__shown"))
    assert page.tab.locator("#view").get_attribute("aria-busy") is None
    assert page.errors == []


def test_the_page_is_focused_without_a_ring_around_it(open_page: Any) -> None:
    page = open_page()
    page.sign_in(ADMIN_KEY)
    page.tab.reload()  # a load with no click or key pressed yet: focus() alone
    page.tab.get_by_role("heading", name="Overview").wait_for()

    focused = page.tab.evaluate("document.activeElement.id")
    outline = page.tab.evaluate("getComputedStyle(document.getElementById('view')).outlineStyle")

    assert focused == "view"  # screen readers start at the new page
    assert outline == "none"


def class_colour(page: Page, name: str) -> str:
    return str(
        page.tab.evaluate(
            """name => {
              const probe = document.createElement('span');
              probe.className = name;
              document.body.append(probe);
              const colour = getComputedStyle(probe).backgroundColor;
              probe.remove();
              return colour;
            }""",
            name,
        )
    )


def test_token_bars_are_drawn_in_their_class_colour_and_the_range_switch_reads_activity_alone(
    open_page: Any, api: httpx.Client
) -> None:
    model = new_model(api, "colours")
    train(api, model, 4, 4)
    page = open_page()
    page.sign_in(ADMIN_KEY)
    page.go(f"model/{model}")
    spam_bar = page.tab.locator('table.tokens[data-class="spam"] .bar').first
    spam_bar.wait_for()
    ham_bar = page.tab.locator('table.tokens[data-class="ham"] .bar').first
    stats = requests_to(page, f"/v1/models/{model}/stats")
    activity = requests_to(page, f"/v1/models/{model}/activity")

    page.tab.get_by_role("button", name="7d").click()
    page.tab.locator('.ranges button[aria-pressed="true"]', has_text="7d").wait_for()
    page.tab.locator("[data-rate='corrections']", has_text="in the last 7 days").wait_for()

    assert spam_bar.evaluate("bar => getComputedStyle(bar).backgroundColor") == class_colour(
        page, "c-spam"
    )
    assert ham_bar.evaluate("bar => getComputedStyle(bar).backgroundColor") == class_colour(
        page, "c-ham"
    )
    assert class_colour(page, "c-spam") != class_colour(page, "c-ham")
    assert stats == []
    assert len(activity) == 1
    assert "range=7d" in activity[0]
    assert page.errors == []


def test_settings_show_every_default_and_refusals_in_words(
    open_page: Any, api: httpx.Client
) -> None:
    model = new_model(api, "settings")
    page = open_page()
    page.sign_in(ADMIN_KEY)
    page.go(f"settings/{model}")
    page.tab.get_by_label("min_learns").wait_for()
    hints = {
        option: page.tab.locator(
            f"#{page.tab.get_by_label(option, exact=True).get_attribute('id')}-hint"
        ).inner_text()
        for option in ("min_learns", "min_train_tokens", "alpha", "event_model", "max_vocab")
    }
    page.tab.get_by_label("alpha", exact=True).fill("-1")
    page.tab.get_by_role("button", name="Save").click()
    refusal = page.tab.locator(".field-error:not([hidden])").first
    refusal.wait_for()
    text = refusal.inner_text()

    defaults = api.get(f"/v1/models/{model}").json()["defaults"]  # the server's own settings
    assert f"Default: {defaults['min_learns']}." in hints["min_learns"]
    assert f"Default: {defaults['min_train_tokens']}." in hints["min_train_tokens"]
    assert "Default: 1." in hints["alpha"]
    assert "Default: none." in hints["max_vocab"]
    assert all("Default:" in hint for hint in hints.values())
    assert text.startswith("alpha: must be more than 0")
    assert "Input should" not in text
    assert page.errors == []


def test_learn_asks_for_the_class_rather_than_preselecting_one(
    open_page: Any, api: httpx.Client, tmp_path: Path
) -> None:
    model = new_model(api, "learn")
    mail = tmp_path / "one.eml"
    mail.write_text("Subject: hello\r\n\r\nlunch on friday with the team\r\n")
    page = open_page()
    page.sign_in(ADMIN_KEY)
    page.go(f"learn/{model}")
    select = page.tab.get_by_label("Learn them as")
    select.wait_for()
    chosen_at_first = select.input_value()
    page.tab.get_by_label("Mail files: .eml files or an mbox").set_input_files(str(mail))
    page.tab.get_by_role("button", name="Learn").click()
    refusal = page.tab.locator(".field-error:not([hidden])").first
    refusal.wait_for()

    assert chosen_at_first == ""
    assert "Choose the class" in refusal.inner_text()
    assert api.get(f"/v1/models/{model}").json()["trained_messages"] == 0
    assert page.errors == []


def test_a_personal_model_classifying_with_its_backing_model_is_not_marked_untrained(
    open_page: Any, api: httpx.Client
) -> None:
    backing = new_model(api, "shared")
    personal = f"bob-{next(names)}"
    assert api.post("/v1/models", json={"name": personal, "backed_by": backing}).status_code == 201
    train(api, backing, 3, 3)
    page = open_page()
    page.sign_in(ADMIN_KEY)
    card = page.tab.locator("article", has=page.tab.get_by_role("link", name=personal, exact=True))
    card.wait_for()
    badge = card.locator(".badge").inner_text()

    assert badge in ("trained", "needs more training")  # per the server's min_learns
    assert page.errors == []


@pytest.fixture(scope="module")
def open_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    """A server with no key at all: development mode."""
    workdir = tmp_path_factory.mktemp("ui-open-server")
    running = Server(f"sqlite:///{workdir / 'spamsift.db'}", workdir, name="ui-open", cli=True)
    running.start()
    yield running
    running.stop()


def test_in_development_mode_the_first_key_is_an_admin_key_and_the_page_goes_on_with_it(
    browser: Any, open_server: Server
) -> None:
    context = browser.new_context(viewport={"width": 1280, "height": 900})
    try:
        page = Page(context, open_server.url)
        page.open("#keys")
        page.tab.get_by_role("button", name="Create key").wait_for()
        boxes = page.tab.locator('input[name="scopes"]')
        order = boxes.evaluate_all("boxes => boxes.map(box => box.value)")
        ticked = boxes.evaluate_all("boxes => boxes.filter(box => box.checked).length")
        page.tab.get_by_role("button", name="Create key").click()
        nothing_ticked = page.tab.locator(".field-error:not([hidden])").first.inner_text()
        page.tab.get_by_label("classify", exact=True).check()
        page.tab.get_by_role("button", name="Create key").click()
        page.tab.locator(".field-error:not([hidden])", has_text="admin key").wait_for()
        page.tab.get_by_label("classify", exact=True).uncheck()
        page.tab.get_by_label("admin", exact=True).check()
        page.tab.get_by_role("button", name="Create key").click()
        secret = page.tab.get_by_label("Secret key")
        secret.wait_for()
        made = secret.input_value()
        page.tab.get_by_role("button", name="Sign out").wait_for()
        page.go("#overview")
        page.tab.get_by_role("heading", name="Overview").wait_for()

        assert order == ["admin", "train", "classify"]
        assert ticked == 0
        assert "Pick at least one scope" in nothing_ticked
        assert page.tab.evaluate("sessionStorage.getItem('spamsift.key')") == made
        assert page.errors == []
    finally:
        context.close()


def test_redoc_reaches_no_other_host(open_page: Any, server: Server) -> None:
    page = open_page()
    elsewhere: list[str] = []
    failures: dict[str, str] = {}

    def note(request: Any) -> None:
        url = urlparse(request.url)
        if url.scheme in ("http", "https") and url.hostname != "127.0.0.1":
            elsewhere.append(request.url)

    page.tab.on("request", note)
    page.tab.on("requestfailed", lambda request: failures.update({request.url: request.failure}))
    page.tab.goto(f"{server.url}/redoc")
    page.tab.get_by_role("heading", name="spamsift").first.wait_for()
    page.tab.wait_for_timeout(1000)  # the side menu's logo is drawn after the first render

    # Redoc asks for its maker's logo on a CDN; the page's policy stops it in the browser.
    assert all("csp" in (failures.get(url) or "").lower() for url in elsewhere), (
        elsewhere,
        failures,
    )
