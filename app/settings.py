"""Service settings, from the environment (DESIGN.md's contract). Secrets are held
in a type whose repr never shows them, so no log line or error can leak one."""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass


class SettingsError(ValueError):
    """A setting is missing or invalid; the message names the variable, never its value."""


class Secret:
    """A string that prints as ``<secret>``."""

    __slots__ = ("_value",)

    def __init__(self, value: str) -> None:
        self._value = value

    def reveal(self) -> str:
        return self._value

    def __bool__(self) -> bool:
        return bool(self._value)

    def __repr__(self) -> str:
        return "<secret>"

    __str__ = __repr__


@dataclass(frozen=True)
class ServiceSettings:
    webhook_secrets: tuple[Secret, ...]  # the current secret first, then one being rotated out
    redis_url: str
    github_api_url: str
    gpu_lease_seconds: float = 60.0  # a runner that stops heartbeating loses its job after this
    artifact_dir: str = "gpuproof-artifacts"  # test-binary archives; shared by every serve replica
    max_body_bytes: int = 25 * 1024 * 1024  # GitHub caps payloads at 25 MB


def service_settings(env: Mapping[str, str] | None = None) -> ServiceSettings:
    env = os.environ if env is None else env
    current = env.get("GITHUB_WEBHOOK_SECRET", "")
    if not current:
        raise SettingsError("GITHUB_WEBHOOK_SECRET is not set: webhooks cannot be verified")
    secrets = [Secret(current)]
    previous = env.get("GITHUB_WEBHOOK_SECRET_PREVIOUS", "")
    if previous:
        secrets.append(Secret(previous))
    return ServiceSettings(
        webhook_secrets=tuple(secrets),
        redis_url=env.get("REDIS_URL", "redis://127.0.0.1:6379/0"),
        github_api_url=env.get("GITHUB_API_URL", "https://api.github.com").rstrip("/"),
        gpu_lease_seconds=gpu_lease_seconds(env),
        artifact_dir=env.get("GPUPROOF_ARTIFACT_DIR", "gpuproof-artifacts"),
    )


def gpu_lease_seconds(env: Mapping[str, str]) -> float:
    raw = env.get("GPUPROOF_LEASE_SECONDS", "60")
    try:
        seconds = float(raw)
    except ValueError:
        raise SettingsError("GPUPROOF_LEASE_SECONDS must be a number of seconds") from None
    if not 1 <= seconds <= 3600:
        raise SettingsError("GPUPROOF_LEASE_SECONDS must be between 1 and 3600")
    return seconds


@dataclass(frozen=True)
class AppCredentials:
    app_id: int
    private_key: Secret
    github_api_url: str
    redis_url: str


def app_credentials(env: Mapping[str, str] | None = None) -> AppCredentials:
    """What a worker needs to act as the GitHub App."""
    env = os.environ if env is None else env
    app_id = env.get("GITHUB_APP_ID", "")
    if not app_id.isdigit():
        raise SettingsError("GITHUB_APP_ID must be the App's numeric id")
    key = env.get("GITHUB_PRIVATE_KEY", "")
    path = env.get("GITHUB_PRIVATE_KEY_PATH", "")
    if not key and path:
        try:
            with open(path, encoding="utf-8") as handle:
                key = handle.read()
        except OSError as exc:
            raise SettingsError(f"GITHUB_PRIVATE_KEY_PATH cannot be read ({exc.strerror})") from None
    if "PRIVATE KEY" not in key:
        raise SettingsError(
            "GITHUB_PRIVATE_KEY or GITHUB_PRIVATE_KEY_PATH must hold the App's PEM private key"
        )
    return AppCredentials(
        app_id=int(app_id),
        private_key=Secret(key),
        github_api_url=env.get("GITHUB_API_URL", "https://api.github.com").rstrip("/"),
        redis_url=env.get("REDIS_URL", "redis://127.0.0.1:6379/0"),
    )
