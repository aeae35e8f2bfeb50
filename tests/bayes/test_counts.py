"""CountTable: batch equals incremental, train then forget, ids placed by the database."""

from __future__ import annotations

import numpy as np
import pytest
import scipy.sparse
from hypothesis import given, settings
from hypothesis import strategies as st

from app.bayes.counts import CountTable
from app.bayes.tokens import TokenIndex, token_hashes
from app.text import hash_raw
from tests.bayes.examples import corpus_messages, random_counts, rows_of
from tests.cores import TOKEN_CORE


def assert_same_counts(table: CountTable, other: CountTable) -> None:
    assert table.classes == other.classes
    assert list(table.tokens) == list(other.tokens)
    np.testing.assert_array_equal(table.token_docs, other.token_docs)
    np.testing.assert_array_equal(table.token_terms, other.token_terms)
    np.testing.assert_array_equal(table.class_docs, other.class_docs)
    np.testing.assert_array_equal(table.class_terms, other.class_terms)


def trained_one_by_one(X, labels, classes) -> CountTable:
    table = CountTable(classes)
    table.place(np.arange(X.shape[1]), CountTable.from_matrix(X, labels, classes).tokens)
    for (token_ids, terms), label in zip(rows_of(X), labels, strict=True):
        table.add(int(label), token_ids, terms)
    return table


@pytest.mark.parametrize("n_classes", [2, 3, 5])
def test_training_messages_one_by_one_gives_the_counts_of_from_matrix(n_classes):
    X, labels = random_counts(seed=n_classes, n_classes=n_classes)
    classes = [f"c{i}" for i in range(n_classes)]
    batch = CountTable.from_matrix(X, labels, classes)
    assert_same_counts(trained_one_by_one(X, labels, classes), batch)
    np.testing.assert_array_equal(batch.class_docs, np.bincount(labels, minlength=n_classes))
    np.testing.assert_array_equal(batch.token_docs[0], (X[labels == 0] > 0).sum(axis=0))


def test_from_matrix_accepts_labels_by_name():
    X, labels = random_counts(seed=4)
    names = np.array(["ham", "spam"])[labels]
    by_name = CountTable.from_matrix(X, names, ["ham", "spam"])
    assert_same_counts(by_name, CountTable.from_matrix(X, labels, ["ham", "spam"]))


def test_training_then_forgetting_restores_the_counts_exactly():
    X, labels = random_counts(seed=5)
    table = CountTable.from_matrix(X, labels, ["ham", "spam"])
    before = table.copy()
    extra, _ = random_counts(seed=6, n_messages=10)
    for token_ids, terms in rows_of(extra):
        table.add(1, token_ids, terms)
    for token_ids, terms in reversed(rows_of(extra)):
        table.add(1, token_ids, terms, sign=-1)
    assert_same_counts(table, before)


def test_forgetting_a_message_never_trained_raises_and_changes_nothing():
    table = CountTable(["ham", "spam"])
    ids = table.intern(["cheap", "pills", "now"])
    table.add(1, ids[:2], [1, 3])
    before, generation = table.copy(), table.generation
    with pytest.raises(ValueError, match="negative"):
        table.add(1, ids, [1, 1, 1], sign=-1)  # "now" was never trained
    with pytest.raises(ValueError, match="negative"):
        table.add(1, ids[:2], [1, 4], sign=-1)  # more "pills" than trained
    with pytest.raises(ValueError, match="negative"):
        table.add(0, ids[:1], [1], sign=-1)  # no ham at all
    assert_same_counts(table, before)
    assert table.generation == generation


@settings(max_examples=40, deadline=None)
@given(
    st.lists(
        st.tuples(
            st.integers(0, 2),
            st.dictionaries(st.integers(0, 15), st.integers(1, 5), min_size=1, max_size=8),
        ),
        max_size=25,
    ),
    st.data(),
)
def test_forgetting_any_trained_subset_equals_never_training_it(messages, data):
    forget = data.draw(st.lists(st.booleans(), min_size=len(messages), max_size=len(messages)))
    table, expected = CountTable(["a", "b", "c"]), CountTable(["a", "b", "c"])
    for current in (table, expected):
        current.place(np.arange(16), [f"w{i}" for i in range(16)])
    for (label, counts), forgotten in zip(messages, forget, strict=True):
        table.add(label, list(counts), list(counts.values()))
        if not forgotten:
            expected.add(label, list(counts), list(counts.values()))
    for (label, counts), forgotten in zip(messages, forget, strict=True):
        if forgotten:
            table.add(label, list(counts), list(counts.values()), sign=-1)
    assert_same_counts(table, expected)
    assert (table.token_docs >= 0).all()


def test_a_message_must_list_each_token_once_with_positive_terms():
    table = CountTable(["ham", "spam"])
    ids = table.intern(["a", "b"])
    with pytest.raises(ValueError, match="unique"):
        table.add(0, [ids[0], ids[0]], [1, 1])
    with pytest.raises(ValueError, match=">= 1"):
        table.add(0, ids, [1, 0])
    with pytest.raises(ValueError, match="token ids"):
        table.add(0, [5], [1])
    with pytest.raises(ValueError, match="sign"):
        table.add(0, ids, [1, 1], sign=2)


