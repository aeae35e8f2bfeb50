"""What an operator does on the dashboard, in a real browser against a real server: sign in,
learn from uploaded mail, read counts and charts, scan a message and correct it, change a
threshold, see attacker-chosen tokens as text, and get locked out by a revoked key."""

from __future__ import annotations

import itertools
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.builders import ham_message, spam_message
from tests.ui.conftest import ADMIN_KEY

# A header name may hold any printable character but ':' and space, and each gives the
# token `header:<name>`: a spam can make the filter learn markup as a token.
IMG_PAYLOAD = "<img/src=x/onerror=window.__pwned=1>"
SCRIPT_PAYLOAD = "<script>window.__pwned=2</script>"
names = itertools.count(1)


def new_model(api: httpx.Client, stem: str) -> str:
    name = f"{stem}-{next(names)}"
    assert api.post("/v1/models", json={"name": name}).status_code == 201
    return name


def train(api: httpx.Client, model: str, n_spam: int, n_ham: int, **spam: Any) -> None:
    items = [{"label": "spam", "raw": spam_message(i, **spam)} for i in range(n_spam)]
    items += [{"label": "ham", "raw": ham_message(i)} for i in range(n_ham)]
    response = api.post(f"/v1/models/{model}/train/batch", json={"items": items})
    assert response.status_code == 200, response.text


def with_headers(raw: str, *lines: str) -> str:
    """Add header lines after the first (a message must start with a plain field name)."""
    return raw.replace("\r\n", "\r\n" + "".join(line + "\r\n" for line in lines), 1)


def figure(page: Any, name: str, scope: Any = None) -> str:
    return str((scope or page.tab).locator(f'[data-figure="{name}"]').first.inner_text())


def test_signing_in_refuses_a_wrong_key_and_shows_the_overview(open_page: Any) -> None:
    page = open_page()
    page.open()
    page.tab.get_by_label("API key").fill("ss_000000000000_not-a-key")
    page.tab.get_by_role("button", name="Sign in").click()
    refusal = page.tab.locator(".field-error")
    refusal.wait_for()
    assert "unknown or revoked" in refusal.inner_text()
    page.shoot("signin")

    page.sign_in(ADMIN_KEY)

    page.tab.get_by_role("heading", name="Overview").wait_for()
    card = page.tab.locator("article", has=page.tab.get_by_role("link", name="default"))
    assert card.count() == 1
    assert page.tab.evaluate("sessionStorage.getItem('spamsift.key')") == ADMIN_KEY
    assert ADMIN_KEY not in page.tab.url
    assert page.tab.context.cookies() == []
    page.shoot("overview")
    assert page.errors == []


def test_learning_from_uploaded_mail_changes_the_counts_and_the_chart(
    open_page: Any, api: httpx.Client, tmp_path: Path
) -> None:
    model = new_model(api, "upload")
    mbox = tmp_path / "spam.mbox"
    mbox.write_text(
        "".join(
            f"From promo{i}@lottery.biz Sat Nov 21 09:30:00 2026\n"
            + spam_message(i).replace("\r\n", "\n")
            + "\n"
            for i in range(12)
        )
    )
    hams = []
    for i in range(5):
        path = tmp_path / f"ham-{i}.eml"
        path.write_text(ham_message(i))
        hams.append(path)
    tiny = tmp_path / "tiny.eml"  # too few tokens to learn from: refused, the rest learned
    tiny.write_text("Subject: hi\r\n\r\nok\r\n")
    hams.append(tiny)
    page = open_page()
    page.sign_in(ADMIN_KEY)
    page.tab.get_by_role("heading", name="Overview").wait_for()
    page.go(f"#model/{model}")
    chart = page.tab.get_by_role("img", name="Training")
    chart.wait_for()
    assert "trained 0" in chart.get_attribute("aria-label")

    page.go(f"#learn/{model}")
    page.tab.get_by_label("Learn them as").select_option("spam")
    page.tab.get_by_label("Mail files").set_input_files(str(mbox))
    page.tab.get_by_role("button", name="Learn").click()
    report = page.tab.locator("pre.report")
    report.filter(has_text="already known").wait_for()
    spam_report = report.inner_text()
    page.tab.get_by_label("Learn them as").select_option("ham")
    page.tab.get_by_label("Mail files").set_input_files([str(path) for path in hams])
    page.tab.get_by_role("button", name="Learn").click()
    report.filter(has_text="6 messages in").wait_for()
    assert page.tab.locator("progress").get_attribute("value") == "6"
    page.shoot("learn")
    ham_report = report.inner_text()

    page.go("#overview")
    card = page.tab.locator("article", has=page.tab.get_by_role("link", name=model))
    card.wait_for()
    spam_count = figure(page, "messages-spam", card)
    ham_count = figure(page, "messages-ham", card)
    page.go(f"#model/{model}")
    page.tab.get_by_role("img", name="Training").wait_for()
    after = page.tab.get_by_role("img", name="Training").get_attribute("aria-label")
    page.shoot("model")

    assert f"model {model}: 12 messages in" in spam_report
    assert "  trained        12" in spam_report
    assert "  trained        5" in ham_report
    assert "  refused        1" in ham_report
    assert "1 too_few_tokens, e.g. " in ham_report
    assert ham_report.rstrip().endswith(": tiny.eml")
    assert (spam_count, ham_count) == ("12", "5")
    assert "trained 17" in after
    assert api.get(f"/v1/models/{model}").json()["messages"] == {"ham": 5, "spam": 12}
    assert page.errors == []


