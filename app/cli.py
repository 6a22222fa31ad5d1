"""The ``gpuproof`` command.

Exit codes of ``check``: 0 no error-level finding, 1 at least one, 2 bad input
(a missing path, an invalid config, a malformed diff), always with a message and
never a traceback.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from collections.abc import Sequence
from fnmatch import fnmatch
from pathlib import Path
from typing import TYPE_CHECKING

from app import __version__, gitlocal
from app.checks.model import Severity
from app.checks.review import review
from app.checks.rules import BY_ID, RULES
from app.config import CONFIG_PATH, ConfigError, RepoConfig, load_config, parse_config
from app.diff import DiffError, moved_lines, touched_lines
from app.report.checkrun import github_linker, plain_location, render
from app.report.jsonout import render_json
from app.report.review_text import render_review_text
from app.report.rules_doc import explain, rules_markdown
from app.report.sarif import render_sarif
from app.report.text import render_text
from app.scan import ScanError, ScanResult, find_rust_files, load_sources, read_files, scan, utf8_notes
from app.settings import ServiceSettings, SettingsError, app_credentials, service_settings

if TYPE_CHECKING:
    from fastapi import APIRouter

    from app.queue.jobs import JobQueue

DEFAULT_BASELINE = ".github/gpuproof-baseline.json"


class UsageError(Exception):
    """Bad input from the user: reported in one line, exit code 2."""


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="gpuproof", description=__doc__.splitlines()[0] if __doc__ else "")
    parser.add_argument("--version", action="version", version=f"gpuproof {__version__}")
    sub = parser.add_subparsers(dest="command", required=True)

    check = sub.add_parser("check", help="scan Rust sources for fake-GPU patterns")
    _scan_arguments(check)
    check.add_argument("--format", choices=("text", "json", "sarif"), default="text")
    check.add_argument(
        "--diff",
        metavar="FILE",
        help="unified diff ('-' for stdin): report only findings in the functions it touches",
    )
    check.add_argument("--base", metavar="REV", help="like --diff, with `git diff REV`")
    check.add_argument(
        "--baseline",
        metavar="FILE",
        help="ignore findings recorded in this baseline (default: the config's `baseline`)",
    )
    check.add_argument("--no-baseline", action="store_true", help="report baselined findings too")
    check.add_argument("--output", "-o", metavar="FILE", help="write the report here, not stdout")

    baseline = sub.add_parser("baseline", help="record today's findings so only new ones fail")
    _scan_arguments(baseline)
    baseline.add_argument(
        "--output",
        "-o",
        metavar="FILE",
        help=f"where to write it (default: the config's `baseline`, else {DEFAULT_BASELINE})",
    )

    review_cmd = sub.add_parser(
        "review", help="what the App would post for a branch: check runs and inline comments"
    )
    review_cmd.add_argument("--base", required=True, metavar="REV", help="the pull request's base")
    review_cmd.add_argument(
        "--head", metavar="REV", help="the pull request's head (default: the working tree)"
    )
    review_cmd.add_argument(
        "--body", metavar="FILE", help="the PR description ('-' for stdin; default: the commit messages)"
    )
    review_cmd.add_argument("--title", default=None, help="the PR title (default: from the commits)")
    review_cmd.add_argument("--format", choices=("text", "json"), default="text")
    review_cmd.add_argument("--root", type=Path, default=Path.cwd(), help="inside the git checkout")
    review_cmd.add_argument("--no-cache", action="store_true", help="ignore and do not write the cache")

    serve = sub.add_parser("serve", help="the webhook endpoint (needs GITHUB_WEBHOOK_SECRET, REDIS_URL)")
    serve.add_argument("--host", default="127.0.0.1")
    serve.add_argument("--port", type=int, default=8000)

    worker = sub.add_parser(
        "worker", help="run jobs from Redis (needs GITHUB_APP_ID, GITHUB_PRIVATE_KEY[_PATH], REDIS_URL)"
    )
    worker.add_argument(
        "--name", default=None, help="this worker's name in the consumer group (default: host-pid)"
    )
    worker.add_argument(
        "--stale-after-ms",
        type=int,
        default=60_000,
        help="claim a job that another worker took but did not finish after this long",
    )

    runner = sub.add_parser(
        "runner", help="pull GPU test jobs from the App and run them (on the GPU host)", add_help=False
    )
    runner.add_argument("runner_args", nargs=argparse.REMAINDER)
    token = sub.add_parser(
        "runner-token", help="register a runner and print its token once (needs REDIS_URL)"
    )
    token.add_argument("name", help="the runner's name, shown in check runs")
    token.add_argument("--revoke", action="store_true", help="invalidate the runner's token instead")

    explain_cmd = sub.add_parser("explain", help="what a rule flags, why, and what to write instead")
    explain_cmd.add_argument("rule")
    sub.add_parser("rules", help="list the rules")
    sub.add_parser("docs", help="print docs/rules.md, generated from the rules")
    return parser


def _scan_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("paths", nargs="*", type=Path, help="files or directories (default: the root)")
    parser.add_argument(
        "--root",
        type=Path,
        help="the workspace root that paths in the report are "
        "relative to (default: the single directory given, "
        "else the current directory)",
    )
    parser.add_argument("--config", type=Path, help="a gpuproof.yml (default: ROOT/.github/gpuproof.yml)")
    parser.add_argument("--no-cache", action="store_true", help="ignore and do not write the cache")


def _root_of(args: argparse.Namespace) -> Path:
    if args.root is not None:
        return Path(args.root)
    if len(args.paths) == 1 and args.paths[0].is_dir():
        return Path(args.paths[0])
    return Path.cwd()


def _config(args: argparse.Namespace, root: Path) -> RepoConfig:
    known = set(BY_ID)
    if args.config is None:
        return load_config(root, known)
    try:
        text = args.config.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigError(f"{args.config}: cannot be read: {exc}") from None
    return parse_config(text, known, str(args.config))


def _load_baseline(path: Path) -> dict[str, int]:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
        fingerprints = data["fingerprints"]
        if not isinstance(fingerprints, dict):
            raise TypeError("'fingerprints' is not an object")
        return {str(k): int(v) for k, v in fingerprints.items()}
    except FileNotFoundError:
        raise UsageError(f"baseline {path} does not exist (create it with `gpuproof baseline`)") from None
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise UsageError(f"baseline {path} is not a gpuproof baseline: {exc}") from None


def _touched(args: argparse.Namespace, root: Path) -> dict[str, frozenset[int]] | None:
    if args.diff and args.base:
        raise UsageError("give either --diff or --base, not both")
    if args.diff:
        try:
            text = sys.stdin.read() if args.diff == "-" else Path(args.diff).read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as exc:
            raise UsageError(f"cannot read the diff {args.diff}: {exc}") from None
        return touched_lines(text)
    if args.base:
        text = gitlocal.diff(root, args.base)
        return touched_lines(text, strip_prefix=gitlocal.prefix(root))
    return None


class LineReader:
    """Reads the offending lines for the text report, each file once."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.files: dict[str, list[str]] = {}

    def __call__(self, path: str, line: int) -> str:
        if path not in self.files:
            try:
                self.files[path] = (
                    (self.root / path).read_text(encoding="utf-8", errors="replace").splitlines()
                )
            except OSError:
                self.files[path] = []
        lines = self.files[path]
        return lines[line - 1] if 0 < line <= len(lines) else ""


