"""Plain text -> word, URL and e-mail tokens: the normalisation every body and header word gets.

Everything here is compiled regular expressions whose repeats are either bounded or cannot
overlap, so each runs in time linear in its input (ROBUSTNESS I28, I30).
"""

import re
import unicodedata
from itertools import repeat
from operator import add

# Removed before words are cut (ROBUSTNESS I31): C0 controls and NUL (PostgreSQL text columns
# refuse NUL), soft hyphen, zero-width and joiner characters, bidi marks and overrides,
# invisible separators, variation selectors, BOM, tag characters, lone surrogates (they make
# .encode("utf-8") raise), and combining diacritics NFKC could not compose (zalgo text,
# "v\u0335iagra"), so "v\u200biagra" and "vi\u00adagra" read "viagra".
_INVISIBLE = re.compile(
    "[\x00-\x08\x0b\x0c\x0e-\x1f\x7f\u00ad\u034f\u061c\u115f\u1160\u17b4\u17b5\u180b-\u180f"
    "\u200b-\u200f\u202a-\u202e\u2060-\u206f\u3164\ufe00-\ufe0f\ufeff\uffa0\ufff0-\ufff8"
    "\ud800-\udfff\U000e0000-\U000e0fff"
    "\u0300-\u036f\u1ab0-\u1aff\u1dc0-\u1dff\u20d0-\u20ff\ufe20-\ufe2f]+"
)

# Han (with extensions and compatibility ideographs), kana, Hangul: scripts written without
# spaces, cut into overlapping character bigrams. Adding the single characters as well
# measured worse on trec06c text only (RF 1-ROCA 0.029% -> 0.052%, FNR 5.2% -> 8.9%).
_CJK_RUN = re.compile(
    "([\u1100-\u11ff\u3040-\u30ff\u3130-\u318f\u31f0-\u31ff\u3400-\u4dbf\u4e00-\u9fff"
    "\ua960-\ua97f\uac00-\ud7af\ud7b0-\ud7ff\uf900-\ufaff\U00020000-\U0003134f]+)"
)

# Runs of letters and digits (str.isalnum characters), no underscore, keeping a leading
# currency sign ("$100", "\u00a3150"): SMS 1-ROCA (RF s=1) 0.449% -> 0.427%. Keeping inner
# punctuation too ("don't", "3.50", "e-mail") measured worse on SMS (0.447% -> 0.558%).
# A minimum length of 2 or 3 (bogofilter drops words under 3) measured worse on spamassassin
# and SMS RF: one- and two-letter words ("u", "ur", "2") are evidence.
_WORD = re.compile(r"[$\u00a3\u20ac\u00a5]?[^\W_]+")

# Numbers of 4 digits or more also give a shape token, "digits:11" for a phone number: a
# campaign changes its numbers but not their shape. SMS Bernoulli NB FNR at 0 FP
# 8.8% -> 4.1%, multinomial 7.5% -> 4.8%; spamassassin raw RF 1-ROCA 0.019% -> 0.017%.
# The boundary before is checked after the first digit, so the search jumps from digit to digit
# (a leading lookbehind tried every position: 3x slower).
_NUMBER = re.compile(r"[0-9](?<![^\W_][0-9])[0-9]{3,}(?![^\W_])")

# URL up to 2 KiB; its host is what becomes a token. Bounded repeat: linear on "http://a.a.a...".
# Each scheme starts with its letter and then checks the word boundary before it (the same
# as a leading \b): a pattern that starts with a character lets the engine jump to the next
# h, f or w, where a leading \b tried every position (3x faster on the corpora's texts).
# One group around the whole URL, so that `split` keeps the URLs (`cut_urls`).
_URL = re.compile(
    r"((?:h(?<!\wh)ttps?://|f(?<!\wf)tp://|w(?<!\ww)ww\.)[^\s<>\"'`{}|\\^\[\]]{0,2048})"
)
_URL_HOST = re.compile(r"(?:[a-z][a-z0-9+.-]{0,15}:)?/*([^/?#\s]*)")
_HOST_CHARS = re.compile(r"[^a-z0-9.-]")

# "@domain.tld" preceded by an address character ([\w.+-]): the domain of an e-mail address.
# Labels cannot contain the dot between them, so the nested bounded repeats cannot backtrack.
# The pattern starts with "@" so the search jumps from "@" to "@" (a leading lookbehind,
# (?<=[\w.+-])@..., tried every position: 6% of tokenizing); the character before is checked
# after the match.
_AT_DOMAIN = re.compile(r"@([a-z0-9][a-z0-9-]{0,62}(?:\.[a-z0-9-]{1,63}){1,8})")
_ADDRESS_CHARACTER = re.compile(r"[\w.+-]")


def normalize_text(text: str) -> str:
    """Return `text` NFKC-normalised, case-folded, without invisible characters."""
    if not text.isascii():
        text = _INVISIBLE.sub("", text)
        normalized = unicodedata.normalize("NFKC", text)
        if normalized != text:  # NFKC can expose new ones (e.g. from compatibility forms)
            text = _INVISIBLE.sub("", normalized)
    elif "\x00" in text or "\x1b" in text:
        text = _INVISIBLE.sub("", text)
    return text.casefold()


def skip_token(word: str) -> str:
    """Return the bounded stand-in for an over-long word: first character and length bucket.

    As SpamBayes' "skip:" tokens: 10 MB without whitespace gives one token, not a 10 MB row.
    """
    return f"skip:{word[0]} {min(len(word), 1000) // 10 * 10}"


