"""API keys (SPEC §8): create, list, revoke, seed SPAMSIFT_ADMIN_KEY, and check a request's key.

A key reads `ss_<key_id>_<secret>`: `key_id` (12 hex digits) is public, shown by `keys list`,
and finds the row; the secret is 32 random bytes (43 URL-safe characters). Only the sha256 of
the whole key is stored, and compared with `hmac.compare_digest`. A plain hash is enough where
passwords need a slow KDF (bcrypt, scrypt): a key carries 256 random bits, so there is no list
of likely keys to try against a leaked hash, and checking a request's key stays microseconds.

SPAMSIFT_ADMIN_KEY may be any string the operator picks (`openssl rand -hex 32`); when it is
not in the `ss_` form its key id is derived from its hash.
"""

from __future__ import annotations

import hashlib
import hmac
import logging
import math
import re
import secrets
import threading
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING, Annotated, Literal

from pydantic import Field

from app.errors import Conflict, DatabaseUnavailable, InvalidInput, LastAdminKey, NotFound
from app.service.models import MODEL_NAME_PATTERN
from app.store import Connection
from app.store import keys as store
from app.store.engine import Database
from app.store.models import find_model

if TYPE_CHECKING:
    from app.service.runtime import Runtime

log = logging.getLogger(__name__)

Scope = Literal["classify", "train", "admin"]
SCOPES: tuple[Scope, ...] = ("classify", "train", "admin")
KEY_PATTERN = re.compile(r"ss_(?P<key_id>[0-9a-f]{12})_[A-Za-z0-9_-]{43}")
ADMIN_KEY_NAME = "SPAMSIFT_ADMIN_KEY"
MAX_NAME_CHARS = 100
MAX_KEY_CHARS = 512  # longer is no key of ours: refused before it is hashed
SHORT_ADMIN_KEY_CHARS = 32
# Keys made or revoked by another process (the CLI) count here within this long (SPEC §7 spirit).
KEY_CACHE_SECONDS = 1.0

DEVELOPMENT_MODE_WARNING = (
    "DEVELOPMENT MODE: no API key exists, so every endpoint is open to anyone who can reach "
    "this server. Create one with `spamsift keys create --scope admin` or set "
    "SPAMSIFT_ADMIN_KEY; from then on every request but /healthz and /readyz needs a key."
)


@dataclass(frozen=True)
class ApiKey:
    """A key as listed: everything but the secret, which only its creator ever saw."""

    key_id: Annotated[
        str, Field(description="The key's public id; the secret is never shown again")
    ]
    name: str
    scopes: tuple[str, ...]
    models: Annotated[
        tuple[str, ...] | None, Field(description="The models it may use; null: every model")
    ]
    created_at: datetime
    revoked_at: datetime | None

    def allows(self, scope: Scope) -> bool:
        """Tell whether the key may act with `scope`; `admin` implies the others."""
        return scope in self.scopes or "admin" in self.scopes

    def may_use(self, model_name: str | None) -> bool:
        """Tell whether the key may touch `model_name`. None is a request not about one model
        (listing or creating models, metrics): only a key for every model may make it."""
        if self.models is None:
            return True
        return model_name is not None and model_name in self.models


def _key(row: store.KeyRow) -> ApiKey:
    return ApiKey(
        key_id=row.key_id,
        name=row.name,
        scopes=row.scopes,
        models=row.models,
        created_at=row.created_at,
        revoked_at=row.revoked_at,
    )


def hash_key(key: str) -> str:
    return hashlib.sha256(key.encode()).hexdigest()


def key_id_of(key: str) -> str:
    """Return the public id of `key`: its `ss_<key_id>_` part, or one derived from its hash
    for a key the operator chose ("x" keeps the two kinds of id apart: "x" is no hex digit)."""
    match = KEY_PATTERN.fullmatch(key)
    if match:
        return match["key_id"]
    return "x" + hash_key(key)[:11]


