"""The "review-pr" job: fetch a pull request, review it with the pure core, and
answer in GitHub's vocabulary. Every effect is idempotent, because a job can run
twice (at-least-once delivery): check runs are found by name on the head SHA before
one is created, inline comments are keyed by finding fingerprints (in Redis and in a
hidden marker), and the summary comment is found by its marker and edited."""

from __future__ import annotations

import io
import re
import tarfile
from collections.abc import Iterable
from dataclasses import dataclass
from fnmatch import fnmatch
from typing import Any

from app.checks.description import KERNEL_SOURCE_PATH
from app.checks.engine import Touched
from app.checks.review import Review, review
from app.checks.rules import BY_ID
from app.config import CONFIG_PATH, ConfigError, RepoConfig, parse_config
from app.diff import DiffError, moved_lines, touched_lines
from app.github.client import GitHubClient
from app.queue.jobs import Job, PullRequestState
from app.report.checkrun import CODE_CHECK, DESCRIPTION_CHECK, github_linker, render
from app.scan import load_sources

MAX_INLINE_COMMENTS = 30
ANNOTATIONS_PER_REQUEST = 50  # the Checks API limit
MAX_FILE_BYTES = 4 * 1024 * 1024
MAX_TREE_BYTES = 512 * 1024 * 1024
SUMMARY_MARKER = "<!-- gpuproof:summary -->"
_FINDING_MARKER = re.compile(r"<!-- gpuproof:finding (\S+) -->")


@dataclass
class PullRequest:
    repository: str
    number: int
    head_sha: str
    base_sha: str
    title: str
    body: str
    html_url: str


def review_pull_request(github: GitHubClient, state: PullRequestState, job: Job) -> str:
    """Run the job; returns what happened, in a word, for the log."""
    inst, repo = job.installation_id, job.repository
    head = str(job.payload["head_sha"])
    if not state.is_current(head):
        return "superseded"
    data = github.pull_request(inst, repo, int(str(job.payload["number"])))
    pr = PullRequest(
        repo,
        int(data["number"]),
        data["head"]["sha"],
        data["base"]["sha"],
        data["title"] or "",
        data["body"] or "",
        data["html_url"],
    )
    if pr.head_sha != head:
        return "superseded"  # a newer push is on its way
    runs = {name: _check_run(github, inst, repo, head, name) for name in (CODE_CHECK, DESCRIPTION_CHECK)}
    try:
        config = _config(github, inst, pr)
    except ConfigError as exc:
        _neutral(
            github,
            inst,
            repo,
            runs.values(),
            "Invalid .github/gpuproof.yml",
            f"The base branch's configuration cannot be used: {exc}",
        )
        return "invalid-config"
    touched, moved = _touched(github, inst, pr)
    sources, _ = load_sources(_rust_sources(github.tarball(inst, repo, head), config))
    result = review(sources, config, touched, pr.title, pr.body, moved)
    if not state.is_current(head):
        _neutral(
            github,
            inst,
            repo,
            runs.values(),
            "Superseded by a newer push",
            "A newer commit of this pull request is being reviewed.",
        )
        return "superseded"
    rendered = render(result, github_linker(pr.html_url.split("/pull/")[0], head))
    for check in rendered["checks"]:
        _complete(github, inst, repo, runs[check["name"]], check)
    _comment(github, state, inst, pr, rendered["comments"], result)
    _summary(github, inst, pr, rendered)
    return "reviewed"


def _neutral(
    github: GitHubClient, inst: int, repo: str, run_ids: Iterable[int], title: str, summary: str
) -> None:
    """Complete check runs that have nothing to judge (never left in progress)."""
    for run_id in run_ids:
        github.update_check_run(
            inst,
            repo,
            run_id,
            status="completed",
            conclusion="neutral",
            output={"title": title, "summary": summary},
        )


def _check_run(github: GitHubClient, inst: int, repo: str, head: str, name: str) -> int:
    for run in github.check_runs_for(inst, repo, head):
        if run["name"] == name:
            github.update_check_run(inst, repo, run["id"], status="in_progress")
            return int(run["id"])
    return int(github.create_check_run(inst, repo, name=name, head_sha=head, status="in_progress")["id"])


def _config(github: GitHubClient, inst: int, pr: PullRequest) -> RepoConfig:
    # From the base: a pull request cannot switch off its own checks.
    text = github.file_at(inst, pr.repository, CONFIG_PATH, pr.base_sha)
    return parse_config(text, set(BY_ID)) if text else RepoConfig()


