"""The dashboard on a corpus-sized model: the SpamAssassin corpus (~6,000 messages, ~690,000
tokens) trained into `default` once per session, then every page opened in Chromium settles:
its elements appear and no script fails. No timing is asserted; the generous timeout only
keeps a broken page from hanging the run."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from typing import Any

import pytest

from tests.builders import spam_message
from tests.conftest import corpus_path
from tests.faults.servers import Server
from tests.ui.conftest import ADMIN_KEY, WIDE, Page

pytestmark = [pytest.mark.browser, pytest.mark.corpus, pytest.mark.slow]

SETTLE_MS = 300_000


@pytest.fixture(scope="session")
def corpus_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    """A server whose `default` holds the SpamAssassin corpus, trained by `spamsift train`."""
    corpus = corpus_path("spamassassin")
    workdir = tmp_path_factory.mktemp("ui-corpus")
    url = f"sqlite:///{workdir / 'spamsift.db'}"
    env = {**os.environ, "SPAMSIFT_DATABASE_URL": url}
    for command in (["db", "upgrade"], ["train", str(corpus)]):
        done = subprocess.run(
            [sys.executable, "-m", "app.cli.main", *command],
            cwd=workdir,
            env=env,
            capture_output=True,
            text=True,
            timeout=1800,
        )
        assert done.returncode == 0, done.stderr[-2000:]
    running = Server(url, workdir, name="ui-corpus", cli=True, settings={"admin_key": ADMIN_KEY})
    running.start()
    yield running
    running.stop()


@pytest.fixture
def page(browser: Any, corpus_server: Server) -> Iterator[Page]:
    context = browser.new_context(viewport=WIDE)
    context.set_default_timeout(SETTLE_MS)
    try:
        yield Page(context, corpus_server.url)
    finally:
        context.close()


def test_every_page_settles_on_a_corpus_sized_model(page: Page) -> None:
    page.sign_in(ADMIN_KEY)
    card = page.tab.locator("article", has=page.tab.get_by_role("link", name="default", exact=True))
    card.locator('[data-figure="vocabulary"]').wait_for()
    vocabulary = card.locator('[data-figure="vocabulary"]').inner_text()

    page.go("#model/default")
    page.tab.locator('table.tokens[data-class="spam"] tbody tr').first.wait_for()
    page.tab.get_by_role("button", name="30d").click()
    page.tab.locator("[data-rate='corrections']", has_text="in the last 30 days").wait_for()
    spam_tokens = page.tab.locator('table.tokens[data-class="spam"] tbody tr').count()

    page.go("#scan/default")
    page.tab.get_by_label("Plain text, not a mail with headers").wait_for()
    page.tab.locator("textarea[name=message]").fill(spam_message(1))
    page.tab.get_by_role("button", name="Scan").click()
    page.tab.locator("table.clues tbody tr").first.wait_for()

    page.go("#settings/default")
    page.tab.get_by_label("min_learns").wait_for()
    page.go("#keys")
    page.tab.get_by_role("button", name="Create key").wait_for()
    page.go("#overview")
    page.tab.get_by_role("heading", name="Overview").wait_for()

    assert int(vocabulary.split()[0].replace(",", "")) > 100_000
    assert spam_tokens == 20
    assert page.errors == []
