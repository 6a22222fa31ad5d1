"""The routing table: one short function per (event, action), like Probot's
``app.on("pull_request.opened", ...)``. A handler turns a delivery into the job a
worker will run, or into nothing when there is nothing to do."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from app.queue.jobs import Job
from app.webhooks.commands import parse_commands


@dataclass(frozen=True)
class Delivery:
    event: str
    action: str
    delivery_id: str
    payload: dict[str, Any]

    @property
    def repository(self) -> str:
        return str((self.payload.get("repository") or {}).get("full_name", ""))

    @property
    def installation_id(self) -> int:
        return int((self.payload.get("installation") or {}).get("id", 0))

    def job(self, kind: str, **details: object) -> Job:
        return Job(kind, self.repository, self.installation_id, self.delivery_id, dict(details))


Handler = Callable[[Delivery], Job | None]
ROUTES: dict[tuple[str, str], Handler] = {}


def on(*keys: str) -> Callable[[Handler], Handler]:
    """Register a handler for "event.action" keys."""

    def register(handler: Handler) -> Handler:
        for key in keys:
            event, _, action = key.partition(".")
            ROUTES[(event, action)] = handler
        return handler

    return register


def route(delivery: Delivery) -> Handler | None:
    return ROUTES.get((delivery.event, delivery.action))


def _pull_request(delivery: Delivery) -> dict[str, object]:
    pr = delivery.payload["pull_request"]
    return {
        "number": pr["number"],
        "head_sha": pr["head"]["sha"],
        "base_ref": pr["base"]["ref"],
        "base_sha": pr["base"]["sha"],
        "head_repository": (pr["head"].get("repo") or {}).get("full_name", ""),
        "author": pr["user"]["login"],
    }


@on(
    "pull_request.opened",
    "pull_request.synchronize",
    "pull_request.reopened",
    "pull_request.ready_for_review",
)
def review_pull_request(delivery: Delivery) -> Job:
    return delivery.job("review-pr", **_pull_request(delivery))


@on("pull_request.edited")
def review_edited_description(delivery: Delivery) -> Job | None:
    changes = delivery.payload.get("changes") or {}
    if "title" not in changes and "body" not in changes:
        return None  # a base-branch change alone does not change what the description says
    return delivery.job("review-description", **_pull_request(delivery))


@on("pull_request.labeled")
def label_added(delivery: Delivery) -> Job:
    return delivery.job(
        "gpu-label",
        **_pull_request(delivery),
        label=delivery.payload["label"]["name"],
        sender=delivery.payload["sender"]["login"],
    )


@on("push.")
def branch_pushed(delivery: Delivery) -> Job | None:
    push = delivery.payload
    default = f"refs/heads/{push['repository']['default_branch']}"
    if push["ref"] != default or push.get("deleted"):
        return None  # only the default branch runs GPU jobs on push
    return delivery.job("gpu-push", sha=push["after"], ref=push["ref"])


@on("issue_comment.created")
def slash_command(delivery: Delivery) -> Job | None:
    issue = delivery.payload["issue"]
    comment = delivery.payload["comment"]
    if "pull_request" not in issue:
        return None  # only pull requests are reviewed
    commands = parse_commands(comment.get("body") or "")
    if not commands:
        return None
    return delivery.job(
        "slash-command",
        number=issue["number"],
        comment_id=comment["id"],
        author=comment["user"]["login"],
        commands=[[c.name, *c.args] for c in commands],
    )


def _numbers(pull_requests: list[dict[str, Any]] | None) -> list[int]:
    return [int(pr["number"]) for pr in pull_requests or []]


@on("check_run.rerequested")
def rerun_check_run(delivery: Delivery) -> Job:
    run = delivery.payload["check_run"]
    return delivery.job(
        "rerun",
        head_sha=run["head_sha"],
        check_run_id=run["id"],
        pull_requests=_numbers(run.get("pull_requests")),
    )


@on("check_run.requested_action")
def requested_action(delivery: Delivery) -> Job:
    run = delivery.payload["check_run"]
    action = delivery.payload.get("requested_action") or {}
    return delivery.job(
        "requested-action",
        head_sha=run["head_sha"],
        check_run_id=run["id"],
        identifier=action.get("identifier", ""),
        pull_requests=_numbers(run.get("pull_requests")),
    )


@on("check_suite.requested", "check_suite.rerequested")
def review_check_suite(delivery: Delivery) -> Job:
    suite = delivery.payload["check_suite"]
    return delivery.job(
        "review-suite", head_sha=suite["head_sha"], pull_requests=_numbers(suite.get("pull_requests"))
    )


@on(
    "installation.created",
    "installation.deleted",
    "installation_repositories.added",
    "installation_repositories.removed",
)
def installation_changed(delivery: Delivery) -> Job:
    added = delivery.payload.get("repositories_added") or delivery.payload.get("repositories") or []
    removed = delivery.payload.get("repositories_removed") or []
    return Job(
        "installation",
        "",
        delivery.installation_id,
        delivery.delivery_id,
        {
            "action": f"{delivery.event}.{delivery.action}",
            "added": [r["full_name"] for r in added],
            "removed": [r["full_name"] for r in removed],
        },
    )
