"""End to end: a delivery through `serve`, the job through a worker, the answer posted
to the GitHub emulator (which validates every request), with a real Redis."""

from __future__ import annotations

import copy
import difflib
import json
import textwrap
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient

from app.github.client import GitHubClient
from app.queue.jobs import STREAM, JobConsumer, JobQueue, PullRequestState
from app.settings import Secret, ServiceSettings
from app.webhooks.server import create_app
from app.worker import Worker
from tests.conftest import APP_ID, signed_headers, start_serve
from tests.github_emulator import SPEC_PATH, GitHubEmulator

EXAMPLES = Path(__file__).resolve().parents[2] / "shared/github/webhooks/examples/api.github.com"
pytestmark = pytest.mark.skipif(
    not (SPEC_PATH.exists() and EXAMPLES.is_dir()),
    reason="the shared GitHub description and examples (../shared/github) are not beside this checkout",
)
INSTALLATION, REPO, NUMBER = 31, "octo-org/kernels", 7
SECRET = "webhook-secret"
KERNEL = textwrap.dedent("""\
    pub fn gpu_scale(x: &CudaSlice<f32>, dev: &CudaDevice) -> Result<(), GpuError> {
        let f = dev.get_func("k", "scale").ok_or(GpuError::MissingKernel)?;
        unsafe { f.launch(LaunchConfig::for_num_elems(x.len() as u32), (x,)) }?;
        Ok(())
    }
    """)
FAKE = textwrap.dedent("""\

    pub fn gpu_layer_norm(x: &CudaBuffer<f32>, dev: &GpuDevice) -> GpuResult<CudaBuffer<f32>> {
        let host = gpu_to_cpu(x, dev)?;
        let mean = host.iter().sum::<f32>() / host.len() as f32;
        cpu_to_gpu(&host.iter().map(|v| v - mean).collect::<Vec<f32>>(), dev)
    }
    """)
BASE, HEAD1, HEAD2 = "b" * 40, "1" * 40, "2" * 40


@pytest.fixture(autouse=True)
def _base_tree(emulator: GitHubEmulator) -> None:
    emulator.trees[BASE] = {"src/lib.rs": KERNEL.encode()}


def push(emulator: GitHubEmulator, head: str, source: str, body: str) -> None:
    """Make `head` the pull request's head, with src/lib.rs = source."""
    emulator.trees[head] = {"src/lib.rs": source.encode()}
    emulator.add_pull(NUMBER, head, BASE, "Layer norm", body)
    hunks = difflib.unified_diff(KERNEL.splitlines(), source.splitlines(), lineterm="", n=0)
    patch = "\n".join(line for line in hunks if not line.startswith(("---", "+++")))
    emulator.pull_files[NUMBER] = [
        {**_file_template(emulator), "filename": "src/lib.rs", "status": "modified", "patch": patch}
    ]


def _file_template(emulator: GitHubEmulator) -> dict[str, Any]:
    op = emulator.spec["paths"]["/repos/{owner}/{repo}/pulls/{pull_number}/files"]["get"]
    return dict(emulator._example(op, "200")[0])


def pull_request_delivery(action: str, head: str) -> bytes:
    """The shared example `pull_request` payload, pointed at this test's repository and head."""
    payload = json.loads((EXAMPLES / "pull_request" / "opened.payload.json").read_text())
    payload["action"] = action
    payload["repository"]["full_name"] = REPO
    payload["installation"] = {"id": INSTALLATION, "node_id": "x"}
    payload["pull_request"]["number"] = NUMBER
    payload["pull_request"]["head"]["sha"] = head
    return json.dumps(payload).encode()


def deliver(client: TestClient, action: str, head: str, delivery: str) -> Any:
    body = pull_request_delivery(action, head)
    return client.post(
        "/webhooks/github",
        content=body,
        headers=signed_headers("pull_request", delivery, body, SECRET),
    )


def make(emulator: GitHubEmulator, queue: JobQueue, name: str = "w1", stale_after_ms: int = 60_000) -> Worker:
    github = GitHubClient(
        emulator.base_url,
        APP_ID,
        emulator.private_key,  # type: ignore[attr-defined]
        sleep=lambda _: None,
    )
    return Worker(queue, github, name, stale_after_ms)


@pytest.fixture
def serve(queue: JobQueue) -> TestClient:
    return TestClient(create_app(ServiceSettings((Secret(SECRET),), "unused", "unused"), queue))


def runs_on(emulator: GitHubEmulator, sha: str) -> dict[str, dict[str, Any]]:
    return {r["name"]: r for r in emulator.check_runs.values() if r["head_sha"] == sha}


