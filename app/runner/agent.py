"""`gpuproof runner`: the agent on a GPU host (or, with the label ``cpu``, on a build
host). It long-polls the App for jobs its labels and GPU fit, runs each in a fresh
workspace at the exact commit, and reports per-test results and the kernels each
process launched.

    gpuproof runner --url https://gpuproof.example.com --labels cuda,sm_90 \\
        --token-file /etc/gpuproof/runner-token [--gpus all] [--work-dir DIR] [--cache-dir DIR]

One job per GPU at a time (``CUDA_VISIBLE_DEVICES`` names it); the job's tokens never
reach the code under test; a job's process group is killed on timeout or cancel, and
its workspace removed afterwards. Standard library only.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import re
import shutil
import sys
import tarfile
import tempfile
import threading
import time
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import Any

from app.runner.archive import ArchiveError, build_command, built_test_binaries, pack, unpack
from app.runner.execute import TestRun, clean_environment, run_binary, run_process, traced_environment
from app.runner.gpu import Gpu, GpuHostError, build_tracer, gpus
from app.runner.junit import JunitError, parse_junit
from app.runner.libtest import TestOutcome, parse_libtest
from app.runner.protocol import AppConnection, LeaseLost, ProtocolError, download_tarball

log = logging.getLogger("gpuproof.runner")
_RUNNING = re.compile(r"^\s*Running .*?\((?P<path>[^)]+)\)\s*$", re.M)


class JobError(RuntimeError):
    """The job cannot run as configured; reported as its result."""


@dataclass
class Claimed:
    """What the App handed out: the job, its token and how to check it out."""

    id: str
    step: str
    repository: str
    sha: str
    trusted: bool
    spec: dict[str, Any]
    artifact_sha256: str
    job_token: str
    lease_seconds: float
    tarball_url: str
    checkout_token: str

    @classmethod
    def from_answer(cls, answer: dict[str, Any]) -> Claimed:
        job = answer["job"]
        return cls(
            job["id"],
            job["step"],
            job["repository"],
            job["sha"],
            bool(job["trusted"]),
            job["spec"],
            job.get("artifact_sha256", ""),
            answer["job_token"],
            float(answer["lease_seconds"]),
            answer["checkout"]["tarball_url"],
            answer["checkout"]["token"],
        )


class Runner:
    def __init__(
        self,
        app: AppConnection,
        labels: list[str],
        work_dir: Path,
        cache_dir: Path,
        tracer: Path | None,
        gpu: Gpu | None,
    ) -> None:
        self.app = app
        self.labels = labels
        self.work_dir = work_dir
        self.cache_dir = cache_dir
        self.tracer = tracer
        self.gpu = gpu
        self.name = f"GPU {gpu.index}" if gpu else "no GPU"

    def run(self, stop: threading.Event, once: bool = False) -> None:
        while not stop.is_set():
            try:
                answer = self.app.claim(self.labels, [self.gpu.to_json()] if self.gpu else [])
            except ProtocolError as exc:
                log.warning("[%s] claim failed (%s); retrying in 5 s", self.name, exc)
                stop.wait(5)
                continue
            for why in answer.get("mismatches") or []:
                log.warning("[%s] a job has our labels but not our GPU: %s", self.name, why)
            if answer.get("job"):
                self.execute(Claimed.from_answer(answer))
                if once:
                    return

    def execute(self, job: Claimed) -> None:
        log.info("[%s] job %s: %s of %s@%s", self.name, job.id, job.step, job.repository, job.sha[:12])
        cancel, lost = threading.Event(), threading.Event()
        beating = threading.Event()
        heart = threading.Thread(target=self._heartbeats, args=(job, cancel, lost, beating), daemon=True)
        heart.start()
        workspace = Path(tempfile.mkdtemp(prefix=f"job-{job.id}-", dir=self.work_dir))
        try:
            result = self._run(job, workspace, cancel)
        except (JobError, ArchiveError, JunitError, ProtocolError, OSError, tarfile.TarError) as exc:
            result = {"status": "error", "message": str(exc)}
        finally:
            beating.set()
            heart.join(timeout=5)
            shutil.rmtree(workspace, ignore_errors=True)
        if cancel.is_set() and not lost.is_set():
            result = {**result, "status": "cancelled", "message": result.get("message") or "cancelled"}
        if lost.is_set():
            log.error("[%s] job %s: lease lost; the App has given it to another runner", self.name, job.id)
            return
        self._report(job, result)

    def _heartbeats(
        self, job: Claimed, cancel: threading.Event, lost: threading.Event, done: threading.Event
    ) -> None:
        interval = max(1.0, job.lease_seconds / 4)
        while not done.wait(interval):
            try:
                answer = self.app.heartbeat(job.id, job.job_token)
            except LeaseLost:
                lost.set()
                cancel.set()
                return
            except ProtocolError as exc:
                log.warning("[%s] heartbeat failed (%s)", self.name, exc)
                continue
            if answer.get("cancel") and not cancel.is_set():
                log.info("[%s] job %s cancelled: %s", self.name, job.id, answer.get("message", ""))
                cancel.set()

    def _report(self, job: Claimed, result: dict[str, Any]) -> None:
        for attempt in range(5):
            try:
                answer = self.app.report(job.id, job.job_token, result)
                log.info("[%s] job %s reported: %s", self.name, job.id, answer.get("conclusion"))
                return
            except LeaseLost:
                log.error("[%s] job %s: the App no longer takes its result", self.name, job.id)
                return
            except ProtocolError as exc:
                log.warning("[%s] reporting job %s failed (%s)", self.name, job.id, exc)
                time.sleep(2**attempt)

    # -- the work ----------------------------------------------------------------------
    def _run(self, job: Claimed, workspace: Path, cancel: threading.Event) -> dict[str, Any]:
        deadline = time.monotonic() + int(job.spec["timeout_minutes"]) * 60
        source = checkout(job, workspace)
        if job.step == "build":
            return self._build(job, workspace, source, cancel, deadline)
        if job.spec.get("build"):
            return self._run_archive(job, workspace, source, cancel, deadline)
        return self._run_commands(job, workspace, source, cancel, deadline)

    def _test_env(self, job: Claimed) -> dict[str, str]:
        env = clean_environment(os.environ)
        env.update({str(k): str(v) for k, v in (job.spec.get("env") or {}).items()})
        return env

    def _build(
        self, job: Claimed, workspace: Path, source: Path, cancel: threading.Event, deadline: float
    ) -> dict[str, Any]:
        env = self._test_env(job)
        env["CARGO_TARGET_DIR"] = str(self._target_dir(job, workspace))
        messages = workspace / "cargo-messages.json"
        done = run_process(
            build_command(job.spec["build"]),
            cwd=source,
            env=env,
            timeout=deadline - time.monotonic(),
            cancel=cancel,
            stdout_path=messages,
        )
        if done.returncode != 0:
            return _ended(done.cancelled, done.timed_out, "the build failed", done.output)
        executables = built_test_binaries(messages.read_text(errors="replace"), source)
        if not executables:
            return {
                "status": "error",
                "message": "the build command built no test binary",
                "log_tail": done.output,
            }
        archive = workspace / "tests.tar.gz"
        manifest = pack(executables, job.repository, job.sha, archive)
        digest = self.app.upload_artifact(job.id, job.job_token, archive)
        names = ", ".join(b["name"] for b in manifest["binaries"])
        return {
            "status": "passed",
            "message": f"{len(executables)} test binaries ({names}); archive sha256 {digest[:16]}",
        }

    def _target_dir(self, job: Claimed, workspace: Path) -> Path:
        """Trusted jobs build in the repository's cache and so keep it warm; any other
        job reads a copy, so it cannot poison what later trusted builds use."""
        cache = self.cache_dir / job.repository.replace("/", "__") / "target"
        if job.trusted:
            cache.mkdir(parents=True, exist_ok=True)
            return cache
        private = workspace / "target"
        if cache.is_dir():
            shutil.copytree(cache, private, symlinks=True)
        return private

    def _run_archive(
        self, job: Claimed, workspace: Path, source: Path, cancel: threading.Event, deadline: float
    ) -> dict[str, Any]:
        archive = workspace / "tests.tar.gz"
        self.app.download_artifact(job.id, job.job_token, archive)
        binaries = unpack(archive, job.artifact_sha256, job.repository, job.sha, workspace / "bin")
        runs: list[TestRun] = []
        for binary in binaries:
            crate = (source / binary.crate_dir).resolve()
            runs += run_binary(
                workspace / "bin" / binary.file,
                self.tracer,
                timeout=max(1.0, deadline - time.monotonic()),
                gpu=self._visible_device(),
                env=self._test_env(job),
                cwd=crate if crate.is_dir() and crate.is_relative_to(source.resolve()) else source,
                cancel=cancel,
            )
            for run in runs:
                if run.binary == str((workspace / "bin" / binary.file).resolve()):
                    run.binary = binary.name
        tests = [dict(r.to_json(), own_process=True) for r in runs]
        processes = _launches_per_binary([(str(t["binary"]), t) for t in tests])
        findings = gpu_test_findings(tests, processes, job.spec["gpu_test_pattern"], source)
        status = _status(tests, cancel, any(r.timed_out for r in runs))
        return {
            "status": status,
            "tests": tests,
            "processes": processes,
            "findings": findings,
            "gpus": self._gpus(),
        }

    def _run_commands(
        self, job: Claimed, workspace: Path, source: Path, cancel: threading.Event, deadline: float
    ) -> dict[str, Any]:
        traces = workspace / "traces"
        traces.mkdir()
        env = traced_environment(self._test_env(job), self.tracer, self._visible_device())
        env["GPUPROOF_TRACE_DIR"] = str(traces)
        outputs, failed_command = [], ""
        timed_out = False
        for command in job.spec["commands"]:
            done = run_process(
                ["bash", "-c", command],
                cwd=source,
                env=env,
                timeout=max(1.0, deadline - time.monotonic()),
                cancel=cancel,
            )
            outputs.append(done.output)
            timed_out = timed_out or done.timed_out
            if done.returncode != 0 and not failed_command:
                failed_command = command
            if done.cancelled or done.timed_out:
                break
        output = "\n".join(outputs)
        tests = outcomes_from_output(output)
        if job.spec.get("junit"):
            report = (source / job.spec["junit"]).resolve()
            if not report.is_relative_to(source.resolve()) or not report.is_file():
                raise JobError(f"the JUnit report {job.spec['junit']} was not written")
            tests = [
                dict(_outcome_json(o), binary=suite, own_process=False) for suite, o in parse_junit(report)
            ]
        processes = traced_processes(traces)
        findings = gpu_test_findings(tests, processes, job.spec["gpu_test_pattern"], source)
        status = _status(tests, cancel, timed_out)
        if status == "passed" and failed_command:
            status = "failed"
        result = {
            "status": status,
            "tests": tests,
            "processes": processes,
            "findings": findings,
            "gpus": self._gpus(),
        }
        result["log_tail"] = output[-20000:]
        if failed_command:
            result["message"] = f"`{failed_command}` exited with an error"
        return result

    def _visible_device(self) -> str | None:
        if self.gpu is None:
            return None
        return self.gpu.uuid or str(self.gpu.index)

    def _gpus(self) -> list[dict[str, Any]]:
        return [self.gpu.to_json()] if self.gpu else []


def checkout(job: Claimed, workspace: Path) -> Path:
    """The repository at the job's commit, from its tarball, extracted safely."""
    tarball = workspace / "source.tar.gz"
    download_tarball(job.tarball_url, job.checkout_token, tarball)
    unpacked = workspace / "unpacked"
    with tarfile.open(tarball, "r:*") as archive:
        archive.extractall(unpacked, filter="data")  # refuses links out, absolute paths, devices
    tarball.unlink()
    tops = list(unpacked.iterdir())
    if len(tops) != 1 or not tops[0].is_dir():  # GitHub wraps the tree in "<owner>-<repo>-<sha>/"
        raise JobError("the repository tarball does not hold one top-level directory")
    return tops[0]


