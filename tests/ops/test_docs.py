"""The README and docs/ stand alone: every link leads to a file of the repository, no text
cites a document that is not in it, and the model options' table in docs/configuration.md
repeats their one declaration (ModelConfig: default and description, which /docs shows)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from app.api.schemas import ConfigFields
from app.config import Settings
from app.service.model_config import ModelConfig, shown_default

REPO = Path(__file__).resolve().parent.parent.parent
PAGES = [REPO / "README.md", *sorted((REPO / "docs").glob("*.md"))]


@pytest.mark.parametrize("page", PAGES, ids=lambda page: page.name)
def test_every_link_leads_to_a_file_of_the_repository(page: Path) -> None:
    for target in re.findall(r"\]\(([^)#\s]+)(?:#[^)]*)?\)", page.read_text()):
        if re.match(r"[a-z]+:", target):
            continue  # http:, https:, mailto:
        path = (page.parent / target).resolve()
        assert path.exists(), f"{page.name} links {target}"


@pytest.mark.parametrize("page", PAGES, ids=lambda page: page.name)
def test_no_page_cites_a_document_outside_the_repository(page: Path) -> None:
    text = page.read_text()
    for outside in ("SPEC §", "SPEC.md", "ROBUSTNESS", "STYLE.md"):
        assert outside not in text, f"{page.name} cites {outside}"
    assert not re.search(r"\bissue #?\d+", text, re.I), page.name


def test_the_options_table_is_the_declaration() -> None:
    configuration = (REPO / "docs" / "configuration.md").read_text()
    for name, field in ModelConfig.model_fields.items():
        assert field.description, f"{name} has no description"
        row = f"| `{name}` | {shown_default(field.default)} | {field.description} |"
        assert row in configuration, row


def test_every_option_a_request_sets_is_in_the_table_as_openapi_describes_it() -> None:
    configuration = (REPO / "docs" / "configuration.md").read_text()
    for name, field in ConfigFields.model_fields.items():
        assert field.description, f"{name} has no description in /docs"
        assert re.search(
            rf"^\| `{name}` \| [^|]+ \| {re.escape(field.description)} \|$", configuration, re.M
        ), name


def test_every_setting_is_in_the_configuration_reference() -> None:
    configuration = (REPO / "docs" / "configuration.md").read_text()
    for name in Settings.model_fields:
        assert f"`SPAMSIFT_{name.upper()}`" in configuration, name
