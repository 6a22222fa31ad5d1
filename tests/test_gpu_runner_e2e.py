"""End to end with real processes: `gpuproof serve`, a worker and runners
(`python -m app.runner.agent`), a real Redis and the GitHub emulator. The fixture crate
(tests/fixtures/gpu-crate: passing, failing, ignored and GPU tests) is built on a CPU
runner and its test binaries run by a GPU runner; a runner SIGKILLed mid-job loses
its lease and another completes the job; a new push cancels a running job. This
machine has no GPU, so the GPU runner runs without the tracer (docs/gpu-proof.md has
the same run on a real GPU)."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from app.queue.jobs import JobQueue
from app.runner.gpu import gpus
from tests.conftest import APP_ID, signed_headers, start_serve
from tests.github_emulator import GitHubEmulator
from tests.test_gpu_dispatch import delivery
from tests.test_runner import WHY_NO_GPU
from tests.test_worker import BASE, HEAD1, HEAD2, NUMBER, REPO, SECRET, runs_on
from tests.test_worker import pytestmark as needs_shared_github

pytestmark = needs_shared_github
FIXTURE = Path(__file__).parent / "fixtures" / "gpu-crate"
TOKEN_PREFIXES = ("gpr_", "gpj_", "ghs_")


class Stack:
    """serve + worker as real processes, runners started on demand, one log file."""

    def __init__(self, emulator: GitHubEmulator, redis_url: str, tmp: Path) -> None:
        key_file = tmp / "app.pem"
        key_file.write_text(emulator.private_key)  # type: ignore[attr-defined]
        self.tmp = tmp
        self.env = {
            **os.environ,
            "GITHUB_WEBHOOK_SECRET": SECRET,
            "REDIS_URL": redis_url,
            "GITHUB_APP_ID": str(APP_ID),
            "GITHUB_PRIVATE_KEY_PATH": str(key_file),
            "GITHUB_API_URL": emulator.base_url,
            "GPUPROOF_LEASE_SECONDS": "3",
            "GPUPROOF_ARTIFACT_DIR": str(tmp / "artifacts"),
        }
        self.log = tmp / "logs.txt"
        self.processes: list[subprocess.Popen[bytes]] = []
        serve, self.url = start_serve(self.env, self.log)
        self.processes.append(serve)
        self.processes.append(self._start([sys.executable, "-m", "app.cli", "worker"], self.env))

    def _start(self, argv: list[str], env: dict[str, str]) -> subprocess.Popen[bytes]:
        with self.log.open("a") as out:  # the child keeps its own descriptor
            process = subprocess.Popen(argv, env=env, stdout=out, stderr=subprocess.STDOUT)
        self.processes.append(process)
        return process

    def token(self, name: str) -> str:
        """A runner token, registered the way an operator does it."""
        return subprocess.run(
            [sys.executable, "-m", "app.cli", "runner-token", name],
            env=self.env,
            capture_output=True,
            text=True,
            check=True,
        ).stdout.strip()

    def runner(self, name: str, labels: str, *extra: str) -> subprocess.Popen[bytes]:
        token = self.token(name)
        runner_env = {k: v for k, v in os.environ.items() if not k.startswith("GITHUB_")}
        runner_env["GPUPROOF_RUNNER_TOKEN"] = token
        argv = [
            sys.executable,
            "-m",
            "app.runner.agent",
            "--url",
            self.url,
            "--labels",
            labels,
            "--gpus",
            "none",
        ]
        argv += ["--work-dir", str(self.tmp / f"work-{name}"), "--cache-dir", str(self.tmp / "cache"), *extra]
        return self._start(argv, runner_env)

    def deliver(self, action: str, head: str, name: str) -> None:
        raw = delivery(action, head)
        answer = httpx.post(
            f"{self.url}/webhooks/github",
            content=raw,
            headers=signed_headers("pull_request", name, raw, SECRET),
        )
        assert answer.status_code == 202, answer.text

    def stop(self) -> None:
        for process in reversed(self.processes):  # runners first: their long polls hold serve open
            if process.poll() is None:
                process.terminate()
                try:
                    process.wait(timeout=15)
                except subprocess.TimeoutExpired:
                    process.kill()
                    raise


@pytest.fixture
def stack(emulator: GitHubEmulator, queue: JobQueue, redis_url: str, tmp_path: Path) -> Iterator[Stack]:
    emulator.permissions["octocat"] = "write"
    running = Stack(emulator, redis_url, tmp_path)
    yield running
    running.stop()
    text = running.log.read_text()
    assert not any(prefix in text for prefix in TOKEN_PREFIXES), "a token reached a log line"


def set_up(emulator: GitHubEmulator, config: str, head: str, files: dict[str, bytes]) -> None:
    emulator.trees[BASE] = {".github/gpuproof.yml": config.encode()}
    emulator.trees[head] = {**emulator.trees[BASE], **files}
    emulator.add_pull(NUMBER, head, BASE, "GPU kernels", "")
    emulator.pull_files[NUMBER] = []


def wait_for(what: Callable[[], Any], seconds: float, log: Path) -> Any:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        value = what()
        if value:
            return value
        time.sleep(0.2)
    raise AssertionError(f"timed out waiting; logs:\n{log.read_text()[-6000:]}")


def gpu_run(emulator: GitHubEmulator, sha: str) -> dict[str, Any] | None:
    return runs_on(emulator, sha).get("gpuproof / gpu-tests (cuda)")


def completed(emulator: GitHubEmulator, sha: str) -> Callable[[], dict[str, Any] | None]:
    def check() -> dict[str, Any] | None:
        run = gpu_run(emulator, sha)
        return run if run and run["status"] == "completed" else None

    return check


def statuses_of(emulator: GitHubEmulator, run_id: int) -> list[str]:
    updates = [r.body.get("status") for r in emulator.posted("PATCH", f"/check-runs/{run_id}")]
    return [s for i, s in enumerate(updates) if s and (i == 0 or s != updates[i - 1])]


def no_token_in(emulator: GitHubEmulator) -> bool:
    bodies = json.dumps([r.body for r in emulator.requests if r.method != "GET"])
    return not any(prefix in bodies for prefix in TOKEN_PREFIXES)


@pytest.mark.skipif(
    shutil.which("cargo") is None, reason="cargo is not installed: the fixture crate cannot be built"
)
def test_built_on_a_cpu_runner_and_run_on_a_gpu_runner(emulator: GitHubEmulator, stack: Stack) -> None:
    config = "gpu_tests:\n  - {name: cuda, labels: [cuda], build: cargo test --no-run --offline, gpu_test_pattern: gpu}\n"
    files = {p: (FIXTURE / p).read_bytes() for p in ("Cargo.toml", "Cargo.lock", "src/lib.rs")}
    set_up(emulator, config, HEAD1, files)
    stack.runner("builder", "cpu", "--once")
    stack.runner("gpu-box", "cuda", "--once", "--no-tracer")
    stack.deliver("opened", HEAD1, "e2e-build")
    run = wait_for(completed(emulator, HEAD1), 180, stack.log)
    summary = run["output"]["summary"]
    assert run["conclusion"] == "failure", summary
    assert run["output"]["title"].startswith(
        "2 passed, 2 failed, 1 ignored; 0 kernel launch(es); 1 GPU test(s)"
    )
    assert "`tests::gpu_add_one_pretends` (gpu_fixture)" in summary  # gpu-test-ran-on-cpu
    assert "| `tests::cpu_sum_fails` | failed | 0 |" in summary
    annotations = {(a["path"], a["start_line"], a["title"]) for a in run["_annotations"]}
    assert ("src/lib.rs", 151, "test failed: tests::cpu_sum_fails") in annotations
    assert any(title == "gpu-test-ran-on-cpu" for _, _, title in annotations)
    # Queued, in progress (build, then GPU step), completed once; a worker shows the
    # newest state, so a quick step may skip one in between.
    statuses = statuses_of(emulator, run["id"])
    assert (
        statuses[0] == "queued"
        and "in_progress" in statuses
        and statuses.index("completed") == len(statuses) - 1
    )
    assert (stack.tmp / "cache" / "octo-org__kernels" / "target").is_dir()  # a trusted build keeps the cache
    assert not list((stack.tmp / "artifacts").iterdir())  # the archive went with its GPU step
    for runner in ("builder", "gpu-box"):  # each job's workspace is removed after it
        assert not list((stack.tmp / f"work-{runner}").glob("job-*"))
    assert no_token_in(emulator)


def test_a_killed_runner_loses_its_lease_and_another_completes_the_job(
    emulator: GitHubEmulator, stack: Stack
) -> None:
    config = "gpu_tests:\n  - name: cuda\n    labels: [cuda]\n    commands: ['sleep 4; echo \"test tests::cpu_ok ... ok\"']\n"
    set_up(emulator, config, HEAD1, {"src/lib.rs": b"pub fn f() {}\n"})
    doomed = stack.runner("doomed", "cuda")
    stack.deliver("opened", HEAD1, "e2e-kill")
    wait_for(lambda: (gpu_run(emulator, HEAD1) or {}).get("status") == "in_progress", 30, stack.log)
    doomed.send_signal(signal.SIGKILL)
    doomed.wait(timeout=10)
    stack.runner("survivor", "cuda", "--once")
    run = wait_for(completed(emulator, HEAD1), 60, stack.log)
    assert run["conclusion"] == "success", run["output"]
    assert "1 passed, 0 failed" in run["output"]["title"]
    assert "doomed stopped answering" in stack.log.read_text()
    assert no_token_in(emulator)


def test_a_new_push_cancels_the_running_job_and_tokens_stay_out_of_the_tests(
    emulator: GitHubEmulator, stack: Stack
) -> None:
    commands = "['env | grep -c -E \"GPUPROOF_RUNNER_TOKEN|gpr_|ghs_\" || true', 'sleep 60']"
    config = f"gpu_tests:\n  - name: cuda\n    labels: [cuda]\n    commands: {commands}\n"
    set_up(emulator, config, HEAD1, {"src/lib.rs": b"pub fn f() {}\n"})
    runner = stack.runner("box", "cuda", "--once")
    stack.deliver("opened", HEAD1, "e2e-cancel-1")
    wait_for(lambda: (gpu_run(emulator, HEAD1) or {}).get("status") == "in_progress", 30, stack.log)
    set_up(emulator, config, HEAD2, {"src/lib.rs": b"pub fn g() {}\n"})
    stack.deliver("synchronize", HEAD2, "e2e-cancel-2")
    run = wait_for(completed(emulator, HEAD1), 30, stack.log)
    assert run["conclusion"] == "cancelled" and HEAD2[:12] in run["output"]["summary"]
    assert "```\n0\n" in run["output"]["summary"]  # the tests saw no token
    assert runner.wait(timeout=10) == 0  # --once: it reported and left
    assert gpu_run(emulator, HEAD2)["status"] == "queued"  # type: ignore[index]


def _fixture_archive(tmp: Path) -> Path:
    """The fixture crate's test binary as a CPU build runner archives it. A GPU host has
    no Rust toolchain: GPUPROOF_FIXTURE_BINARY names a binary built elsewhere with
    `cargo test --no-run`."""
    from app.runner.archive import built_test_binaries, pack

    prebuilt = os.environ.get("GPUPROOF_FIXTURE_BINARY")
    if prebuilt:
        executables = [("gpu_fixture", Path(prebuilt), ".")]
    else:
        done = subprocess.run(
            [
                "cargo",
                "test",
                "--no-run",
                "--offline",
                "--message-format=json",
                "--target-dir",
                str(tmp / "t"),
            ],
            cwd=FIXTURE,
            capture_output=True,
            text=True,
            check=True,
        )
        executables = [(n, p, ".") for n, p, _ in built_test_binaries(done.stdout, FIXTURE)]
    archive = tmp / "tests.tar.gz"
    pack(executables, REPO, HEAD1, archive)
    return archive


@pytest.mark.skipif(bool(WHY_NO_GPU), reason=f"needs an NVIDIA GPU with CUDA and CUPTI ({WHY_NO_GPU})")
def test_on_a_real_gpu_the_check_run_shows_kernels_and_flags_the_pretender(
    emulator: GitHubEmulator, stack: Stack
) -> None:
    from app.runner.protocol import AppConnection

    config = (
        "gpu_tests:\n  - {name: cuda, labels: [cuda], build: cargo test --no-run, gpu_test_pattern: gpu}\n"
    )
    files = {p: (FIXTURE / p).read_bytes() for p in ("Cargo.toml", "Cargo.lock", "src/lib.rs")}
    set_up(emulator, config, HEAD1, files)
    stack.runner("gpu-box", "cuda", "--once", "--gpus", "all")
    stack.deliver("opened", HEAD1, "gpu-proof")
    # The CPU build runner's part, through the same protocol (the GPU host cannot build).
    builder = AppConnection(stack.url, stack.token("builder"))
    answer = wait_for(lambda: _claimed(builder), 60, stack.log)
    builder.upload_artifact(answer["job"]["id"], answer["job_token"], _fixture_archive(stack.tmp))
    builder.report(answer["job"]["id"], answer["job_token"], {"status": "passed", "message": "prebuilt"})
    run = wait_for(completed(emulator, HEAD1), 300, stack.log)
    proof = os.environ.get("GPUPROOF_PROOF_DIR")
    if proof:
        Path(proof).mkdir(parents=True, exist_ok=True)
        (Path(proof) / "gpu-check-run.json").write_text(json.dumps(run, indent=2))
        shutil.copy(stack.log, Path(proof) / "gpu-stack-log.txt")
    summary = run["output"]["summary"]
    assert run["conclusion"] == "failure", summary  # the pretender is flagged
    assert "| `tests::gpu_add_one_launches_a_kernel` | passed | 1 | `add_one` ×1 |" in summary
    assert "| `tests::gpu_add_one_pretends` | passed | 0 | none |" in summary
    assert "### gpu-test-ran-on-cpu\n- `tests::gpu_add_one_pretends`" in summary
    assert "GPU: NVIDIA" in summary and "1 kernel launch(es)" in run["output"]["title"]
    assert no_token_in(emulator)


def _claimed(connection: Any) -> dict[str, Any] | None:
    answer: dict[str, Any] = connection.claim(["cpu"], [])
    return answer if answer.get("job") else None


def _gpu_count() -> int:
    return 0 if WHY_NO_GPU else len(gpus())


@pytest.mark.skipif(_gpu_count() < 2, reason="needs a host with two or more NVIDIA GPUs")
def test_a_multi_gpu_host_runs_one_job_per_gpu_at_once(emulator: GitHubEmulator, stack: Stack) -> None:
    from app.queue.gpu_jobs import GpuQueue

    command = "'echo visible=$CUDA_VISIBLE_DEVICES; sleep 4; echo \"test tests::cpu_ok ... ok\"'"
    config = "gpu_tests:\n" + "".join(
        f"  - name: {name}\n    labels: [cuda]\n    commands: [{command}]\n" for name in ("left", "right")
    )
    set_up(emulator, config, HEAD1, {"src/lib.rs": b"pub fn f() {}\n"})
    stack.runner("two-gpus", "cuda", "--once", "--gpus", "all")
    stack.deliver("opened", HEAD1, "multi-gpu")

    def both_done() -> list[dict[str, Any]] | None:
        runs = [r for r in runs_on(emulator, HEAD1).values() if r["name"].startswith("gpuproof / gpu-tests")]
        return runs if len(runs) == 2 and all(r["status"] == "completed" for r in runs) else None

    runs = wait_for(both_done, 120, stack.log)
    visible = {r["output"]["summary"].rsplit("visible=", 1)[1].split()[0] for r in runs}  # from the output
    assert len(visible) == 2 and all(v.startswith("GPU-") for v in visible)  # one GPU each, by UUID
    import redis

    jobs = GpuQueue(redis.Redis.from_url(stack.env["REDIS_URL"])).for_commit(REPO, HEAD1)
    started = sorted(j.claimed_at for j in jobs)
    assert started[1] - started[0] < 4, "the second job waited for the first"
    proof = os.environ.get("GPUPROOF_PROOF_DIR")
    if proof:
        (Path(proof) / "multi-gpu-check-runs.json").write_text(json.dumps(runs, indent=2))