def test_ids_placed_out_of_order_leave_unnamed_gaps_until_filled():
    table = CountTable(["ham", "spam"])
    table.place(np.array([7, 2]), ["seven", "two"])
    assert table.n_tokens == 8
    assert table.tokens[2] == "two"
    assert table.tokens[7] == "seven"
    assert table.tokens[0] == ""
    np.testing.assert_array_equal(table.lookup(["two", "seven", "zero"]), [2, 7, -1])
    table.place(np.array([0, 2]), ["zero", "two"])  # placing a known pair again is a no-op
    assert table.lookup(["zero"])[0] == 0
    with pytest.raises(ValueError, match="id 2"):
        table.place(np.array([2]), ["other"])
    with pytest.raises(ValueError, match="has id 7"):
        table.place(np.array([3]), ["seven"])


def test_capacity_grows_by_doubling_for_many_tokens():
    table = CountTable(["ham", "spam"])
    capacities = set()
    for start in range(0, 5000, 100):
        table.place(np.arange(start, start + 100), [f"t{i}" for i in range(start, start + 100)])
        capacities.add(table._docs.shape[1])
    assert table.n_tokens == 5000
    assert len(capacities) <= 8  # 64 → 128 → … → 8192: log2 many reallocations
    assert table.token_docs.shape == (2, 5000)


def test_interning_assigns_dense_ids_in_order_of_first_sight():
    table = CountTable(["ham", "spam"])
    np.testing.assert_array_equal(table.intern(["b", "a", "b"]), [0, 1, 0])
    np.testing.assert_array_equal(table.intern(["c", "a"]), [2, 1])
    assert list(table.tokens) == ["b", "a", "c"]


def test_set_counts_sets_absolute_cells_and_grows_the_table():
    table = CountTable(["ham", "spam"])
    table.set_counts([3, 3, 1, 3], [0, 1, 1, 0], [2, 5, 1, 4], [6, 9, 1, 8])
    assert table.n_tokens == 4
    np.testing.assert_array_equal(table.token_docs, [[0, 0, 0, 4], [0, 1, 0, 5]])
    np.testing.assert_array_equal(table.token_terms, [[0, 0, 0, 8], [0, 1, 0, 9]])
    table.set_class_totals([10, 7], [100, 70])
    np.testing.assert_array_equal(table.class_docs, [10, 7])
    np.testing.assert_array_equal(table.class_terms, [100, 70])
    with pytest.raises(ValueError, match=">= 0"):
        table.set_counts([0], [0], [-1], [0])


def test_vectorize_counts_known_tokens_and_drops_unknown_ones():
    table = CountTable(["ham", "spam"])
    table.intern(["a", "b", "c"])
    X = table.vectorize([{"c": 2, "a": 1, "zzz": 4}, {}, {"b": 3}])
    assert isinstance(X, scipy.sparse.csr_array)
    np.testing.assert_array_equal(X.toarray(), [[1, 0, 2], [0, 0, 0], [0, 3, 0]])


def hashed_rows(messages, hash_of=token_hashes):
    return [
        (hash_of(list(message)), np.fromiter(message.values(), np.int64, len(message)))
        for message in messages
    ]


def texts_of(messages):
    return lambda row: list(messages[row])


def assert_same_matrix(X, Y):
    assert X.shape == Y.shape
    for matrix in (X, Y):  # each row's ids in order (repeated only where weak hashes collide)
        for row in range(matrix.shape[0]):
            ids = matrix.indices[matrix.indptr[row] : matrix.indptr[row + 1]]
            assert (np.diff(ids) >= 0).all(), f"row {row}: ids {ids.tolist()} out of order"
    np.testing.assert_array_equal(X.indptr, Y.indptr)
    np.testing.assert_array_equal(X.indices, Y.indices)
    np.testing.assert_array_equal(X.data, Y.data)


def test_vectorize_by_hash_counts_known_tokens_and_drops_unknown_ones():
    table = CountTable(["ham", "spam"])
    table.intern(["a", "b", "c"])
    messages = [{"c": 2, "a": 1, "zzz": 4}, {}, {"b": 3, "a": 0}]

    X = table.vectorize_hashed(hashed_rows(messages), texts_of(messages))

    assert isinstance(X, scipy.sparse.csr_array)
    np.testing.assert_array_equal(X.toarray(), [[1, 0, 2], [0, 0, 0], [0, 3, 0]])
    assert_same_matrix(X, table.vectorize(messages))
    assert table.vectorize_hashed([], texts_of([])).shape == (0, 3)
    with pytest.raises(ValueError, match="one count per hash"):
        table.vectorize_hashed([(token_hashes(["a"]), np.zeros(2, np.int64))], texts_of([{}]))


def weak_hashes(texts):
    return np.array([len(text) % 3 for text in texts], dtype=np.int64)