def _run_check(args: argparse.Namespace) -> int:
    root = _root_of(args)
    config = _config(args, root)
    baseline = None
    if not args.no_baseline:
        baseline_path = (
            Path(args.baseline) if args.baseline else (root / config.baseline if config.baseline else None)
        )
        if baseline_path is not None:
            baseline = _load_baseline(baseline_path)
    started = time.perf_counter()
    result = scan(root, list(args.paths), config, _touched(args, root), baseline, not args.no_cache)
    seconds = time.perf_counter() - started
    if args.format == "json":
        report = render_json(result, seconds)
    elif args.format == "sarif":
        report = render_sarif(result)
    else:
        report = render_text(result, LineReader(root), seconds)
    _emit(report, args.output)
    return 1 if _has_errors(result) else 0


def _has_errors(result: ScanResult) -> bool:
    return any(f.severity == Severity.ERROR for f in result.analysis.findings)


def _emit(text: str, output: str | None) -> None:
    if output:
        try:
            Path(output).write_text(text + "\n", encoding="utf-8")
        except OSError as exc:
            raise UsageError(f"cannot write {output}: {exc}") from None
    else:
        sys.stdout.write(text + "\n")


def _run_baseline(args: argparse.Namespace) -> int:
    root = _root_of(args)
    config = _config(args, root)
    result = scan(root, list(args.paths), config, None, None, not args.no_cache)
    counts: dict[str, int] = {}
    for finding in result.analysis.findings:
        counts[finding.fingerprint] = counts.get(finding.fingerprint, 0) + 1
    output = Path(args.output) if args.output else root / (config.baseline or DEFAULT_BASELINE)
    document = {
        "version": 1,
        "tool": f"gpuproof {__version__}",
        "fingerprints": dict(sorted(counts.items())),
        "findings": [
            {"fingerprint": f.fingerprint, "rule": f.rule, "path": f.path, "function": f.function}
            for f in result.analysis.findings
        ],
    }
    try:
        output.parent.mkdir(parents=True, exist_ok=True)
        output.write_text(json.dumps(document, indent=2) + "\n", encoding="utf-8")
    except OSError as exc:
        raise UsageError(f"cannot write {output}: {exc}") from None
    print(f"gpuproof: recorded {len(result.analysis.findings)} finding(s) in {output}")
    return 0


