"""The header fields a classified message is marked with, for the milter and for
`spamsift classify --add-header` alike.

Beside spamsift's own (`X-Spamsift-Verdict`, `X-Spamsift-Probability`), the three that
SpamAssassin writes and mail software already reads: Sieve rules (`header :is "X-Spam-Flag"
"YES"`), Thunderbird's "trust junk mail headers set by SpamAssassin" (`X-Spam-Status: Yes`),
Roundcube's markasjunk and procmail recipes (`X-Spam-Level: *****`).

The score is P(spam) x 10 and `required` the model's spam threshold x 10, so "Yes" means the
verdict spam exactly: never for `unsure`, whatever the score.
"""

from __future__ import annotations

from dataclasses import dataclass

from app.config import Settings
from app.service.classification import Classification, classify
from app.service.messages import Message
from app.service.model_config import ModelConfig, parse_config
from app.service.runtime import Runtime

VERDICT_HEADER = "X-Spamsift-Verdict"
PROBABILITY_HEADER = "X-Spamsift-Probability"
# On mail that passed without a verdict (fail open), with the reason.
NOT_SCANNED_HEADER = "X-Spamsift-Scanned"
OWN_HEADER_NAMES = (VERDICT_HEADER, PROBABILITY_HEADER, NOT_SCANNED_HEADER)
# A model's default, where the caller does not know the model's own.
DEFAULT_SPAM_THRESHOLD: float = ModelConfig.model_fields["spam_threshold"].default


@dataclass(frozen=True)
class SpamHeaderNames:
    """The SpamAssassin-style fields' names; an empty name leaves that field out."""

    # The defaults are the settings' (SPAMSIFT_SPAM_*_HEADER), declared there once.
    flag: str = Settings.model_fields["spam_flag_header"].default
    status: str = Settings.model_fields["spam_status_header"].default
    level: str = Settings.model_fields["spam_level_header"].default

    @classmethod
    def of(cls, settings: Settings) -> SpamHeaderNames:
        return cls(
            flag=settings.spam_flag_header,
            status=settings.spam_status_header,
            level=settings.spam_level_header,
        )

    def all(self) -> list[str]:
        """The names given (not left empty)."""
        return [name for name in (self.flag, self.status, self.level) if name]


def verdict_headers(
    *,
    verdict: str,
    probability: float | None,
    spam_threshold: float = DEFAULT_SPAM_THRESHOLD,
    names: SpamHeaderNames = SpamHeaderNames(),
) -> list[tuple[str, str]]:
    """Return the (name, value) fields to add to a message classified as `verdict` with
    `probability` (P(spam) for a ham/spam model).

    The X-Spam-* fields speak of spam: they are left out for a verdict that is none of spam,
    ham and unsure, or without a probability.
    """
    fields = [(VERDICT_HEADER, verdict)]
    if probability is not None:
        fields.append((PROBABILITY_HEADER, f"{probability:.6f}"))
    if probability is None or verdict not in ("spam", "ham", "unsure"):
        return fields
    is_spam = verdict == "spam"
    score = round(10 * probability, 1)  # the stars count what the status shows
    if names.flag and is_spam:
        fields.append((names.flag, "YES"))
    if names.status:
        fields.append(
            (
                names.status,
                f"{'Yes' if is_spam else 'No'}, score={score:.1f} "
                f"required={10 * spam_threshold:.1f} tests=SPAMSIFT_{verdict.upper()}",
            )
        )
    if names.level:
        fields.append((names.level, "*" * int(score)))
    return fields


def not_scanned_headers(reason: str) -> list[tuple[str, str]]:
    """The mark of a message passed on without a verdict (fail open)."""
    return [(NOT_SCANNED_HEADER, f"no ({reason})")]


@dataclass(frozen=True)
class MailVerdict:
    """A message classified for a mail server: the result and the fields to mark it with."""

    classification: Classification
    headers: list[tuple[str, str]]


def classify_mail(
    rt: Runtime, *, model_name: str, raw: bytes, names: SpamHeaderNames
) -> MailVerdict:
    """Classify raw mail with `model_name` and build its header fields (the milter's call)."""
    result = classify(rt, model_name=model_name, message=Message(raw=raw))
    live = rt.models.get(model_name)
    threshold = parse_config(live.options, classes=live.classes).spam_threshold
    probability = result.spam_probability
    if probability is None:
        probability = result.probabilities.get(result.verdict)
    return MailVerdict(
        classification=result,
        headers=verdict_headers(
            verdict=result.verdict,
            probability=probability,
            spam_threshold=threshold,
            names=names,
        ),
    )
