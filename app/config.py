"""Process configuration from SPAMSIFT_* environment variables (and a .env file)."""

from __future__ import annotations

import ipaddress
import re
from typing import Literal

from pydantic import Field, field_validator
from pydantic_settings import BaseSettings, SettingsConfigDict

from app.message_caps import MessageCaps

MIB = 1024 * 1024

# The database drivers spamsift ships; "postgresql://" means psycopg 3 here (SQLAlchemy would
# pick psycopg2, which is not installed).
DATABASE_SCHEMES = {
    "sqlite": "sqlite",
    "sqlite+pysqlite": "sqlite+pysqlite",
    "postgresql": "postgresql+psycopg",
    "postgres": "postgresql+psycopg",
    "postgresql+psycopg": "postgresql+psycopg",
}


# A database URL's scheme and database as SQLAlchemy's make_url reads them (its pattern, the
# rest unnamed), so that settings are checked without loading the database stack; the store
# parses the whole URL when it connects (tests/ops/test_settings.py holds the two equal).
DATABASE_URL = re.compile(
    r"""(?P<scheme>[\w+]+)://
    (?:[^:/]*(?::[^@]*)?@)?
    (?:(?:\[[^/?]+\]|[^/:?]+)?(?::(?P<port>[^/?]*))?)?
    (?:/(?P<database>[^?]*))?""",
    re.X,
)


def check_database_url(url: str) -> str:
    """Return `url` with its scheme made explicit; ValueError for what spamsift cannot use."""
    parsed = DATABASE_URL.match(url)
    if parsed is None or not (parsed["port"] or "0").isdigit():
        raise ValueError(
            "not a database URL; use sqlite:///path/to/spamsift.db or "
            "postgresql+psycopg://user:password@host/database"
        )
    given = parsed["scheme"]
    scheme = DATABASE_SCHEMES.get(given)
    if scheme is None:
        raise ValueError(
            f"unknown database scheme {given!r}; use sqlite:// or postgresql+psycopg://"
        )
    if scheme.startswith("postgresql") and not parsed["database"]:
        raise ValueError("a PostgreSQL URL names its database: postgresql+psycopg://user@host/db")
    return scheme + url[len(given) :]