def url_host(url: str, max_token_chars: int) -> str:
    """Return the lower-case host of a URL (no user, no port), cut to its last labels."""
    match = _URL_HOST.match(url)
    host = match.group(1) if match else ""
    host = host.rpartition("@")[2].partition(":")[0].strip(".")
    if _HOST_CHARS.search(host):
        host = _HOST_CHARS.sub("", host)
    while len(host) > max_token_chars and "." in host:
        host = host.partition(".")[2]
    return host[:max_token_chars]


def url_tokens(url: str, max_token_chars: int) -> list[str]:
    """Return `url:host` and `urlpath:word` for the first words of a normalised URL's path.

    Path words (SpamBayes also tokenizes URL pieces) measured on spamassassin text only
    (RF s=0.1, min_dev=0.1): 1-ROCA 0.203% -> 0.122%, FNR at 0 FP 8.5% -> 7.1%; raw mail
    unchanged (0.022%), SMS unchanged.
    """
    host = url_host(url, max_token_chars)
    tokens = [f"url:{host}"] if host else []
    path = url.partition("//")[2].partition("/")[2] if "//" in url else url.partition("/")[2]
    for word in _WORD.findall(path, 0, 2048)[:_MAX_PATH_WORDS]:
        tokens.append(f"urlpath:{word[:max_token_chars]}")
    return tokens


_MAX_PATH_WORDS = 20


# The tokenizer builds lists, not chains of generators: each token used to pass through up to
# five nested generators, which cost more than finding it.
def word_tokens(text: str, max_token_chars: int) -> list[str]:
    """Return the words and CJK bigrams of already normalised text, in order."""
    if text.isascii():
        return _words(text, max_token_chars)
    tokens: list[str] = []
    for index, piece in enumerate(_CJK_RUN.split(text)):
        if index % 2:
            # CJK run: overlapping bigrams, made in C by map(add, ...).
            if len(piece) == 1:
                tokens.append(piece)
            else:
                tokens.extend(map(add, piece, piece[1:]))
        else:
            tokens.extend(_words(piece, max_token_chars))
    return tokens


def _words(piece: str, max_token_chars: int) -> list[str]:
    """Return the words of a piece without CJK runs, then a `digits:N` per long number."""
    if piece.isascii():
        return _ascii_words(piece, max_token_chars)
    words: list[str] = _WORD.findall(piece)
    if not words:
        return words
    if max(map(len, words)) > max_token_chars:
        words = [word if len(word) <= max_token_chars else skip_token(word) for word in words]
    numbers: list[str] = _NUMBER.findall(piece)
    if numbers:
        words.extend([f"digits:{min(len(number), 100)}" for number in numbers])
    return words


# On ASCII text the word characters of _WORD and _NUMBER are exactly [A-Za-z0-9], so words are
# cut by str.translate and str.split, in C: the same tokens as the regular expressions, 2.3x
# faster on the corpora's ASCII texts (regex matching was the tokenizer's largest cost).
_ASCII_WORD_CHARACTERS = str.maketrans(
    {code: chr(code) if chr(code).isalnum() or chr(code) == "$" else " " for code in range(128)}
)


def _ascii_words(piece: str, max_token_chars: int) -> list[str]:
    """`_words` for ASCII text."""
    if "$" in piece:
        # "$100" keeps its sign; a "$" before no letter or digit starts no word.
        spaced = piece.replace("$", " $").translate(_ASCII_WORD_CHARACTERS)
        words = list(filter("$".__ne__, spaced.split()))
        digits = filter(str.isdigit, map(str.lstrip, words, repeat("$")))
    else:
        words = piece.translate(_ASCII_WORD_CHARACTERS).split()
        digits = filter(str.isdigit, words)  # in C: no Python call per word
    numbers = [length for length in map(len, digits) if length >= 4]
    if not words:
        return words
    if max(map(len, words)) > max_token_chars:
        words = [word if len(word) <= max_token_chars else skip_token(word) for word in words]
    if numbers:
        words.extend([f"digits:{min(length, 100)}" for length in numbers])
    return words


def email_domains(text: str) -> list[str]:
    """Return the domains of the e-mail addresses in `text`, in order.

    A domain contains no "@", so skipping a match whose "@" follows no address character
    skips no other "@": the result is that of findall with the lookbehind.
    """
    return [
        match.group(1)
        for match in _AT_DOMAIN.finditer(text)
        if match.start() and _ADDRESS_CHARACTER.match(text, match.start() - 1)
    ]


def cut_urls(text: str) -> tuple[str, list[str]]:
    """Return `text` with each URL replaced by a blank, and the URLs in order."""
    # One scan: split at the URLs (kept by the group) gives the text around them and the
    # URLs in turn, where findall and then sub scanned the text twice.
    pieces = _URL.split(text)
    return " ".join(pieces[::2]), pieces[1::2]


def text_tokens(text: str, max_token_chars: int) -> list[str]:
    """Return the tokens of a normalised text: URL tokens, `email:domain`, then words.

    URLs are cut out before words are taken, so their pieces do not also count as words.
    """
    tokens: list[str] = []
    if "://" in text or "www." in text:
        text, urls = cut_urls(text)
        for url in urls:
            tokens.extend(url_tokens(url, max_token_chars))
    if "@" in text:
        domains = email_domains(text)
        tokens.extend([f"email:{domain[:max_token_chars]}" for domain in domains])
    if not tokens:
        return word_tokens(text, max_token_chars)
    tokens.extend(word_tokens(text, max_token_chars))
    return tokens
