"""GPU test dispatch, on the worker: which pushes run the repository's GPU test jobs,
whom to trust, and the "gpuproof / gpu-tests (<job>)" check runs that show each
job's state (queued -> in_progress -> completed; never left in progress: a lost
runner's lease, a cancel and a queue timeout all complete it).

Trust is bound to a commit. A pull request from this repository by an author with
write permission runs automatically; any other runs only after `/gpuproof gpu-test`
(or a configured label) from someone with write permission, and that approval covers
the head SHA it was given on, not later pushes.
"""

from __future__ import annotations

import logging
from collections.abc import Callable

from app.checks.rules import BY_ID
from app.config import CONFIG_PATH, ConfigError, RepoConfig, parse_config
from app.github.client import GitHubClient
from app.gpu_config import GpuJobSpec
from app.queue.gpu_jobs import GpuJob, GpuQueue
from app.queue.jobs import Job
from app.report.gpu_checkrun import render_gpu_check

log = logging.getLogger("gpuproof.gpu")
WRITERS = ("admin", "maintain", "write")


def config_at(github: GitHubClient, inst: int, repo: str, ref: str) -> RepoConfig:
    text = github.file_at(inst, repo, CONFIG_PATH, ref)
    return parse_config(text, set(BY_ID)) if text else RepoConfig()


def jobs_on(github: GitHubClient, inst: int, repo: str, ref: str, trigger: str) -> list[GpuJobSpec]:
    """The GPU jobs the config at ``ref`` runs on ``trigger``; ConfigError when it is invalid."""
    return [spec for spec in config_at(github, inst, repo, ref).gpu_jobs if spec.runs_on(trigger)]


def _jobs_or_reason(
    github: GitHubClient, inst: int, repo: str, ref: str, trigger: str
) -> list[GpuJobSpec] | str:
    try:
        return jobs_on(github, inst, repo, ref, trigger)
    except ConfigError as exc:
        return f"GPU tests not dispatched: {exc}"


def show(github: GitHubClient, job: GpuJob) -> None:
    """Bring the job's check run up to date with its record (idempotent; run by the
    "gpu-check" job that every change of the record queues)."""
    github.update_check_run(job.installation_id, job.repository, job.check_run_id, **render_gpu_check(job))


def dispatch(
    github: GitHubClient,
    gpu: GpuQueue,
    inst: int,
    repo: str,
    sha: str,
    number: int,
    specs: list[GpuJobSpec],
    trusted: bool,
) -> list[GpuJob]:
    """Queue each job for the commit unless one is already queued or running for it."""
    active = {j.spec.name for j in gpu.for_commit(repo, sha) if j.state != "done"}
    # A retried dispatch (the worker died after creating the run) reuses the open run.
    open_runs = {r["name"]: r for r in github.check_runs_for(inst, repo, sha) if r["status"] != "completed"}
    queued = []
    for spec in specs:
        if spec.name in active:
            continue
        run = open_runs.get(spec.check_name) or github.create_check_run(
            inst, repo, name=spec.check_name, head_sha=sha, status="queued"
        )
        job = gpu.create(
            GpuJob(
                id=gpu.new_id(),
                repository=repo,
                installation_id=inst,
                sha=sha,
                pull_number=number,
                spec=spec,
                step="build" if spec.build else "test",
                trusted=trusted,
                check_run_id=int(run["id"]),
            )
        )
        log.info("GPU job %s (%s) queued for %s@%s", job.id, spec.name, repo, sha[:12])
        queued.append(job)
    return queued


def cancel_older(github: GitHubClient, gpu: GpuQueue, repo: str, number: int, head: str) -> int:
    """A new push cancels the pull request's queued jobs for older commits and
    signals the running ones."""
    older = [job for job in gpu.for_pull(repo, number) if job.sha != head]
    return _cancel(
        github, gpu, older, lambda job: f"cancelled: a newer push ({head[:12]}) supersedes {job.sha[:12]}"
    )


def cancel_commit(github: GitHubClient, gpu: GpuQueue, repo: str, sha: str, who: str) -> int:
    return _cancel(github, gpu, gpu.for_commit(repo, sha), lambda job: f"cancelled by @{who}")


def _cancel(github: GitHubClient, gpu: GpuQueue, jobs: list[GpuJob], reason: Callable[[GpuJob], str]) -> int:
    return sum(1 for job in jobs if job.state != "done" and gpu.cancel(job, reason(job)) is not None)


