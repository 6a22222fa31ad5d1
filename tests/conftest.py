"""Shared helpers: analyse small Rust snippets written for these tests."""

from __future__ import annotations

import socket
import subprocess
import textwrap
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
import redis

from app.checks.engine import Analysis, analyze
from app.checks.review import Review, review
from app.checks.rust_index import extract
from app.checks.workspace import SourceFile
from app.config import RepoConfig
from app.queue.jobs import JobQueue
from app.webhooks.signature import sign
from tests.github_emulator import GitHubEmulator


def signed_headers(event: str, delivery: str, body: bytes, secret: str) -> dict[str, str]:
    """The headers GitHub sends with a webhook delivery, signed with ``secret``."""
    return {
        "X-GitHub-Event": event,
        "X-GitHub-Delivery": delivery,
        "X-Hub-Signature-256": sign(secret, body),
        "Content-Type": "application/json",
    }


def run_analysis(
    files: dict[str, str],
    config: RepoConfig | None = None,
    diff_all: bool = False,
) -> Analysis:
    """Analyse {path: rust source}; with diff_all, as if a diff touched every line."""
    sources = [SourceFile(path, extract(textwrap.dedent(code).encode())) for path, code in files.items()]
    touched = None
    if diff_all:
        touched = {path: frozenset(range(1, code.count("\n") + 2)) for path, code in files.items()}
    return analyze(sources, config or RepoConfig(), touched)


def run_review(files: dict[str, str], body: str, title: str = "", config: RepoConfig | None = None) -> Review:
    """Review as if the diff added every given file."""
    sources = [SourceFile(path, extract(textwrap.dedent(code).encode())) for path, code in files.items()]
    touched = {path: frozenset(range(1, code.count("\n") + 2)) for path, code in files.items()}
    return review(sources, config or RepoConfig(), touched, title, textwrap.dedent(body))


def rules_found(code: str, path: str = "src/lib.rs", **kwargs: object) -> set[str]:
    return {f.rule for f in run_analysis({path: code}, **kwargs).findings}  # type: ignore[arg-type]


@pytest.fixture
def workspace(tmp_path: Path) -> Path:
    """An empty cargo workspace directory."""
    (tmp_path / "Cargo.toml").write_text('[workspace]\nmembers = ["kernels"]\n')
    (tmp_path / "kernels" / "src").mkdir(parents=True)
    (tmp_path / "kernels" / "Cargo.toml").write_text('[package]\nname = "kernels"\nversion = "0.1.0"\n')
    return tmp_path


@pytest.fixture(autouse=True)
def _isolated_cache(tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch) -> None:
    """Every test gets its own cache directory, so no test sees another's results."""
    monkeypatch.setenv("GPUPROOF_CACHE_DIR", str(tmp_path_factory.mktemp("cache")))


@pytest.fixture(scope="session")
def redis_url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """A real redis-server of our own on a free port."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    workdir = tmp_path_factory.mktemp("redis")
    server = subprocess.Popen(
        [
            "redis-server",
            "--port",
            str(port),
            "--bind",
            "127.0.0.1",
            "--save",
            "",
            "--appendonly",
            "no",
            "--dir",
            str(workdir),
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    client = redis.Redis(port=port)
    for _ in range(100):
        try:
            client.ping()
            break
        except redis.ConnectionError:
            time.sleep(0.05)
    else:
        server.kill()
        pytest.fail("redis-server did not start")
    yield f"redis://127.0.0.1:{port}/0"
    server.terminate()
    server.wait(timeout=10)


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
        return port


def start_serve(env: dict[str, str], log: Path) -> tuple[subprocess.Popen[bytes], str]:
    """`gpuproof serve` as a real process; returns it and its base URL once it is ready."""
    import sys

    import httpx

    port = free_port()
    with log.open("a") as out:  # the child keeps its own descriptor
        process = subprocess.Popen(
            [sys.executable, "-m", "app.cli", "serve", "--port", str(port)],
            env=env,
            stdout=out,
            stderr=subprocess.STDOUT,
        )
    base = f"http://127.0.0.1:{port}"
    for _ in range(150):
        try:
            if httpx.get(f"{base}/readyz").status_code == 200:
                return process, base
        except httpx.TransportError:
            time.sleep(0.1)
    process.kill()
    raise AssertionError(f"gpuproof serve did not become ready:\n{log.read_text()}")


APP_ID = 99  # the GitHub App the emulator knows


@pytest.fixture
def emulator() -> Iterator[GitHubEmulator]:
    """A GitHub emulator that validates every request; no test may leave a violation."""
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.asymmetric import rsa

    key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    public = (
        key.public_key()
        .public_bytes(serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo)
        .decode()
    )
    server = GitHubEmulator(APP_ID, public)
    server.private_key = key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
    ).decode()  # type: ignore[attr-defined]
    server.start()
    yield server
    server.stop()
    assert server.violations == [], server.violations


@pytest.fixture
def queue(redis_url: str) -> Iterator[JobQueue]:
    """The job queue on the session's redis-server, emptied before and after."""
    client = redis.Redis.from_url(redis_url)
    client.flushdb()
    yield JobQueue(client)
    client.flushdb()