def _outcome_json(outcome: TestOutcome) -> dict[str, Any]:
    return {
        "test": outcome.name,
        "status": outcome.status,
        "message": outcome.message,
        "file": outcome.file,
        "line": outcome.line,
    }


def _binary_key(name: str) -> str:
    """One name for a test binary, whether it comes from a path (``deps/my_crate-1a2b``),
    a libtest "Running" line or a nextest suite (``my-crate::integration``)."""
    base = PurePosixPath(name.split("::")[-1]).name
    stem, _, suffix = base.rpartition("-")
    if stem and re.fullmatch(r"[0-9a-f]{16}", suffix):
        base = stem
    return base.replace("-", "_")


def outcomes_from_output(output: str) -> list[dict[str, Any]]:
    """libtest results of `cargo test` output, attributed to the binary named by the
    "Running ... (path)" line before them."""
    tests = []
    marks = list(_RUNNING.finditer(output))
    segments = [
        (m.group("path"), output[m.end() : marks[i + 1].start() if i + 1 < len(marks) else len(output)])
        for i, m in enumerate(marks)
    ]
    for path, text in segments or [("", output)]:
        for outcome in parse_libtest(text):
            tests.append(
                dict(_outcome_json(outcome), binary=_binary_key(path) if path else "", own_process=False)
            )
    return tests


