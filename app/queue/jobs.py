"""Analysis jobs in a Redis Stream, and the once-only record of webhook deliveries.

Everything lives in Redis, nothing in a process, so any number of `serve` and
`worker` replicas on any hosts can share one Redis.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass

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