def test_scanning_shows_clues_and_feedback_counts_as_a_false_positive(
    open_page: Any, api: httpx.Client
) -> None:
    model = new_model(api, "scan")
    train(api, model, 8, 8)
    page = open_page()
    page.sign_in(ADMIN_KEY)
    page.tab.get_by_role("heading", name="Overview").wait_for()
    page.go(f"#scan/{model}")

    page.tab.get_by_label("Message", exact=True).fill(spam_message(40))
    page.tab.get_by_role("button", name="Scan").click()
    verdict = page.tab.locator('[data-figure="verdict"]')
    verdict.wait_for()
    clues = page.tab.locator("table.clues tbody tr")
    page.shoot("scan")
    assert verdict.inner_text() == "spam"
    assert clues.count() > 0
    assert clues.first.locator("td").nth(1).inner_text() in ("spam", "ham")

    page.tab.get_by_role("button", name="Mark as ham").click()
    page.tab.locator(".feedback-outcome").filter(has_text="ham").wait_for()
    page.go(f"#model/{model}")
    rate = page.tab.locator('[data-rate="false-positives"]')
    rate.wait_for()
    corrections = page.tab.locator('[data-rate="corrections"]').inner_text()
    page.shoot("model-corrected")

    assert "100.00 %" in rate.inner_text()  # one classified message, corrected to ham
    assert "(1 of 1)" in corrections
    stats = api.get(f"/v1/models/{model}/stats").json()
    assert stats["activity"]["24h"]["false_positives"] == 1
    assert page.errors == []


def test_changing_a_threshold_shows_refusals_at_the_field(
    open_page: Any, api: httpx.Client
) -> None:
    model = new_model(api, "settings")
    page = open_page()
    page.sign_in(ADMIN_KEY)
    page.tab.get_by_role("heading", name="Overview").wait_for()
    page.go(f"#settings/{model}")
    spam_threshold = page.tab.get_by_label("spam_threshold")
    spam_threshold.wait_for()

    spam_threshold.fill("0.05")  # below ham_threshold 0.1
    page.tab.get_by_role("button", name="Save").click()
    error = page.tab.locator(f"#{spam_threshold.get_attribute('id')}-error")
    error.wait_for()
    refusal = error.inner_text()
    marked_invalid = spam_threshold.get_attribute("aria-invalid")
    refused = api.get(f"/v1/models/{model}").json()["config"]["spam_threshold"]
    page.shoot("settings-error")
    spam_threshold.fill("0.8")
    page.tab.get_by_role("button", name="Save").click()
    page.tab.locator(".outcome").filter(has_text="Saved").wait_for()

    assert "spam_threshold" in refusal
    assert marked_invalid == "true"
    assert refused == 0.9
    assert api.get(f"/v1/models/{model}").json()["config"]["spam_threshold"] == 0.8
    assert not page.tab.locator(".field-error:visible").count()
    assert page.errors == []


