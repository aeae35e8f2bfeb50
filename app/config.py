"""Process configuration from SPAMSIFT_* environment variables (and a .env file)."""

from __future__ import annotations

from typing import Literal

from pydantic import Field
from pydantic_settings import BaseSettings, SettingsConfigDict

MIB = 1024 * 1024


class Settings(BaseSettings):
    """Everything a spamsift process is configured with; built once and handed down."""

    model_config = SettingsConfigDict(env_prefix="SPAMSIFT_", env_file=".env", extra="ignore")

    database_url: str = "sqlite:///./spamsift.db"
    admin_key: str | None = None
    log_level: Literal["debug", "info", "warning", "error"] = "info"

    max_message_bytes: int = Field(default=10 * MIB, gt=0)
    max_request_bytes: int = Field(default=64 * MIB, gt=0)
    max_batch_items: int = Field(default=1000, gt=0)
    max_scan_bytes: int = Field(default=512 * 1024, gt=0)
    retention_days: float = Field(default=7, ge=0)

    # A request whose body has not fully arrived by then is dropped (slowloris): 408.
    receive_timeout_seconds: float = Field(default=30.0, gt=0)

    # How long a write waits for a lock before it gives up with 503 and nothing applied.
    lock_timeout_seconds: float = Field(default=5.0, gt=0)
    # How often a process looks for training committed by other processes (SPEC §7: ≤ 1 s).
    sync_interval_seconds: float = Field(default=0.5, gt=0)