def test_pull_request_is_reviewed_and_a_second_push_comments_only_what_is_new(
    emulator: GitHubEmulator, queue: JobQueue, serve: TestClient
) -> None:
    push(emulator, HEAD1, KERNEL + FAKE, "Implemented LayerNorm on GPU.")
    assert deliver(serve, "opened", HEAD1, "d1").status_code == 202
    worker = make(emulator, queue)
    assert worker.run_once() == 1

    runs = runs_on(emulator, HEAD1)
    assert {n: (r["status"], r["conclusion"]) for n, r in runs.items()} == {
        "gpuproof / code": ("completed", "failure"),
        "gpuproof / description": ("completed", "failure"),
    }
    assert runs["gpuproof / code"]["output"]["annotations_count"] == 1
    (comment,) = emulator.review_comments
    assert (comment["path"], comment["line"]) == ("src/lib.rs", 7)
    assert "fake-gpu-function" in comment["body"]
    (summary,) = emulator.issue_comments
    assert "<!-- gpuproof:summary -->" in summary["body"]

    # The same job delivered again (a worker retry): no second comment, one summary.
    worker.handlers["review-pr"](_job(HEAD1))
    assert len(emulator.review_comments) == 1 and len(emulator.issue_comments) == 1

    # Second push: the fake is now a real kernel, a new fake appears.
    fixed = KERNEL + FAKE.replace("gpu_layer_norm", "gpu_rms_norm")
    push(emulator, HEAD2, fixed, "Implemented LayerNorm on GPU.")
    assert deliver(serve, "synchronize", HEAD2, "d2").status_code == 202
    assert worker.run_once() == 1
    new = [c for c in emulator.review_comments if c.get("in_reply_to_id") is None]
    replies = [c for c in emulator.review_comments if c.get("in_reply_to_id") is not None]
    assert [c["body"].count("gpu_rms_norm") > 0 for c in new] == [False, True]
    assert [r["in_reply_to_id"] for r in replies] == [comment["id"]]
    assert replies[0]["body"].startswith("Fixed in 222222222222")
    assert len(emulator.issue_comments) == 1  # the summary was edited in place
    assert "2222222222" in emulator.issue_comments[0]["body"]


def test_a_stub_moved_to_another_file_asks_for_no_gap_report(
    emulator: GitHubEmulator, queue: JobQueue, serve: TestClient
) -> None:
    stub = textwrap.dedent("""\

        pub fn gpu_cumsum(x: &CudaSlice<f32>) -> Result<CudaSlice<f32>, GpuError> {
            let n = x.len();
            todo!("scan kernel for {n} elements")
        }
        """)
    emulator.trees[BASE] = {"src/lib.rs": (KERNEL + stub).encode()}
    emulator.trees[HEAD1] = {"src/lib.rs": KERNEL.encode(), "src/scan.rs": stub.encode()}
    emulator.add_pull(NUMBER, HEAD1, BASE, "Move cumsum to its own file", "")
    # GitHub's patches: the stub leaves the end of lib.rs and is scan.rs's whole text.
    lines = stub.splitlines()
    removed = f"@@ -6,{len(lines)} +5,0 @@\n" + "".join(f"-{line}\n" for line in lines)
    added = f"@@ -0,0 +1,{len(lines)} @@\n" + "".join(f"+{line}\n" for line in lines)
    template = _file_template(emulator)
    emulator.pull_files[NUMBER] = [
        {**template, "filename": "src/lib.rs", "status": "modified", "patch": removed},
        {**template, "filename": "src/scan.rs", "status": "added", "patch": added},
        # a patch that cannot be read counts whole, and hides no other file's move
        {**template, "filename": "src/other.rs", "status": "modified", "patch": "@@ -1,2 +1,2 @@\n+x"},
    ]
    assert deliver(serve, "opened", HEAD1, "d1").status_code == 202
    assert make(emulator, queue).run_once() == 1
    description = runs_on(emulator, HEAD1)["gpuproof / description"]
    assert description["conclusion"] == "success"
    assert "missing-gap-report" not in description["output"]["summary"]


def _job(head: str) -> Any:
    from app.queue.jobs import Job

    return Job("review-pr", REPO, INSTALLATION, "retry", {"number": NUMBER, "head_sha": head})


