"""The dashboard's stats: token figures ranked once per model generation, from a copy of the
arrays, equal to ranking the held table itself."""

from __future__ import annotations

from app.bayes.naive_bayes import top_tokens
from app.bayes.vocabulary import select_vocabulary
from app.service.dashboard import TOP_TOKENS, model_stats
from app.service.messages import Message
from app.service.runtime import Runtime
from app.service.training import train
from tests.builders import spam_text, train_examples


def test_token_figures_are_ranked_once_per_generation_and_equal_the_tables_own(
    runtime: Runtime,
) -> None:
    train_examples(runtime, 5, 5)
    first = model_stats(runtime, model_name="default")
    kept = runtime.stats.token_figures(runtime.models.get("default"), limit=TOP_TOKENS)
    again = model_stats(runtime, model_name="default")  # the range switch, another page
    assert runtime.stats.token_figures(runtime.models.get("default"), limit=TOP_TOKENS) is kept

    train(runtime, model_name="default", label="spam", message=Message(text=spam_text(77)))
    after = model_stats(runtime, model_name="default")
    live = runtime.models.get("default")
    ranked = runtime.stats.token_figures(live, limit=TOP_TOKENS)

    assert {**first, "database": None} == {**again, "database": None}  # but when read
    assert ranked is not kept
    assert after["generation"] == first["generation"] + 1
    assert ranked.generation == after["generation"]
    expected = top_tokens(live.table, live.config, limit=TOP_TOKENS)
    assert after["top_tokens"] == {
        label: [{"token": token, "weight": round(weight, 4)} for token, weight in tokens]
        for label, tokens in expected.items()
    }
    mask = select_vocabulary(
        live.table,
        min_df=live.config.min_df,
        max_vocab=live.config.max_vocab,
        stop_words=live.config.stop_words,
    )
    assert after["vocabulary"]["effective"] == int(mask.sum())
