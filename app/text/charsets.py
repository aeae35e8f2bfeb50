"""Declared charset -> Python codec, from an allow-list of text codecs, with safe fallbacks.

Only codecs that turn bytes into text are reachable from a message: a label such as `rot13`,
`zlib`, `base64` or `idna` (whose decoder was quadratic, CVE-2022-45061) is refused and the
bytes are read with the fallbacks instead (ROBUSTNESS I12).
"""

import re

_ISO_8859 = {f"iso-8859-{n}": f"iso8859_{n}" for n in (*range(1, 12), *range(13, 17))}
_WINDOWS = {f"windows-{n}": f"cp{n}" for n in range(1250, 1259)}

# Stateful 7-bit codecs: ASCII bytes are not plain ASCII text in them.
_SEVEN_BIT_CODECS = frozenset({"iso2022_jp", "iso2022_jp_2", "iso2022_jp_3", "iso2022_kr", "hz"})

_CODECS: dict[str, str] = {
    **_ISO_8859,
    **{f"iso8859-{n}": codec for n, codec in ((k[9:], v) for k, v in _ISO_8859.items())},
    **{f"latin{n}": f"iso8859_{m}" for n, m in ((1, 1), (2, 2), (3, 3), (4, 4), (5, 9), (6, 10))},
    **_WINDOWS,
    **{f"cp{n}": f"cp{n}" for n in range(1250, 1259)},
    **{f"x-cp{n}": f"cp{n}" for n in range(1250, 1259)},
    "utf-8": "utf-8",
    "utf8": "utf-8",
    "unicode-1-1-utf-8": "utf-8",
    # Declared ASCII is read as UTF-8 (a superset); 8-bit bytes then go to the fallbacks.
    "us-ascii": "utf-8",
    "ascii": "utf-8",
    "ansi-x3.4-1968": "utf-8",
    "l1": "iso8859_1",
    # GB2312 and GBK are subsets of GB18030; mail labelled gb2312 often holds GBK characters.
    "gb2312": "gb18030",
    "gbk": "gb18030",
    "x-gbk": "gb18030",
    "cp936": "gb18030",
    "euc-cn": "gb18030",
    "x-euc-cn": "gb18030",
    "gb18030": "gb18030",
    "chinese": "gb18030",
    "csgb2312": "gb18030",
    "hz-gb-2312": "hz",
    "big5": "big5hkscs",
    "big5-hkscs": "big5hkscs",
    "x-big5": "big5hkscs",
    "cp950": "cp950",
    "iso-2022-jp": "iso2022_jp_2",  # -2 is a superset that also reads plain iso-2022-jp
    "iso-2022-jp-2": "iso2022_jp_2",
    "iso-2022-jp-3": "iso2022_jp_3",
    "iso-2022-kr": "iso2022_kr",
    "euc-jp": "euc_jp",
    "x-euc-jp": "euc_jp",
    "shift-jis": "cp932",
    "shift_jis": "cp932",
    "sjis": "cp932",
    "x-sjis": "cp932",
    "ms932": "cp932",
    "cp932": "cp932",
    "windows-31j": "cp932",
    "euc-kr": "cp949",
    "ks-c-5601-1987": "cp949",
    "ks_c_5601-1987": "cp949",
    "cp949": "cp949",
    "koi8-r": "koi8_r",
    "koi8-u": "koi8_u",
    "cp866": "cp866",
    "ibm866": "cp866",
    "tis-620": "cp874",
    "windows-874": "cp874",
    "iso-8859-11": "cp874",
    "utf-16": "utf-16",
    "utf-16le": "utf-16-le",
    "utf-16be": "utf-16-be",
}

_ASCII_BYTES = bytes(range(128))
_WIDE_CODECS = frozenset({"utf-16", "utf-16-le", "utf-16-be"})
_LABEL_JUNK = re.compile(r"[\"'\s]")
_CJK_CODECS = frozenset({"gb18030", "big5hkscs", "cp950", "euc_jp", "cp932", "cp949", "hz"})


def lookup_codec(charset: str | None) -> str | None:
    """Return the Python codec for a declared charset label, or None when not allowed."""
    if not charset:
        return None
    label = _LABEL_JUNK.sub("", charset).lower().replace("_", "-")
    if len(label) > 40:
        return None
    return _CODECS.get(label) or _CODECS.get(label.replace("-", "_"))


def decode_bytes(data: bytes, charset: str | None) -> tuple[str, bool]:
    """Decode `data` declared as `charset`; return the text and whether it decoded cleanly.

    Order: the declared codec, UTF-8, then GB18030 when a CJK codec was declared (trec06c
    labels GB bytes as big5) or else GB2312 (undeclared Chinese mail is common, and GB2312,
    whose two bytes are both >= 0xA1, rejects nearly all Western 8-bit text where GB18030
    would accept "f\xfcr" as one Han character), Windows-1252, Latin-1 (never fails).
    """
    codec = lookup_codec(charset)
    if data.isascii() and codec not in _SEVEN_BIT_CODECS and codec not in _WIDE_CODECS:
        return data.decode("ascii"), charset is None or codec is not None
    candidates: list[str] = [codec] if codec else []
    candidates.append("utf-8")
    if codec in _CJK_CODECS:
        candidates.append("gb18030")
    else:
        candidates.append("gb2312")
        # Undeclared GBK text with characters outside GB2312: a Western 8-bit text with 64
        # or more non-ASCII bytes practically never decodes strictly as GB18030.
        if len(data.translate(None, _ASCII_BYTES)) >= 64:
            candidates.append("gb18030")
    candidates.append("cp1252")
    for candidate in candidates:
        try:
            text = data.decode(candidate)
        except UnicodeDecodeError:
            continue
        if candidate == "gb2312":
            # GB2312 only vouched for the bytes; GB18030 reads them as the rest of the room does
            # (Python's gb2312 maps A1A4 to U+30FB where gb18030 gives U+00B7).
            text = data.decode("gb18030")
        clean = candidate == codec or charset is None
        return text, clean
    return data.decode("latin-1"), False


def decode_str(text: str, charset: str | None) -> tuple[str, bool]:
    """Decode an 8-bit body or header held as a str.

    Bytes input is read as Latin-1 so each character stands for one byte: re-encoding gives
    back the bytes to decode with the declared charset. A str caller that already decoded the
    message (characters above U+00FF) gets its text back unchanged.
    """
    if text.isascii() and lookup_codec(charset) not in _SEVEN_BIT_CODECS:
        return text, True
    try:
        data = text.encode("latin-1")
    except UnicodeEncodeError:
        return text, True
    return decode_bytes(data, charset)
