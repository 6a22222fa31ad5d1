"""The "slash-command" job: `/gpuproof help`, `/gpuproof explain <rule>` and
`/gpuproof recheck` in a pull request's comments. The command's comment gets 👀 on
receipt and a reply with the result; commands that cost resources need write,
maintain or admin permission, and a refusal says why."""

from __future__ import annotations

from collections.abc import Callable

from app.checks.rules import BY_ID
from app.github.client import GitHubClient
from app.pr_review import review_pull_request
from app.queue.jobs import Job, PullRequestState
from app.report.rules_doc import explain

ALLOWED = ("admin", "maintain", "write")
HELP = """**gpuproof commands** (in a comment of their own line; not inside code or quotes):

- `/gpuproof help`: this list.
- `/gpuproof explain <rule>`: what a rule flags, why, and what to write instead.
- `/gpuproof recheck`: review the pull request's head again (needs write permission)."""


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


def _recheck(
    github: GitHubClient, state: PullRequestState, job: Job, author: str, number: int, args: list[str]
) -> str:
    permission = github.permission(job.installation_id, job.repository, author)
    if permission not in ALLOWED:
        return (
            f"`/gpuproof recheck` was not run: it needs write, maintain or admin permission on "
            f"{job.repository}, and @{author} has `{permission}`."
        )
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


_COMMANDS: dict[str, Callable[[GitHubClient, PullRequestState, Job, str, int, list[str]], str]] = {
    "help": _help,
    "explain": _explain,
    "recheck": _recheck,
}