def is_trusted(github: GitHubClient, inst: int, repo: str, head_repository: str, author: str) -> bool:
    return head_repository == repo and github.permission(inst, repo, author) in WRITERS


def after_pull_request_push(
    github: GitHubClient, gpu: GpuQueue, inst: int, repo: str, pull: dict[str, object]
) -> str:
    """A pull request was opened or pushed to: cancel older work, then run the
    ``trusted-push`` jobs when the author is trusted, or say that approval is needed."""
    number, head = int(str(pull["number"])), str(pull["head_sha"])
    cancelled = cancel_older(github, gpu, repo, number, head)
    specs = _jobs_or_reason(github, inst, repo, _base(pull), "trusted-push")
    if isinstance(specs, str):
        return specs
    if not specs:
        return f"no GPU job runs on push ({cancelled} cancelled)"
    if is_trusted(github, inst, repo, str(pull.get("head_repository", "")), str(pull.get("author", ""))):
        queued = dispatch(github, gpu, inst, repo, head, number, specs, trusted=True)
        return f"{len(queued)} GPU job(s) queued ({cancelled} cancelled)"
    for spec in specs:
        github.create_check_run(
            inst,
            repo,
            name=spec.check_name,
            head_sha=head,
            status="completed",
            conclusion="neutral",
            output={
                "title": "Waiting for approval to run on a GPU",
                "summary": approval_needed(head),
            },
        )
    return f"GPU jobs wait for approval of {head[:12]} ({cancelled} cancelled)"


def _base(pull: dict[str, object]) -> str:
    """Where a pull request's config is read: its base, never its own head."""
    return str(pull.get("base_sha") or pull["base_ref"])


def approval_needed(sha: str) -> str:
    return (
        "This pull request comes from a fork or from an author without write permission, "
        "so its code does not run on the GPU runners by itself. Someone with write "
        f"permission can approve this commit ({sha[:12]}) with `/gpuproof gpu-test`. "
        "An approval covers only the commit it was given on; a later push needs a new one."
    )


def approve_and_dispatch(
    github: GitHubClient,
    gpu: GpuQueue,
    inst: int,
    repo: str,
    number: int,
    trigger: str,
) -> tuple[str, list[GpuJob]]:
    """Someone with write permission asked for GPU tests of the pull request's current
    head (checked before this is called). Returns the head approved and the jobs queued."""
    pull = github.pull_request(inst, repo, number)
    head = str(pull["head"]["sha"])
    specs = jobs_on(github, inst, repo, str(pull["base"]["sha"]), trigger)
    trusted = is_trusted(
        github, inst, repo, str((pull["head"].get("repo") or {}).get("full_name", "")), pull["user"]["login"]
    )
    gpu.approve(repo, number, head)
    return head, dispatch(github, gpu, inst, repo, head, number, specs, trusted=trusted)


def after_default_branch_push(github: GitHubClient, gpu: GpuQueue, inst: int, repo: str, sha: str) -> str:
    """Pushes to the default branch are trusted: they run and may write build caches."""
    specs = _jobs_or_reason(github, inst, repo, sha, "default-branch")
    if isinstance(specs, str):
        return specs
    return f"{len(dispatch(github, gpu, inst, repo, sha, 0, specs, trusted=True))} GPU job(s) queued"


def label_added(github: GitHubClient, gpu: GpuQueue, job: Job) -> str:
    """A configured ``label:NAME`` added by someone with write permission approves the
    pull request's head for the jobs that name it."""
    inst, repo, pull = job.installation_id, job.repository, job.payload
    head, label, sender = str(pull["head_sha"]), str(pull["label"]), str(pull["sender"])
    specs = _jobs_or_reason(github, inst, repo, _base(pull), f"label:{label}")
    if isinstance(specs, str):
        return specs
    if not specs:
        return f"label {label!r} starts no GPU job"
    if github.permission(inst, repo, sender) not in WRITERS:
        return f"label {label!r} added by @{sender}, who lacks write permission: no GPU job started"
    number = int(str(pull["number"]))
    gpu.approve(repo, number, head)
    trusted = is_trusted(github, inst, repo, str(pull["head_repository"]), str(pull["author"]))
    return f"{len(dispatch(github, gpu, inst, repo, head, number, specs, trusted))} GPU job(s) queued"
