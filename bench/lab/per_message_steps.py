"""Per-message steps before and after: `python -m bench.lab.per_message_steps [runs]`.

CPU milliseconds, in one process, over the SpamAssassin test split and the first 1,500
messages of trec07p-early's (raw mail as it arrives), each step the way it was before
(the code below, as it stood at 46203af) against the way it is now; the variants take turns
run by run, medians of `runs` (default 5):

- the HTML link search per HTML part: one case-blind pattern after `\\b` (`html._LINK`,
  still the fallback) against the search in the lowered document;
- `parse_message` and the whole tokenizing (`hash_raw`) per message, now only; and, where
  Cython and a C compiler are at hand, `mime.py` and `html.py` as they are today compiled by
  Cython into a throw-away extension: what porting the parse to C as it is would buy;
- raw mail's own numbers (`mail_features`) per message: every header field split out, and
  a whole-message search for a CRLF empty line, against the fields counted in place;
- the evidence floor (`evidence_count`) per message: numpy per prefix over the texts made
  into an array (made afresh each run, as for each message trained), against the compiled
  counter's UTF-8 read in C;
- `normalize_text` per non-ASCII text part: the invisible characters looked for twice,
  against again only where NFKC changed the text;
- a batch's distinct tokens (`HashedTexts.distinct`, 500 SpamAssassin training messages) per
  batch: `np.unique` and every token compared, against the repeats only.
"""

from __future__ import annotations

import importlib.util
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import unicodedata
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from app.text import core, hash_raw, html, mime, words
from app.text.families import DERIVED_PREFIXES
from app.text.features import mail_features
from app.text.limits import TokenizerLimits
from app.text.tokenize import evidence_count
from app.token_texts import HashedTexts
from bench import data
from tests.text.features_oracle import mail_features_before

LIMITS = TokenizerLimits()

# -- the steps as they were (46203af; the features: tests.text.features_oracle) ---------------


def evidence_before(tokens: Any) -> int:
    return len(tokens) - int(np.count_nonzero(tokens.encoded().starting_with(DERIVED_PREFIXES)))


def normalize_before(text: str) -> str:
    text = words._INVISIBLE.sub("", text)
    text = unicodedata.normalize("NFKC", text)
    return words._INVISIBLE.sub("", text).casefold()


def distinct_before(tokens: HashedTexts) -> tuple[HashedTexts, Any]:
    _, first, inverse = np.unique(tokens.hashes, return_index=True, return_inverse=True)
    order = np.argsort(first)
    rank = np.empty_like(order)
    rank[order] = np.arange(order.size)
    firsts, inverse = first[order], rank[inverse.reshape(-1)]
    if not tokens.texts.equal_to(tokens.texts.take(firsts[inverse])).all():
        raise AssertionError("no collision expected among these tokens")
    return tokens.take(firsts), inverse


# -- the measurement ----------------------------------------------------------------------


def compiled_as_is(folder: Path) -> Callable[..., Any] | None:
    """`mime.parse_message` from today's mime.py and html.py compiled by Cython as they are,
    None without Cython or a compiler."""
    if shutil.which("cythonize") is None:
        return None
    for name in ("mime", "html"):
        source = Path(mime.__file__).with_name(f"{name}.py").read_text()
        source = source.replace("from app.text.html import", "from html_as_is import")
        (folder / f"{name}_as_is.py").write_text(source)
    built = subprocess.run(
        ["cythonize", "-i", "-3", "mime_as_is.py", "html_as_is.py"],
        cwd=folder,
        capture_output=True,
        check=False,
    )
    if built.returncode != 0:
        return None
    sys.path.insert(0, str(folder))
    spec = importlib.util.find_spec("mime_as_is")
    if spec is None or not str(spec.origin).endswith(".so"):
        return None
    return importlib.import_module("mime_as_is").parse_message  # type: ignore[no-any-return]