@settings(max_examples=80, deadline=None)
@given(
    known=st.lists(st.text(min_size=1, max_size=3), max_size=30, unique=True),
    messages=st.lists(
        st.dictionaries(st.text(min_size=1, max_size=3), st.integers(-1, 5), max_size=12),
        max_size=8,
    ),
    weak=st.booleans(),
)
def test_vectorize_by_hash_equals_vectorize_by_text(known, messages, weak):
    table = CountTable(["ham", "spam", "other"])
    hash_of = token_hashes
    if weak:  # most tokens share a hash with another: told apart by their texts
        table.tokens = TokenIndex(hash_function=lambda text: len(text) % 3)
        hash_of = weak_hashes
    table.intern(known[: len(known) // 2])
    table.place(np.arange(len(known) // 2 + 3, len(known) + 3), known[len(known) // 2 :])

    X = table.vectorize_hashed(hashed_rows(messages, hash_of), texts_of(messages))

    assert_same_matrix(X, table.vectorize(messages))


def test_vectorize_by_the_tokenizers_hashes_equals_vectorize_on_a_real_corpus():
    messages = [
        hash_raw(text, core=TOKEN_CORE) for _, text in corpus_messages("spamassassin")[::10]
    ]
    training, probe = messages[::2], messages[1::2]
    table = CountTable(["ham", "spam"])
    for index, message in enumerate(training):
        table.add(index % 2, table.intern(list(message.token_counts)), message.counts)

    X = table.vectorize_hashed(
        [(message.hashes, message.counts) for message in probe], no_texts_asked
    )

    assert_same_matrix(X, table.vectorize([message.token_counts for message in probe]))
    assert X.nnz > 0.5 * sum(len(message) for message in probe)


def no_texts_asked(row):
    raise AssertionError(f"texts of message {row} asked: no two tokens of the model share a hash")


def test_count_views_cannot_be_written_around_the_journal():
    table = CountTable(["ham", "spam"])
    table.intern(["a"])
    with pytest.raises(ValueError, match="read-only"):
        table.token_docs[0, 0] = 5


def test_changes_since_reports_the_counts_before_the_first_change():
    table = CountTable(["ham", "spam"])
    ids = table.intern(["a", "b", "c"])
    table.add(0, ids[:2], [2, 1])
    start = table.generation
    table.add(1, ids[1:], [1, 1])
    table.add(0, ids[:1], [5])
    changes = table.changes_since(start)
    assert changes is not None
    np.testing.assert_array_equal(changes.token_ids, [0, 1, 2])
    np.testing.assert_array_equal(changes.old_docs, [[1, 1, 0], [0, 0, 0]])
    np.testing.assert_array_equal(changes.old_terms, [[2, 1, 0], [0, 0, 0]])
    assert table.changes_since(table.generation).token_ids.size == 0


def test_a_bulk_load_tells_consumers_to_rebuild():
    table = CountTable(["ham", "spam"])
    table.intern(["a"])
    start = table.generation
    n = 70_000  # more ids than the journal keeps
    table.set_counts(np.arange(n), np.zeros(n, np.int64), np.ones(n, np.int64), np.ones(n))
    assert table.changes_since(start) is None
    assert table.changes_since(table.generation) is not None


def test_a_dropped_journal_holds_nothing_and_tells_earlier_consumers_to_rebuild():
    table = CountTable(["ham", "spam"])
    table.reserve(100)
    assert table.capacity == 100
    ids = table.intern(["a", "b"])
    start = table.generation
    table.add(0, ids, [1, 1])
    table.drop_journal()
    assert table._journal == []  # the old counts it kept are gone
    assert table.changes_since(start) is None
    table.add(1, ids[:1], [1])
    changes = table.changes_since(start + 1)
    assert changes is not None
    np.testing.assert_array_equal(changes.token_ids, [0])


def test_classes_must_be_two_or_more_distinct_names():
    with pytest.raises(ValueError, match="at least 2"):
        CountTable(["spam"])
    with pytest.raises(ValueError, match="distinct"):
        CountTable(["spam", "spam"])


def test_counts_beyond_int32_widen_the_arrays_and_stay_exact():
    big = 2**31 - 1
    table = CountTable(["ham", "spam"])
    table.place(np.arange(3), ["a", "b", "c"])
    table.set_counts([0, 1], [0, 1], [big, 5], [big, 7])
    assert table.token_docs.dtype == np.int32  # int32 holds the largest value

    table.add(0, [0, 2], [3, 1])  # docs of "a" pass int32's largest value
    table.set_counts([1], [1], [6], [2**40])

    assert table.token_docs.dtype == table.token_terms.dtype == np.int64
    assert table.token_docs[:, :3].tolist() == [[big + 1, 0, 1], [0, 6, 0]]
    assert table.token_terms[:, :3].tolist() == [[big + 3, 0, 1], [0, 2**40, 0]]
    table.add(0, [0, 2], [3, 1], sign=-1)
    assert table.token_docs[0, :3].tolist() == [big, 0, 0]
