from typing import get_args

from app.bayes.naive_bayes import reads
from app.bayes.scorers import EVENT_MODELS, SCORERS, EventModel, Reads, fallback
from tests.bayes.engine_config import engine_config


def test_the_registry_names_each_scorer_by_its_own_name_and_types_the_option():
    assert [scorer.name for scorer in SCORERS.values()] == list(SCORERS) == list(EVENT_MODELS)
    assert get_args(EventModel) == EVENT_MODELS


def test_a_model_of_other_classes_falls_back_to_the_first_scorer_that_fits():
    classes = ("news", "ham", "spam")
    fitting = [name for name, scorer in SCORERS.items() if scorer.unfit_reason(classes) is None]
    assert fallback(classes) == fitting[0]
    assert all(scorer.unfit_reason(("ham", "spam")) is None for scorer in SCORERS.values())


def test_a_max_vocab_cut_reads_the_whole_table_whatever_the_scorer():
    for name, scorer in SCORERS.items():
        assert reads(engine_config(event_model=name)) is scorer.reads
        assert reads(engine_config(event_model=name, max_vocab=10)) is Reads.WHOLE_TABLE