def check_scopes(scopes: Iterable[str]) -> tuple[Scope, ...]:
    given = set(scopes)
    unknown = sorted(given - set(SCOPES))
    if unknown:
        raise InvalidInput(f"scopes are {', '.join(SCOPES)}; got {', '.join(unknown)}")
    if not given:
        raise InvalidInput(f"a key needs at least one scope of {', '.join(SCOPES)}")
    return tuple(scope for scope in SCOPES if scope in given)


def check_model_names(names: Iterable[str]) -> tuple[str, ...]:
    checked = tuple(sorted(set(names)))
    for name in checked:
        if not re.fullmatch(MODEL_NAME_PATTERN, name):
            raise InvalidInput(f"a model name matches {MODEL_NAME_PATTERN}, got {name!r}")
    if not checked:
        raise InvalidInput("a key limited to models needs at least one model name")
    return checked


def _database(where: Runtime | Database) -> Database:
    """The server's routes hand their Runtime, a local command its database."""
    return where if isinstance(where, Database) else where.db


def create_key(
    where: Runtime | Database,
    *,
    scopes: Iterable[str],
    models: Iterable[str] | None = None,
    name: str = "",
    over_http: bool = False,
) -> tuple[str, ApiKey]:
    """Make a key; return it (shown this once, stored only hashed) and its listing.

    `over_http`, a request made it: while no admin key for every model exists, only one may
    be made (see `keep_its_maker_in`).

    `models` limits the key to those models, which must exist; the key is bound to them, not
    to their names (a model deleted and made again is another model). None allows every model.
    """
    checked_scopes = check_scopes(scopes)
    checked_models = None if models is None else check_model_names(models)
    if len(name) > MAX_NAME_CHARS:
        raise InvalidInput(f"a key name has at most {MAX_NAME_CHARS} characters, got {len(name)}")

    def work(conn: Connection) -> tuple[str, ApiKey]:
        if over_http:
            keep_its_maker_in(conn, checked_scopes, checked_models)
        # ModelNotFound for a name that is no model: a typo would make a useless key.
        model_ids = (
            None
            if checked_models is None
            else {model_name: find_model(conn, model_name).id for model_name in checked_models}
        )
        while True:  # a clash of 48-bit random key ids is rare; draw again when it happens
            key = f"ss_{secrets.token_hex(6)}_{secrets.token_urlsafe(32)}"
            row = store.insert_key(
                conn,
                key_id=key_id_of(key),
                key_hash=hash_key(key),
                name=name,
                scopes=checked_scopes,
                models=model_ids,
            )
            if row is not None:
                return key, _key(row)

    return _database(where).run(work)


def seed_admin_key(db: Database, key: str) -> ApiKey:
    """Make sure the admin key `key` (SPAMSIFT_ADMIN_KEY) is stored; idempotent, and safe when
    several processes start at once. A revoked one stays revoked."""
    key_id, key_hash = key_id_of(key), hash_key(key)

    def work(conn: Connection) -> ApiKey:
        store.insert_key(
            conn,
            key_id=key_id,
            key_hash=key_hash,
            name=ADMIN_KEY_NAME,
            scopes=("admin",),
            models=None,
        )
        row = store.find_key(conn, key_id)
        if row is None or not hmac.compare_digest(row.key_hash, key_hash):
            raise Conflict(f"{ADMIN_KEY_NAME} has the key id {key_id} of another key; pick another")
        return _key(row)

    return db.run(work)


def list_keys(where: Runtime | Database) -> list[ApiKey]:
    return [_key(row) for row in _database(where).run(store.list_keys, write=False)]