def test_tokens_and_key_names_that_are_markup_are_shown_as_text(
    open_page: Any, api: httpx.Client
) -> None:
    model = new_model(api, "payload")
    # Ham like the spam but for the two headers: those become the strongest spam tokens.
    items = [
        {
            "label": "spam",
            "raw": with_headers(spam_message(i), f"{IMG_PAYLOAD}: 1", f"{SCRIPT_PAYLOAD}: 1"),
        }
        for i in range(8)
    ]
    items += [{"label": "ham", "raw": spam_message(100 + i)} for i in range(8)]
    assert api.post(f"/v1/models/{model}/train/batch", json={"items": items}).status_code == 200
    made = api.post("/v1/keys", json={"scopes": ["classify"], "name": IMG_PAYLOAD})
    assert made.status_code == 201
    page = open_page()
    page.sign_in(ADMIN_KEY)

    page.go(f"#model/{model}")
    tokens = page.tab.locator('table.tokens[data-class="spam"] td.token')
    tokens.first.wait_for()
    shown = tokens.all_inner_texts()
    page.shoot("tokens-markup")
    page.go(f"#scan/{model}")
    page.tab.get_by_label("Message", exact=True).fill(items[0]["raw"])
    page.tab.get_by_role("button", name="Scan").click()
    page.tab.locator("table.clues").wait_for()
    clues = page.tab.locator("table.clues td.token").all_inner_texts()
    page.go("#keys")
    key_row = page.tab.locator(f'tr[data-key-id="{made.json()["key_id"]}"]')
    key_row.wait_for()

    assert f"header:{IMG_PAYLOAD}" in shown
    assert f"header:{SCRIPT_PAYLOAD}" in shown
    assert f"header:{SCRIPT_PAYLOAD}" in clues
    assert IMG_PAYLOAD in key_row.inner_text()
    # No markup of theirs became an element, no script ran, no dialog opened.
    assert page.tab.locator("main img, main script").count() == 0
    assert page.tab.evaluate("window.__pwned") is None
    assert page.dialogs == []
    assert page.errors == []


def test_a_revoked_key_is_locked_out_and_a_classify_key_sees_only_scan(
    open_page: Any, api: httpx.Client
) -> None:
    admin = open_page()
    admin.sign_in(ADMIN_KEY)
    admin.go("#keys")
    admin.tab.get_by_label("Name (who uses it)").fill("kiosk")
    admin.tab.get_by_label("admin", exact=True).check()
    admin.tab.get_by_role("button", name="Create key").click()
    secret = admin.tab.get_by_label("Secret key")
    secret.wait_for()
    kiosk_key = secret.input_value()
    admin.shoot("keys")
    classify_key = api.post("/v1/keys", json={"scopes": ["classify"], "name": "relay"}).json()

    scanner = open_page()
    scanner.sign_in(classify_key["key"])
    visible_pages = scanner.tab.locator("#nav a").all_inner_texts()
    kiosk = open_page()
    kiosk.sign_in(kiosk_key)
    kiosk.tab.get_by_role("heading", name="Overview").wait_for()

    kiosk_id = kiosk_key.split("_")[1]
    admin.tab.get_by_role("button", name=f"Revoke key {kiosk_id}").click()
    admin.tab.locator(f'tr[data-key-id="{kiosk_id}"]').filter(has_text="revoked").wait_for()
    kiosk.tab.wait_for_timeout(1200)  # servers trust a key checked within the last second
    kiosk.tab.get_by_role("link", name="Model").click()
    kiosk.tab.get_by_role("button", name="Sign in").wait_for()
    banner = kiosk.tab.locator("#banner").inner_text()
    kiosk.shoot("revoked")

    assert visible_pages == ["Scan"]
    assert "revoked" in banner
    assert kiosk.tab.evaluate("sessionStorage.getItem('spamsift.key')") is None
    assert any("Revoke the key" in text for text in admin.dialogs)
    assert admin.errors == scanner.errors == kiosk.errors == []


@pytest.mark.parametrize("path", ["/", "/ui"])
def test_the_root_leads_to_the_page(server: Any, path: str) -> None:
    response = httpx.get(f"{server.url}{path}", follow_redirects=True)

    assert str(response.url).endswith("/ui/")
    assert "<title>spamsift</title>" in response.text


def test_a_personal_models_page_shows_its_backing_model_and_the_backing_its_models(
    open_page: Any, api: httpx.Client
) -> None:
    backing = new_model(api, "global")
    personal = f"alice-{next(names)}"
    created = api.post("/v1/models", json={"name": personal, "backed_by": backing})
    assert created.status_code == 201, created.text
    train(api, backing, 3, 4)
    page = open_page()
    page.open()
    page.sign_in(ADMIN_KEY)

    page.go(f"model/{personal}")
    note = page.tab.locator('[data-relation="backed-by"]')
    note.wait_for()
    text = note.inner_text()
    page.go(f"model/{backing}")
    backs = page.tab.locator('[data-relation="backs"]')
    backs.wait_for()

    assert f"Backed by {backing}: classified on both models' counts (4 ham, 3 spam)" in text
    assert "feedback trains this model alone" in text
    assert personal in backs.inner_text()
    assert page.errors == []
