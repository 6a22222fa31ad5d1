"""The "slash-command" job: `/gpuproof help`, `/gpuproof explain <rule>` and
`/gpuproof recheck` in a pull request's comments. The command's comment gets 👀 on
receipt and a reply with the result; commands that cost resources need write,
maintain or admin permission, and a refusal says why."""

from __future__ import annotations

from collections.abc import Callable

from app import gpu_dispatch
from app.checks.rules import BY_ID
from app.config import ConfigError
from app.github.client import GitHubClient
from app.pr_review import review_pull_request
from app.queue.gpu_jobs import GpuQueue
from app.queue.jobs import Job, PullRequestState
from app.report.rules_doc import explain

ALLOWED = ("admin", "maintain", "write")
HELP = """**gpuproof commands** (in a comment of their own line; not inside code or quotes):

- `/gpuproof help`: this list.
- `/gpuproof explain <rule>`: what a rule flags, why, and what to write instead.
- `/gpuproof recheck`: review the pull request's head again (needs write permission).
- `/gpuproof gpu-test`: run the GPU test jobs on the pull request's current head
  (needs write permission; approves that commit only, not later pushes).
- `/gpuproof gpu-test cancel`: stop the GPU test jobs of the current head."""


def run_slash_commands(github: GitHubClient, state: PullRequestState, job: Job) -> str:
    inst, repo = job.installation_id, job.repository
    number, author = int(str(job.payload["number"])), str(job.payload["author"])
    github.add_reaction(inst, repo, int(str(job.payload["comment_id"])), "eyes")
    answers = []
    commands = job.payload.get("commands")
    for name, *args in commands if isinstance(commands, list) else []:
        handler = _COMMANDS.get(name)
        if handler is None:
            answers.append(f"`/gpuproof {name}` is not a command. {HELP}")
        else:
            answers.append(handler(github, state, job, author, number, args))
    github.create_issue_comment(inst, repo, number, f"@{author}\n\n" + "\n\n---\n\n".join(answers))
    return f"{len(answers)} command(s) answered"


def _help(
    github: GitHubClient, state: PullRequestState, job: Job, author: str, number: int, args: list[str]
) -> str:
    return HELP


def _explain(
    github: GitHubClient, state: PullRequestState, job: Job, author: str, number: int, args: list[str]
) -> str:
    rule = BY_ID.get(args[0]) if args else None
    if rule is None:
        asked = f"`{args[0]}` is not a rule" if args else "`/gpuproof explain` needs a rule id"
        return f"{asked}; the rules are: " + ", ".join(f"`{r}`" for r in BY_ID)
    return explain(rule)


def _refusal(github: GitHubClient, job: Job, author: str, command: str) -> str:
    """Why the author may not run a command that costs resources ("" when they may)."""
    permission = github.permission(job.installation_id, job.repository, author)
    if permission in ALLOWED:
        return ""
    return (
        f"`/gpuproof {command}` was not run: it needs write, maintain or admin permission on "
        f"{job.repository}, and @{author} has `{permission}`."
    )


def _recheck(
    github: GitHubClient, state: PullRequestState, job: Job, author: str, number: int, args: list[str]
) -> str:
    refusal = _refusal(github, job, author, "recheck")
    if refusal:
        return refusal
    pull = github.pull_request(job.installation_id, job.repository, number)
    head = pull["head"]["sha"]
    state.mark_head(head)
    review = Job(
        "review-pr",
        job.repository,
        job.installation_id,
        job.delivery_id,
        {"number": number, "head_sha": head},
    )
    outcome = review_pull_request(github, state, review)
    return f"Re-checked {head[:12]}: {outcome}. See the gpuproof check runs."


def _gpu_test(
    github: GitHubClient, state: PullRequestState, job: Job, author: str, number: int, args: list[str]
) -> str:
    command = " ".join(["gpu-test", *args[:1]])
    refusal = _refusal(github, job, author, command)
    if refusal:
        return refusal
    gpu = GpuQueue(state.client)
    inst, repo = job.installation_id, job.repository
    if args[:1] == ["cancel"]:
        head = str(github.pull_request(inst, repo, number)["head"]["sha"])
        cancelled = gpu_dispatch.cancel_commit(github, gpu, repo, head, author)
        return (
            f"Cancelled {cancelled} GPU job(s) of {head[:12]}."
            if cancelled
            else f"No GPU job of {head[:12]} was queued or running."
        )
    if args:
        return f"`/gpuproof gpu-test {args[0]}` is not a command: use `gpu-test` or `gpu-test cancel`."
    try:
        head, queued = gpu_dispatch.approve_and_dispatch(github, gpu, inst, repo, number, "command")
    except ConfigError as exc:
        return f"GPU tests were not started: {exc}"
    if not queued:
        return (
            f"No GPU job was started for {head[:12]}: `.github/gpuproof.yml` declares none that runs "
            "on `command`, or they are already queued or running for this commit."
        )
    names = ", ".join(f"`{j.spec.name}`" for j in queued)
    return (
        f"Queued GPU job(s) {names} for commit {head[:12]}. This approval covers {head[:12]} only: "
        "a later push needs a new `/gpuproof gpu-test`. See the gpuproof / gpu-tests check runs."
    )


_COMMANDS: dict[str, Callable[[GitHubClient, PullRequestState, Job, str, int, list[str]], str]] = {
    "help": _help,
    "explain": _explain,
    "recheck": _recheck,
    "gpu-test": _gpu_test,
}
