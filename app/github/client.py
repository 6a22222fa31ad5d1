"""The GitHub REST client: App JWT -> installation token (cached until shortly
before it expires), retries with backoff on 5xx and timeouts, primary and secondary
rate limits honoured, pagination. ``GITHUB_API_URL`` points it at GitHub
Enterprise Server or the test emulator. Tokens never reach a log line or an error."""

from __future__ import annotations

import base64
import logging
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from datetime import datetime
from typing import Any

import httpx
import jwt

log = logging.getLogger("gpuproof.github")

MAX_ATTEMPTS = 5
MAX_WAIT_SECONDS = 60.0  # longer waits are not slept through: the job is retried later
TOKEN_MARGIN_SECONDS = 300  # renew an installation token this long before it expires


class GitHubError(Exception):
    """A request GitHub refused or could not answer; carries the status, never a token."""

    def __init__(self, method: str, path: str, status: int, message: str) -> None:
        super().__init__(f"{method} {path} -> {status}: {message}")
        self.status = status


@dataclass
class _Token:
    value: str
    expires_at: float


class GitHubClient:
    def __init__(
        self,
        api_url: str,
        app_id: int,
        private_key_pem: str,
        *,
        timeout: float = 10.0,
        sleep: Callable[[float], None] = time.sleep,
        transport: httpx.BaseTransport | None = None,
    ) -> None:
        self.api_url = api_url.rstrip("/")
        self.app_id = app_id
        self._key = private_key_pem
        self._sleep = sleep
        self._http = httpx.Client(
            timeout=timeout,
            transport=transport,
            headers={
                "accept": "application/vnd.github+json",
                "x-github-api-version": "2022-11-28",
                "user-agent": "gpuproof",
            },
        )
        self._tokens: dict[int, _Token] = {}
        self._lock = threading.Lock()

    # -- authentication -----------------------------------------------------------
    def app_jwt(self) -> str:
        now = int(time.time())
        # Back-dated a minute against clock drift; GitHub allows at most ten minutes.
        claims = {"iat": now - 60, "exp": now + 540, "iss": str(self.app_id)}
        return jwt.encode(claims, self._key, algorithm="RS256")

    def installation_token(self, installation_id: int) -> str:
        with self._lock:
            cached = self._tokens.get(installation_id)
            if cached and cached.expires_at - TOKEN_MARGIN_SECONDS > time.time():
                return cached.value
        data = self._send(
            "POST", f"/app/installations/{installation_id}/access_tokens", auth=f"Bearer {self.app_jwt()}"
        ).json()
        expires = datetime.fromisoformat(data["expires_at"].replace("Z", "+00:00")).timestamp()
        with self._lock:
            self._tokens[installation_id] = _Token(data["token"], expires)
        return str(data["token"])

    def repository_read_token(self, installation_id: int, repo: str) -> tuple[str, str]:
        """A fresh installation token that can only read the contents of one
        repository (for a runner's checkout); returns it and when it expires."""
        data = self._send(
            "POST",
            f"/app/installations/{installation_id}/access_tokens",
            auth=f"Bearer {self.app_jwt()}",
            json={"repositories": [repo.split("/", 1)[1]], "permissions": {"contents": "read"}},
        ).json()
        return str(data["token"]), str(data["expires_at"])

    # -- requests -----------------------------------------------------------------
    def request(
        self,
        installation_id: int,
        method: str,
        path: str,
        *,
        json: Any = None,
        params: dict[str, Any] | None = None,
    ) -> Any:
        response = self._send(
            method, path, auth=f"token {self.installation_token(installation_id)}", json=json, params=params
        )
        return response.json() if response.content else None

    def paginate(
        self, installation_id: int, path: str, params: dict[str, Any] | None = None
    ) -> Iterator[Any]:
        """Every item of a list endpoint, following the Link header page by page."""
        url: str | None = path
        query: dict[str, Any] | None = {"per_page": 100, **(params or {})}
        while url:
            response = self._send(
                "GET", url, auth=f"token {self.installation_token(installation_id)}", params=query
            )
            yield from response.json()
            url = response.links.get("next", {}).get("url")
            query = None  # the next link carries its own query

    def _send(
        self,
        method: str,
        path: str,
        *,
        auth: str,
        json: Any = None,
        params: dict[str, Any] | None = None,
        follow_redirects: bool = False,
    ) -> httpx.Response:
        url = path if path.startswith("http") else f"{self.api_url}{path}"
        shown = path.split("?", 1)[0]
        for attempt in range(1, MAX_ATTEMPTS + 1):
            try:
                # httpx drops the Authorization header on a redirect to another host
                # (a tarball's codeload URL), so the token goes nowhere else.
                response = self._http.request(
                    method,
                    url,
                    json=json,
                    params=params,
                    headers={"authorization": auth},
                    follow_redirects=follow_redirects,
                )
            except httpx.TransportError as exc:
                if attempt == MAX_ATTEMPTS:
                    raise GitHubError(method, shown, 0, f"no answer ({type(exc).__name__})") from None
                self._wait(self._backoff(attempt), f"{method} {shown}: {type(exc).__name__}")
                continue
            wait = self._retry_after(response, attempt)
            if wait is None:
                if response.status_code >= 400:
                    raise GitHubError(method, shown, response.status_code, _message(response))
                return response
            if attempt == MAX_ATTEMPTS or wait > MAX_WAIT_SECONDS:
                raise GitHubError(
                    method,
                    shown,
                    response.status_code,
                    f"{_message(response)} (gave up after {attempt} attempt(s))",
                )
            self._wait(wait, f"{method} {shown}: {response.status_code}")
        raise AssertionError("unreachable: the loop returns or raises")

    def _retry_after(self, response: httpx.Response, attempt: int) -> float | None:
        """How long to wait before retrying, or None when the answer is final."""
        status = response.status_code
        headers = response.headers
        if status >= 500:
            return self._backoff(attempt)
        if status in (403, 429):
            if "retry-after" in headers:  # secondary rate limit
                return float(headers["retry-after"])
            if headers.get("x-ratelimit-remaining") == "0" and "x-ratelimit-reset" in headers:
                return max(0.0, float(headers["x-ratelimit-reset"]) - time.time()) + 1
            if "secondary rate limit" in _message(response).lower():
                return 60.0 * attempt
        return None

    @staticmethod
    def _backoff(attempt: int) -> float:
        return min(2.0 ** (attempt - 1), 30.0)

    def _wait(self, seconds: float, why: str) -> None:
        log.warning("retrying in %.1fs (%s)", seconds, why)
        self._sleep(seconds)

    # -- the operations the App uses ---------------------------------------------------
    def pull_request(self, installation_id: int, repo: str, number: int) -> Any:
        return self.request(installation_id, "GET", f"/repos/{repo}/pulls/{number}")

    def pull_request_files(self, installation_id: int, repo: str, number: int) -> list[Any]:
        """All changed files, through the paginated files API (the diff endpoint
        refuses pull requests of more than 300 files)."""
        return list(self.paginate(installation_id, f"/repos/{repo}/pulls/{number}/files"))

    def create_check_run(self, installation_id: int, repo: str, **fields: Any) -> Any:
        return self.request(installation_id, "POST", f"/repos/{repo}/check-runs", json=fields)

    def update_check_run(self, installation_id: int, repo: str, check_run_id: int, **fields: Any) -> Any:
        return self.request(installation_id, "PATCH", f"/repos/{repo}/check-runs/{check_run_id}", json=fields)

    def check_runs_for(self, installation_id: int, repo: str, sha: str) -> list[Any]:
        data = self.request(
            installation_id, "GET", f"/repos/{repo}/commits/{sha}/check-runs", params={"per_page": 100}
        )
        return list(data["check_runs"])

    def file_at(self, installation_id: int, repo: str, path: str, ref: str) -> str | None:
        """A file's text at a ref, or None when it does not exist there."""
        try:
            data = self.request(installation_id, "GET", f"/repos/{repo}/contents/{path}", params={"ref": ref})
        except GitHubError as exc:
            if exc.status == 404:
                return None
            raise
        return base64.b64decode(data["content"]).decode("utf-8", "replace")

    def tarball(self, installation_id: int, repo: str, ref: str) -> bytes:
        response = self._send(
            "GET",
            f"/repos/{repo}/tarball/{ref}",
            follow_redirects=True,
            auth=f"token {self.installation_token(installation_id)}",
        )
        return response.content

    def review_comments(self, installation_id: int, repo: str, number: int) -> list[Any]:
        return list(self.paginate(installation_id, f"/repos/{repo}/pulls/{number}/comments"))

    def create_review(self, installation_id: int, repo: str, number: int, **fields: Any) -> Any:
        return self.request(installation_id, "POST", f"/repos/{repo}/pulls/{number}/reviews", json=fields)

    def reply_to_review_comment(
        self, installation_id: int, repo: str, number: int, comment: dict[str, Any], body: str, commit_id: str
    ) -> Any:
        """Answer on a review comment's thread (the API wants the comment's place too)."""
        fields = {"body": body, "in_reply_to": comment["id"], "commit_id": commit_id, "path": comment["path"]}
        return self.request(installation_id, "POST", f"/repos/{repo}/pulls/{number}/comments", json=fields)

    def add_reaction(self, installation_id: int, repo: str, comment_id: int, content: str) -> Any:
        return self.request(
            installation_id,
            "POST",
            f"/repos/{repo}/issues/comments/{comment_id}/reactions",
            json={"content": content},
        )

    def permission(self, installation_id: int, repo: str, user: str) -> str:
        """ "admin", "maintain", "write", "triage", "read" or "none"."""
        try:
            data = self.request(installation_id, "GET", f"/repos/{repo}/collaborators/{user}/permission")
        except GitHubError as exc:
            if exc.status == 404:
                return "none"
            raise
        role = str(data.get("role_name") or "")
        return role if role in ("maintain", "triage") else str(data.get("permission") or "none")

    def issue_comments(self, installation_id: int, repo: str, number: int) -> list[Any]:
        return list(self.paginate(installation_id, f"/repos/{repo}/issues/{number}/comments"))

    def create_issue_comment(self, installation_id: int, repo: str, number: int, body: str) -> Any:
        return self.request(
            installation_id, "POST", f"/repos/{repo}/issues/{number}/comments", json={"body": body}
        )

    def update_issue_comment(self, installation_id: int, repo: str, comment_id: int, body: str) -> Any:
        return self.request(
            installation_id, "PATCH", f"/repos/{repo}/issues/comments/{comment_id}", json={"body": body}
        )


def _message(response: httpx.Response) -> str:
    try:
        data = response.json()
    except ValueError:
        return response.reason_phrase or "no message"
    return str(data.get("message", "")) if isinstance(data, dict) else "unexpected body"
