"""Run a Rust test binary one test per process under the kernel-launch tracer, so each
test's launches are its own. Each process runs in its own process group (killed whole
on timeout), with its output capped and the runner's credentials removed from its
environment."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import tempfile
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

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


def run_binary(
    binary: Path,
    tracer: Path | None,
    *,
    timeout: float = 600.0,
    gpu: str | None = None,
    env: Mapping[str, str] | None = None,
) -> list[TestRun]:
    """Every test of the binary, each in its own traced process."""
    binary = binary.resolve()  # the tests run in a scratch directory of their own
    runs = []
    for name in list_tests(binary):
        runs.append(_run_one(binary, name, tracer, timeout, gpu, env or os.environ))
    return runs


def _run_one(
    binary: Path, name: str, tracer: Path | None, timeout: float, gpu: str | None, base_env: Mapping[str, str]
) -> TestRun:
    with tempfile.TemporaryDirectory(prefix="gpuproof-test-") as scratch:
        trace = Path(scratch) / "trace.json"
        env = clean_environment(base_env)
        env.update(RUST_BACKTRACE="0", GPUPROOF_TRACE_FILE=str(trace))
        if tracer is not None:
            env["CUDA_INJECTION64_PATH"] = str(tracer)
        if gpu is not None:
            env["CUDA_VISIBLE_DEVICES"] = gpu  # one job per GPU on a multi-GPU host
        started = time.monotonic()
        process = subprocess.Popen(
            [str(binary), "--exact", name, "--test-threads=1"],
            cwd=scratch,
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        timed_out = False
        try:
            raw, _ = process.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)
            raw, _ = process.communicate()
            timed_out = True
        output = raw[:OUTPUT_CAP].decode("utf-8", "replace")
        outcomes = [o for o in parse_libtest(output) if o.name == name]
        outcome = (
            outcomes[0]
            if outcomes
            else TestOutcome(
                name, "failed", "timed out" if timed_out else f"no result (exit status {process.returncode})"
            )
        )
        run = TestRun(str(binary), outcome, seconds=time.monotonic() - started, timed_out=timed_out)
        if trace.exists():
            data = json.loads(trace.read_text() or "{}")
            run.launches = int(data.get("launches", 0))
            run.kernels = {str(k): int(v) for k, v in (data.get("kernels") or {}).items()}
        return run
