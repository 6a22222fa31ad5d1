"""`gpuproof serve`: the webhook endpoint. It verifies, deduplicates, enqueues and
answers fast (GitHub gives up after 10 s); the work happens in `gpuproof worker`.

Outcomes: 200 for ping, duplicates and events nothing handles; 202 when a job was
enqueued; 400 for a malformed delivery, 401 for a bad signature, 413 past GitHub's
25 MB, 503 when Redis is unreachable (GitHub will redeliver). Nothing is enqueued
unless the delivery is authentic and well-formed.
"""

from __future__ import annotations

import json
import logging
from collections import Counter
from typing import Any

import redis
from fastapi import APIRouter, FastAPI, Request
from fastapi.responses import JSONResponse, PlainTextResponse

from app.queue.jobs import JobQueue, PullRequestState
from app.settings import ServiceSettings
from app.webhooks.routes import Delivery, route
from app.webhooks.signature import verify

log = logging.getLogger("gpuproof.webhooks")


def create_app(settings: ServiceSettings, queue: JobQueue, runners: APIRouter | None = None) -> FastAPI:
    """The webhook endpoint and, with ``runners``, the runner protocol (app/runner_api.py)."""
    app = FastAPI(title="gpuproof", docs_url=None, redoc_url=None, openapi_url=None)
    if runners is not None:
        app.include_router(runners)
    # Per process; Prometheus scrapes every replica and sums.
    outcomes: Counter[tuple[str, str]] = Counter()

    def answer(status: int, outcome: str, event: str, **body: Any) -> JSONResponse:
        outcomes[(event or "unknown", outcome)] += 1
        return JSONResponse({"outcome": outcome, **body}, status_code=status)

    @app.post("/webhooks/github")
    async def receive(request: Request) -> JSONResponse:
        event = request.headers.get("x-github-event", "")
        delivery_id = request.headers.get("x-github-delivery", "")
        declared = request.headers.get("content-length", "")
        if declared.isdigit() and int(declared) > settings.max_body_bytes:
            log.warning("delivery %s rejected: %s bytes is over the limit", delivery_id, declared)
            return answer(413, "too-large", event)
        body = await _read_capped(request, settings.max_body_bytes)
        if body is None:
            log.warning("delivery %s rejected: body over the limit", delivery_id)
            return answer(413, "too-large", event)
        secrets = [s.reveal() for s in settings.webhook_secrets]
        if not verify(secrets, body, request.headers.get("x-hub-signature-256")):
            log.warning("delivery %s (%s) rejected: bad or missing signature", delivery_id, event)
            return answer(401, "bad-signature", event)
        if not event or not delivery_id:
            log.warning("delivery rejected: X-GitHub-Event or X-GitHub-Delivery missing")
            return answer(400, "malformed", event, error="X-GitHub-Event and X-GitHub-Delivery are required")
        try:
            payload = json.loads(body)
        except (UnicodeDecodeError, json.JSONDecodeError) as exc:
            log.warning(
                "delivery %s (%s) rejected: body is not JSON (%s)",
                delivery_id,
                event,
                exc.msg if isinstance(exc, json.JSONDecodeError) else "not UTF-8",
            )
            return answer(400, "malformed", event, error="the body is not JSON")
        if not isinstance(payload, dict):
            return answer(400, "malformed", event, error="the body is not a JSON object")
        if event == "ping":
            return answer(200, "pong", event, zen=payload.get("zen", ""))
        delivery = Delivery(event, str(payload.get("action", "")), delivery_id, payload)
        handler = route(delivery)
        if handler is None:
            return answer(200, "ignored", event, reason=f"{event}.{delivery.action} is not handled")
        try:
            job = handler(delivery)
        except (KeyError, TypeError, ValueError) as exc:
            log.warning(
                "delivery %s (%s.%s) rejected: payload lacks %s", delivery_id, event, delivery.action, exc
            )
            return answer(400, "malformed", event, error=f"the payload lacks a field ({exc})")
        if job is None:
            return answer(200, "nothing-to-do", event)
        try:
            if not queue.first_delivery(delivery_id):
                return answer(200, "duplicate", event)
            try:
                if job.kind == "review-pr":
                    # Newer pushes supersede older work for the same pull request.
                    PullRequestState(queue, job.repository, int(str(job.payload["number"]))).mark_head(
                        str(job.payload["head_sha"])
                    )
                entry = queue.enqueue(job)
            except redis.RedisError:
                queue.forget_delivery(delivery_id)  # let GitHub's redelivery through
                raise
        except redis.RedisError as exc:
            log.error("delivery %s not enqueued: Redis unavailable (%s)", delivery_id, type(exc).__name__)
            return answer(503, "unavailable", event)
        log.info(
            "delivery %s (%s.%s) enqueued as %s for %s",
            delivery_id,
            event,
            delivery.action,
            job.kind,
            job.repository or f"installation {job.installation_id}",
        )
        return answer(202, "enqueued", event, job=job.kind, entry=entry)

    @app.get("/healthz")
    async def healthz() -> dict[str, str]:
        return {"status": "ok"}

    @app.get("/readyz")
    async def readyz() -> JSONResponse:
        ready = queue.reachable()
        return JSONResponse({"redis": "ok" if ready else "unreachable"}, status_code=200 if ready else 503)

    @app.get("/metrics")
    async def metrics() -> PlainTextResponse:
        lines = [
            "# HELP gpuproof_webhook_deliveries_total Webhook deliveries by event and outcome.",
            "# TYPE gpuproof_webhook_deliveries_total counter",
        ]
        lines += [
            f'gpuproof_webhook_deliveries_total{{event="{event}",outcome="{outcome}"}} {count}'
            for (event, outcome), count in sorted(outcomes.items())
        ]
        return PlainTextResponse("\n".join(lines) + "\n", media_type="text/plain; version=0.0.4")

    return app


async def _read_capped(request: Request, limit: int) -> bytes | None:
    """The body, or None once it grows past the limit (a missing or false
    Content-Length must not let an oversized body in)."""
    chunks: list[bytes] = []
    size = 0
    async for chunk in request.stream():
        size += len(chunk)
        if size > limit:
            return None
        chunks.append(chunk)
    return b"".join(chunks)