def _touched(github: GitHubClient, inst: int, pr: PullRequest) -> tuple[Touched, Touched]:
    """The lines the pull request writes in each Rust and kernel source file (a changed
    `.cu` changes the Rust functions that launch it, as in `gpuproof review`), and those
    of them it only moves (from any file, removed ones included)."""
    touched: dict[str, frozenset[int]] = {}
    patches: list[str] = []  # those that parse, removed files' included: code moves out of them
    for changed in github.pull_request_files(inst, pr.repository, pr.number):
        path = changed["filename"]
        if not (path.endswith(".rs") or KERNEL_SOURCE_PATH.search(path)):
            continue
        removed = changed["status"] == "removed"
        patch = changed.get("patch")
        if patch is None:  # too large for the API to show: the whole file counts as changed
            if not removed:
                touched[path] = frozenset(range(1, 1_000_000))
            continue
        text = f"--- a/{path}\n+++ b/{path}\n{patch}\n"
        try:
            lines = touched_lines(text)
        except DiffError:
            if not removed:
                touched[path] = frozenset(range(1, 1_000_000))
            continue
        patches.append(text)
        if not removed:
            touched.update(lines)
    return touched, moved_lines("".join(patches))


def _rust_sources(tarball: bytes, config: RepoConfig) -> dict[str, bytes]:
    """The .rs files of a repository tarball, extracted in memory and safely: no
    links, no absolute or parent paths, no oversized files."""
    files: dict[str, bytes] = {}
    total = 0
    with tarfile.open(fileobj=io.BytesIO(tarball), mode="r:*") as archive:
        for member in archive:
            if not member.isfile() or not member.name.endswith(".rs") or member.size > MAX_FILE_BYTES:
                continue
            parts = member.name.split("/")[1:]  # drop GitHub's "<owner>-<repo>-<sha>/" prefix
            if not parts or any(p in ("", "..") for p in parts) or member.name.startswith("/"):
                continue
            path = "/".join(parts)
            if any(fnmatch(path, pattern) for pattern in config.exclude):
                continue
            total += member.size
            if total > MAX_TREE_BYTES:
                break  # the rest of a huge tree is not indexed; the review still runs
            handle = archive.extractfile(member)
            if handle is not None:
                files[path] = handle.read()
    return files


def _complete(github: GitHubClient, inst: int, repo: str, run_id: int, check: dict[str, Any]) -> None:
    annotations = check["annotations"]
    batches = [
        annotations[i : i + ANNOTATIONS_PER_REQUEST]
        for i in range(0, len(annotations), ANNOTATIONS_PER_REQUEST)
    ] or [[]]
    for batch in batches[:-1]:  # more than 50: earlier batches first, the run still in progress
        github.update_check_run(
            inst,
            repo,
            run_id,
            output={"title": check["title"], "summary": check["summary"], "annotations": batch},
        )
    github.update_check_run(
        inst,
        repo,
        run_id,
        status="completed",
        conclusion=check["conclusion"],
        output={"title": check["title"], "summary": check["summary"], "annotations": batches[-1]},
    )


def _comment(
    github: GitHubClient,
    state: PullRequestState,
    inst: int,
    pr: PullRequest,
    comments: list[dict[str, Any]],
    result: Review,
) -> None:
    existing = github.review_comments(inst, pr.repository, pr.number)
    posted = {m.group(1): c for c in existing if (m := _FINDING_MARKER.search(c.get("body") or ""))}
    already = state.commented() | set(posted)
    fresh = [c for c in comments if _fingerprint(c) not in already]
    if fresh:
        inline, rest = fresh[:MAX_INLINE_COMMENTS], fresh[MAX_INLINE_COMMENTS:]
        body = f"gpuproof found {len(fresh)} new issue(s) in this push."
        if rest:
            body += f' {len(rest)} more are listed in the "{CODE_CHECK}" check run.'
        github.create_review(
            inst,
            pr.repository,
            pr.number,
            commit_id=pr.head_sha,
            event="COMMENT",
            body=body,
            comments=[
                {"path": c["path"], "line": c["line"], "side": "RIGHT", "body": c["body"]} for c in inline
            ],
        )
        state.remember_commented([_fingerprint(c) for c in inline])
    current = {f.fingerprint for f in result.code.findings}
    for fingerprint, comment in posted.items():
        if (
            fingerprint not in current
            and not comment.get("in_reply_to_id")
            and not state.acknowledged(fingerprint)
        ):
            github.reply_to_review_comment(
                inst,
                pr.repository,
                pr.number,
                comment,
                f"Fixed in {pr.head_sha[:12]}: gpuproof no longer finds this.",
                pr.head_sha,
            )
            state.remember_acknowledged(fingerprint)


def _fingerprint(comment: dict[str, Any]) -> str:
    found = _FINDING_MARKER.search(comment["body"])
    return found.group(1) if found else ""


def _summary(github: GitHubClient, inst: int, pr: PullRequest, rendered: dict[str, Any]) -> None:
    lines = [SUMMARY_MARKER, f"**gpuproof** reviewed {pr.head_sha[:12]}:", ""]
    lines += [f"- {c['name']}: **{c['conclusion']}**: {c['title']}" for c in rendered["checks"]]
    body = "\n".join(lines)
    for comment in github.issue_comments(inst, pr.repository, pr.number):
        if SUMMARY_MARKER in (comment.get("body") or ""):
            github.update_issue_comment(inst, pr.repository, comment["id"], body)
            return
    github.create_issue_comment(inst, pr.repository, pr.number, body)
