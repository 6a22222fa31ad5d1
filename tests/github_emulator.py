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
    delay: float = 0.0  # seconds to hang before answering (a stuck request)


_STATEFUL = {
    "/repos/{owner}/{repo}/pulls/{pull_number}": "_pull",
    "/repos/{owner}/{repo}/commits/{ref}/check-runs": "_runs_for",
    "/repos/{owner}/{repo}/check-runs": "_create_run",
    "/repos/{owner}/{repo}/check-runs/{check_run_id}": "_update_run",
    "/repos/{owner}/{repo}/contents/{path}": "_contents",
    "/repos/{owner}/{repo}/tarball/{ref}": "_redirect_tarball",
    "/repos/{owner}/{repo}/pulls/{pull_number}/comments": "_list_review_comments",
    "/repos/{owner}/{repo}/pulls/{pull_number}/reviews": "_create_review",
    "/repos/{owner}/{repo}/issues/{issue_number}/comments": "_issue_comments",
    "/repos/{owner}/{repo}/issues/comments/{comment_id}": "_edit_issue_comment",
    "/repos/{owner}/{repo}/collaborators/{username}/permission": "_permission",
}


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


def _default_of(schema: dict[str, Any]) -> Any:
    kind = schema.get("type")
    if isinstance(kind, list):
        kind = next((k for k in kind if k != "null"), "null")
    if "enum" in schema:
        return schema["enum"][0]
    return {"string": "", "integer": 0, "number": 0, "boolean": False, "array": [], "object": {}}.get(
        str(kind)
    )