class Settings(BaseSettings, MessageCaps):
    """Everything a spamsift process is configured with; built once and handed down. The
    caps on one message's tokenizing are MessageCaps' fields (SPAMSIFT_MAX_SCAN_BYTES, ...)."""

    model_config = SettingsConfigDict(env_prefix="SPAMSIFT_", env_file=".env", extra="ignore")

    database_url: str = "sqlite:///./spamsift.db"
    admin_key: str | None = None
    # With no API key, `spamsift serve` on an address beyond loopback refuses to start unless
    # this is true: every endpoint would be open to anyone who reaches the address.
    allow_no_authentication: bool = Field(
        default=False,
        description="serve with no API key on a non-loopback address (every endpoint open)",
    )
    log_level: Literal["debug", "info", "warning", "error"] = "info"
    # json: one JSON object per line (for collectors); text: one readable line (for a terminal).
    log_format: Literal["json", "text"] = "json"

    max_message_bytes: int = Field(default=10 * MIB, gt=0)
    max_request_bytes: int = Field(default=64 * MIB, gt=0)
    max_batch_items: int = Field(default=1000, gt=0)
    # /train (and train/batch, feedback with a message) refuses fewer distinct tokens with 422.
    min_train_tokens: int = Field(default=11, ge=1)
    # Fewest trained messages per class before a verdict is trusted (a model's min_learns
    # overrides it); below it verdicts are "unsure" and answers carry a warning. SpamAssassin
    # (bayes_min_ham_num, bayes_min_spam_num) and rspamd (min_learns) use 200.
    min_learns: int = Field(
        default=200,
        ge=0,
        description="trained messages of each class before verdicts are trusted",
    )
    # Tokenizing time per request; beyond it classify scores what it has ("time_budget"),
    # train refuses with 503 and Retry-After. 0 cuts at once (for tests).
    classify_time_budget_seconds: float = Field(default=2.0, ge=0)
    train_time_budget_seconds: float = Field(default=5.0, ge=0)
    retention_days: float = Field(default=7, ge=0)

    # A request whose body has not fully arrived by then is dropped (slowloris): 408.
    receive_timeout_seconds: float = Field(default=30.0, gt=0)
    trusted_proxies: str = Field(
        default="",
        description="Comma-separated addresses or networks (CIDR) of the reverse proxies in "
        "front of spamsift whose X-Forwarded-For and X-Forwarded-Proto are believed; empty "
        "(the default): none, the client is the address that connected",
    )

    # Connections of `spamsift serve` (app/connections.py), per server process: what an
    # Internet-facing server bounds before any request reaches the app.
    max_connections: int = Field(
        default=4096,
        ge=1,
        description="open connections a server process keeps; beyond, a new one gets 503",
    )
    max_connections_per_client: int = Field(
        default=256,
        ge=1,
        description="open connections from one client address per server process (the "
        "trusted proxies of SPAMSIFT_TRUSTED_PROXIES excepted); beyond, a new one gets 503",
    )
    header_timeout_seconds: float = Field(
        default=10.0,
        gt=0,
        description="a request line and headers must arrive within this time of the connection "
        "(or of their first byte on a kept-alive one); else the connection is closed (408)",
    )
    keep_alive_timeout_seconds: int = Field(
        default=5,
        ge=1,
        description="an idle kept-alive connection is closed after this time",
    )
    max_header_bytes: int = Field(
        default=16 * 1024,
        ge=1024,
        description="request line and header fields, counted as they are read: 431 beyond",
    )
    lingering_close_seconds: float = Field(
        default=30.0,
        ge=0,
        description="after an answer sent before the request body was read (401, 413, 431), "
        "how long what the client still sends is read and thrown away, so that the client "
        "reads the answer instead of a TCP reset (at most 256 MiB; 0: close at once)",
    )

    # How long a write waits for a lock before it gives up with 503 and nothing applied.
    lock_timeout_seconds: float = Field(default=5.0, gt=0)
    # How often a process looks for training committed by other processes (SPEC §7: ≤ 1 s).
    sync_interval_seconds: float = Field(default=0.5, gt=0)
    # Memory a process gives to the models it holds in memory (estimated from their tokens);
    # past it the least recently used are dropped and read again when next used. 0: no limit.
    live_models_max_mb: float = Field(
        default=512,
        ge=0,
        description="memory budget of the models one process holds, in MB (0: no limit)",
    )
    # Token expiry: a model keeps at most this many tokens (least recently seen and least
    # informative deleted first, every 5 minutes by the server and by `spamsift expire`).
    max_tokens_per_model: int = Field(
        default=0,
        ge=0,
        description="tokens a model keeps at most; 0: no maximum (dead tokens still go)",
    )
    # Training ledger retention: a model's ledger keeps the newest N trained messages (pruned
    # in small chunks every 5 minutes by the server and by `spamsift expire`). An older
    # message's training is then permanent: forget answers 404, feedback trains it anew.
    max_ledger_messages_per_model: int = Field(
        default=0,
        ge=0,
        description="trained messages a model's ledger keeps (the newest) so that they can be "
        "forgotten or relabelled; 0: every one",
    )
    # Classification records kept in memory while the database cannot take them, per process
    # (about 3.1 KB each); past it the oldest are dropped, and feedback by their message_id
    # then needs the message itself.
    max_buffered_records: int = Field(
        default=100_000,
        ge=1,
        description="classification records a process buffers while the database is down",
    )

    # --- Tenants: what one API key (one tenant) may cost the others (docs/security.md) ---
    # New tokens one train, batch or feedback request may add to a model; more: 413, nothing
    # written. Where max_tokens_per_model is set, a model's vocabulary is also bounded at
    # write time: that maximum plus as much again, or plus this where it is more (expiry
    # brings it back to the maximum every 5 minutes).
    max_new_tokens_per_request: int = Field(
        default=500_000,
        ge=0,
        description="new tokens one training request may add to a model (0: no bound)",
    )
    # Requests one tenant's API key (limited to models, not admin) may have in progress in one
    # process; more: 429 with Retry-After. Measured (python -m bench.tenants --kinds
    # multinomial,bernoulli, 40 clients of one key): another tenant's classify p99 went 8.7x
    # its unloaded value with 16, 4.7x with 4. Keys for every model are not limited.
    max_requests_per_key: int = Field(
        default=4,
        ge=0,
        description="requests one API key limited to models (not admin) may have in progress "
        "per process (0: no limit)",
    )

    # Classification records (kept retention_days for feedback by message_id) one API key
    # limited to models may have stored per retention period, per process; beyond it its
    # classifications are answered but not recorded. Keys for every model are not limited.
    max_records_per_key: int = Field(
        default=100_000,
        ge=0,
        description="classification records a key limited to models may have kept per "
        "retention period, per process (0: no quota)",
    )

    # Mail servers: the milter (Postfix smtpd_milters, Sendmail INPUT_MAIL_FILTER) that
    # `spamsift serve` runs beside the HTTP API when an address is set.
    milter_address: str = Field(
        default="",
        description="where the milter listens: host:port (127.0.0.1:11332) or unix:/path; "
        "empty (the default): no milter",
    )
    milter_model: str = Field(
        default="default", description="the model the milter classifies with by default"
    )
    milter_recipient_models: str = Field(
        default="",
        description="comma-separated recipient=model entries: an address "
        "(bob@example.org=bob) or a domain (@example.org=example-org); the address wins",
    )
    milter_model_per_recipient: bool = Field(
        default=False,
        description="a recipient without an entry is classified by the model named after its "
        "address (lower-cased, @ as .: bob.example.org) where that model exists",
    )
    milter_spam_action: Literal["tag", "quarantine", "reject"] = Field(
        default="tag",
        description="what the milter does with spam beyond adding headers: tag (nothing "
        "more), quarantine (the MTA's hold queue), reject (550 at milter_reject_threshold)",
    )
    milter_reject_threshold: float = Field(
        default=0.999,
        gt=0,
        le=1,
        description="with milter_spam_action=reject: spam at this P(spam) or above is refused "
        "with 550 (other spam is tagged); never a message whose verdict is not spam",
    )
    milter_timeout_seconds: float = Field(
        default=1.5,
        gt=0,
        description="a message not classified by then passes unscanned, marked so (fail open)",
    )
    spam_flag_header: str = Field(default="X-Spam-Flag", description="empty: not added")
    spam_status_header: str = Field(default="X-Spam-Status", description="empty: not added")
    spam_level_header: str = Field(default="X-Spam-Level", description="empty: not added")

    # The compiled token core where it is built (auto), or the pure-Python reference forced
    # (python); compiled refuses to start where the extension is not built.
    # Checked against the build where the process is assembled (app/serving.py: load_settings):
    # settings import no other room. The choices are app.text.core.CoreChoice.
    tokenizer: Literal["auto", "python", "compiled"] = Field(
        default="auto",
        description="token core: auto (compiled where built), python, or compiled (required)",
    )

    @field_validator("database_url")
    @classmethod
    def _known_database(cls, url: str) -> str:
        return check_database_url(url)

    @field_validator("trusted_proxies")
    @classmethod
    def _addresses_or_networks(cls, proxies: str) -> str:
        entries = [entry.strip() for entry in proxies.split(",") if entry.strip()]
        for entry in entries:
            try:
                ipaddress.ip_network(entry, strict=False)
            except ValueError:
                raise ValueError(
                    f"a comma-separated list of IP addresses or networks, got {entry!r}"
                ) from None
        return ",".join(entries)

    @field_validator("milter_address")
    @classmethod
    def _listen_address(cls, address: str) -> str:
        address = address.strip()
        if address and not address.startswith("unix:"):
            host, colon, port = address.rpartition(":")
            if not colon or not host or not port.isdigit() or not 0 < int(port) < 65536:
                raise ValueError(f"host:port or unix:/path, got {address!r}")
        if address == "unix:":
            raise ValueError("unix: needs a socket path, e.g. unix:/run/spamsift/milter.sock")
        return address

    @field_validator("milter_recipient_models")
    @classmethod
    def _recipient_entries(cls, entries: str) -> str:
        for entry in filter(None, (part.strip() for part in entries.split(","))):
            recipient, equals, model = entry.partition("=")
            if not equals or "@" not in recipient or not model.strip():
                raise ValueError(
                    f"entries are address=model or @domain=model, comma-separated; got {entry!r}"
                )
        return entries

    @field_validator("spam_flag_header", "spam_status_header", "spam_level_header")
    @classmethod
    def _field_name(cls, name: str) -> str:
        name = name.strip()
        if name and not all(33 <= ord(char) <= 126 and char != ":" for char in name):
            raise ValueError(f"a header field name (printable ASCII, no colon), got {name!r}")
        return name

    @field_validator("admin_key")
    @classmethod
    def _blank_admin_key_is_none(cls, key: str | None) -> str | None:
        return key or None  # SPAMSIFT_ADMIN_KEY= (empty, as env files leave it) seeds nothing

    @field_validator("log_level", "log_format", mode="before")
    @classmethod
    def _lower_case(cls, value: object) -> object:
        return value.strip().lower() if isinstance(value, str) else value