def test_a_newer_push_supersedes_queued_work(
    emulator: GitHubEmulator, queue: JobQueue, serve: TestClient
) -> None:
    push(emulator, HEAD1, KERNEL + FAKE, "")
    deliver(serve, "opened", HEAD1, "s1")
    push(emulator, HEAD2, KERNEL + FAKE, "")
    deliver(serve, "synchronize", HEAD2, "s2")
    worker = make(emulator, queue)
    assert worker.run_once() == 1 and worker.run_once() == 1
    assert runs_on(emulator, HEAD1) == {}  # never started: superseded while queued
    assert runs_on(emulator, HEAD2)["gpuproof / code"]["conclusion"] == "failure"


def test_a_job_whose_worker_died_completes_once_on_another(
    emulator: GitHubEmulator, queue: JobQueue, serve: TestClient
) -> None:
    push(emulator, HEAD1, KERNEL + FAKE, "")
    deliver(serve, "opened", HEAD1, "k1")
    dead = JobConsumer(queue, "dead-worker")
    assert len(dead.next_jobs(block_ms=0)) == 1  # taken, never acknowledged: the worker was killed
    survivor = make(emulator, queue, "w2", stale_after_ms=0)
    assert survivor.run_once() == 1
    assert survivor.run_once() == 0  # acknowledged: nothing is left pending
    assert len(runs_on(emulator, HEAD1)) == 2 and len(emulator.review_comments) == 1
    assert queue.client.xpending(STREAM, "gpuproof-workers")["pending"] == 0


def test_github_failing_then_recovering_still_completes(
    emulator: GitHubEmulator, queue: JobQueue, serve: TestClient
) -> None:
    from tests.github_emulator import Fault

    push(emulator, HEAD1, KERNEL + FAKE, "")
    deliver(serve, "opened", HEAD1, "f1")
    emulator.faults.append(Fault("/check-runs", 502, times=2))
    emulator.faults.append(
        Fault(
            "/reviews",
            403,
            headers={"retry-after": "1"},
            body={"message": "You have exceeded a secondary rate limit"},
        )
    )
    assert make(emulator, queue).run_once() == 1
    assert {r["status"] for r in runs_on(emulator, HEAD1).values()} == {"completed"}
    assert len(emulator.review_comments) == 1


def test_invalid_config_on_the_base_gives_neutral_runs(
    emulator: GitHubEmulator, queue: JobQueue, serve: TestClient
) -> None:
    emulator.trees[BASE][".github/gpuproof.yml"] = b"severities: {nonsense: error}\n"
    push(emulator, HEAD1, KERNEL + FAKE, "")
    deliver(serve, "opened", HEAD1, "c1")
    make(emulator, queue).run_once()
    runs = runs_on(emulator, HEAD1)
    assert {r["conclusion"] for r in runs.values()} == {"neutral"}
    assert "unknown rule 'nonsense'" in runs["gpuproof / code"]["output"]["summary"]


def test_state_records_heads(queue: JobQueue) -> None:
    state = PullRequestState(queue, REPO, NUMBER)
    assert state.is_current(HEAD1)  # nothing recorded yet
    state.mark_head(HEAD2)
    assert not state.is_current(HEAD1) and state.is_current(HEAD2)


def slash(client: TestClient, body: str, author: str, delivery: str) -> Any:
    payload = copy.deepcopy(json.loads((EXAMPLES / "issue_comment" / "created.payload.json").read_text()))
    payload["repository"]["full_name"] = REPO
    payload["installation"] = {"id": INSTALLATION, "node_id": "x"}
    payload["issue"]["number"] = NUMBER
    payload["issue"]["pull_request"] = {"url": f"https://api.github.com/repos/{REPO}/pulls/{NUMBER}"}
    payload["comment"]["body"] = body
    payload["comment"]["user"]["login"] = author
    raw = json.dumps(payload).encode()
    return client.post(
        "/webhooks/github",
        content=raw,
        headers=signed_headers("issue_comment", delivery, raw, SECRET),
    )


def test_slash_commands_answer_and_recheck_needs_write_permission(
    emulator: GitHubEmulator, queue: JobQueue, serve: TestClient
) -> None:
    push(emulator, HEAD1, KERNEL + FAKE, "")
    emulator.permissions.update({"maintainer": "maintain", "reader": "read"})
    worker = make(emulator, queue)

    assert slash(serve, "/gpuproof recheck", "stranger", "sc1").status_code == 202
    worker.run_once()
    refusal = emulator.issue_comments[-1]["body"]
    assert "@stranger" in refusal and "needs write, maintain or admin permission" in refusal
    assert "`none`" in refusal and runs_on(emulator, HEAD1) == {}
    assert len(emulator.posted("POST", "/reactions")) == 1  # 👀 on receipt

    slash(serve, "/gpuproof recheck", "reader", "sc2")
    worker.run_once()
    assert "has `read`" in emulator.issue_comments[-1]["body"] and runs_on(emulator, HEAD1) == {}

    slash(serve, "/gpuproof explain silent-fallback\n/gpuproof frobnicate", "reader", "sc3")
    worker.run_once()
    answer = emulator.issue_comments[-1]["body"]
    assert "## What it does" in answer and "`/gpuproof frobnicate` is not a command" in answer

    slash(serve, "/gpuproof recheck", "maintainer", "sc4")
    worker.run_once()
    assert "Re-checked 111111111111: reviewed" in emulator.issue_comments[-1]["body"]
    assert runs_on(emulator, HEAD1)["gpuproof / code"]["conclusion"] == "failure"


