"""GPU test jobs in Redis: the queue runners claim from, their leases, cancellation,
runner registration and per-commit approvals.

A job is one JSON record (``gpuproof:gpu:job:<id>``); every change of state is a
WATCH/MULTI transaction on that record, so the webhook server (claims, results) and
the workers (dispatch, cancel, lease reaping) never lose each other's updates. The
same transaction queues a "gpu-check" job for the workers, so the check run follows
every change even when the process that made it dies right after.

Lifecycle: queued -> running (a runner claimed it and holds a lease, renewed by
heartbeats) -> done (with a conclusion). A lease that runs out puts the job back in
the queue once; the second time it fails with a message. Runner and job tokens are
stored only as SHA-256 hashes.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import secrets
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from typing import Any

import redis

from app.gpu_config import BUILD_LABEL, GpuJobSpec, gpu_mismatch, gpu_requirements
from app.queue.jobs import STREAM, Job

JOB_KEY = "gpuproof:gpu:job:{}"
QUEUE_KEY = "gpuproof:gpu:queued"
LEASES_KEY = "gpuproof:gpu:leases"
COMMIT_KEY = "gpuproof:gpu:commit:{}@{}"  # the jobs of one commit
PULL_KEY = "gpuproof:gpu:pull:{}#{}"  # the jobs of one pull request
RUNNER_KEY = "gpuproof:gpu:runner:{}"  # hash of a runner token -> runner name
RUNNERS_KEY = "gpuproof:gpu:runners"  # runner name -> hash of its current token
APPROVED_KEY = "gpuproof:gpu:approved:{}#{}"  # head SHAs approved for GPU tests
MAX_ATTEMPTS = 2  # a lost lease requeues the job once
RECORD_TTL_SECONDS = 30 * 24 * 3600


def _announce(pipe: Any, job: GpuJob) -> None:
    """Queue the worker job that brings the check run up to date with this record."""
    update = Job("gpu-check", job.repository, job.installation_id, f"gpu-{job.id}", {"job": job.id})
    pipe.xadd(STREAM, update.to_fields())


def _hash(token: str) -> str:
    return hashlib.sha256(token.encode()).hexdigest()


@dataclass
class GpuJob:
    id: str
    repository: str
    installation_id: int
    sha: str
    pull_number: int  # 0 for a push to a branch
    spec: GpuJobSpec
    step: str  # "build" (on a CPU runner) or "test" (on a GPU runner)
    trusted: bool  # trusted jobs may write the build cache
    check_run_id: int
    state: str = "queued"  # queued, running, done
    conclusion: str = ""  # when done: success, failure, cancelled, timed_out
    attempts: int = 0
    runner: str = ""
    cancel_requested: bool = False
    build_job: str = ""  # for a test step: the build job whose archive it runs
    artifact_sha256: str = ""
    created_at: float = field(default_factory=time.time)
    claimed_at: float = 0.0
    message: str = ""  # what is going on, or why it ended
    mismatches: dict[str, str] = field(default_factory=dict)  # runner -> why its GPU does not fit
    result: dict[str, Any] = field(default_factory=dict)
    token_hash: str = ""

    @property
    def labels(self) -> tuple[str, ...]:
        return (BUILD_LABEL,) if self.step == "build" else self.spec.labels

    def to_json(self) -> str:
        data = asdict(self)
        data["spec"] = self.spec.to_json()
        return json.dumps(data, separators=(",", ":"))

    @classmethod
    def from_json(cls, raw: bytes | str) -> GpuJob:
        data = json.loads(raw)
        data["spec"] = GpuJobSpec.from_json(data["spec"])
        return cls(**data)


class GpuQueue:
    def __init__(
        self, client: redis.Redis, lease_seconds: float = 60.0, queue_timeout_seconds: float = 86400.0
    ):
        self.client = client
        self.lease_seconds = lease_seconds
        self.queue_timeout_seconds = queue_timeout_seconds

    # -- records -------------------------------------------------------------------
    def get(self, job_id: str) -> GpuJob | None:
        raw = self.client.get(JOB_KEY.format(job_id))
        return GpuJob.from_json(raw) if raw else None

    def for_commit(self, repository: str, sha: str) -> list[GpuJob]:
        return self._load(self.client.smembers(COMMIT_KEY.format(repository, sha)))

    def for_pull(self, repository: str, number: int) -> list[GpuJob]:
        return self._load(self.client.smembers(PULL_KEY.format(repository, number)))

    def _load(self, ids: Any) -> list[GpuJob]:
        jobs = [self.get(i.decode() if isinstance(i, bytes) else i) for i in ids]
        return sorted((j for j in jobs if j is not None), key=lambda j: j.created_at)

    def _change(
        self, job_id: str, change: Callable[[GpuJob], bool], also: Callable[[Any], object] | None = None
    ) -> tuple[GpuJob | None, list[Any]]:
        """Apply ``change`` to the record atomically (it returns False to leave the
        record alone); ``also`` queues more commands into the same transaction."""
        key = JOB_KEY.format(job_id)
        while True:
            with self.client.pipeline() as pipe:
                try:
                    pipe.watch(key)  # type: ignore[no-untyped-call]
                    raw = pipe.get(key)
                    if raw is None:
                        return None, []
                    job = GpuJob.from_json(raw)
                    if not change(job):
                        pipe.unwatch()
                        return None, []
                    pipe.multi()
                    pipe.set(key, job.to_json(), ex=RECORD_TTL_SECONDS)
                    _announce(pipe, job)
                    if also is not None:
                        also(pipe)
                    replies = pipe.execute()
                    return job, replies[2:]
                except redis.WatchError:
                    continue

    # -- dispatch ------------------------------------------------------------------
    def create(self, job: GpuJob) -> GpuJob:
        with self.client.pipeline() as pipe:
            pipe.set(JOB_KEY.format(job.id), job.to_json(), ex=RECORD_TTL_SECONDS)
            pipe.sadd(COMMIT_KEY.format(job.repository, job.sha), job.id)
            pipe.expire(COMMIT_KEY.format(job.repository, job.sha), RECORD_TTL_SECONDS)
            if job.pull_number:
                pipe.sadd(PULL_KEY.format(job.repository, job.pull_number), job.id)
                pipe.expire(PULL_KEY.format(job.repository, job.pull_number), RECORD_TTL_SECONDS)
            pipe.rpush(QUEUE_KEY, job.id)
            _announce(pipe, job)
            pipe.execute()
        return job

    @staticmethod
    def new_id() -> str:
        return secrets.token_hex(8)

    # -- the runner's side -------------------------------------------------------------
    def claim(
        self, runner: str, labels: set[str], gpus: list[dict[str, Any]], mismatches: list[str] | None = None
    ) -> tuple[GpuJob, str] | None:
        """The oldest queued job this runner can run, with its job token (shown once).
        Jobs whose labels fit but whose GPU requirements do not are noted on the job
        and, with the reason, in ``mismatches``."""
        for raw_id in self.client.lrange(QUEUE_KEY, 0, -1):
            job_id = raw_id.decode() if isinstance(raw_id, bytes) else str(raw_id)
            job = self.get(job_id)
            if job is None:
                self.client.lrem(QUEUE_KEY, 0, job_id)  # its record expired
                continue
            if not set(job.labels) <= labels:
                continue
            if job.step == "test":
                why = gpu_mismatch(gpu_requirements(job.spec.labels, job.spec.requires), gpus)
                if why:
                    self._note_mismatch(job_id, runner, why)
                    if mismatches is not None:
                        mismatches.append(f"{job.spec.name} of {job.repository}@{job.sha[:12]}: {why}")
                    continue
            taken = self._take(job_id, runner)
            if taken is not None:
                return taken
        return None

    def _take(self, job_id: str, runner: str) -> tuple[GpuJob, str] | None:
        """Move one queued job to running with a fresh lease and job token."""
        token = "gpj_" + secrets.token_urlsafe(32)
        now = time.time()

        def take(record: GpuJob) -> bool:
            if record.state != "queued":
                return False
            record.state, record.runner, record.claimed_at = "running", runner, now
            record.attempts += 1
            record.token_hash = _hash(token)
            record.message = f"running on {runner}"
            return True

        def dequeue_and_lease(pipe: Any) -> None:
            pipe.lrem(QUEUE_KEY, 1, job_id)
            pipe.zadd(LEASES_KEY, {job_id: now + self.lease_seconds})

        claimed, replies = self._change(job_id, take, dequeue_and_lease)
        return (claimed, token) if claimed is not None and replies and replies[0] == 1 else None

    def release(self, job_id: str, why: str) -> None:
        """Give a claimed job back to the front of the queue without counting the attempt
        (the App could not hand it out, e.g. GitHub refused a checkout token)."""

        def unclaim(record: GpuJob) -> bool:
            if record.state != "running":
                return False
            record.state, record.runner, record.token_hash, record.message = "queued", "", "", why
            record.attempts -= 1
            return True

        self._change(
            job_id, unclaim, lambda pipe: (pipe.zrem(LEASES_KEY, job_id), pipe.lpush(QUEUE_KEY, job_id))
        )

    def _note_mismatch(self, job_id: str, runner: str, why: str) -> None:
        def note(record: GpuJob) -> bool:
            if record.mismatches.get(runner) == why:
                return False
            record.mismatches[runner] = why
            return True

        self._change(job_id, note)

    def authenticate(self, job_id: str, token: str) -> GpuJob | None:
        """The running job this job token belongs to, or None."""
        job = self.get(job_id)
        if job is None or job.state != "running" or not token:
            return None
        return job if hmac.compare_digest(job.token_hash, _hash(token)) else None

    def heartbeat(self, job_id: str) -> bool:
        """Renew the lease; True when the job holds one still."""
        renewed = self.client.zadd(LEASES_KEY, {job_id: time.time() + self.lease_seconds}, xx=True, ch=True)
        return bool(renewed) or self.client.zscore(LEASES_KEY, job_id) is not None

    def finish(
        self, job_id: str, conclusion: str, message: str, result: dict[str, Any] | None = None
    ) -> GpuJob | None:
        def end(record: GpuJob) -> bool:
            if record.state == "done":
                return False
            record.state, record.conclusion, record.message = "done", conclusion, message
            record.token_hash = ""
            if result is not None:
                record.result = result
            return True

        job, _ = self._change(
            job_id, end, lambda pipe: (pipe.zrem(LEASES_KEY, job_id), pipe.lrem(QUEUE_KEY, 0, job_id))
        )
        return job

    def set_artifact(self, job_id: str, sha256: str) -> None:
        def record_artifact(record: GpuJob) -> bool:
            record.artifact_sha256 = sha256
            return True

        self._change(job_id, record_artifact)

    # -- cancellation and leases -----------------------------------------------------
    def cancel(self, job: GpuJob, reason: str) -> GpuJob | None:
        """A queued job ends at once; a running one is told at its next heartbeat."""
        if job.state == "queued":
            ended = self.finish(job.id, "cancelled", reason)
            if ended is not None:
                return ended

        def ask(record: GpuJob) -> bool:
            if record.state != "running" or record.cancel_requested:
                return False
            record.cancel_requested, record.message = True, reason
            return True

        asked, _ = self._change(job.id, ask)
        return asked

    def reap(self, now: float | None = None) -> list[GpuJob]:
        """Jobs whose runner stopped heartbeating (requeued once, then failed) and jobs
        no runner claimed in time; returns the jobs whose state changed."""
        now = time.time() if now is None else now
        changed = []
        for raw_id in self.client.zrangebyscore(LEASES_KEY, "-inf", now):
            job_id = raw_id.decode() if isinstance(raw_id, bytes) else str(raw_id)
            if self.client.zrem(LEASES_KEY, job_id) != 1:
                continue  # another reaper got it
            job = self._lease_lost(job_id)
            if job is not None:
                changed.append(job)
        for raw_id in self.client.lrange(QUEUE_KEY, 0, -1):
            job_id = raw_id.decode() if isinstance(raw_id, bytes) else str(raw_id)
            job = self.get(job_id)
            if job is not None and now - job.created_at > self.queue_timeout_seconds:
                hours = self.queue_timeout_seconds / 3600
                ended = self.finish(
                    job_id,
                    "timed_out",
                    f"no runner with labels [{', '.join(job.labels)}] claimed this job within {hours:g} h",
                )
                if ended is not None:
                    changed.append(ended)
        return changed

    def _lease_lost(self, job_id: str) -> GpuJob | None:
        job = self.get(job_id)
        if job is None or job.state != "running":
            return None
        lost = f"runner {job.runner} stopped answering (no heartbeat for {self.lease_seconds:g} s)"
        if job.cancel_requested:
            return self.finish(job_id, "cancelled", f"{job.message}; {lost}")
        if job.attempts >= MAX_ATTEMPTS:
            return self.finish(
                job_id, "failure", f"{lost}, for the second time; the job is not retried again"
            )

        def requeue(record: GpuJob) -> bool:
            if record.state != "running":
                return False
            record.state, record.runner, record.token_hash = "queued", "", ""
            record.message = f"{lost}; requeued (attempt {record.attempts + 1} of {MAX_ATTEMPTS})"
            return True

        requeued, _ = self._change(job_id, requeue, lambda pipe: pipe.lpush(QUEUE_KEY, job_id))
        return requeued

    # -- runners and approvals ---------------------------------------------------------
    def register_runner(self, name: str) -> str:
        """A new token for the runner (shown once); a token it had before stops working."""
        token = "gpr_" + secrets.token_urlsafe(32)
        self.revoke_runner(name)
        with self.client.pipeline() as pipe:
            pipe.set(RUNNER_KEY.format(_hash(token)), name)
            pipe.hset(RUNNERS_KEY, name, _hash(token))
            pipe.execute()
        return token

    def revoke_runner(self, name: str) -> bool:
        previous = self.client.hget(RUNNERS_KEY, name)
        if previous is None:
            return False
        digest = previous.decode() if isinstance(previous, bytes) else str(previous)
        with self.client.pipeline() as pipe:
            pipe.delete(RUNNER_KEY.format(digest))
            pipe.hdel(RUNNERS_KEY, name)
            pipe.execute()
        return True

    def runner_named_by(self, token: str) -> str | None:
        name = self.client.get(RUNNER_KEY.format(_hash(token))) if token else None
        return name.decode() if isinstance(name, bytes) else name

    def approve(self, repository: str, number: int, sha: str) -> None:
        key = APPROVED_KEY.format(repository, number)
        self.client.sadd(key, sha)
        self.client.expire(key, RECORD_TTL_SECONDS)

    def approved(self, repository: str, number: int, sha: str) -> bool:
        return bool(self.client.sismember(APPROVED_KEY.format(repository, number), sha))