def _run_review(args: argparse.Namespace) -> int:
    root = gitlocal.toplevel(args.root)
    base = gitlocal.resolve(root, args.base)
    head = gitlocal.resolve(root, args.head) if args.head else None
    # The base branch's config, so a change cannot switch off its own checks.
    config_text = gitlocal.show(root, base, CONFIG_PATH)
    config = parse_config(config_text, set(BY_ID)) if config_text else RepoConfig()
    diff = gitlocal.diff(root, base, head)
    touched = touched_lines(diff)
    if head:
        contents = {
            p: d
            for p, d in gitlocal.files_at(root, head, ".rs").items()
            if not any(fnmatch(p, x) for x in config.exclude)
        }
        notes = [n for p, d in contents.items() for n in utf8_notes(p, d)]
    else:
        contents, notes = read_files(root, find_rust_files(root, [], config.exclude))
    sources, _ = load_sources(contents, not args.no_cache)
    title, body = _description(args, root, base, head)
    result = review(sources, config, touched, title, body, moved_lines(diff))
    result.code.notes[:0] = notes
    repository = gitlocal.github_url(root)
    link = github_linker(repository, head or "HEAD") if repository else plain_location
    rendered = render(result, link)
    _emit(json.dumps(rendered, indent=2) if args.format == "json" else render_review_text(rendered), None)
    failed = any(c["conclusion"] == "failure" for c in rendered["checks"])
    return 1 if failed else 0


def _description(args: argparse.Namespace, root: Path, base: str, head: str | None) -> tuple[str, str]:
    if args.body:
        try:
            body = sys.stdin.read() if args.body == "-" else Path(args.body).read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as exc:
            raise UsageError(f"cannot read the description {args.body}: {exc}") from None
        return args.title or "", body
    found = gitlocal.messages(root, base, head or "HEAD")
    if not found:
        return args.title or "", ""
    subject, _, rest = found[-1].partition("\n")  # the oldest commit names the change
    others = "\n\n".join(found[:-1])
    return args.title or subject, "\n\n".join(p for p in (rest.strip(), others) if p)


