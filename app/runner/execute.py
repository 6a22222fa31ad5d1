"""Run a Rust test binary one test per process under the kernel-launch tracer, so each
test's launches are its own. Each process runs in its own process group (killed whole
on timeout), with its output capped and the runner's credentials removed from its
environment."""

from __future__ import annotations

import contextlib
import json
import os
import re
import signal
import subprocess
import tempfile
import threading
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO

from app.runner.libtest import TestOutcome, parse_libtest

OUTPUT_CAP = 1024 * 1024  # bytes of output kept per test process
# Never passed to the code under test.
_CREDENTIALS = re.compile(r"TOKEN|SECRET|PASSWORD|PRIVATE_KEY|GITHUB_|REDIS_URL|_KEY$", re.I)


@dataclass
class TestRun:
    binary: str
    outcome: TestOutcome
    launches: int = 0
    kernels: dict[str, int] = field(default_factory=dict)
    seconds: float = 0.0
    timed_out: bool = False

    def to_json(self) -> dict[str, object]:
        return {
            "binary": self.binary,
            "test": self.outcome.name,
            "status": self.outcome.status,
            "message": self.outcome.message,
            "file": self.outcome.file,
            "line": self.outcome.line,
            "launches": self.launches,
            "kernels": self.kernels,
            "seconds": round(self.seconds, 3),
            "timed_out": self.timed_out,
        }


def clean_environment(base: Mapping[str, str]) -> dict[str, str]:
    return {k: v for k, v in base.items() if not _CREDENTIALS.search(k)}


def list_tests(binary: Path) -> list[str]:
    done = subprocess.run(
        [str(binary), "--list", "--format", "terse"], capture_output=True, text=True, check=False, timeout=60
    )
    return [line.rsplit(": ", 1)[0] for line in done.stdout.splitlines() if line.endswith(": test")]


@dataclass
class ProcessResult:
    output: str  # capped: the head and the tail of stdout and stderr together
    returncode: int | None
    timed_out: bool = False
    cancelled: bool = False
    seconds: float = 0.0


class _CappedOutput:
    """Keeps the first and the last OUTPUT_CAP/2 bytes of a stream, however long it runs."""

    def __init__(self) -> None:
        self.head = bytearray()
        self.tail = bytearray()
        self.dropped = 0

    def feed(self, chunk: bytes) -> None:
        room = OUTPUT_CAP // 2 - len(self.head)
        if room > 0:
            self.head += chunk[:room]
            chunk = chunk[room:]
        self.tail += chunk
        if len(self.tail) > OUTPUT_CAP // 2:
            cut = len(self.tail) - OUTPUT_CAP // 2
            self.dropped += cut
            del self.tail[:cut]

    def drain(self, stream: IO[bytes]) -> None:
        for chunk in iter(lambda: stream.read(65536), b""):
            self.feed(chunk)

    def text(self) -> str:
        gap = f"\n[... {self.dropped} bytes of output dropped ...]\n".encode() if self.dropped else b""
        return bytes(self.head + gap + self.tail).decode("utf-8", "replace")


def run_process(
    argv: list[str],
    *,
    cwd: Path,
    env: Mapping[str, str],
    timeout: float,
    cancel: threading.Event | None = None,
    stdout_path: Path | None = None,
) -> ProcessResult:
    """Run a command in a process group of its own; the whole group is killed on
    timeout or cancel. Output is capped (``stdout_path`` keeps stdout whole, for
    machine-readable output such as cargo's JSON messages)."""
    started = time.monotonic()
    stdout_file = stdout_path.open("wb") if stdout_path else None
    process = subprocess.Popen(
        argv,
        cwd=cwd,
        env=dict(env),
        stdin=subprocess.DEVNULL,
        stdout=stdout_file or subprocess.PIPE,
        stderr=subprocess.PIPE if stdout_file else subprocess.STDOUT,
        start_new_session=True,
    )
    captured = _CappedOutput()
    stream = process.stderr if stdout_file else process.stdout
    assert stream is not None
    reader = threading.Thread(target=captured.drain, args=(stream,))
    reader.start()
    result = ProcessResult("", None)
    deadline = started + timeout
    while process.poll() is None:
        if cancel is not None and cancel.is_set():
            result.cancelled = True
        elif time.monotonic() >= deadline:
            result.timed_out = True
        if result.cancelled or result.timed_out:
            _kill_group(process)
            break
        time.sleep(0.05)
    _kill_group(process)  # children the command left behind die with it
    process.wait()
    reader.join(timeout=10)
    if stdout_file:
        stdout_file.close()
    result.output, result.returncode = captured.text(), process.returncode
    result.seconds = time.monotonic() - started
    return result


