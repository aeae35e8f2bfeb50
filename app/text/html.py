"""HTML -> visible text and link targets, in linear time.

Python 3.11's html.parser has quadratic cases (CVE-2025-6069, unclosed comments and CDATA),
so HTML is read with a few regular expressions and `str.find` scans that only move forward:
5 MB of unclosed tags or 100 000 `<![CDATA[` take one pass (ROBUSTNESS I27).
"""

import html
import re
from dataclasses import dataclass

# Sections whose content is not visible text. An unterminated one hides the rest of the
# document, as it does in a browser.
_HIDDEN_START = re.compile(r"<!--|<!\[cdata\[|<(script|style)\b", re.IGNORECASE)
_HIDDEN_END = {
    "<!--": re.compile(r"-->"),
    "<![cdata[": re.compile(r"\]\]>"),
    "script": re.compile(r"</script\s*>", re.IGNORECASE),
    "style": re.compile(r"</style\s*>", re.IGNORECASE),
}

# Inline tags vanish so that "vi<b></b>agra" reads "viagra"; other tags separate words.
_INLINE_TAG = re.compile(
    r"</?(?:a|abbr|b|big|em|font|i|s|small|span|strike|strong|sub|sup|tt|u|wbr)\b[^<>]*>",
    re.IGNORECASE,
)
_TAG = re.compile(r"<[/!?]?[a-zA-Z][^<>]*>")

# Link targets, at most 2 KiB each (the bound keeps unterminated quotes linear).
_LINK_TARGET = r"""\s*=\s*(?:"([^"<>]{0,2048})"|'([^'<>]{0,2048})'|([^\s"'<>]{1,2048}))"""
_LINK = re.compile(r"\b(?:href|src|action|background)" + _LINK_TARGET, re.IGNORECASE)
# The same names in the lowered document, case-sensitive and without `\b`: so the engine skips
# to their first letters instead of trying every position (0.117 -> 0.040 ms an HTML part);
# the boundary is checked by hand. Exact only where lowering keeps every character in place
# and the document holds none of the characters IGNORECASE takes for these ASCII letters
# though they do not lower to them (found by trying every code point).
_LINK_LOWERED = re.compile(r"(?:href|src|action|background)" + _LINK_TARGET)
_FOLDED_ONTO_LETTERS = ("\u0130", "\u0131", "\u017f")  # dotted capital I, dotless i, long s


@dataclass(frozen=True)
class HtmlText:
    """Visible text of an HTML document and the targets of its links and images."""

    text: str
    links: tuple[str, ...]
    hidden: str = ""  # text of comments, CDATA, scripts and styles (bogofilter reads it too)


def _drop_hidden(document: str) -> tuple[str, str]:
    """Return `document` without comments, CDATA, scripts and styles, and their content."""
    if "<" not in document:
        return document, ""
    kept: list[str] = []
    hidden: list[str] = []
    position = 0
    while True:
        start = _HIDDEN_START.search(document, position)
        if start is None:
            kept.append(document[position:])
            break
        kept.append(document[position : start.start()])
        key = start.group(1) or start.group(0)
        end = _HIDDEN_END[key.lower()].search(document, start.end())
        if end is None:
            hidden.append(document[start.end() :])
            break
        kept.append(" ")
        hidden.append(document[start.end() : end.start()])
        position = end.end()
    return "".join(kept), " ".join(hidden)


def html_to_text(document: str) -> HtmlText:
    """Return the visible text of an HTML document, tags dropped, and its link targets."""
    document, hidden = _drop_hidden(document)
    links = tuple(html.unescape(a or b or c).strip() for a, b, c in _link_targets(document))
    text = _INLINE_TAG.sub("", document)
    text = _TAG.sub(" ", text)
    if "&" in text:
        text = html.unescape(text)
    return HtmlText(text=text, links=links, hidden=hidden)


def _link_targets(document: str) -> list[tuple[str, str, str]]:
    """`_LINK.findall(document)`: each link's target, as one of three groups."""
    lowered = document.lower()
    if len(lowered) != len(document) or any(c in document for c in _FOLDED_ONTO_LETTERS):
        return _LINK.findall(document)
    found: list[tuple[str, str, str]] = []
    position = 0
    while (match := _LINK_LOWERED.search(lowered, position)) is not None:
        start = match.start()
        before = document[start - 1] if start else ""
        if before.isalnum() or before == "_":  # a word character: no `\b` before the name
            position = start + 1
            continue
        # Groups that took no part span (-1, -1): "", as findall gives them.
        quoted, single_quoted, bare = (document[slice(*match.span(g))] for g in (1, 2, 3))
        found.append((quoted, single_quoted, bare))
        position = match.end()
    return found