def _run_serve(args: argparse.Namespace) -> int:
    import logging

    import uvicorn

    from app.queue.jobs import JobQueue
    from app.webhooks.server import create_app

    settings = service_settings()
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    queue = JobQueue.from_url(settings.redis_url)
    app = create_app(settings, queue, _runner_router(settings, queue))
    # Runners' long polls would hold a graceful shutdown open; they retry elsewhere.
    uvicorn.run(app, host=args.host, port=args.port, log_level="info", timeout_graceful_shutdown=5)
    return 0


def _runner_router(settings: ServiceSettings, queue: JobQueue) -> APIRouter:
    """The runner protocol; it hands out checkout tokens, so it acts as the App when
    the App's credentials are set (without them, claims answer 503)."""
    from app.github.client import GitHubClient
    from app.queue.gpu_jobs import GpuQueue
    from app.runner_api import runner_router

    github = None
    if os.environ.get("GITHUB_APP_ID"):
        credentials = app_credentials()
        github = GitHubClient(
            credentials.github_api_url, credentials.app_id, credentials.private_key.reveal()
        )
    gpu = GpuQueue(queue.client, lease_seconds=settings.gpu_lease_seconds)
    return runner_router(gpu, github, Path(settings.artifact_dir))


def _run_worker(args: argparse.Namespace) -> int:
    import logging
    import os
    import signal
    import socket
    import threading

    from app.github.client import GitHubClient
    from app.queue.jobs import JobQueue
    from app.worker import Worker

    credentials = app_credentials()
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    github = GitHubClient(credentials.github_api_url, credentials.app_id, credentials.private_key.reveal())
    name = args.name or f"{socket.gethostname()}-{os.getpid()}"
    stop = threading.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda *_: stop.set())
    Worker(JobQueue.from_url(credentials.redis_url), github, name, args.stale_after_ms).run(stop)
    return 0


def _run_runner_token(args: argparse.Namespace) -> int:
    import redis

    from app.queue.gpu_jobs import GpuQueue

    url = os.environ.get("REDIS_URL", "redis://127.0.0.1:6379/0")
    gpu = GpuQueue(redis.Redis.from_url(url, socket_connect_timeout=2))
    try:
        if args.revoke:
            if not gpu.revoke_runner(args.name):
                raise UsageError(f"no runner named '{args.name}' is registered")
            print(f"runner '{args.name}': token revoked", file=sys.stderr)
            return 0
        token = gpu.register_runner(args.name)
    except redis.RedisError as exc:
        raise UsageError(f"Redis at REDIS_URL cannot be reached ({type(exc).__name__})") from None
    print(token)
    print(f"runner '{args.name}' registered; give it this token (shown only now)", file=sys.stderr)
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv[:1] == ["runner"]:  # the runner has its own, standard-library-only, argument parser
        from app.runner.agent import main as runner_main

        return runner_main(argv[1:])
    args = _parser().parse_args(argv)
    try:
        if args.command == "check":
            return _run_check(args)
        if args.command == "baseline":
            return _run_baseline(args)
        if args.command == "review":
            return _run_review(args)
        if args.command == "serve":
            return _run_serve(args)
        if args.command == "worker":
            return _run_worker(args)
        if args.command == "runner-token":
            return _run_runner_token(args)
        if args.command == "explain":
            rule = BY_ID.get(args.rule)
            if rule is None:
                raise UsageError(f"unknown rule '{args.rule}'; known rules: {', '.join(BY_ID)}")
            print(explain(rule))
        elif args.command == "rules":
            for rule in RULES:
                print(f"{rule.id:28} {rule.severity!s:8} {rule.summary}")
        elif args.command == "docs":
            sys.stdout.write(rules_markdown())
        return 0
    except (UsageError, ConfigError, DiffError, ScanError, gitlocal.GitError, SettingsError) as exc:
        print(f"gpuproof: error: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        return 130


if __name__ == "__main__":
    sys.exit(main())
