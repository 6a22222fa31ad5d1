"""A local GitHub REST emulator for the tests: it serves the operations of
`../shared/github/openapi/github-subset.json`, validates every request against the
official description (route, auth, JSON body), answers with the description's own
examples (checked against the response schemas), records what was posted, and can be
told to fail (502, secondary rate limits) to exercise retries."""

from __future__ import annotations

import copy
import itertools
import json
import re
import threading
import time
from collections import deque
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit

import jsonschema
import jwt
from referencing import Registry, Resource
from referencing.jsonschema import DRAFT4

SPEC_PATH = Path(__file__).resolve().parents[2] / "shared/github/openapi/github-subset.json"
_SPEC_URI = "urn:github-rest-subset"


@dataclass
class Recorded:
    method: str
    path: str
    query: dict[str, list[str]]
    body: Any
    status: int


@dataclass
class Fault:
    """Answer the next ``times`` requests whose path contains ``path_part`` with this."""

    path_part: str
    status: int
    headers: dict[str, str] = field(default_factory=dict)
    body: dict[str, Any] = field(default_factory=lambda: {"message": "Server Error"})
    times: int = 1


def _openapi_to_jsonschema(node: Any) -> Any:
    """OpenAPI 3.0 `nullable` as JSON Schema null types, and local $refs made absolute."""
    if isinstance(node, list):
        return [_openapi_to_jsonschema(n) for n in node]
    if not isinstance(node, dict):
        return node
    out = {k: _openapi_to_jsonschema(v) for k, v in node.items()}
    ref = out.get("$ref")
    if isinstance(ref, str) and ref.startswith("#"):
        out["$ref"] = _SPEC_URI + ref
    if out.pop("nullable", False):
        if isinstance(out.get("type"), str):
            out["type"] = [out["type"], "null"]
        if "enum" in out:
            out["enum"] = [*out["enum"], None]
    return out


def _pointer(*parts: str) -> str:
    return "/".join(p.replace("~", "~0").replace("/", "~1") for p in parts)