def test_a_400_file_pull_request_is_reviewed(
    emulator: GitHubEmulator, queue: JobQueue, serve: TestClient
) -> None:
    push(emulator, HEAD1, KERNEL + FAKE, "")
    template = emulator.pull_files[NUMBER][0]
    emulator.pull_files[NUMBER] += [
        {**template, "filename": f"docs/page_{i}.md", "patch": "@@ -0,0 +1 @@\n+x"} for i in range(399)
    ]
    deliver(serve, "opened", HEAD1, "big")
    assert make(emulator, queue).run_once() == 1
    assert runs_on(emulator, HEAD1)["gpuproof / code"]["status"] == "completed"
    assert len(emulator.posted("GET", f"/pulls/{NUMBER}/files")) == 4


def test_rerun_button_reanalyses_the_pull_request(
    emulator: GitHubEmulator, queue: JobQueue, serve: TestClient
) -> None:
    push(emulator, HEAD1, KERNEL + FAKE, "")
    payload = copy.deepcopy(json.loads((EXAMPLES / "check_run" / "rerequested.payload.json").read_text()))
    payload["repository"]["full_name"] = REPO
    payload["installation"] = {"id": INSTALLATION, "node_id": "x"}
    payload["check_run"]["head_sha"] = HEAD1
    payload["check_run"]["pull_requests"] = (
        [{**payload["check_run"]["pull_requests"][0], "number": NUMBER}]
        if payload["check_run"]["pull_requests"]
        else [
            {
                "number": NUMBER,
                "id": 1,
                "url": "u",
                "head": {"ref": "h", "sha": HEAD1, "repo": {"id": 1, "url": "u", "name": "k"}},
                "base": {"ref": "main", "sha": BASE, "repo": {"id": 1, "url": "u", "name": "k"}},
            }
        ]
    )
    raw = json.dumps(payload).encode()
    response = serve.post(
        "/webhooks/github",
        content=raw,
        headers=signed_headers("check_run", "rerun-1", raw, SECRET),
    )
    assert response.status_code == 202
    assert make(emulator, queue).run_once() == 1
    assert runs_on(emulator, HEAD1)["gpuproof / code"]["conclusion"] == "failure"


def test_serve_and_worker_processes_survive_a_killed_worker(
    emulator: GitHubEmulator, queue: JobQueue, redis_url: str, tmp_path: Path
) -> None:
    """Real processes: `gpuproof serve`, a worker killed with SIGKILL while its job is in
    flight, and a second worker that completes the job exactly once."""
    import os
    import signal
    import subprocess
    import sys
    import time

    import httpx

    from tests.github_emulator import Fault

    push(emulator, HEAD1, KERNEL + FAKE, "Implemented LayerNorm on GPU.")
    key_file = tmp_path / "app.pem"
    key_file.write_text(emulator.private_key)  # type: ignore[attr-defined]
    env = {
        **os.environ,
        "GITHUB_WEBHOOK_SECRET": SECRET,
        "REDIS_URL": redis_url,
        "GITHUB_APP_ID": str(APP_ID),
        "GITHUB_PRIVATE_KEY_PATH": str(key_file),
        "GITHUB_API_URL": emulator.base_url,
    }
    logs = tmp_path / "logs.txt"
    out = logs.open("w")

    def start(*args: str) -> subprocess.Popen[bytes]:
        return subprocess.Popen(
            [sys.executable, "-m", "app.cli", *args], env=env, stdout=out, stderr=subprocess.STDOUT
        )

    serve_process, base = start_serve(env, logs)
    processes = [serve_process]
    try:
        emulator.faults.append(Fault("/tarball/", 200, delay=30.0))  # the first worker hangs here
        doomed = start("worker", "--name", "doomed")
        processes.append(doomed)
        raw = pull_request_delivery("opened", HEAD1)
        posted = httpx.post(
            f"{base}/webhooks/github",
            content=raw,
            headers=signed_headers("pull_request", "proc-1", raw, SECRET),
        )
        assert posted.status_code == 202
        for _ in range(400):  # until the doomed worker has opened both check runs (then it hangs)
            if len(runs_on(emulator, HEAD1)) == 2:
                break
            time.sleep(0.05)
        time.sleep(0.5)
        doomed.send_signal(signal.SIGKILL)  # mid-job: check runs created, nothing completed
        doomed.wait(timeout=10)
        assert {r["status"] for r in runs_on(emulator, HEAD1).values()} == {"in_progress"}, (
            logs.read_text(),
            [(r.method, r.path, r.status) for r in emulator.requests],
        )
        processes.append(start("worker", "--name", "survivor", "--stale-after-ms", "500"))
        for _ in range(300):
            if {r["status"] for r in runs_on(emulator, HEAD1).values()} == {"completed"}:
                break
            time.sleep(0.05)
    finally:
        for process in processes:
            process.terminate()
            process.wait(timeout=10)
    runs = runs_on(emulator, HEAD1)
    assert {n: r["conclusion"] for n, r in runs.items()} == {
        "gpuproof / code": "failure",
        "gpuproof / description": "failure",
    }
    assert len(emulator.review_comments) == 1 and len(emulator.issue_comments) == 1
    text = logs.read_text()
    assert SECRET not in text and emulator.private_key.splitlines()[1] not in text  # type: ignore[attr-defined]
    for token in emulator.tokens:
        assert token not in text


