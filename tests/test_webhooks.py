"""The webhook endpoint with a real Redis, fed with GitHub's example payloads from
`../shared/github/webhooks/`."""

from __future__ import annotations

import copy
import json
import logging
from pathlib import Path
from typing import Any

import pytest
import redis
from fastapi.testclient import TestClient

from app.queue.jobs import STREAM, JobQueue
from app.settings import Secret, ServiceSettings, SettingsError, service_settings
from app.webhooks.commands import parse_commands
from app.webhooks.server import create_app
from app.webhooks.signature import sign
from tests.conftest import signed_headers, start_serve

EXAMPLES = Path(__file__).resolve().parents[2] / "shared/github/webhooks/examples/api.github.com"
SECRET = "it's-a-secret-to-everybody"
OLD_SECRET = "the-secret-being-rotated-out"

needs_examples = pytest.mark.skipif(
    not EXAMPLES.is_dir(),
    reason="the shared GitHub webhook examples (../shared/github) are not beside this checkout",
)


def example(event: str, name: str) -> dict[str, Any]:
    data: dict[str, Any] = json.loads((EXAMPLES / event / name).read_text())
    return data


@pytest.fixture
def client(queue: JobQueue) -> TestClient:
    settings = ServiceSettings(
        (Secret(SECRET), Secret(OLD_SECRET)), "unused", "http://127.0.0.1:1", max_body_bytes=512 * 1024
    )
    return TestClient(create_app(settings, queue))


def deliver(
    client: TestClient,
    event: str,
    payload: object,
    delivery: str = "d-1",
    secret: str = SECRET,
    raw: bytes | None = None,
) -> Any:
    body = raw if raw is not None else json.dumps(payload).encode()
    return client.post(
        "/webhooks/github", content=body, headers=signed_headers(event, delivery, body, secret)
    )


def queued(queue: JobQueue) -> list[dict[str, Any]]:
    return [json.loads(fields[b"job"]) for _, fields in queue.client.xrange(STREAM)]


@needs_examples
def test_ping_is_answered_and_nothing_queued(client: TestClient, queue: JobQueue) -> None:
    response = deliver(client, "ping", example("ping", "payload.json"))
    assert response.status_code == 200 and response.json()["outcome"] == "pong"
    assert queued(queue) == []


@needs_examples
def test_pull_request_opened_is_enqueued_once(client: TestClient, queue: JobQueue) -> None:
    payload = example("pull_request", "opened.payload.json")
    first = deliver(client, "pull_request", payload, delivery="abc")
    again = deliver(client, "pull_request", payload, delivery="abc")  # GitHub redelivers
    assert (first.status_code, first.json()["job"]) == (202, "review-pr")
    assert (again.status_code, again.json()["outcome"]) == (200, "duplicate")
    (job,) = queued(queue)
    assert job["repository"] == payload["repository"]["full_name"]
    assert job["payload"]["head_sha"] == payload["pull_request"]["head"]["sha"]
    assert job["payload"]["number"] == payload["pull_request"]["number"]


@needs_examples
def test_bad_signature_is_401_and_nothing_queued(
    client: TestClient, queue: JobQueue, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO)
    response = deliver(client, "pull_request", example("pull_request", "opened.payload.json"), secret="wrong")
    assert response.status_code == 401
    assert queued(queue) == []
    assert "bad or missing signature" in caplog.text
    assert SECRET not in caplog.text and "wrong" not in caplog.text


@needs_examples
def test_secret_being_rotated_out_is_still_accepted(client: TestClient, queue: JobQueue) -> None:
    response = deliver(
        client, "pull_request", example("pull_request", "synchronize.payload.json"), secret=OLD_SECRET
    )
    assert response.status_code == 202
    assert len(queued(queue)) == 1


def test_malformed_deliveries_are_4xx_and_nothing_queued(client: TestClient, queue: JobQueue) -> None:
    assert deliver(client, "pull_request", None, raw=b"{not json").status_code == 400
    assert deliver(client, "pull_request", None, raw=b"[1, 2]").status_code == 400
    assert deliver(client, "pull_request", {"action": "opened"}).status_code == 400  # no pull_request
    no_headers = client.post(
        "/webhooks/github", content=b"{}", headers={"X-Hub-Signature-256": sign(SECRET, b"{}")}
    )
    assert no_headers.status_code == 400
    too_big = b'{"zen": "' + b"x" * (600 * 1024) + b'"}'
    assert deliver(client, "ping", None, raw=too_big).status_code == 413
    assert queued(queue) == []


@needs_examples
def test_unhandled_events_get_a_2xx(client: TestClient, queue: JobQueue) -> None:
    push = deliver(client, "push", example("push", "payload.json"))
    closed = deliver(client, "pull_request", example("pull_request", "closed.payload.json"), delivery="d-2")
    # A push that deletes a tag: only pushes to the default branch start GPU jobs.
    assert (push.status_code, push.json()["outcome"]) == (200, "nothing-to-do")
    assert (closed.status_code, closed.json()["outcome"]) == (200, "ignored")
    assert queued(queue) == []