class GitHubEmulator:
    def __init__(self, app_id: int, public_key_pem: str) -> None:
        self.spec = json.loads(SPEC_PATH.read_text())
        converted = _openapi_to_jsonschema(self.spec)
        self.registry = Registry().with_resource(
            _SPEC_URI, Resource.from_contents(converted, default_specification=DRAFT4)
        )
        self.app_id = app_id
        self.public_key = public_key_pem
        self.requests: list[Recorded] = []
        self.violations: list[str] = []
        self.example_drift: list[str] = []
        self.faults: deque[Fault] = deque()
        self.tokens: dict[str, int] = {}
        self.pull_files: dict[int, list[dict[str, Any]]] = {}
        self.token_lifetime_seconds = 3600
        self._ids = itertools.count(1000)
        self._lock = threading.Lock()
        self._routes = [
            (method.upper(), re.compile("^" + re.sub(r"\{[^}]+\}", r"([^/]+)", path) + "$"), path, op)
            for path, ops in self.spec["paths"].items()
            for method, op in ops.items()
            if method in ("get", "post", "patch", "put", "delete")
        ]
        self._server: ThreadingHTTPServer | None = None
        self.base_url = ""

    # -- lifecycle -----------------------------------------------------------------
    def start(self) -> str:
        emulator = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: Any) -> None:  # keep test output quiet
                pass

            def _serve(self) -> None:
                length = int(self.headers.get("content-length") or 0)
                raw = self.rfile.read(length) if length else b""
                status, headers, body = emulator.handle(self.command, self.path, dict(self.headers), raw)
                payload = b"" if body is None else json.dumps(body).encode()
                self.send_response(status)
                self.send_header("content-type", "application/json")
                self.send_header("content-length", str(len(payload)))
                for key, value in headers.items():
                    self.send_header(key, value)
                self.end_headers()
                self.wfile.write(payload)

            do_GET = do_POST = do_PATCH = do_PUT = do_DELETE = _serve

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        threading.Thread(target=self._server.serve_forever, daemon=True).start()
        self.base_url = f"http://127.0.0.1:{self._server.server_address[1]}"
        return self.base_url

    def stop(self) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()

    # -- what tests look at ---------------------------------------------------------
    def posted(self, method: str, path_part: str) -> list[Recorded]:
        return [r for r in self.requests if r.method == method and path_part in r.path and r.status < 400]

    # -- the emulation ---------------------------------------------------------------
    def handle(
        self, method: str, target: str, headers: dict[str, str], raw: bytes
    ) -> tuple[int, dict[str, str], Any]:
        url = urlsplit(target)
        query = parse_qs(url.query)
        body: Any = None
        if raw:
            try:
                body = json.loads(raw)
            except json.JSONDecodeError:
                return self._record(
                    method, url.path, query, raw, 400, {}, {"message": "Problems parsing JSON"}
                )
        route = next(
            (
                (p, op, m.groups())
                for verb, rx, p, op in self._routes
                if verb == method and (m := rx.match(url.path))
            ),
            None,
        )
        if route is None:
            self.violations.append(f"{method} {url.path}: no such operation in the description")
            return self._record(method, url.path, query, body, 404, {}, {"message": "Not Found"})
        template, op, params = route
        with self._lock:
            fault = next((f for f in self.faults if f.path_part in url.path), None)
            if fault is not None:
                fault.times -= 1
                if fault.times <= 0:
                    self.faults.remove(fault)
        if fault is not None:
            return self._record(method, url.path, query, body, fault.status, fault.headers, fault.body)
        denied = self._authenticate(template, headers, params)
        if denied:
            return self._record(method, url.path, query, body, 401, {}, {"message": denied})
        problems = self._validate_body(template, method, op, body)
        if problems:
            self.violations.extend(f"{method} {url.path}: {p}" for p in problems)
            return self._record(
                method, url.path, query, body, 422, {}, {"message": "Validation Failed", "errors": problems}
            )
        status, extra, response = self._respond(template, method, op, params, query, body)
        return self._record(method, url.path, query, body, status, extra, response)

    def _record(
        self,
        method: str,
        path: str,
        query: dict[str, list[str]],
        body: Any,
        status: int,
        headers: dict[str, str],
        response: Any,
    ) -> tuple[int, dict[str, str], Any]:
        with self._lock:
            self.requests.append(Recorded(method, path, query, body, status))
        return status, headers, response

    def _authenticate(self, template: str, headers: dict[str, str], params: tuple[str, ...]) -> str:
        auth = {k.lower(): v for k, v in headers.items()}.get("authorization", "")
        scheme, _, credential = auth.partition(" ")
        if template in (
            "/app",
            "/app/installations/{installation_id}/access_tokens",
            "/repos/{owner}/{repo}/installation",
        ):
            if scheme.lower() != "bearer":
                return "A JSON web token could not be decoded"
            try:
                claims = jwt.decode(credential, self.public_key, algorithms=["RS256"])
            except jwt.PyJWTError as exc:
                return f"A JSON web token could not be decoded ({type(exc).__name__})"
            if str(claims.get("iss")) != str(self.app_id) or claims["exp"] - claims["iat"] > 600:
                return "'Issued at' or 'expiration' time is invalid, or the issuer is not this app"
            return ""
        if scheme.lower() not in ("token", "bearer") or credential not in self.tokens:
            return "Bad credentials"
        return ""

    def _validate_body(self, template: str, method: str, op: dict[str, Any], body: Any) -> list[str]:
        content = ((op.get("requestBody") or {}).get("content") or {}).get("application/json")
        if content is None:
            return []
        if body is None:
            return ["a JSON body is required"] if op["requestBody"].get("required") else []
        pointer = "#/" + _pointer(
            "paths", template, method.lower(), "requestBody", "content", "application/json", "schema"
        )
        validator = jsonschema.Draft4Validator({"$ref": _SPEC_URI + pointer}, registry=self.registry)
        return [f"{'/'.join(map(str, e.path)) or 'body'}: {e.message}" for e in validator.iter_errors(body)]

    def _example(self, op: dict[str, Any], status: str) -> Any:
        content = op["responses"][status]["content"]["application/json"]
        example = next(iter(content["examples"].values()))
        if "$ref" in example:
            example = self.spec["components"]["examples"][example["$ref"].rsplit("/", 1)[-1]]
        return copy.deepcopy(example["value"])

    def _check_response(self, template: str, method: str, status: str, response: Any) -> None:
        pointer = "#/" + _pointer(
            "paths", template, method.lower(), "responses", status, "content", "application/json", "schema"
        )
        validator = jsonschema.Draft4Validator({"$ref": _SPEC_URI + pointer}, registry=self.registry)
        # The description's own examples sometimes lag its schemas (README of shared/github):
        # kept apart, as they are GitHub's inconsistency rather than the client's mistake.
        for error in validator.iter_errors(response):
            self.example_drift.append(f"{template}: {error.message}")

    def _respond(
        self,
        template: str,
        method: str,
        op: dict[str, Any],
        params: tuple[str, ...],
        query: dict[str, list[str]],
        body: Any,
    ) -> tuple[int, dict[str, str], Any]:
        success = next(s for s in op["responses"] if s.startswith("2"))
        if template == "/app/installations/{installation_id}/access_tokens":
            token = f"ghs_emulated{next(self._ids)}"
            self.tokens[token] = int(params[0])
            response = self._example(op, success)
            response["token"] = token
            response["expires_at"] = time.strftime(
                "%Y-%m-%dT%H:%M:%SZ", time.gmtime(time.time() + self.token_lifetime_seconds)
            )
        elif template == "/repos/{owner}/{repo}/pulls/{pull_number}/files":
            return self._files_page(int(params[2]), query, template)
        elif "content" not in (op["responses"][success] or {}):
            return int(success), {}, None
        else:
            response = self._example(op, success)
            if isinstance(response, dict):
                if isinstance(body, dict):
                    response.update(
                        {k: v for k, v in body.items() if k in response and not isinstance(v, dict)}
                    )
                if "id" in response and method in ("POST", "PUT"):
                    response["id"] = next(self._ids)
        self._check_response(template, method, success, response)
        return int(success), {}, response

    def _files_page(
        self, number: int, query: dict[str, list[str]], template: str
    ) -> tuple[int, dict[str, str], Any]:
        files = self.pull_files.get(number, [])
        per_page = min(int(query.get("per_page", ["30"])[0]), 100)
        page = int(query.get("page", ["1"])[0])
        chunk = files[(page - 1) * per_page : page * per_page]
        headers = {}
        if page * per_page < len(files):
            path = template.replace("{pull_number}", str(number))
            headers["link"] = f'<{self.base_url}{path}?per_page={per_page}&page={page + 1}>; rel="next"'

        self._check_response(template, "GET", "200", chunk)
        return 200, headers, chunk

    def add_pull_files(self, number: int, count: int) -> None:
        op = self.spec["paths"]["/repos/{owner}/{repo}/pulls/{pull_number}/files"]["get"]
        template = self._example(op, "200")[0]
        self.pull_files[number] = [
            {**template, "filename": f"crates/kernels/src/op_{i}.rs", "sha": f"{i:040x}"}
            for i in range(count)
        ]