def main() -> None:
    runs = int(sys.argv[1]) if len(sys.argv) > 1 else 5
    compiled = core.COMPILED
    if compiled is None:
        raise SystemExit("the compiled token core is not built: this compares its steps")
    raws = [m.raw or b"" for m in data.split("spamassassin").test]
    raws += [m.raw or b"" for m in data.split("trec07p-early").test[:1500]]
    documents: list[str] = []
    non_ascii: list[str] = []
    for raw in raws:
        parsed = mime.parse_message(raw, limits=LIMITS, core=compiled)
        non_ascii += [text for text in parsed.texts if not text.isascii()]
    original = html.html_to_text

    def keep(document: str) -> html.HtmlText:
        documents.append(html._drop_hidden(document)[0])
        return original(document)

    mime.html_to_text = keep  # type: ignore[attr-defined]
    try:
        for raw in raws:
            mime.parse_message(raw, limits=LIMITS, core=compiled)
    finally:
        mime.html_to_text = original  # type: ignore[attr-defined]
    hashed = [hash_raw(raw, core=compiled) for raw in raws]
    training = data.split("spamassassin").train[:500]
    batch = HashedTexts.concatenate(
        [hash_raw(m.raw or b"", core=compiled).hashed_texts() for m in training]
    )
    scan = LIMITS.max_scan_bytes
    if [html._LINK.findall(d) for d in documents] != [html._link_targets(d) for d in documents]:
        raise AssertionError("the link searches differ")
    if any(
        mail_features_before(r, max_scan_bytes=scan) != mail_features(r, max_scan_bytes=scan)
        for r in raws
    ):
        raise AssertionError("the mail features differ")

    def each(function: Callable[[Any], object], items: Sequence[Any]) -> Callable[[], None]:
        def run() -> None:
            for item in items:
                function(item)

        return run

    def evidence(function: Callable[[Any], int]) -> Callable[[], None]:
        def run() -> None:
            for tokens in hashed:
                tokens._encoded = None  # each run reads a message's tokens afresh, as training
                function(tokens)

        return run

    with tempfile.TemporaryDirectory() as folder:
        as_is = compiled_as_is(Path(folder))
        steps: dict[str, tuple[int, Callable[[], None]]] = {
            "link search, before (per HTML part)": (
                len(documents),
                each(html._LINK.findall, documents),
            ),
            "link search, now (per HTML part)": (
                len(documents),
                each(html._link_targets, documents),
            ),
            "parse_message, now": (
                len(raws),
                each(lambda r: mime.parse_message(r, limits=LIMITS, core=compiled), raws),
            ),
            "tokenizing (hash_raw), now": (
                len(raws),
                each(lambda r: hash_raw(r, core=compiled), raws),
            ),
            "mail_features, before": (
                len(raws),
                each(lambda r: mail_features_before(r, max_scan_bytes=scan), raws),
            ),
            "mail_features, now": (
                len(raws),
                each(lambda r: mail_features(r, max_scan_bytes=scan), raws),
            ),
            "normalize_text, before (per non-ASCII part)": (
                len(non_ascii),
                each(normalize_before, non_ascii),
            ),
            "normalize_text, now (per non-ASCII part)": (
                len(non_ascii),
                each(words.normalize_text, non_ascii),
            ),
            "distinct of a 500-message batch, before (per batch)": (
                1,
                each(distinct_before, [batch]),
            ),
            "distinct of a 500-message batch, now (per batch)": (
                1,
                each(HashedTexts.distinct, [batch]),
            ),
        }
        steps["evidence_count, before"] = (len(hashed), evidence(evidence_before))
        steps["evidence_count, now"] = (
            len(hashed),
            evidence(lambda tokens: evidence_count(tokens, core=compiled)),
        )
        if as_is is not None:
            steps["parse_message, mime.py and html.py compiled by Cython as they are"] = (
                len(raws),
                each(lambda r: as_is(r, limits=LIMITS, core=compiled), raws),
            )
        cpu: dict[str, list[float]] = {name: [] for name in steps}
        for _ in range(runs):
            for name, (count, run) in steps.items():
                started = time.process_time()
                run()
                cpu[name].append((time.process_time() - started) / count * 1000)
    print(
        f"{len(raws)} messages ({len(documents)} HTML parts, {len(non_ascii)} non-ASCII text "
        f"parts, a batch of {len(batch)} tokens); CPU ms, median of {runs} (min-max)"
    )
    if as_is is None:
        print("(no Cython or no C compiler: the parse compiled as it is was not measured)")
    print("| step | ms (min-max) |")
    print("|---|---|")
    for name, values in cpu.items():
        print(f"| {name} | {statistics.median(values):.4f} ({min(values):.4f}-{max(values):.4f}) |")


if __name__ == "__main__":
    main()
