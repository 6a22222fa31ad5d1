"""The runner protocol, served by `gpuproof serve` under ``/runner/v1``: GPU and build
runners pull work over HTTPS the way CI runners do, so a GPU box behind NAT needs only
outbound access and never holds Redis credentials or the App's key.

* ``POST /runner/v1/claim`` (runner token): long-polls up to ``wait`` seconds for a
  job the runner's labels and GPU fit. The answer carries a job-scoped token (for
  everything below) and a read-only installation token for that one repository,
  for the checkout only.
* ``POST /runner/v1/jobs/{id}/heartbeat``: renews the lease; answers whether the job
  was cancelled. 410 when the runner lost the job (its lease ran out).
* ``PUT /runner/v1/jobs/{id}/artifact``: a build runner uploads the archive of test
  binaries, with its SHA-256 in ``X-Gpuproof-Sha256`` (checked).
* ``GET /runner/v1/jobs/{id}/artifact``: the GPU runner downloads the archive its
  job runs.
* ``POST /runner/v1/jobs/{id}/result``: the outcome; a successful build queues the
  GPU step, anything else completes the job. Check runs are updated by the workers
  (each change of a job's state queues a "gpu-check" job, app/queue/gpu_jobs.py), so
  this server never waits on GitHub except for the checkout token.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import time
from pathlib import Path
from typing import Any

from fastapi import APIRouter, Request
from fastapi.responses import FileResponse, JSONResponse, Response

from app.github.client import GitHubClient, GitHubError
from app.queue.gpu_jobs import GpuJob, GpuQueue

log = logging.getLogger("gpuproof.runners")
MAX_WAIT_SECONDS = 50.0  # under common proxies' 60 s idle timeout
POLL_SECONDS = 0.5
MAX_RESULT_BYTES = 8 * 1024 * 1024
MAX_ARTIFACT_BYTES = 4 * 1024 * 1024 * 1024
ARTIFACT_TTL_SECONDS = 2 * 24 * 3600
CONCLUSIONS = {
    "passed": "success",
    "failed": "failure",
    "error": "failure",
    "cancelled": "cancelled",
    "timed_out": "timed_out",
}


def _bearer(request: Request) -> str:
    scheme, _, token = request.headers.get("authorization", "").partition(" ")
    return token.strip() if scheme.lower() == "bearer" else ""


def _refuse(status: int, error: str) -> JSONResponse:
    return JSONResponse({"error": error}, status_code=status)


def _prune(artifact_dir: Path) -> None:
    """Archives whose GPU step never ended (its runner was lost twice, say) go after a while."""
    cutoff = time.time() - ARTIFACT_TTL_SECONDS
    for archive in artifact_dir.glob("*.tar.gz"):
        if archive.stat().st_mtime < cutoff:
            archive.unlink(missing_ok=True)


def runner_router(gpu: GpuQueue, github: GitHubClient | None, artifact_dir: Path) -> APIRouter:
    router = APIRouter(prefix="/runner/v1")

    def job_for(request: Request, job_id: str) -> GpuJob | None:
        return gpu.authenticate(job_id, _bearer(request))

    @router.post("/claim")
    def claim(request: Request, body: dict[str, Any]) -> Response:
        runner = gpu.runner_named_by(_bearer(request))
        if runner is None:
            log.warning("claim refused: unknown runner token")
            return _refuse(401, "unknown runner token (register one with `gpuproof runner-token NAME`)")
        if github is None:
            return _refuse(503, "this server has no GitHub App credentials, so it cannot hand out jobs")
        labels = {str(label) for label in body.get("labels") or []}
        gpus = [g for g in body.get("gpus") or [] if isinstance(g, dict)]
        deadline = time.monotonic() + min(float(body.get("wait", 25)), MAX_WAIT_SECONDS)
        while True:
            for changed in gpu.reap():
                log.warning("job %s: %s", changed.id, changed.message)
            mismatches: list[str] = []
            claimed = gpu.claim(runner, labels, gpus, mismatches)
            if claimed is not None or time.monotonic() >= deadline:
                break
            time.sleep(POLL_SECONDS)
        if claimed is None:
            return JSONResponse({"job": None, "mismatches": mismatches})
        job, job_token = claimed
        try:
            checkout_token, expires = github.repository_read_token(job.installation_id, job.repository)
        except GitHubError as exc:
            gpu.release(job.id, f"GitHub refused a checkout token ({exc.status}); requeued")
            log.error("job %s released: no checkout token for %s (%s)", job.id, job.repository, exc.status)
            return _refuse(503, "GitHub refused a checkout token; try again")
        log.info("job %s (%s %s@%s) claimed by %s", job.id, job.step, job.repository, job.sha[:12], runner)
        return JSONResponse(
            {
                "job": {
                    "id": job.id,
                    "step": job.step,
                    "repository": job.repository,
                    "sha": job.sha,
                    "trusted": job.trusted,
                    "spec": job.spec.to_json(),
                    "artifact_sha256": job.artifact_sha256,
                },
                "job_token": job_token,
                "lease_seconds": gpu.lease_seconds,
                "checkout": {
                    "tarball_url": f"{github.api_url}/repos/{job.repository}/tarball/{job.sha}",
                    "token": checkout_token,
                    "expires_at": expires,
                },
            }
        )

    @router.post("/jobs/{job_id}/heartbeat")
    def heartbeat(job_id: str, request: Request) -> Response:
        job = job_for(request, job_id)
        if job is None or not gpu.heartbeat(job_id):
            return _refuse(410, "this job is no longer yours: its lease ran out or it ended")
        return JSONResponse({"cancel": job.cancel_requested, "message": job.message})

    @router.put("/jobs/{job_id}/artifact")
    async def upload(job_id: str, request: Request) -> Response:
        job = job_for(request, job_id)
        if job is None or job.step != "build":
            return _refuse(404, "no build job of yours has this id")
        declared = request.headers.get("x-gpuproof-sha256", "").lower()
        artifact_dir.mkdir(parents=True, exist_ok=True)
        partial = artifact_dir / f"{job_id}.tar.gz.part"
        digest, size = hashlib.sha256(), 0
        with partial.open("wb") as out:
            async for chunk in request.stream():
                size += len(chunk)
                if size > MAX_ARTIFACT_BYTES:
                    out.close()
                    partial.unlink()
                    return _refuse(413, f"the archive is over {MAX_ARTIFACT_BYTES // 2**30} GiB")
                digest.update(chunk)
                out.write(chunk)
        if digest.hexdigest() != declared:
            partial.unlink()
            log.warning("job %s: archive refused, checksum mismatch", job_id)
            return _refuse(400, "the archive's SHA-256 does not match X-Gpuproof-Sha256")
        os.replace(partial, artifact_dir / f"{job_id}.tar.gz")
        gpu.set_artifact(job_id, declared)
        _prune(artifact_dir)
        return JSONResponse({"sha256": declared, "bytes": size}, status_code=201)

    @router.get("/jobs/{job_id}/artifact")
    def download(job_id: str, request: Request) -> Response:
        job = job_for(request, job_id)
        path = artifact_dir / f"{job.build_job}.tar.gz" if job is not None and job.build_job else None
        if path is None or not path.is_file():
            return _refuse(404, "this job has no archive to run")
        return FileResponse(path, media_type="application/gzip")

    @router.post("/jobs/{job_id}/result")
    async def result(job_id: str, request: Request) -> Response:
        job = job_for(request, job_id)
        if job is None:
            return _refuse(410, "this job is no longer yours: its lease ran out or it ended")
        raw = await request.body()
        if len(raw) > MAX_RESULT_BYTES:
            return _refuse(413, "the result is too large")
        try:
            report = json.loads(raw)
            status = str(report["status"])
            conclusion = CONCLUSIONS[status]
        except (ValueError, KeyError, TypeError):
            return _refuse(400, f'a result is {{"status": one of {", ".join(CONCLUSIONS)}, ...}}')
        message = str(report.get("message") or "")[:2000]
        if status == "cancelled" and job.cancel_requested:
            message = job.message  # why it was cancelled, as the App recorded it
        if job.step == "build" and status == "passed" and not job.cancel_requested:
            return _built(job, message)
        if findings := report.get("findings"):
            conclusion = "failure" if conclusion == "success" else conclusion
            message = message or f"{len(findings)} GPU test(s) launched no kernel"
        ended = gpu.finish(job_id, conclusion, message, report)
        if ended is not None:
            log.info("job %s finished: %s (%s)", job_id, conclusion, status)
            if ended.build_job:  # its GPU step is over: the archive is not needed again
                (artifact_dir / f"{ended.build_job}.tar.gz").unlink(missing_ok=True)
        return JSONResponse({"conclusion": conclusion})

    def _built(job: GpuJob, message: str) -> Response:
        if not job.artifact_sha256:
            gpu.finish(job.id, "failure", "the build reported success but uploaded no archive")
            return _refuse(400, "upload the archive before reporting a successful build")
        built = gpu.finish(job.id, "success", f"built on {job.runner}" + (f": {message}" if message else ""))
        if built is None:
            return _refuse(410, "this job already ended")
        step = gpu.create(
            GpuJob(
                id=gpu.new_id(),
                repository=job.repository,
                installation_id=job.installation_id,
                sha=job.sha,
                pull_number=job.pull_number,
                spec=job.spec,
                step="test",
                trusted=job.trusted,
                check_run_id=job.check_run_id,
                build_job=job.id,
                artifact_sha256=job.artifact_sha256,
                message=f"built on {job.runner}",
            )
        )
        return JSONResponse({"conclusion": "success", "next": step.id})

    return router