def traced_processes(traces: Path) -> list[dict[str, Any]]:
    """Kernel launches per test binary, from the tracer's per-process reports."""
    reports = []
    for report in sorted(traces.glob("trace-*.json")):
        try:
            data = json.loads(report.read_text() or "{}")
        except ValueError:
            continue
        reports.append((_binary_key(str(data.get("exe", "?"))), data))
    return sorted(_launches_per_binary(reports), key=lambda process: str(process["binary"]))


def _launches_per_binary(reports: list[tuple[str, dict[str, Any]]]) -> list[dict[str, Any]]:
    """(binary, {"launches", "kernels"}) reports summed per binary, in first-seen order."""
    by_binary: dict[str, dict[str, Any]] = {}
    for binary, report in reports:
        entry = by_binary.setdefault(binary, {"launches": 0, "kernels": {}})
        entry["launches"] += int(report.get("launches", 0))
        for kernel, count in (report.get("kernels") or {}).items():
            entry["kernels"][kernel] = entry["kernels"].get(kernel, 0) + int(count)
    return [{"binary": name, **entry} for name, entry in by_binary.items()]


def gpu_test_findings(
    tests: list[dict[str, Any]], processes: list[dict[str, Any]], pattern: str, source: Path | None = None
) -> list[dict[str, Any]]:
    """``gpu-test-ran-on-cpu``: a passing GPU test whose process launched no kernel
    (its own process, or its binary's when the tests of a binary share one)."""
    gpu_test = re.compile(pattern, re.I)
    launched = {_binary_key(str(p["binary"])): int(p["launches"]) for p in processes}
    findings = []
    for test in tests:
        if test["status"] != "passed" or not gpu_test.search(str(test["test"])):
            continue
        own = test.get("own_process")
        launches = int(test.get("launches", 0)) if own else launched.get(_binary_key(str(test["binary"])), 0)
        if launches:
            continue
        scope = "its process" if own else f"its test binary `{test['binary']}`"
        finding = {
            "rule": "gpu-test-ran-on-cpu",
            "severity": "error",
            "binary": test["binary"],
            "test": test["test"],
            "message": f"GPU test `{test['test']}` passed, but {scope} launched no GPU kernel: "
            "it tested the CPU path under a GPU name.",
        }
        if source is not None:
            finding.update(locate_test(source, str(test["test"])))
        findings.append(finding)
    return findings


