"""Continuous attributes, discretized or Gaussian: raw mail's own numbers (size, links, share
of HTML, recipients, Received hops) as shape tokens (`size:`, `links:`, `html:`), as Gaussians
per class (`gaussian_attributes`), both, or neither.

    python -m bench.lab.gaussian_attributes [--event-model robinson-fisher] [--limit N]

Each corpus is tokenized twice (with and without the shape tokens) and streamed online, each
message scored and then trained (TREC's protocol, `spamsift evaluate --online`): trec07p-early
in delivery order, spamassassin and csdmc2010 in the fixed shuffle of seed 0, all in the full
view. Prints 1-ROCA % and FNR at FPR <= 0.1 % per corpus and configuration. enron-spam is text
(Subject and body) without a header: it has none of these numbers, so the option changes
nothing there.
"""

from __future__ import annotations

import argparse
import dataclasses
import time

from app.service.evaluation import evaluate_online, tokenize_corpus
from app.service.model_config import ModelConfig
from app.text import core
from bench import data
from bench.lab.token_families_cost import without_shape

STREAMS = (("trec07p-early", None), ("spamassassin", 0), ("csdmc2010", 0))
CONFIGURATIONS = (
    ("shape tokens (today)", True, False),
    ("shape tokens + Gaussian", True, True),
    ("Gaussian, no shape tokens", False, True),
    ("neither", False, False),
)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--event-model", default="robinson-fisher")
    parser.add_argument("--limit", type=int, default=None, help="messages per corpus (spread)")
    parser.add_argument(
        "--corpus", action="append", choices=[name for name, _ in STREAMS], help="only these"
    )
    args = parser.parse_args()
    token_core = core.resolve("auto")
    print(f"event model {args.event_model}; 1-ROCA % / FNR % at FPR <= 0.1 %", flush=True)
    seeds = dict(STREAMS)
    for name in args.corpus or list(seeds):  # in the order given
        seed = seeds[name]
        messages = data.load(name, limit=args.limit)
        with_shape = tokenize_corpus(messages, core=token_core)
        with without_shape():
            no_shape = tokenize_corpus(messages, core=token_core)
        order = "in delivery order" if seed is None else f"shuffled, seed {seed}"
        for label, shape, gaussian in CONFIGURATIONS:
            config = ModelConfig(
                event_model=args.event_model, gaussian_attributes=gaussian
            ).to_engine()
            examples = with_shape if shape else no_shape
            started = time.process_time()
            report = evaluate_online(
                examples,
                corpus=name,
                config=dataclasses.replace(config),
                shuffle_seed=seed,
            )
            cpu_ms = 1000 * (time.process_time() - started) / len(examples)
            ranking = report.ranking
            low, high = ranking.one_minus_roca_percent_ci95
            print(
                f"{name} ({len(examples)}, {order}) | {label} | "
                f"{ranking.one_minus_roca_percent:.4f} ({low:.4f}-{high:.4f}) | "
                f"{100 * ranking.fnr_at_max_fpr:.2f} | "
                f"FP {report.false_positives} FN {report.false_negatives} "
                f"unsure {report.unsure} | {cpu_ms:.2f} ms CPU/message",
                flush=True,
            )


if __name__ == "__main__":
    main()
