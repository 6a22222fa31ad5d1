"""The runner's side of the runner protocol (app/runner_api.py serves the other):
plain HTTPS requests with the standard library, outbound only. Tokens travel in
headers and never appear in an error message."""

from __future__ import annotations

import json
import shutil
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

from app.runner.archive import sha256_of

CLAIM_WAIT_SECONDS = 25.0


class ProtocolError(RuntimeError):
    """The App refused a request or could not be reached; says which, never a token."""

    def __init__(self, what: str, status: int, detail: str) -> None:
        super().__init__(f"{what}: {status or 'no answer'} {detail}".strip())
        self.status = status


class LeaseLost(ProtocolError):
    """The App gave the job to someone else (the lease ran out) or ended it."""


class AppConnection:
    def __init__(self, url: str, runner_token: str) -> None:
        self.url = url.rstrip("/")
        self._runner_token = runner_token

    def claim(self, labels: list[str], gpus: list[dict[str, Any]]) -> dict[str, Any]:
        """A job to run ({"job": None} when none came within the long poll)."""
        body = {"labels": labels, "gpus": gpus, "wait": CLAIM_WAIT_SECONDS}
        answer: dict[str, Any] = self._json(
            "claim", "POST", "/runner/v1/claim", self._runner_token, body, CLAIM_WAIT_SECONDS + 30
        )
        return answer

    def heartbeat(self, job_id: str, job_token: str) -> dict[str, Any]:
        answer: dict[str, Any] = self._json(
            "heartbeat", "POST", f"/runner/v1/jobs/{job_id}/heartbeat", job_token, {}
        )
        return answer

    def report(self, job_id: str, job_token: str, result: dict[str, Any]) -> dict[str, Any]:
        answer: dict[str, Any] = self._json(
            "result", "POST", f"/runner/v1/jobs/{job_id}/result", job_token, result
        )
        return answer

    def upload_artifact(self, job_id: str, job_token: str, archive: Path) -> str:
        digest = sha256_of(archive)
        with archive.open("rb") as data:
            request = urllib.request.Request(
                f"{self.url}/runner/v1/jobs/{job_id}/artifact",
                data=data,
                method="PUT",
                headers={
                    "authorization": f"Bearer {job_token}",
                    "content-type": "application/gzip",
                    "content-length": str(archive.stat().st_size),
                    "x-gpuproof-sha256": digest,
                },
            )
            self._open("artifact upload", request, 600).close()
        return digest

    def download_artifact(self, job_id: str, job_token: str, target: Path) -> None:
        request = urllib.request.Request(
            f"{self.url}/runner/v1/jobs/{job_id}/artifact", headers={"authorization": f"Bearer {job_token}"}
        )
        with self._open("artifact download", request, 600) as response, target.open("wb") as out:
            shutil.copyfileobj(response, out)

    def _json(
        self, what: str, method: str, path: str, token: str, body: dict[str, Any], timeout: float = 30
    ) -> Any:
        request = urllib.request.Request(
            f"{self.url}{path}",
            data=json.dumps(body).encode(),
            method=method,
            headers={"authorization": f"Bearer {token}", "content-type": "application/json"},
        )
        with self._open(what, request, timeout) as response:
            return json.loads(response.read() or b"{}")

    @staticmethod
    def _open(what: str, request: urllib.request.Request, timeout: float) -> Any:
        try:
            return urllib.request.urlopen(request, timeout=timeout)
        except urllib.error.HTTPError as exc:
            try:
                detail = str(json.loads(exc.read()).get("error", ""))
            except ValueError:
                detail = exc.reason
            error = LeaseLost if exc.code == 410 else ProtocolError
            raise error(what, exc.code, detail) from None
        except (urllib.error.URLError, TimeoutError, ConnectionError) as exc:
            raise ProtocolError(what, 0, type(exc).__name__) from None


def download_tarball(url: str, token: str, target: Path) -> None:
    """A repository tarball at one commit, with the job's read-only checkout token.
    The token is an unredirected header: the API answers with a redirect to a
    pre-signed download URL, which must not receive it."""
    request = urllib.request.Request(url, headers={"accept": "application/vnd.github+json"})
    request.add_unredirected_header("Authorization", f"token {token}")
    with AppConnection._open("checkout", request, 600) as response, target.open("wb") as out:
        shutil.copyfileobj(response, out)