def locate_test(source: Path, test: str) -> dict[str, Any]:
    """Where ``fn <last path segment>`` is defined, for an annotation ({} if not found)."""
    name = test.rsplit("::", 1)[-1]
    definition = re.compile(rf"^\s*(?:pub\s+)?(?:async\s+)?fn\s+{re.escape(name)}\s*\(", re.M)
    for path in sorted(source.rglob("*.rs")):
        if "target" in path.relative_to(source).parts:
            continue
        text = path.read_text(errors="replace")
        found = definition.search(text)
        if found:
            line = text.count("\n", 0, found.end()) + 1
            return {"path": str(path.relative_to(source)), "line": line}
    return {}


def _status(tests: list[dict[str, Any]], cancel: threading.Event, timed_out: bool) -> str:
    if cancel.is_set():
        return "cancelled"
    if timed_out:
        return "timed_out"
    return "failed" if any(t["status"] == "failed" for t in tests) else "passed"


def _ended(cancelled: bool, timed_out: bool, what: str, output: str) -> dict[str, Any]:
    status = "cancelled" if cancelled else "timed_out" if timed_out else "failed"
    return {"status": status, "message": what if status == "failed" else status, "log_tail": output[-20000:]}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="gpuproof runner", description=__doc__.splitlines()[0])
    parser.add_argument("--url", required=True, help="the App's base URL (the `gpuproof serve` address)")
    parser.add_argument("--labels", required=True, help="comma-separated labels, e.g. cuda,sm_90 or cpu")
    parser.add_argument(
        "--token-file", type=Path, help="file with the runner token (else $GPUPROOF_RUNNER_TOKEN)"
    )
    parser.add_argument(
        "--gpus", default="all", help="'all', 'none' or GPU indices like 0,1: one job per GPU"
    )
    parser.add_argument("--work-dir", type=Path, default=Path(tempfile.gettempdir()) / "gpuproof-runner")
    parser.add_argument("--cache-dir", type=Path, default=Path.home() / ".cache" / "gpuproof-runner")
    parser.add_argument("--no-tracer", action="store_true", help="run without the CUPTI tracer")
    parser.add_argument("--once", action="store_true", help="run one job per GPU, then exit")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    token = (
        args.token_file.read_text().strip()
        if args.token_file
        else os.environ.get("GPUPROOF_RUNNER_TOKEN", "")
    )
    if not token:
        print("gpuproof runner: no runner token (--token-file or GPUPROOF_RUNNER_TOKEN)", file=sys.stderr)
        return 2
    labels = [label.strip() for label in args.labels.split(",") if label.strip()]
    try:
        devices = _chosen_gpus(args.gpus)
        tracer = None if args.no_tracer or not devices else build_tracer(args.work_dir / "tracer")
    except GpuHostError as exc:
        print(f"gpuproof runner: {exc}", file=sys.stderr)
        return 2
    args.work_dir.mkdir(parents=True, exist_ok=True)
    app = AppConnection(args.url, token)
    stop = threading.Event()
    chosen: list[Gpu | None] = list(devices) or [None]  # a build runner has one slot and no GPU
    slots = [Runner(app, labels, args.work_dir, args.cache_dir, tracer, gpu) for gpu in chosen]
    threads = [threading.Thread(target=slot.run, args=(stop, args.once), daemon=True) for slot in slots]
    for thread in threads:
        thread.start()
    log.info("runner up: labels %s, %s", ",".join(labels), ", ".join(s.name for s in slots))
    try:
        for thread in threads:
            while thread.is_alive():
                thread.join(timeout=1)
    except KeyboardInterrupt:
        stop.set()
    return 0


def _chosen_gpus(choice: str) -> list[Gpu]:
    if choice == "none":
        return []
    found = gpus()
    if choice == "all":
        return found
    wanted = {int(i) for i in choice.split(",")}
    return [g for g in found if g.index in wanted]


if __name__ == "__main__":
    sys.exit(main())