def _kill_group(process: subprocess.Popen[bytes]) -> None:
    with contextlib.suppress(ProcessLookupError):
        os.killpg(process.pid, signal.SIGKILL)


def run_binary(
    binary: Path,
    tracer: Path | None,
    *,
    timeout: float = 600.0,
    gpu: str | None = None,
    env: Mapping[str, str] | None = None,
    cwd: Path | None = None,
    cancel: threading.Event | None = None,
) -> list[TestRun]:
    """Every test of the binary, each in its own traced process, within ``timeout``
    seconds for the whole binary; tests left when time runs out or on cancel are
    reported as not run."""
    binary = binary.resolve()
    deadline = time.monotonic() + timeout
    runs = []
    for name in list_tests(binary):
        left = deadline - time.monotonic()
        if left <= 0 or (cancel is not None and cancel.is_set()):
            why = "cancelled" if cancel is not None and cancel.is_set() else "not run: the job's time ran out"
            runs.append(TestRun(str(binary), TestOutcome(name, "failed", why), timed_out=why != "cancelled"))
            continue
        runs.append(_run_one(binary, name, tracer, left, gpu, env or os.environ, cwd, cancel))
    return runs


def traced_environment(base: Mapping[str, str], tracer: Path | None, gpu: str | None) -> dict[str, str]:
    """The environment of code under test: no credentials, the tracer injected and,
    on a multi-GPU host, only this job's GPU visible."""
    env = clean_environment(base)
    env["RUST_BACKTRACE"] = "0"
    if tracer is not None:
        env["CUDA_INJECTION64_PATH"] = str(tracer)
    if gpu is not None:
        env["CUDA_VISIBLE_DEVICES"] = gpu  # one job per GPU on a multi-GPU host
    return env


def _run_one(
    binary: Path,
    name: str,
    tracer: Path | None,
    timeout: float,
    gpu: str | None,
    base_env: Mapping[str, str],
    cwd: Path | None,
    cancel: threading.Event | None,
) -> TestRun:
    with tempfile.TemporaryDirectory(prefix="gpuproof-test-") as scratch:
        trace = Path(scratch) / "trace.json"
        env = traced_environment(base_env, tracer, gpu)
        env["GPUPROOF_TRACE_FILE"] = str(trace)
        done = run_process(
            [str(binary), "--exact", name, "--test-threads=1"],
            cwd=cwd or Path(scratch),
            env=env,
            timeout=timeout,
            cancel=cancel,
        )
        outcomes = [o for o in parse_libtest(done.output) if o.name == name]
        if outcomes:
            outcome = outcomes[0]
        else:
            why = (
                "cancelled"
                if done.cancelled
                else "timed out"
                if done.timed_out
                else f"no result (exit status {done.returncode})"
            )
            outcome = TestOutcome(name, "failed", why)
        run = TestRun(str(binary), outcome, seconds=done.seconds, timed_out=done.timed_out)
        if trace.exists():
            data = json.loads(trace.read_text() or "{}")
            run.launches = int(data.get("launches", 0))
            run.kernels = {str(k): int(v) for k, v in (data.get("kernels") or {}).items()}
        return run