def test_many_findings_batch_annotations_and_cap_inline_comments(
    emulator: GitHubEmulator, queue: JobQueue, serve: TestClient
) -> None:
    fakes = "".join(FAKE.replace("gpu_layer_norm", f"gpu_norm_{i}") for i in range(60))
    push(emulator, HEAD1, KERNEL + fakes, "")
    deliver(serve, "opened", HEAD1, "many")
    deliver(serve, "opened", HEAD1, "many")  # the same delivery again
    worker = make(emulator, queue)
    assert worker.run_once() == 1 and worker.run_once() == 0
    code = runs_on(emulator, HEAD1)["gpuproof / code"]
    assert code["output"]["annotations_count"] == 60
    run_updates = [
        r for r in emulator.posted("PATCH", "/check-runs/") if (r.body.get("output") or {}).get("annotations")
    ]
    assert all(len(r.body["output"]["annotations"]) <= 50 for r in run_updates)
    assert len(emulator.review_comments) == 30  # the cap; the rest are in the check run
    (review,) = emulator.posted("POST", "/reviews")
    assert "30 more are listed" in review.body["body"]


def test_a_job_that_keeps_crashing_is_dropped_after_three_attempts(
    emulator: GitHubEmulator, queue: JobQueue, serve: TestClient, caplog: pytest.LogCaptureFixture
) -> None:
    push(emulator, HEAD1, KERNEL, "")
    deliver(serve, "opened", HEAD1, "crash")
    worker = make(emulator, queue, stale_after_ms=0)

    def crash(job: Any) -> str:
        raise RuntimeError("a bug")

    worker.handlers["review-pr"] = crash
    for _ in range(3):
        assert worker.run_once() == 1
    assert worker.run_once() == 0  # dropped, not retried forever
    assert caplog.text.count("crashed") == 3


def test_a_change_to_kernel_source_only_is_seen_as_the_cli_sees_it(
    emulator: GitHubEmulator, queue: JobQueue, serve: TestClient
) -> None:
    # The title's GPU work is in a `.cu` file: the description check says that gpuproof
    # cannot read it, not that the diff changes no GPU code.
    emulator.trees[HEAD1] = {
        "src/lib.rs": KERNEL.encode(),
        "kernels/src/scale.cu": b"__global__ void scale() {}\n",
    }
    emulator.add_pull(NUMBER, HEAD1, BASE, "fix(gpu): fix the scale kernel rounding", "")
    emulator.pull_files[NUMBER] = [
        {
            **_file_template(emulator),
            "filename": "kernels/src/scale.cu",
            "status": "modified",
            "patch": "@@ -1 +1 @@\n-__global__ void scale(float *x) {}\n+__global__ void scale() {}",
        }
    ]
    assert deliver(serve, "opened", HEAD1, "d1").status_code == 202
    assert make(emulator, queue).run_once() == 1
    summary = " ".join(runs_on(emulator, HEAD1)["gpuproof / description"]["output"]["summary"].split())
    assert "changes GPU code only in kernel source (`kernels/src/scale.cu`)" in summary
