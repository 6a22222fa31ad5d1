"""Analysis jobs in a Redis Stream, and the once-only record of webhook deliveries.

Everything lives in Redis, nothing in a process, so any number of `serve` and
`worker` replicas on any hosts can share one Redis.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass
from typing import Any

import redis

STREAM = "gpuproof:jobs"
DELIVERY_KEY = "gpuproof:delivery:{}"
DELIVERY_TTL_SECONDS = 7 * 24 * 3600  # GitHub redelivers for days; remember that long


@dataclass(frozen=True)
class Job:
    """One unit of work: what to do, for which repository and installation."""

    kind: str  # "review-pr", "slash-command", "rerun-check", "installation"
    repository: str  # owner/name ("" for installation-wide jobs)
    installation_id: int
    delivery_id: str
    payload: dict[str, object]  # the fields the worker needs, not the whole delivery

    def to_fields(self) -> dict[str, str]:
        return {"job": json.dumps(asdict(self), separators=(",", ":"))}


class JobQueue:
    def __init__(self, client: redis.Redis) -> None:
        self.client = client

    @classmethod
    def from_url(cls, url: str) -> JobQueue:
        return cls(redis.Redis.from_url(url, socket_timeout=5, socket_connect_timeout=2))

    def first_delivery(self, delivery_id: str) -> bool:
        """Record a delivery; False when it was recorded before (GitHub redelivered it)."""
        return bool(self.client.set(DELIVERY_KEY.format(delivery_id), "1", nx=True, ex=DELIVERY_TTL_SECONDS))

    def forget_delivery(self, delivery_id: str) -> None:
        """Undo ``first_delivery`` when enqueueing failed, so a redelivery is not lost."""
        self.client.delete(DELIVERY_KEY.format(delivery_id))

    def enqueue(self, job: Job) -> str:
        entry_id = self.client.xadd(STREAM, job.to_fields())  # type: ignore[arg-type]
        return entry_id.decode() if isinstance(entry_id, bytes) else str(entry_id)

    def reachable(self) -> bool:
        try:
            return bool(self.client.ping())
        except redis.RedisError:
            return False


GROUP = "gpuproof-workers"
HEAD_KEY = "gpuproof:head:{}#{}"  # the newest head SHA of a pull request
COMMENTED_KEY = "gpuproof:commented:{}#{}"  # fingerprints already commented on a pull request


def job_from_fields(fields: dict[bytes, bytes]) -> Job:
    data = json.loads(fields[b"job"])
    return Job(
        data["kind"], data["repository"], int(data["installation_id"]), data["delivery_id"], data["payload"]
    )


class JobConsumer:
    """A worker's side of the stream: a consumer group gives each job to one worker;
    a job whose worker died (never acknowledged) is claimed by another after
    ``stale_after_ms``."""

    def __init__(self, queue: JobQueue, consumer: str, stale_after_ms: int = 60_000) -> None:
        self.client = queue.client
        self.consumer = consumer
        self.stale_after_ms = stale_after_ms
        try:
            self.client.xgroup_create(STREAM, GROUP, id="0", mkstream=True)
        except redis.ResponseError as exc:
            if "BUSYGROUP" not in str(exc):
                raise

    def next_jobs(self, block_ms: int = 5000, count: int = 1) -> list[tuple[str, Job]]:
        """Stale jobs of dead workers first, then new ones."""
        reply: Any = self.client.xautoclaim(
            STREAM, GROUP, self.consumer, self.stale_after_ms, start_id="0-0", count=count
        )
        entries = list(reply[1])
        if not entries:
            # BLOCK 0 would wait forever: 0 means "do not wait" here.
            streams: Any = self.client.xreadgroup(
                GROUP, self.consumer, {STREAM: ">"}, count=count, block=block_ms or None
            )
            for _, stream_entries in streams or []:
                entries.extend(stream_entries)
        return [(_text(entry_id), job_from_fields(fields)) for entry_id, fields in entries if fields]

    def done(self, entry_id: str) -> None:
        self.client.xack(STREAM, GROUP, entry_id)

    def deliveries(self, entry_id: str) -> int:
        """How many times the job has been handed to a worker."""
        pending: Any = self.client.xpending_range(STREAM, GROUP, min=entry_id, max=entry_id, count=1)
        return int(pending[0]["times_delivered"]) if pending else 1


def _text(value: bytes | str) -> str:
    return value.decode() if isinstance(value, bytes) else value


class PullRequestState:
    """What the workers share about one pull request: its newest head (older work is
    superseded) and the findings already commented on (never commented twice)."""

    def __init__(self, queue: JobQueue, repository: str, number: int) -> None:
        self.client = queue.client
        self.head_key = HEAD_KEY.format(repository, number)
        self.commented_key = COMMENTED_KEY.format(repository, number)

    def mark_head(self, sha: str) -> None:
        self.client.set(self.head_key, sha)

    def is_current(self, sha: str) -> bool:
        latest = self.client.get(self.head_key)
        return latest is None or _text(latest) == sha

    def commented(self) -> set[str]:
        return {_text(v) for v in self.client.smembers(self.commented_key)}

    def remember_commented(self, fingerprints: list[str]) -> None:
        if fingerprints:
            self.client.sadd(self.commented_key, *fingerprints)

    def acknowledged(self, fingerprint: str) -> bool:
        return bool(self.client.sismember(self.commented_key + ":fixed", fingerprint))

    def remember_acknowledged(self, fingerprint: str) -> None:
        self.client.sadd(self.commented_key + ":fixed", fingerprint)