def revoke_key(where: Runtime | Database, *, key: str, over_http: bool = False) -> ApiKey:
    """Revoke a key named by its key id (as `keys list` shows it) or given whole.

    The last admin key for every model is not revoked while other keys remain (see
    `keep_an_admin_key`); `over_http`, not even when it is the last key of all.
    """

    def work(conn: Connection) -> ApiKey:
        row = store.find_key(conn, key)
        if row is None and len(key) <= MAX_KEY_CHARS:
            row = store.find_key(conn, key_id_of(key))
            if row is not None and not hmac.compare_digest(row.key_hash, hash_key(key)):
                row = None
        if row is None:
            raise NotFound(f"no API key with the id {key!r} (see `spamsift keys list`)")
        keep_an_admin_key(conn, row, even_alone=over_http)
        store.revoke_key(conn, row.key_id)
        revoked = store.find_key(conn, row.key_id)
        assert revoked is not None
        return _key(revoked)

    return _database(where).run(work)


def keep_an_admin_key(conn: Connection, row: store.KeyRow, *, even_alone: bool) -> None:
    """Refuse to revoke the last unrevoked admin key for every model while other keys remain:
    nobody could manage those (nor make an admin key) but from the command line. With
    `even_alone`, refuse it when it is the last key of all too: a request revoking it (the
    dashboard's own key) would lock its sender out. Revoking a leaked last key, which closes
    the service, stays possible with `spamsift keys revoke`."""
    if row.revoked_at is not None or not _manages_keys(row):
        return
    active = store.list_active_keys(conn)
    if sum(1 for other in active if _manages_keys(other)) > 1:
        return
    others = len(active) - 1
    if others:
        raise LastAdminKey(
            f"key {row.key_id} is the last admin key for every model, and {others} other "
            f"key{'s' if others > 1 else ''} would be left without one to manage them: make "
            "another admin key first (spamsift keys create --scope admin)"
        )
    if even_alone:
        raise LastAdminKey(
            f"key {row.key_id} is the last key: revoked, it would lock everyone out, you "
            "included; make another admin key first, or revoke it with `spamsift keys revoke` "
            "to close the service"
        )


def keep_its_maker_in(
    conn: Connection, scopes: tuple[Scope, ...], models: tuple[str, ...] | None
) -> None:
    """Refuse a key made by a request while no admin key for every model exists, unless it is
    one: the first key ends development mode, and a request that made a classify key first
    could use nothing but classify afterwards (the dashboard that made it included)."""
    if "admin" in scopes and models is None:
        return
    if any(_manages_keys(row) for row in store.list_active_keys(conn)):
        return
    raise LastAdminKey(
        'no admin key for every model exists yet: make that first (scopes ["admin"], no '
        "models), or this key would end development mode and lock you out of managing keys"
    )


def _manages_keys(row: store.KeyRow) -> bool:
    return "admin" in row.scopes and row.models is None


@dataclass(frozen=True)
class _KnownKey:
    key_hash: str
    key: ApiKey


# Compared with the hash of a key whose id is unknown, so an unknown id costs what a known
# one does: one sha256, one dictionary lookup, one constant-time comparison.
_NO_HASH = "0" * 64


