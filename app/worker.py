"""`gpuproof worker`: takes jobs from the Redis Stream and runs them. Any number of
workers on any hosts share the stream; a job whose worker dies is claimed by another
once it has been pending for a while, so every job completes at least once (and the
effects are idempotent, so at most once as far as GitHub shows)."""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable

from app import gpu_dispatch
from app.github.client import GitHubClient, GitHubError
from app.pr_review import review_pull_request
from app.queue.gpu_jobs import GpuQueue
from app.queue.jobs import Job, JobConsumer, JobQueue, PullRequestState
from app.slash_commands import run_slash_commands

log = logging.getLogger("gpuproof.worker")
MAX_ATTEMPTS = 3  # deliveries of a job that keeps crashing before it is dropped


class Worker:
    def __init__(
        self, queue: JobQueue, github: GitHubClient, name: str, stale_after_ms: int = 60_000
    ) -> None:
        self.queue = queue
        self.github = github
        self.consumer = JobConsumer(queue, name, stale_after_ms)
        self.gpu = GpuQueue(queue.client)
        self.handlers: dict[str, Callable[[Job], str]] = {
            "review-pr": self._review,
            "review-description": self._review,
            "slash-command": self._slash,
            # The check run's "Re-run", a requested action and a check suite all re-analyse
            # the pull requests of that head.
            "rerun": self._review_each,
            "requested-action": self._review_each,
            "review-suite": self._review_each,
            "installation": lambda job: "noted (nothing to set up: repositories are read on demand)",
            "gpu-check": self._gpu_check,
            "gpu-label": self._gpu_label,
            "gpu-push": self._gpu_push,
        }

    def run(self, stop: threading.Event, block_ms: int = 2000) -> None:
        while not stop.is_set():
            self.run_once(block_ms)

    def run_once(self, block_ms: int = 0) -> int:
        self.reap_gpu_leases()
        jobs = self.consumer.next_jobs(block_ms=block_ms)
        for entry_id, job in jobs:
            handler = self.handlers.get(job.kind)
            if handler is None:
                log.info("job %s (%s) has no handler yet; dropped", entry_id, job.kind)
                self.consumer.done(entry_id)
                continue
            try:
                outcome = handler(job)
            except GitHubError as exc:
                if 400 <= exc.status < 500:
                    log.error("job %s (%s) failed for good: %s", entry_id, job.kind, exc)
                    self.consumer.done(entry_id)  # retrying cannot help
                else:
                    log.warning("job %s (%s) failed, will be retried: %s", entry_id, job.kind, exc)
                continue
            except Exception:  # a bug or bad data: retried a few times, then given up, never fatal
                attempts = self.consumer.deliveries(entry_id)
                log.exception(
                    "job %s (%s) crashed (attempt %d of %d)", entry_id, job.kind, attempts, MAX_ATTEMPTS
                )
                if attempts >= MAX_ATTEMPTS:
                    self.consumer.done(entry_id)
                continue
            log.info("job %s (%s for %s): %s", entry_id, job.kind, job.repository, outcome)
            self.consumer.done(entry_id)
        return len(jobs)

    def _state(self, job: Job) -> PullRequestState:
        return PullRequestState(self.queue, job.repository, int(str(job.payload["number"])))

    def reap_gpu_leases(self) -> None:
        """GPU jobs whose runner died are requeued or failed here, even when no runner
        is polling (their check runs follow through the "gpu-check" jobs it queues)."""
        for job in self.gpu.reap():
            log.warning("GPU job %s: %s", job.id, job.message)

    def _review(self, job: Job) -> str:
        outcome = review_pull_request(self.github, self._state(job), job)
        if job.kind == "review-pr" and "author" in job.payload and outcome != "superseded":
            gpu = gpu_dispatch.after_pull_request_push(
                self.github, self.gpu, job.installation_id, job.repository, job.payload
            )
            outcome = f"{outcome}; {gpu}"
        return outcome

    def _gpu_check(self, job: Job) -> str:
        record = self.gpu.get(str(job.payload["job"]))
        if record is None:
            return "GPU job expired"
        # The newest job of the check run (a build's GPU step) is the one to show.
        latest = max(
            (
                j
                for j in self.gpu.for_commit(record.repository, record.sha)
                if j.check_run_id == record.check_run_id
            ),
            key=lambda j: j.created_at,
            default=record,
        )
        gpu_dispatch.show(self.github, latest)
        return f"GPU check run {latest.check_run_id} shows {latest.state}"

    def _gpu_label(self, job: Job) -> str:
        return gpu_dispatch.label_added(self.github, self.gpu, job)

    def _gpu_push(self, job: Job) -> str:
        return gpu_dispatch.after_default_branch_push(
            self.github, self.gpu, job.installation_id, job.repository, str(job.payload["sha"])
        )

    def _review_each(self, job: Job) -> str:
        numbers = job.payload.get("pull_requests")
        outcomes = []
        for number in numbers if isinstance(numbers, list) else []:
            review = Job(
                "review-pr",
                job.repository,
                job.installation_id,
                job.delivery_id,
                {"number": number, "head_sha": job.payload["head_sha"]},
            )
            outcomes.append(self._review(review))
        return ", ".join(outcomes) or "no pull request for this head"

    def _slash(self, job: Job) -> str:
        return run_slash_commands(self.github, self._state(job), job)