def _param_pattern(match: re.Match[str]) -> str:
    return "(.+)" if match.group() == "{path}" else "([^/]+)"  # a file path spans segments


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
        self.faults: deque[Fault] = deque()
        self.tokens: dict[str, int] = {}
        self.token_repositories: dict[str, list[str]] = {}  # a token limited to these repositories, read-only
        self.pull_files: dict[int, list[dict[str, Any]]] = {}
        # A repository's state, enough for a pull request's review.
        self.trees: dict[str, dict[str, bytes]] = {}  # sha -> path -> content
        self.pulls: dict[int, dict[str, Any]] = {}  # number -> head_sha, base_sha, title, body
        self.check_runs: dict[int, dict[str, Any]] = {}
        self.review_comments: list[dict[str, Any]] = []
        self.issue_comments: list[dict[str, Any]] = []
        self.permissions: dict[str, str] = {}  # login -> admin / maintain / write / read (others: 404)
        self.token_lifetime_seconds = 3600
        self._ids = itertools.count(1000)
        self._lock = threading.Lock()
        self._routes = [
            (method.upper(), re.compile("^" + re.sub(r"\{[^}]+\}", _param_pattern, path) + "$"), path, op)
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
                raw_body = isinstance(body, bytes)
                payload = body if raw_body else b"" if body is None else json.dumps(body).encode()
                self.send_response(status)
                self.send_header("content-type", "application/gzip" if raw_body else "application/json")
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
        if url.path.startswith("/_codeload/"):  # where the tarball endpoint redirects
            tarball = self._tarball(url.path.rsplit("/", 1)[-1])
            return self._record(method, url.path, query, None, 200, {}, tarball)
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
            time.sleep(fault.delay)
            return self._record(method, url.path, query, body, fault.status, fault.headers, fault.body)
        denied = self._authenticate(template, headers, params, method)
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

    def _authenticate(
        self, template: str, headers: dict[str, str], params: tuple[str, ...], method: str
    ) -> str:
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
        scoped = self.token_repositories.get(credential)
        if scoped is not None and (len(params) < 2 or params[1] not in scoped or method != "GET"):
            return "Resource not accessible by integration"
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
        """Make the answer valid for the response schema. The description's own examples
        sometimes lag its schemas (a field that became required); such a field is added
        with a value of its type. Anything else invalid is a violation."""
        pointer = "#/" + _pointer(
            "paths", template, method.lower(), "responses", status, "content", "application/json", "schema"
        )
        validator = jsonschema.Draft4Validator({"$ref": _SPEC_URI + pointer}, registry=self.registry)
        for _ in range(20):
            errors = list(validator.iter_errors(response))
            missing = [e for e in errors if e.validator == "required"]
            if not errors:
                return
            if not missing:
                break
            for error in missing:
                name = error.message.split("'")[1]
                spec = (error.schema.get("properties") or {}).get(name, {})
                error.instance[name] = _default_of(spec)
        for error in validator.iter_errors(response):
            self.violations.append(f"emulator answered {template} with an invalid body: {error.message}")

    def _respond(
        self,
        template: str,
        method: str,
        op: dict[str, Any],
        params: tuple[str, ...],
        query: dict[str, list[str]],
        body: Any,
    ) -> tuple[int, dict[str, str], Any]:
        success = next(s for s in op["responses"] if s[0] in "23")
        if template == "/app/installations/{installation_id}/access_tokens":
            token = f"ghs_emulated{next(self._ids)}"
            self.tokens[token] = int(params[0])
            if isinstance(body, dict) and body.get("repositories"):
                self.token_repositories[token] = list(body["repositories"])
            response = self._example(op, success)
            response["token"] = token
            response["expires_at"] = time.strftime(
                "%Y-%m-%dT%H:%M:%SZ", time.gmtime(time.time() + self.token_lifetime_seconds)
            )
        elif template == "/repos/{owner}/{repo}/pulls/{pull_number}/files":
            return self._files_page(int(params[2]), query, template)
        elif template in _STATEFUL:
            status, extra, response = getattr(self, _STATEFUL[template])(
                op, success, method, params, query, body
            )
            if isinstance(response, (dict, list)) and status < 300:
                self._check_response(template, method, str(status), response)
            return status, extra, response
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

    # -- stateful operations -----------------------------------------------------------
    def _pull(
        self, op: dict[str, Any], ok: str, method: str, params: tuple[str, ...], query: Any, body: Any
    ) -> Any:
        pull = self.pulls.get(int(params[2]))
        if pull is None:
            return 404, {}, {"message": "Not Found"}
        response = self._example(op, ok)
        response.update(
            number=int(params[2]),
            title=pull["title"],
            body=pull["body"],
            html_url=f"https://github.com/{params[0]}/{params[1]}/pull/{params[2]}",
        )
        response["head"]["sha"], response["base"]["sha"] = pull["head_sha"], pull["base_sha"]
        response["head"]["repo"]["full_name"] = pull.get("head_repository") or f"{params[0]}/{params[1]}"
        response["user"]["login"] = pull.get("author", response["user"]["login"])
        return 200, {}, response

    def _runs_for(
        self, op: dict[str, Any], ok: str, method: str, params: tuple[str, ...], query: Any, body: Any
    ) -> Any:
        runs = [r for r in self.check_runs.values() if r["head_sha"] == params[2]]
        return 200, {}, {"total_count": len(runs), "check_runs": runs}

    def _create_run(
        self, op: dict[str, Any], ok: str, method: str, params: tuple[str, ...], query: Any, body: Any
    ) -> Any:
        run = self._example(op, ok)
        run.update(
            id=next(self._ids),
            name=body["name"],
            head_sha=body["head_sha"],
            status=body.get("status", "queued"),
            conclusion=body.get("conclusion"),
            completed_at=None,
        )
        output = body.get("output") or {}
        run["output"] = {
            **run["output"],
            "title": output.get("title"),
            "summary": output.get("summary"),
            "annotations_count": 0,
        }
        self.check_runs[run["id"]] = run
        return 201, {}, run

    def _update_run(
        self, op: dict[str, Any], ok: str, method: str, params: tuple[str, ...], query: Any, body: Any
    ) -> Any:
        run = self.check_runs[int(params[2])]
        output = body.get("output") or {}
        run["output"]["annotations_count"] += len(output.get("annotations") or [])
        run["output"].update({k: output[k] for k in ("title", "summary") if k in output})
        run.update({k: body[k] for k in ("status", "conclusion") if k in body})
        run.setdefault("_annotations", []).extend(output.get("annotations") or [])
        return 200, {}, {k: v for k, v in run.items() if not k.startswith("_")}

    def _contents(
        self, op: dict[str, Any], ok: str, method: str, params: tuple[str, ...], query: Any, body: Any
    ) -> Any:
        import base64

        ref = query.get("ref", [""])[0]
        data = self.trees.get(ref, {}).get(params[2])
        if data is None:
            return 404, {}, {"message": "Not Found"}
        response = self._example(op, ok)
        response.update(
            path=params[2], content=base64.b64encode(data).decode(), encoding="base64", size=len(data)
        )
        return 200, {}, response

    def _redirect_tarball(
        self, op: dict[str, Any], ok: str, method: str, params: tuple[str, ...], query: Any, body: Any
    ) -> Any:
        return 302, {"location": f"{self.base_url}/_codeload/{params[0]}/{params[1]}/{params[2]}"}, None

    def _tarball(self, sha: str) -> bytes:
        import io
        import tarfile

        out = io.BytesIO()
        with tarfile.open(fileobj=out, mode="w:gz") as archive:
            for path, data in self.trees.get(sha, {}).items():
                info = tarfile.TarInfo(f"octo-kernels-{sha[:7]}/{path}")
                info.size = len(data)
                archive.addfile(info, io.BytesIO(data))
        return out.getvalue()

    def _list_review_comments(
        self, op: dict[str, Any], ok: str, method: str, params: tuple[str, ...], query: Any, body: Any
    ) -> Any:
        if method == "GET":
            return 200, {}, [c for c in self.review_comments if c["_pull"] == int(params[2])]
        reply_to = next(c for c in self.review_comments if c["id"] == body["in_reply_to"])
        return (
            201,
            {},
            self._review_comment(
                int(params[2]), reply_to["path"], reply_to["line"], body["body"], in_reply_to=reply_to["id"]
            ),
        )

    def _review_comment(
        self, number: int, path: str, line: int, text: str, in_reply_to: int | None = None
    ) -> Any:
        op = self.spec["paths"]["/repos/{owner}/{repo}/pulls/{pull_number}/comments"]["get"]
        comment = self._example(op, "200")[0]
        comment.update(id=next(self._ids), path=path, line=line, body=text)
        comment.pop("in_reply_to_id", None)
        if in_reply_to is not None:
            comment["in_reply_to_id"] = in_reply_to
        self.review_comments.append({**comment, "_pull": number})
        return comment

    def _create_review(
        self, op: dict[str, Any], ok: str, method: str, params: tuple[str, ...], query: Any, body: Any
    ) -> Any:
        for c in body.get("comments") or []:
            self._review_comment(int(params[2]), c["path"], c["line"], c["body"])
        review = self._example(op, ok)
        review.update(id=next(self._ids), body=body.get("body", ""), commit_id=body.get("commit_id"))
        return 200, {}, review

    def _issue_comments(
        self, op: dict[str, Any], ok: str, method: str, params: tuple[str, ...], query: Any, body: Any
    ) -> Any:
        if method == "GET":
            return 200, {}, [c for c in self.issue_comments if c["_issue"] == int(params[2])]
        comment = self._example(op, ok)
        comment.update(id=next(self._ids), body=body["body"])
        self.issue_comments.append({**comment, "_issue": int(params[2])})
        return 201, {}, comment

    def _edit_issue_comment(
        self, op: dict[str, Any], ok: str, method: str, params: tuple[str, ...], query: Any, body: Any
    ) -> Any:
        comment = next(c for c in self.issue_comments if c["id"] == int(params[2]))
        comment["body"] = body["body"]
        return 200, {}, {k: v for k, v in comment.items() if not k.startswith("_")}

    def _permission(
        self, op: dict[str, Any], ok: str, method: str, params: tuple[str, ...], query: Any, body: Any
    ) -> Any:
        level = self.permissions.get(params[2])
        if level is None:
            return 404, {}, {"message": "Not Found"}
        response = self._example(op, ok)
        response["permission"] = "write" if level == "maintain" else level
        response["role_name"] = level
        response["user"]["login"] = params[2]
        return 200, {}, response

    def add_pull(
        self,
        number: int,
        head_sha: str,
        base_sha: str,
        title: str = "",
        body: str = "",
        *,
        author: str = "octocat",
        head_repository: str = "",
    ) -> None:
        """``head_repository`` defaults to the pull request's own repository (not a fork)."""
        self.pulls[number] = {
            "head_sha": head_sha,
            "base_sha": base_sha,
            "title": title,
            "body": body,
            "author": author,
            "head_repository": head_repository,
        }

    def add_pull_files(self, number: int, count: int) -> None:
        op = self.spec["paths"]["/repos/{owner}/{repo}/pulls/{pull_number}/files"]["get"]
        template = self._example(op, "200")[0]
        self.pull_files[number] = [
            {**template, "filename": f"crates/kernels/src/op_{i}.rs", "sha": f"{i:040x}"}
            for i in range(count)
        ]
