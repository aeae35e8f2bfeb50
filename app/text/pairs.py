"""Word pairs: orthogonal sparse bigrams of adjacent content words (window 2).

"pair:cheap pills" is evidence neither word gives alone: the text form of a one-dependence
estimator, each word conditioned on its neighbour (rspamd measured that window 2 keeps most of
the gain of window 5 at a fifth of the storage).

Pairs are taken between the bare words of one text as the word tokenizer emitted them, after
English stop words are skipped: "buy the pills now" gives "pair:buy pills" and "pair:pills
now". Pairs of every adjacent word, stop words included, measured worse at a strict false
positive rate (spamassassin text-only online FNR at FPR <= 0.1 %: 18 % -> 29 %) and cost more
tokens. Prefixed tokens (`url:`, `digits:`, `skip:`, ...) are not words and take no part; the
words either side of a URL, which is cut out of the text before words are taken, become
neighbours, as they read on screen.
"""

from itertools import islice

from app.text.stop_words import load_stop_words

# Skipped before pairing, whatever a model's own stop-word option: the tokenizer's output does
# not depend on a model, so the list is fixed here (the built-in English one).
SKIPPED_WORDS = load_stop_words("english")


def pair_tokens(tokens: list[str], max_token_chars: int) -> list[str]:
    """Return `pair:a b` for each two adjacent content words of `tokens`, in order.

    At most one pair per word, each cut to `max_token_chars` after its prefix, so the output is
    bounded by the input and made in one pass.
    """
    words = [token for token in tokens if token not in SKIPPED_WORDS and ":" not in token]
    return [
        f"pair:{first} {second}"
        if len(first) + len(second) < max_token_chars
        else f"pair:{(first + ' ' + second)[:max_token_chars]}"
        for first, second in zip(words, islice(words, 1, None), strict=False)
    ]
