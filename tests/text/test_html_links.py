"""HTML link targets: the fast search in the lowered document finds exactly what one
case-blind regular expression over the document finds."""

from __future__ import annotations

import html
import re

from hypothesis import example, given, settings
from hypothesis import strategies as st

from app.text.html import html_to_text

# The reading before the fast search: one case-blind pattern, `\b` before the attribute name.
REFERENCE = re.compile(
    r"""\b(?:href|src|action|background)\s*=\s*(?:"([^"<>]{0,2048})"|'([^'<>]{0,2048})'|([^\s"'<>]{1,2048}))""",
    re.IGNORECASE,
)


def reference_links(document: str) -> tuple[str, ...]:
    return tuple(html.unescape(a or b or c).strip() for a, b, c in REFERENCE.findall(document))


# No comment, script or style among them: the whole document is where links are looked for.
pieces = st.sampled_from(
    ["href", "HREF", "hRef", "src", "SRC", "action", "BackGround", "x", "_", "9", "é", "ß"]
)
more_pieces = st.sampled_from(["=", " = ", "\n", '"', "'", "<", ">", "<a", "a.example/", "&amp;"])
odd_letters = st.sampled_from(["\u0130", "\u0131", "\u017f", "\u212a", "\u017frc", "ǅ"])


@settings(max_examples=1000, deadline=None)
# The odd letters: characters IGNORECASE and lowering treat differently (dotted capital I,
# dotless i, long s, Kelvin sign) and a title-case one.
@given(st.lists(pieces | more_pieces | odd_letters, max_size=40).map("".join))
@example('<a xhref="no" href="yes">')  # a word character before the name: no boundary there
@example("xsrc=href=inner")  # the rejected name's value holds the next match
@example('<img \u017frc="long-s">')  # IGNORECASE takes long s for s; lowering does not
@example('<a HREF="\u0130stanbul">')  # lowering makes two characters of one
def test_link_targets_are_those_of_one_case_blind_pattern(document: str) -> None:
    assert html_to_text(document).links == reference_links(document)
