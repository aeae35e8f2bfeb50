"""The textbook naive Bayes models hold through the HTTP API.

With the derived token families off (`word_pairs`, `shape_tokens`) and `stop_words: none`, a
plain `text` is its words alone, so a model trained and asked through /train and /classify is
the textbook one: the 14-day weather table's worked example, and scikit-learn's
`MultinomialNB` and `BernoulliNB` on random texts, to 1e-9.
"""

from __future__ import annotations

import random
from collections import Counter
from typing import Any

import numpy as np
import pytest
from fastapi.testclient import TestClient
from sklearn.naive_bayes import BernoulliNB, MultinomialNB

from app.text import tokenize_text
from tests.cores import TOKEN_CORE

WORDS_ALONE = {"word_pairs": False, "shape_tokens": False, "stop_words": "none"}

# Quinlan's weather data (Mitchell, Machine Learning, table 3.2): outlook, temperature,
# humidity, windy -> play. Each value is a word of its own, and no value is shared by two
# attributes, so a row is the text of its four values. (An attribute's name joined to its
# value by "_" would be two words: the tokenizer takes runs of letters and digits.)
WEATHER = [
    ("sunny hot high false", "no"),
    ("sunny hot high true", "no"),
    ("overcast hot high false", "yes"),
    ("rainy mild high false", "yes"),
    ("rainy cool normal false", "yes"),
    ("rainy cool normal true", "no"),
    ("overcast cool normal true", "yes"),
    ("sunny mild high false", "no"),
    ("sunny cool normal false", "yes"),
    ("rainy mild normal false", "yes"),
    ("sunny mild normal true", "yes"),
    ("overcast mild high true", "yes"),
    ("overcast hot normal false", "yes"),
    ("rainy mild high true", "no"),
]


def create(client: TestClient, name: str, **options: Any) -> None:
    response = client.post("/v1/models", json={"name": name, **WORDS_ALONE, **options})
    assert response.status_code == 201, response.text


def train(client: TestClient, name: str, examples: list[tuple[str, str]]) -> None:
    items = [
        {"text": text, "label": label, "message_id": f"m{index}"}
        for index, (text, label) in enumerate(examples)
    ]
    response = client.post(f"/v1/models/{name}/train/batch", json={"items": items})
    assert response.status_code == 200, response.text


def probabilities(client: TestClient, name: str, texts: list[str]) -> list[dict[str, float]]:
    response = client.post(
        f"/v1/models/{name}/classify/batch", json={"items": [{"text": text} for text in texts]}
    )
    assert response.status_code == 200, response.text
    return [result["probabilities"] for result in response.json()["results"]]


def test_a_weather_row_is_its_four_values_and_nothing_else() -> None:
    families_off = frozenset[Any]()
    for text, _ in WEATHER:
        tokens = tokenize_text(text, core=TOKEN_CORE, families=families_off).token_counts
        assert tokens == dict.fromkeys(text.split(), 1)


def test_the_weather_tables_worked_example_through_the_api(client: TestClient) -> None:
    # Multinomial with alpha -> 0 on rows of one value per attribute is the categorical naive
    # Bayes of the textbook: every row has four tokens, so P(value | class) is the textbook's
    # divided by 4 in both classes, which cancels.
    # P(no) P(sunny|no) P(cool|no) P(high|no) P(true|no) = 5/14 * 3/5 * 1/5 * 4/5 * 3/5
    # P(yes) ... = 9/14 * 2/9 * 3/9 * 3/9 * 3/9, so P(no | x) = 486/611 = 0.7954.
    create(client, "weather", classes=["no", "yes"], event_model="multinomial", alpha=1e-12)
    train(client, "weather", WEATHER)

    [answer] = probabilities(client, "weather", ["sunny cool high true"])

    assert answer["no"] == pytest.approx(486 / 611, rel=1e-9)
    assert answer["yes"] == pytest.approx(125 / 611, rel=1e-9)


def random_corpus(seed: int) -> tuple[list[tuple[str, str]], list[str]]:
    """Training texts (two classes with different word use) and texts to score, some with
    words no training text has."""
    generator = random.Random(seed)
    letters = "abcdefghijklmnopqrstuvwxyz"
    vocabulary = sorted(
        {"".join(generator.choices(letters, k=generator.randint(3, 9))) for _ in range(60)}
    )
    unseen = ["zzqxunseen", "qqvunknown"]
    weights = {
        "ham": [generator.random() ** 2 for _ in vocabulary],
        "spam": [generator.random() ** 2 for _ in vocabulary],
    }

    def text(label: str, length: int) -> str:
        return " ".join(generator.choices(vocabulary, weights[label], k=length))

    training = [
        (text(label, generator.randint(3, 20)), label)
        for label in generator.choices(["ham", "spam"], [3, 2], k=40)
    ]
    queries = [text(generator.choice(["ham", "spam"]), generator.randint(1, 12)) for _ in range(15)]
    queries += [f"{queries[0]} {unseen[0]}", unseen[1]]
    return training, queries


def count_matrix(texts: list[str], columns: list[str]) -> np.ndarray:
    index = {word: column for column, word in enumerate(columns)}
    matrix = np.zeros((len(texts), len(columns)))
    for row, text in enumerate(texts):
        for word, count in Counter(text.split()).items():
            if word in index:  # a word no training text has is outside V: ignored
                matrix[row, index[word]] = count
    return matrix


@pytest.mark.parametrize(
    ("event_model", "reference"), [("multinomial", MultinomialNB), ("bernoulli", BernoulliNB)]
)
@pytest.mark.parametrize(("seed", "alpha"), [(1, 1.0), (2, 0.25), (3, 1e-3)])
def test_the_api_equals_scikit_learn_on_random_texts(
    client: TestClient, event_model: str, reference: Any, seed: int, alpha: float
) -> None:
    training, queries = random_corpus(seed)
    create(client, "random", event_model=event_model, alpha=alpha)
    train(client, "random", training)
    answers = probabilities(client, "random", queries)

    columns = sorted({word for text, _ in training for word in text.split()})
    fitted = reference(alpha=alpha).fit(
        count_matrix([text for text, _ in training], columns), [label for _, label in training]
    )
    expected = fitted.predict_proba(count_matrix(queries, columns))

    for answer, row in zip(answers, expected, strict=True):
        for class_index, label in enumerate(fitted.classes_):
            assert answer[label] == pytest.approx(row[class_index], rel=1e-9, abs=1e-300)