class KeyGuard:
    """What one process knows of API keys: whether any exists (none: development mode), and
    every unrevoked key, in memory. A request's key is checked against memory alone, with the
    same work for an unknown key id as for a known one (no database round trip tells them
    apart). At most every `cache_seconds` the guard reads the keys' generation (one small
    query) and re-reads the keys only when it changed, so a key made or revoked by another
    process (the CLI, another server) counts here within about a second.

    A key once made keeps the service out of development mode even when revoked: revoking a
    leaked last key must close the service, not open it to everyone. While the database does
    not answer, the keys last read stay in force.
    """

    def __init__(
        self,
        db: Database,
        *,
        admin_key: str | None = None,
        cache_seconds: float = KEY_CACHE_SECONDS,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.db = db
        self.cache_seconds = cache_seconds
        self._clock = clock
        self._admin_key = admin_key
        self._lock = threading.Lock()
        self._enforced: bool | None = None
        self._checked_at = 0.0
        self._generation: tuple[int, int] | None = None
        self._keys: dict[str, _KnownKey] = {}

    def start(self) -> None:
        """Seed SPAMSIFT_ADMIN_KEY and say loudly when no key exists. A database that does not
        answer now is tried again by the next request, which meanwhile gets 503."""
        if self._admin_key is not None and len(self._admin_key) < SHORT_ADMIN_KEY_CHARS:
            log.warning(
                "%s is shorter than %d characters: use a long random one (openssl rand -hex 32)",
                ADMIN_KEY_NAME,
                SHORT_ADMIN_KEY_CHARS,
            )
        try:
            self._refresh()
        except DatabaseUnavailable:
            log.warning("could not read the API keys: the database is unavailable")

    def enforced(self) -> bool:
        """Tell whether requests need a key: whether any key was ever made."""
        self._keep_fresh()
        return bool(self._enforced)

    def invalidate(self) -> None:
        """Re-check the keys' generation at the next request (this process changed keys)."""
        with self._lock:
            self._checked_at = -math.inf

    def fresh(self) -> bool:
        """Tell whether the keys last read answer a request from memory alone, with no read
        of the database (what an event loop may ask without blocking)."""
        with self._lock:
            age = self._clock() - self._checked_at
            return self._enforced is not None and age < self.cache_seconds

    def refresh_ahead(self) -> None:
        """Read the keys again once half their cache time has passed: the server's background
        thread calls this every tick, so a request finds them fresh and checks its key on the
        event loop instead of waiting for a thread to read the database (which, with every
        thread of the pool taken, would hold up even a classification answered from memory).
        A database that does not answer keeps the keys last read, as for a request."""
        with self._lock:
            due = self._enforced is None or (
                self._clock() - self._checked_at >= self.cache_seconds / 2
            )
        if due:
            self._read_or_keep()

    def _keep_fresh(self) -> None:
        if not self.fresh():
            self._read_or_keep()

    def _read_or_keep(self) -> None:
        try:
            self._refresh()
        except DatabaseUnavailable:
            with self._lock:
                if self._enforced is None:
                    raise
                self._checked_at = self._clock()  # keep the last keys; retry in a while

    def _refresh(self) -> None:
        if self._admin_key is not None:
            seeded = seed_admin_key(self.db, self._admin_key)
            self._admin_key = None
            if seeded.revoked_at is not None:
                log.warning("%s was revoked; it is refused like any revoked key", ADMIN_KEY_NAME)
            else:
                log.info("%s is stored as the admin key %s", ADMIN_KEY_NAME, seeded.key_id)
        checked_at = self._clock()
        generation = self.db.run(store.read_generation, write=False)
        if generation == self._generation:
            with self._lock:
                self._checked_at = checked_at
            return

        def read(conn: Connection) -> tuple[tuple[int, int], bool, list[store.KeyRow]]:
            return store.read_generation(conn), store.any_key(conn), store.list_active_keys(conn)

        generation, enforced, rows = self.db.run(read, write=False)
        keys = {row.key_id: _KnownKey(row.key_hash, _key(row)) for row in rows}
        with self._lock:
            before = self._enforced
            self._enforced, self._keys = enforced, keys
            self._generation, self._checked_at = generation, checked_at
        if not enforced and before is not False:
            log.warning(DEVELOPMENT_MODE_WARNING)
        elif enforced and before is False:
            log.warning("an API key exists now: every request but /healthz and /readyz needs one")

    def authenticate(self, key: str) -> ApiKey | None:
        """Return the unrevoked key `key`, or None when it is unknown, revoked or malformed."""
        if not key or len(key) > MAX_KEY_CHARS:
            return None
        self._keep_fresh()
        key_hash = hash_key(key)
        with self._lock:
            known = self._keys.get(key_id_of(key))
        matches = hmac.compare_digest(known.key_hash if known else _NO_HASH, key_hash)
        return known.key if known is not None and matches else None
