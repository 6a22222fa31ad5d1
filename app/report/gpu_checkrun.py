"""A GPU job's record -> the fields of its "gpuproof / gpu-tests (<job>)" check run:
status, conclusion, title, a Markdown summary (the GPU, per test binary and per test
the kernels launched, the gpu-test-ran-on-cpu findings, the output's tail) and
annotations for failures whose file and line are known."""

from __future__ import annotations

from collections import Counter
from typing import Any

from app.queue.gpu_jobs import GpuJob
from app.report.checkrun import fit

MAX_ANNOTATIONS = 50
MAX_TEST_ROWS = 200


def render_gpu_check(job: GpuJob) -> dict[str, Any]:
    # A successful build is never the end: its GPU step follows (queued next), so the
    # check run must not flip to completed in between.
    built = job.step == "build" and job.state == "done" and job.conclusion == "success"
    if job.state == "queued" or built:
        return {
            "status": "queued",
            "output": {"title": _queued_title(job), "summary": fit(_queued_summary(job))},
        }
    if job.state == "running":
        doing = "Building the test binaries" if job.step == "build" else "Running the GPU tests"
        return {
            "status": "in_progress",
            "output": {"title": f"{doing} on {job.runner}", "summary": fit(_header(job))},
        }
    return {
        "status": "completed",
        "conclusion": job.conclusion,
        "output": {
            "title": _done_title(job),
            "summary": fit(_done_summary(job)),
            "annotations": _annotations(job.result)[:MAX_ANNOTATIONS],
        },
    }


def _header(job: GpuJob) -> str:
    spec = job.spec
    how = (
        f"built on a CPU runner with `{spec.build}`"
        if spec.build
        else "run as " + ", ".join(f"`{c}`" for c in spec.commands)
    )
    return (
        f"**{spec.name}** at `{job.sha[:12]}`: {how}; runner labels `{', '.join(spec.labels)}`, "
        f"timeout {spec.timeout_minutes} min."
    )


def _queued_title(job: GpuJob) -> str:
    if (job.step == "test" and job.build_job) or job.state == "done":
        return "Built; waiting for a GPU runner"
    return f"Queued: waiting for a runner with labels {', '.join(job.labels)}"


def _queued_summary(job: GpuJob) -> str:
    parts = [_header(job)]
    if job.message:
        parts.append(job.message)
    if job.mismatches:
        rows = "\n".join(f"- `{runner}`: {why}" for runner, why in sorted(job.mismatches.items()))
        parts.append(f"Runners with the labels whose GPU does not fit the job:\n{rows}")
    return "\n\n".join(parts)


def _done_title(job: GpuJob) -> str:
    tests = job.result.get("tests") or []
    counts = Counter(str(t.get("status")) for t in tests)
    findings = job.result.get("findings") or []
    launches = sum(int(p.get("launches", 0)) for p in _processes(job.result))
    if job.conclusion in ("cancelled", "timed_out") or not tests:
        return job.message[:200] or job.conclusion
    title = (
        f"{counts['passed']} passed, {counts['failed']} failed, {counts['ignored']} ignored; "
        f"{launches} kernel launch(es)"
    )
    return title + (f"; {len(findings)} GPU test(s) ran on the CPU" if findings else "")


def _done_summary(job: GpuJob) -> str:
    result = job.result
    parts = [_header(job)]
    if job.message:
        parts.append(f"**{job.conclusion}**: {job.message}")
    gpus = result.get("gpus") or []
    if gpus:
        parts.append(
            "GPU: "
            + "; ".join(
                f"{g.get('name')} (driver {g.get('driver')}, {int(g.get('memory_mib', 0)) // 1024} GiB, "
                f"compute capability {g.get('compute_capability')})"
                for g in gpus
            )
        )
    findings = result.get("findings") or []
    if findings:
        parts.append(
            "### gpu-test-ran-on-cpu\n"
            + "\n".join(f"- `{f.get('test')}` ({f.get('binary')}): {f.get('message')}" for f in findings)
        )
    processes = _processes(result)
    if processes:
        parts.append(_binaries_table(result, processes))
    tests = result.get("tests") or []
    if tests:
        parts.append(_tests_table(tests))
    tail = str(result.get("log_tail") or "").strip()
    if tail:
        parts.append(f"<details><summary>Output (tail)</summary>\n\n```\n{tail[-20000:]}\n```\n</details>")
    return "\n\n".join(parts)


def _processes(result: dict[str, Any]) -> list[dict[str, Any]]:
    return list(result.get("processes") or [])


def _kernels(kernels: dict[str, int], limit: int = 5) -> str:
    top = sorted(kernels.items(), key=lambda kv: (-kv[1], kv[0]))[:limit]
    shown = ", ".join(f"`{name[:60]}` ×{count}" for name, count in top)
    return shown + (f", … {len(kernels) - limit} more" if len(kernels) > limit else "") or "none"


def _binaries_table(result: dict[str, Any], processes: list[dict[str, Any]]) -> str:
    by_binary: dict[str, Counter[str]] = {}
    for test in result.get("tests") or []:
        by_binary.setdefault(str(test.get("binary")), Counter())[str(test.get("status"))] += 1
    rows = [
        f"| `{p.get('binary')}` | {by_binary.get(str(p.get('binary')), Counter())['passed']} / "
        f"{by_binary.get(str(p.get('binary')), Counter())['failed']} / "
        f"{by_binary.get(str(p.get('binary')), Counter())['ignored']} | {p.get('launches', 0)} | "
        f"{_kernels(p.get('kernels') or {})} |"
        for p in processes
    ]
    return (
        "### Per test binary\n| binary | passed / failed / ignored | kernel launches | kernels |\n"
        "|---|---|---|---|\n" + "\n".join(rows)
    )


def _tests_table(tests: list[dict[str, Any]]) -> str:
    rows = []
    for t in tests[:MAX_TEST_ROWS]:
        if t.get("own_process"):
            launches, kernels = str(t.get("launches", 0)), _kernels(t.get("kernels") or {})
        else:
            launches, kernels = "shared process", "see its binary"
        rows.append(f"| `{t.get('test')}` | {t.get('status')} | {launches} | {kernels} |")
    more = f"\n\n… and {len(tests) - MAX_TEST_ROWS} more tests" if len(tests) > MAX_TEST_ROWS else ""
    return (
        "<details><summary>Per test</summary>\n\n| test | result | kernel launches | kernels |\n"
        "|---|---|---|---|\n" + "\n".join(rows) + more + "\n</details>"
    )


def _annotations(result: dict[str, Any]) -> list[dict[str, Any]]:
    notes = []
    for t in result.get("tests") or []:
        if t.get("status") == "failed" and t.get("file") and t.get("line"):
            notes.append(
                {
                    "path": t["file"],
                    "start_line": int(t["line"]),
                    "end_line": int(t["line"]),
                    "annotation_level": "failure",
                    "title": f"test failed: {t.get('test')}",
                    "message": str(t.get("message") or "failed")[:60000],
                }
            )
    for f in result.get("findings") or []:
        if f.get("path") and f.get("line"):
            notes.append(
                {
                    "path": f["path"],
                    "start_line": int(f["line"]),
                    "end_line": int(f["line"]),
                    "annotation_level": "failure",
                    "title": "gpu-test-ran-on-cpu",
                    "message": str(f.get("message"))[:60000],
                }
            )
    return notes
