"""Machine codes for what was wrong with a message, reported in `TokenizedMessage.defects`.

Malformed mail is normal input: a defect never stops tokenizing, it says what was skipped,
guessed or cut so that an operator can see why a message gave few tokens.
"""

NO_HEADERS = "no_headers"  # input does not start with a header field: all of it is body
TRUNCATED = "truncated"  # a TokenizerLimits cap was hit (scan bytes, header size or count,
# MIME parts, distinct tokens): the rest was ignored
MIME_DEPTH = "mime_depth"  # parts nested deeper than max_mime_depth were not walked
BAD_CHARSET = "bad_charset"  # unknown or refused charset, or bytes invalid in the declared one
BAD_BASE64 = "bad_base64"  # base64 body with characters outside the alphabet or a broken length
BAD_MIME = "bad_mime"  # multipart without boundary, boundary absent or never closed
TIME_BUDGET = "time_budget"  # the request's time budget ran out: the rest was not tokenized
HEADER_PARSE_ERROR = "header_parse_error"  # a line in the header block that is no field,
# a broken RFC 2047 encoded word, or a parameter the email package could not parse

ALL_DEFECTS = frozenset(
    {
        NO_HEADERS,
        TRUNCATED,
        MIME_DEPTH,
        BAD_CHARSET,
        BAD_BASE64,
        BAD_MIME,
        HEADER_PARSE_ERROR,
        TIME_BUDGET,
    }
)
