"""The candidate token families of `bench.accuracy --add` and `--keep-case` (sanity only), as
`python -m bench.token_experiments` reports them."""

from pathlib import Path
from typing import Any

from tests.bench import run_bench

MAIL = b"Date: Tue, 01 Oct 2002 23:30:00 -0200\nSubject: Hi\n\n" + b"FREE offer " * 1000


def families(folder: Path, content: bytes, *options: str) -> dict[str, Any]:
    message = folder / "message"
    message.write_bytes(content)
    return run_bench("bench.token_experiments", str(message), *options, folder=folder).report


def test_char4_tokens_are_binary_hashed_and_read_only_the_first_characters(
    tmp_path: Path,
) -> None:
    report = families(tmp_path, MAIL)
    tokens = report["full"]["char4"]
    assert set(tokens.values()) == {1}
    assert all(token.startswith("c4:") and len(token) == 8 for token in tokens)
    assert len(tokens) <= report["char4_prefix_chars"]
    assert families(tmp_path, b"", "--text")["full"]["char4"] == {}


def test_hour_is_that_of_the_date_header_in_utc_and_only_in_the_full_view(
    tmp_path: Path,
) -> None:
    report = families(tmp_path, MAIL)
    assert report["full"]["hour"] == {"hour:1": 1}
    assert report["text_only"]["hour"] == {}
    undated = families(tmp_path, b"Subject: x\n\nhi")
    assert undated["full"]["hour"] == {"hour:none": 1}


def test_case_kept_only_inside_its_block(tmp_path: Path) -> None:
    report = families(
        tmp_path, b"FREE Money at http://Example.COM/Win or HTTP://Shop.Example/Go", "--text"
    )
    kept = set(report["tokens_case_kept"])
    assert {"FREE", "Money", "url:example.com", "urlpath:Win"} <= kept
    # A scheme in capitals is still a URL's: the URL pattern is made case-blind in the block.
    assert {"url:shop.example", "urlpath:Go"} <= kept
    assert "HTTP" not in kept
    assert {"free", "money", "url:example.com"} <= set(report["tokens_after"])