@needs_examples
@pytest.mark.parametrize(
    ("event", "name", "kind"),
    [
        ("check_run", "rerequested.payload.json", "rerun"),
        ("check_run", "requested_action.payload.json", "requested-action"),
        ("check_suite", "requested.payload.json", "review-suite"),
        ("check_suite", "rerequested.payload.json", "review-suite"),
        ("installation", "created.payload.json", "installation"),
        ("installation", "deleted.payload.json", "installation"),
        ("installation_repositories", "added.payload.json", "installation"),
        ("pull_request", "reopened.payload.json", "review-pr"),
        ("pull_request", "labeled.payload.json", "gpu-label"),
        ("push", "with-new-branch.payload.json", "gpu-push"),
    ],
)
def test_routing_table(client: TestClient, queue: JobQueue, event: str, name: str, kind: str) -> None:
    response = deliver(client, event, example(event, name), delivery=f"{event}-{name}")
    assert response.status_code == 202, response.json()
    assert [job["kind"] for job in queued(queue)] == [kind]


@needs_examples
def test_slash_commands_only_on_pull_requests_and_outside_code(client: TestClient, queue: JobQueue) -> None:
    comment = example("issue_comment", "created.payload.json")
    on_issue = copy.deepcopy(comment)
    on_issue["comment"]["body"] = "/gpuproof recheck"
    assert deliver(client, "issue_comment", on_issue, delivery="c-1").json()["outcome"] == "nothing-to-do"

    on_pr = copy.deepcopy(on_issue)
    on_pr["issue"]["pull_request"] = {"url": "https://api.github.com/repos/o/r/pulls/1"}
    on_pr["comment"]["body"] = "Thanks!\n```\n/gpuproof help\n```\n> /gpuproof explain x\n/gpuproof recheck\n"
    response = deliver(client, "issue_comment", on_pr, delivery="c-2")
    assert response.status_code == 202
    (job,) = queued(queue)
    assert job["payload"]["commands"] == [["recheck"]]


def test_parse_commands() -> None:
    assert parse_commands("/gpuproof") == [parse_commands("/gpuproof help")[0]]
    assert [(c.name, c.args) for c in parse_commands("x\n /gpuproof explain silent-fallback \n")] == [
        ("explain", ("silent-fallback",))
    ]
    assert parse_commands("see `/gpuproof help` inline") == []


@needs_examples
def test_redis_down_is_503_so_github_redelivers(client: TestClient, queue: JobQueue) -> None:
    broken = JobQueue(redis.Redis(port=1, socket_connect_timeout=0.2))
    settings = ServiceSettings((Secret(SECRET),), "unused", "http://127.0.0.1:1")
    down = TestClient(create_app(settings, broken))
    response = deliver(down, "pull_request", example("pull_request", "opened.payload.json"))
    assert response.status_code == 503
    assert down.get("/readyz").status_code == 503


def test_health_ready_and_metrics(client: TestClient) -> None:
    assert client.get("/healthz").json() == {"status": "ok"}
    assert client.get("/readyz").status_code == 200
    deliver(client, "ping", {"zen": "Keep it logically awesome."})
    text = client.get("/metrics").text
    assert 'gpuproof_webhook_deliveries_total{event="ping",outcome="pong"} 1' in text


def test_settings_need_the_webhook_secret_and_never_show_it() -> None:
    with pytest.raises(SettingsError, match="GITHUB_WEBHOOK_SECRET"):
        service_settings({})
    settings = service_settings({"GITHUB_WEBHOOK_SECRET": "s3cr3t", "GITHUB_WEBHOOK_SECRET_PREVIOUS": "old"})
    assert len(settings.webhook_secrets) == 2
    assert "s3cr3t" not in repr(settings) and "old" not in repr(settings)
    assert settings.redis_url == "redis://127.0.0.1:6379/0"


def test_serve_command_runs_the_endpoint(redis_url: str, tmp_path: Path) -> None:
    import os

    import httpx

    log = tmp_path / "serve.log"
    server, base = start_serve({**os.environ, "GITHUB_WEBHOOK_SECRET": SECRET, "REDIS_URL": redis_url}, log)
    try:
        body = b'{"zen": "Design for failure."}'
        headers = signed_headers("ping", "live-1", body, SECRET)
        response = httpx.post(f"{base}/webhooks/github", content=body, headers=headers)
        assert response.json() == {"outcome": "pong", "zen": "Design for failure."}
    finally:
        server.terminate()
        server.wait(timeout=10)
    assert SECRET not in log.read_text()


def test_serve_without_a_secret_is_exit_2(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    from app.cli import main

    monkeypatch.delenv("GITHUB_WEBHOOK_SECRET", raising=False)
    assert main(["serve"]) == 2
    assert "GITHUB_WEBHOOK_SECRET is not set" in capsys.readouterr().err


def test_app_credentials_are_checked_and_never_shown(tmp_path: Path) -> None:
    from app.settings import app_credentials

    with pytest.raises(SettingsError, match="GITHUB_APP_ID"):
        app_credentials({})
    with pytest.raises(SettingsError, match="PEM private key"):
        app_credentials({"GITHUB_APP_ID": "12", "GITHUB_PRIVATE_KEY": "nope"})
    key_file = tmp_path / "app.pem"
    key_file.write_text("-----BEGIN PRIVATE KEY-----\nMIIE\n-----END PRIVATE KEY-----\n")
    credentials = app_credentials({"GITHUB_APP_ID": "12", "GITHUB_PRIVATE_KEY_PATH": str(key_file)})
    assert credentials.app_id == 12 and "MIIE" not in repr(credentials)
