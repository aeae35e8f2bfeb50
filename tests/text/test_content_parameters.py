"""A part's Content-Type and Content-Disposition parameters, split in one pass, read exactly
as the email package's Message reads them, whose own split takes time quadratic in a value's
semicolons."""

from __future__ import annotations

import email.message

from hypothesis import example, given, settings
from hypothesis import strategies as st

from app.text.mime import _PARAMETER_ERRORS, read_parameters

# Pieces that make every branch: quoting and escapes, RFC 2231 names, charsets and
# languages, percent escapes, case, bare names, empty parameters, a surrogate (a Header).
PIECES = [
    "text/plain", "multipart/mixed", "attachment", "inline", ";", "; ", " ", '"', "\\", "=", '\\"',
    "charset", "CharSet", "boundary", "filename", "name", "foo", "*", "*0", "*1", "*0*",
    "*1*", "utf-8''", "us-ascii'en'", "no-such-charset''", "'", "%41", "%E9", "%", "a", "b.txt",
    "é", "日本", "\udce9",
]  # fmt: skip
VALUES = st.none() | st.lists(st.sampled_from(PIECES), max_size=14).map("".join)


def outcome(read: object) -> tuple[object, ...]:
    """What a reading gives: its values, or that it failed as the tokenizer catches it."""
    try:
        return ("read", read())  # type: ignore[operator]
    except _PARAMETER_ERRORS as error:
        return ("failed", type(error))


@settings(max_examples=3000)
@given(VALUES, VALUES)
@example("text/plain; filename*=a; filename*0=b", None)  # continuations unsortable: fails
@example("; charset=x", "; ; filename=y")  # the first parameter empty
@example('text/plain; name="a\\";b"; charset=x', None)  # an escaped quote opens nothing
def test_parameters_are_read_as_the_email_package_reads_them(
    content_type: str | None, disposition: str | None
) -> None:
    headers = email.message.Message()
    if content_type is not None:
        headers["content-type"] = content_type
    if disposition is not None:
        headers["content-disposition"] = disposition

    def by_the_email_package() -> tuple[str | None, str | None, str | None]:
        charset = headers.get_content_charset()
        return charset, headers.get_boundary(), headers.get_filename()

    assert outcome(lambda: read_parameters(headers)) == outcome(by_the_email_package)


def test_a_value_of_thousands_of_semicolons_reads_as_the_package_reads_it() -> None:
    for value in ["text/html" + " ;" * 4000, 'text/plain; a="' + ";" * 8000, "a;" * 3000]:
        headers = email.message.Message()
        headers["content-type"] = value + '; charset="UTF-8"; name="x.pdf"'
        assert read_parameters(headers) == (
            headers.get_content_charset(),
            headers.get_boundary(),
            headers.get_filename(),
        )
