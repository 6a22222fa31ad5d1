"""The GitHub client against the local emulator, which validates every request
against the official OpenAPI description."""

from __future__ import annotations

import logging
from collections.abc import Iterator

import pytest
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import rsa

from app.github.client import GitHubClient, GitHubError
from tests.github_emulator import SPEC_PATH, Fault, GitHubEmulator

pytestmark = pytest.mark.skipif(
    not SPEC_PATH.exists(),
    reason="the shared OpenAPI description (../shared/github) is not beside this checkout",
)
APP_ID = 4242
INSTALLATION = 77
REPO = "octo-org/kernels"


@pytest.fixture(scope="module")
def key_pair() -> tuple[str, str]:
    key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    private = key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
    ).decode()
    public = (
        key.public_key()
        .public_bytes(serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo)
        .decode()
    )
    return private, public


@pytest.fixture
def emulator(key_pair: tuple[str, str]) -> Iterator[GitHubEmulator]:
    server = GitHubEmulator(APP_ID, key_pair[1])
    server.start()
    yield server
    server.stop()
    assert server.violations == [], server.violations  # every request matched the description


@pytest.fixture
def slept() -> list[float]:
    return []


@pytest.fixture
def client(emulator: GitHubEmulator, key_pair: tuple[str, str], slept: list[float]) -> GitHubClient:
    return GitHubClient(emulator.base_url, APP_ID, key_pair[0], sleep=slept.append)


def test_installation_token_is_fetched_once_and_cached(
    client: GitHubClient, emulator: GitHubEmulator
) -> None:
    client.create_check_run(
        INSTALLATION, REPO, name="gpuproof / code", head_sha="a" * 40, status="in_progress"
    )
    client.create_check_run(INSTALLATION, REPO, name="gpuproof / description", head_sha="a" * 40)
    assert len(emulator.posted("POST", "/access_tokens")) == 1
    runs = emulator.posted("POST", "/check-runs")
    assert [r.body["name"] for r in runs] == ["gpuproof / code", "gpuproof / description"]


def test_token_near_expiry_is_renewed(client: GitHubClient, emulator: GitHubEmulator) -> None:
    emulator.token_lifetime_seconds = 120  # inside the renewal margin
    emulator.add_pull(1, "a" * 40, "b" * 40)
    client.pull_request(INSTALLATION, REPO, 1)
    client.pull_request(INSTALLATION, REPO, 1)
    assert len(emulator.posted("POST", "/access_tokens")) == 2


def test_5xx_and_secondary_rate_limit_are_retried(
    client: GitHubClient, emulator: GitHubEmulator, slept: list[float]
) -> None:
    emulator.faults.append(Fault("/check-runs", 502, times=2))
    emulator.faults.append(
        Fault(
            "/check-runs",
            403,
            headers={"retry-after": "7"},
            body={"message": "You have exceeded a secondary rate limit."},
        )
    )
    run = client.create_check_run(INSTALLATION, REPO, name="gpuproof / code", head_sha="b" * 40)
    assert run["id"]
    assert slept == [1.0, 2.0, 7.0]  # backoff, backoff, then GitHub's Retry-After
    assert len(emulator.posted("POST", "/check-runs")) == 1


def test_primary_rate_limit_waits_for_the_reset(
    client: GitHubClient, emulator: GitHubEmulator, slept: list[float]
) -> None:
    import time

    reset = str(int(time.time()) + 20)
    emulator.add_pull(3, "a" * 40, "b" * 40)
    emulator.faults.append(
        Fault(
            "/pulls/3",
            403,
            headers={"x-ratelimit-remaining": "0", "x-ratelimit-reset": reset},
            body={"message": "API rate limit exceeded"},
        )
    )
    client.pull_request(INSTALLATION, REPO, 3)
    assert len(slept) == 1 and 15 < slept[0] <= 22


def test_final_errors_are_raised_without_tokens(
    client: GitHubClient, emulator: GitHubEmulator, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    emulator.faults.append(Fault("/pulls/9", 404, body={"message": "Not Found"}))
    with pytest.raises(GitHubError) as raised:
        client.pull_request(INSTALLATION, REPO, 9)
    assert raised.value.status == 404
    for token in emulator.tokens:
        assert token not in str(raised.value) and token not in caplog.text


def test_a_400_file_pull_request_is_read_page_by_page(client: GitHubClient, emulator: GitHubEmulator) -> None:
    emulator.add_pull_files(12, 400)
    files = client.pull_request_files(INSTALLATION, REPO, 12)
    assert len(files) == 400 and files[-1]["filename"] == "crates/kernels/src/op_399.rs"
    assert len(emulator.posted("GET", "/pulls/12/files")) == 4


def test_emulator_rejects_requests_that_break_the_description(
    client: GitHubClient, emulator: GitHubEmulator
) -> None:
    with pytest.raises(GitHubError) as raised:
        client.create_check_run(
            INSTALLATION, REPO, name="gpuproof / code", head_sha="c" * 40, status="finished"
        )  # not a status GitHub knows
    assert raised.value.status == 422
    assert any("status" in v for v in emulator.violations)
    emulator.violations.clear()  # expected here; the fixture checks for unexpected ones


def test_a_wrong_app_key_is_refused(emulator: GitHubEmulator, key_pair: tuple[str, str]) -> None:
    other = (
        rsa.generate_private_key(public_exponent=65537, key_size=2048)
        .private_bytes(
            serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
        )
        .decode()
    )
    with pytest.raises(GitHubError) as raised:
        GitHubClient(emulator.base_url, APP_ID, other, sleep=lambda _: None).pull_request(
            INSTALLATION, REPO, 1
        )
    assert raised.value.status == 401
