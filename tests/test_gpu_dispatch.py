"""GPU test dispatch with a real Redis and the GitHub emulator: the configuration, who
is trusted, approvals bound to one commit, cancellation on a new push, the check run's
states, leases, GPU fit, and the runner protocol's refusals."""

from __future__ import annotations

import hashlib
import json
import time
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient

from app.config import ConfigError, parse_config
from app.github.client import GitHubClient
from app.gpu_config import GpuJobSpec, gpu_mismatch, gpu_requirements
from app.queue.gpu_jobs import GpuJob, GpuQueue
from app.queue.jobs import JobQueue
from app.report.gpu_checkrun import render_gpu_check
from app.runner.archive import ArchiveError, pack, unpack
from app.runner.junit import parse_junit
from app.runner_api import runner_router
from app.settings import Secret, ServiceSettings
from app.webhooks.server import create_app
from tests.conftest import APP_ID, signed_headers
from tests.github_emulator import GitHubEmulator
from tests.test_worker import (
    BASE,
    EXAMPLES,
    HEAD1,
    HEAD2,
    INSTALLATION,
    NUMBER,
    REPO,
    SECRET,
    make,
    runs_on,
    slash,
)
from tests.test_worker import pytestmark as needs_shared_github

pytestmark = needs_shared_github
GPU_CONFIG = """\
gpu_tests:
  - name: cuda
    labels: [cuda]
    commands: ["cargo test --features cuda"]
    timeout_minutes: 5
"""
GPU_CHECK = "gpuproof / gpu-tests (cuda)"


def delivery(action: str, head: str, author: str = "octocat", fork: bool = False) -> bytes:
    payload = json.loads((EXAMPLES / "pull_request" / "opened.payload.json").read_text())
    payload["action"] = action
    payload["repository"]["full_name"] = REPO
    payload["installation"] = {"id": INSTALLATION, "node_id": "x"}
    pull = payload["pull_request"]
    pull["number"], pull["head"]["sha"], pull["user"]["login"] = NUMBER, head, author
    pull["head"]["repo"]["full_name"] = "someone/kernels-fork" if fork else REPO
    pull["base"]["sha"] = BASE
    return json.dumps(payload).encode()


@pytest.fixture
def app(queue: JobQueue, tmp_path: Path, emulator: GitHubEmulator) -> TestClient:
    github = GitHubClient(emulator.base_url, APP_ID, emulator.private_key)  # type: ignore[attr-defined]
    router = runner_router(GpuQueue(queue.client, lease_seconds=2), github, tmp_path / "artifacts")
    settings = ServiceSettings((Secret(SECRET),), "unused", "unused")
    return TestClient(create_app(settings, queue, router))


def open_pull(
    emulator: GitHubEmulator,
    app: TestClient,
    head: str,
    action: str = "opened",
    fork: bool = False,
    author: str = "octocat",
) -> None:
    emulator.trees[BASE] = {".github/gpuproof.yml": GPU_CONFIG.encode(), "src/lib.rs": b"pub fn f() {}\n"}
    emulator.trees[head] = {**emulator.trees[BASE]}
    emulator.add_pull(
        NUMBER,
        head,
        BASE,
        "GPU tests",
        "",
        author=author,
        head_repository="someone/kernels-fork" if fork else "",
    )
    emulator.pull_files[NUMBER] = []
    raw = delivery(action, head, author, fork)
    answer = app.post(
        "/webhooks/github",
        content=raw,
        headers=signed_headers("pull_request", f"{action}-{head[:4]}", raw, SECRET),
    )
    assert answer.status_code == 202, answer.text


def opened_by_a_writer(emulator: GitHubEmulator, queue: JobQueue, app: TestClient) -> Any:
    """A pull request opened by an author with write permission, its jobs all run."""
    emulator.permissions["octocat"] = "write"
    worker = make(emulator, queue)
    open_pull(emulator, app, HEAD1)
    drain(worker)
    return worker


def drain(worker: Any) -> None:
    while worker.run_once():
        pass


def test_gpu_tests_config_is_validated() -> None:
    config = parse_config(
        GPU_CONFIG + "    requires: {memory_gb: 40}\n    when: [command, 'label:gpu']\n", set()
    )
    (job,) = config.gpu_jobs
    assert (job.name, job.labels, job.commands, job.when, job.requires) == (
        "cuda",
        ("cuda",),
        ("cargo test --features cuda",),
        ("command", "label:gpu"),
        {"memory_gb": "40"},
    )
    bad = {
        "    build: cargo test --no-run\n": "exactly one of 'build'",
        "    when: [nightly]\n": "'when' has 'nightly'",
        "    runner: big\n": r"unknown key\(s\) runner",
        "    timeout_minutes: 0\n": "'timeout_minutes'",
        "    gpu_test_pattern: '('\n": "not a regular expression",
    }
    for extra, message in bad.items():
        with pytest.raises(ConfigError, match=message):
            parse_config(GPU_CONFIG + extra, set())
    with pytest.raises(ConfigError, match="must be a `cargo test --no-run"):
        parse_config("gpu_tests:\n  - {name: x, labels: [cuda], build: make}\n", set())


def test_gpu_fit_names_what_is_missing() -> None:
    h100 = {"name": "NVIDIA H100", "compute_capability": "9.0", "memory_mib": 81559, "driver": "580.1"}
    assert gpu_mismatch(gpu_requirements(("cuda", "sm_90"), {"memory_gb": "80"}), [h100]) == ""
    why = gpu_mismatch(gpu_requirements(("sm_100",), {"memory_gb": "141", "driver": "590"}), [h100])
    assert (
        "compute capability 9.0 < 10.0" in why
        and "memory 86 GB < 141 GB" in why
        and "driver 580.1 < 590" in why
    )
    assert gpu_mismatch({"memory_gb": "1"}, []) == "the runner reported no GPU"


def test_a_trusted_push_queues_a_gpu_check_and_a_new_push_cancels_it(
    emulator: GitHubEmulator, queue: JobQueue, app: TestClient
) -> None:
    worker = opened_by_a_writer(emulator, queue, app)
    first = runs_on(emulator, HEAD1)[GPU_CHECK]
    assert first["status"] == "queued" and "labels cuda" in first["output"]["title"]
    open_pull(emulator, app, HEAD2, "synchronize")
    drain(worker)
    old, new = runs_on(emulator, HEAD1)[GPU_CHECK], runs_on(emulator, HEAD2)[GPU_CHECK]
    assert (old["status"], old["conclusion"]) == ("completed", "cancelled")
    assert HEAD2[:12] in old["output"]["title"]
    assert new["status"] == "queued"
    jobs = GpuQueue(queue.client).for_pull(REPO, NUMBER)
    assert [(j.sha, j.state) for j in jobs] == [(HEAD1, "done"), (HEAD2, "queued")]


def test_a_fork_waits_for_approval_and_the_approval_covers_one_commit(
    emulator: GitHubEmulator, queue: JobQueue, app: TestClient
) -> None:
    emulator.permissions.update({"maintainer": "write", "visitor": "read"})
    worker = make(emulator, queue)
    gpu = GpuQueue(queue.client)
    open_pull(emulator, app, HEAD1, fork=True, author="visitor")
    drain(worker)
    waiting = runs_on(emulator, HEAD1)[GPU_CHECK]
    assert waiting["conclusion"] == "neutral" and "approval" in waiting["output"]["title"]
    assert gpu.for_commit(REPO, HEAD1) == []

    slash(app, "/gpuproof gpu-test", "visitor", "c1")
    drain(worker)
    assert "needs write" in emulator.issue_comments[-1]["body"] and gpu.for_commit(REPO, HEAD1) == []

    slash(app, "/gpuproof gpu-test", "maintainer", "c2")
    drain(worker)
    reply = emulator.issue_comments[-1]["body"]
    assert f"covers {HEAD1[:12]} only" in reply
    (approved,) = gpu.for_commit(REPO, HEAD1)
    assert approved.state == "queued" and not approved.trusted  # may not write build caches

    open_pull(emulator, app, HEAD2, "synchronize", fork=True, author="visitor")
    drain(worker)
    assert gpu.for_commit(REPO, HEAD2) == []  # the approval did not carry over
    assert runs_on(emulator, HEAD2)[GPU_CHECK]["conclusion"] == "neutral"
    assert gpu.get(approved.id).conclusion == "cancelled"  # type: ignore[union-attr]


def test_gpu_test_cancel_stops_the_heads_jobs(
    emulator: GitHubEmulator, queue: JobQueue, app: TestClient
) -> None:
    emulator.permissions["octocat"] = "admin"
    worker = make(emulator, queue)
    open_pull(emulator, app, HEAD1)
    drain(worker)
    slash(app, "/gpuproof gpu-test cancel", "octocat", "c3")
    drain(worker)
    assert "Cancelled 1 GPU job(s)" in emulator.issue_comments[-1]["body"]
    assert runs_on(emulator, HEAD1)[GPU_CHECK]["conclusion"] == "cancelled"


def _claim(app: TestClient, token: str, labels: list[str], gpus: list[dict[str, Any]] | None = None) -> Any:
    return app.post(
        "/runner/v1/claim",
        json={"labels": labels, "gpus": gpus or [], "wait": 0},
        headers={"authorization": f"Bearer {token}"},
    )


def test_the_runner_protocol_hands_out_scoped_tokens_and_lost_leases_requeue_once(
    emulator: GitHubEmulator, queue: JobQueue, app: TestClient
) -> None:
    emulator.permissions["octocat"] = "write"
    worker = make(emulator, queue)
    gpu = GpuQueue(queue.client, lease_seconds=2)
    open_pull(emulator, app, HEAD1)
    drain(worker)
    assert _claim(app, "gpr_forged", ["cuda"]).status_code == 401
    token = gpu.register_runner("box-1")
    assert _claim(app, token, ["cpu"]).json()["job"] is None  # labels do not fit

    claimed = _claim(app, token, ["cuda", "sm_90"]).json()
    job_id, job_token, checkout = claimed["job"]["id"], claimed["job_token"], claimed["checkout"]
    assert claimed["job"]["sha"] == HEAD1 and checkout["tarball_url"].endswith(f"/{REPO}/tarball/{HEAD1}")
    assert emulator.token_repositories[checkout["token"]] == ["kernels"]  # this repository only
    drain(worker)
    assert runs_on(emulator, HEAD1)[GPU_CHECK]["status"] == "in_progress"
    beat = app.post(f"/runner/v1/jobs/{job_id}/heartbeat", headers={"authorization": f"Bearer {job_token}"})
    assert beat.json() == {"cancel": False, "message": "running on box-1"}
    forged = app.post(f"/runner/v1/jobs/{job_id}/heartbeat", headers={"authorization": "Bearer gpj_forged"})
    assert forged.status_code == 410

    # The runner dies: after the lease, the job is requeued once, then failed.
    (requeued,) = gpu.reap(now=time.time() + 3)
    assert requeued.state == "queued" and "requeued (attempt 2 of 2)" in requeued.message
    second = _claim(app, token, ["cuda"]).json()
    assert second["job"]["id"] == job_id and second["job_token"] != job_token
    stale = app.post(
        f"/runner/v1/jobs/{job_id}/result",
        json={"status": "passed"},
        headers={"authorization": f"Bearer {job_token}"},
    )
    assert stale.status_code == 410  # the first runner's token died with its lease
    (failed,) = gpu.reap(now=time.time() + 3)
    assert (failed.state, failed.conclusion) == ("done", "failure") and "second time" in failed.message
    worker.reap_gpu_leases()
    drain(worker)
    run = runs_on(emulator, HEAD1)[GPU_CHECK]
    assert run["conclusion"] == "failure" and "second time" in run["output"]["summary"]
    for recorded in emulator.requests:
        assert "gpj_" not in json.dumps(recorded.body) and "gpr_" not in json.dumps(recorded.body)


def test_a_runner_whose_gpu_does_not_fit_is_told_and_the_check_run_says_why(
    emulator: GitHubEmulator, queue: JobQueue, app: TestClient
) -> None:
    opened_by_a_writer(emulator, queue, app)
    gpu = GpuQueue(queue.client)
    (job,) = gpu.for_commit(REPO, HEAD1)
    job.spec = GpuJobSpec("cuda", ("cuda", "sm_90"), commands=("cargo test",), requires={"memory_gb": "80"})
    queue.client.set(f"gpuproof:gpu:job:{job.id}", job.to_json())
    small = {"name": "RTX 4000", "compute_capability": "8.9", "memory_mib": 20480, "driver": "580"}
    answer = _claim(app, gpu.register_runner("small-box"), ["cuda", "sm_90"], [small]).json()
    assert answer["job"] is None and "compute capability 8.9 < 9.0" in answer["mismatches"][0]
    shown = render_gpu_check(gpu.get(job.id))  # type: ignore[arg-type]
    assert (
        "`small-box`: RTX 4000: memory 21 GB < 80 GB; compute capability 8.9 < 9.0"
        in shown["output"]["summary"]
    )


def test_artifact_upload_is_checked_against_its_checksum(
    emulator: GitHubEmulator, queue: JobQueue, app: TestClient, tmp_path: Path
) -> None:
    gpu = GpuQueue(queue.client)
    spec = GpuJobSpec("cuda", ("cuda",), build="cargo test --no-run")
    job = gpu.create(
        GpuJob(gpu.new_id(), REPO, INSTALLATION, HEAD1, NUMBER, spec, "build", True, check_run_id=1)
    )
    claimed = _claim(app, gpu.register_runner("builder"), ["cpu"]).json()
    assert claimed["job"]["id"] == job.id
    headers = {"authorization": f"Bearer {claimed['job_token']}"}
    data = b"not really a tarball"
    wrong = app.put(
        f"/runner/v1/jobs/{job.id}/artifact", content=data, headers={**headers, "x-gpuproof-sha256": "0" * 64}
    )
    assert wrong.status_code == 400
    early = app.post(f"/runner/v1/jobs/{job.id}/result", json={"status": "bogus"}, headers=headers)
    assert early.status_code == 400
    right = app.put(
        f"/runner/v1/jobs/{job.id}/artifact",
        content=data,
        headers={**headers, "x-gpuproof-sha256": hashlib.sha256(data).hexdigest()},
    )
    assert right.status_code == 201
    built = app.post(f"/runner/v1/jobs/{job.id}/result", json={"status": "passed"}, headers=headers).json()
    step = gpu.get(built["next"])
    assert step is not None and (step.step, step.build_job, step.state) == ("test", job.id, "queued")
    assert render_gpu_check(step)["output"]["title"] == "Built; waiting for a GPU runner"


def test_a_tampered_archive_is_refused(tmp_path: Path) -> None:
    binary = tmp_path / "kernels-0123456789abcdef"
    binary.write_bytes(b"\x7fELF pretend")
    archive = tmp_path / "tests.tar.gz"
    pack([("kernels", binary, ".")], REPO, HEAD1, archive)
    digest = hashlib.sha256(archive.read_bytes()).hexdigest()
    (ready,) = unpack(archive, digest, REPO, HEAD1, tmp_path / "ok")
    assert ready.name == "kernels" and (tmp_path / "ok" / ready.file).read_bytes() == b"\x7fELF pretend"
    with pytest.raises(
        ArchiveError, match="built from octo-org/kernels@111111111111, not octo-org/kernels@222222222222"
    ):
        unpack(archive, digest, REPO, HEAD2, tmp_path / "other-commit")
    with pytest.raises(ArchiveError, match="SHA-256 differs"):
        unpack(archive, "f" * 64, REPO, HEAD1, tmp_path / "bad")


def test_nextest_junit_reports_become_per_test_outcomes(tmp_path: Path) -> None:
    report = tmp_path / "junit.xml"
    report.write_text(
        """<?xml version="1.0" encoding="UTF-8"?>
<testsuites name="nextest-run" tests="3" failures="1">
  <testsuite name="kernels" tests="3">
    <testcase name="tests::gpu_add" classname="kernels" time="0.1"/>
    <testcase name="tests::gpu_sub" classname="kernels" time="0.1">
      <failure type="test failure">thread 'tests::gpu_sub' panicked at src/lib.rs:42:5:
values differ</failure>
      <system-out></system-out>
    </testcase>
    <testcase name="tests::big" classname="kernels"><skipped/></testcase>
  </testsuite>
</testsuites>
"""
    )
    outcomes = [(suite, o.name, o.status, o.file, o.line) for suite, o in parse_junit(report)]
    assert outcomes == [
        ("kernels", "tests::gpu_add", "passed", "", 0),
        ("kernels", "tests::gpu_sub", "failed", "src/lib.rs", 42),
        ("kernels", "tests::big", "ignored", "", 0),
    ]


def test_a_label_from_a_writer_and_a_push_to_the_default_branch_start_gpu_jobs(
    emulator: GitHubEmulator, queue: JobQueue, app: TestClient
) -> None:
    config = GPU_CONFIG + "    when: [default-branch, 'label:run-gpu']\n"
    emulator.permissions.update({"maintainer": "write", "visitor": "read"})
    worker = make(emulator, queue)
    gpu = GpuQueue(queue.client)
    emulator.trees[BASE] = {".github/gpuproof.yml": config.encode()}
    emulator.trees[HEAD1] = emulator.trees[BASE]

    def label(sender: str, name: str, delivery_id: str) -> None:
        payload = json.loads((EXAMPLES / "pull_request" / "labeled.payload.json").read_text())
        payload["repository"]["full_name"] = REPO
        payload["installation"] = {"id": INSTALLATION, "node_id": "x"}
        pull = payload["pull_request"]
        pull["number"], pull["head"]["sha"], pull["base"]["sha"] = NUMBER, HEAD1, BASE
        pull["head"]["repo"]["full_name"] = "someone/kernels-fork"
        payload["label"]["name"], payload["sender"]["login"] = name, sender
        raw = json.dumps(payload).encode()
        answer = app.post(
            "/webhooks/github", content=raw, headers=signed_headers("pull_request", delivery_id, raw, SECRET)
        )
        assert answer.status_code == 202

    label("maintainer", "bug", "l1")  # not the configured label
    label("visitor", "run-gpu", "l2")  # not allowed to approve
    drain(worker)
    assert gpu.for_commit(REPO, HEAD1) == []
    label("maintainer", "run-gpu", "l3")
    drain(worker)
    (labelled,) = gpu.for_commit(REPO, HEAD1)
    assert gpu.approved(REPO, NUMBER, HEAD1) and not labelled.trusted

    push = json.loads((EXAMPLES / "push" / "with-installation.payload.json").read_text())
    push["repository"]["full_name"], push["installation"]["id"] = REPO, INSTALLATION
    push["ref"], push["after"], push["deleted"] = "refs/heads/master", HEAD2, False
    emulator.trees[HEAD2] = emulator.trees[BASE]
    for ref, delivery_id, status in (("refs/heads/topic", "p1", 200), ("refs/heads/master", "p2", 202)):
        push["ref"] = ref
        raw = json.dumps(push).encode()
        answer = app.post(
            "/webhooks/github", content=raw, headers=signed_headers("push", delivery_id, raw, SECRET)
        )
        assert answer.status_code == status
    drain(worker)
    (on_main,) = gpu.for_commit(REPO, HEAD2)
    assert on_main.trusted and on_main.pull_number == 0  # default-branch builds may write caches
    assert runs_on(emulator, HEAD2)[GPU_CHECK]["status"] == "queued"


def test_only_trusted_builds_write_the_build_cache(tmp_path: Path) -> None:
    from app.runner.agent import Claimed, Runner

    cache = tmp_path / "cache"
    warm = cache / "octo-org__kernels" / "target"
    (warm / "debug").mkdir(parents=True)
    (warm / "debug" / "lib.rlib").write_text("trusted output")
    runner = Runner(None, ["cpu"], tmp_path, cache, None, None)  # type: ignore[arg-type]

    def job(trusted: bool) -> Claimed:
        return Claimed("j", "build", REPO, HEAD1, trusted, {}, "", "t", 60, "", "")

    assert runner._target_dir(job(True), tmp_path / "w1") == warm
    private = runner._target_dir(job(False), tmp_path / "w2")
    assert (
        private == tmp_path / "w2" / "target"
        and (private / "debug" / "lib.rlib").read_text() == "trusted output"
    )
    (private / "debug" / "lib.rlib").write_text("poisoned")
    assert (warm / "debug" / "lib.rlib").read_text() == "trusted output"


def test_cargo_test_output_is_attributed_to_its_test_binaries() -> None:
    from app.runner.agent import outcomes_from_output

    output = """\
     Running unittests src/lib.rs (target/debug/deps/kernels-0123456789abcdef)
running 1 test
test tests::gpu_add ... ok
     Running tests/integration.rs (target/debug/deps/integration-fedcba9876543210)
running 2 tests
test gpu_sub ... FAILED
test slow ... ignored
"""
    assert [(t["binary"], t["test"], t["status"]) for t in outcomes_from_output(output)] == [
        ("kernels", "tests::gpu_add", "passed"),
        ("integration", "gpu_sub", "failed"),
        ("integration", "slow", "ignored"),
    ]


def test_a_new_runner_token_replaces_the_old_one_and_revoked_tokens_are_refused(
    queue: JobQueue, app: TestClient
) -> None:
    gpu = GpuQueue(queue.client)
    first = gpu.register_runner("box")
    second = gpu.register_runner("box")
    assert gpu.runner_named_by(first) is None and gpu.runner_named_by(second) == "box"
    assert gpu.revoke_runner("box") and not gpu.revoke_runner("box")
    assert _claim(app, second, ["cuda"]).status_code == 401


def test_a_finished_build_shows_as_waiting_for_its_gpu_step_never_as_completed() -> None:
    spec = GpuJobSpec("cuda", ("cuda",), build="cargo test --no-run")
    build = GpuJob(
        "b1", REPO, INSTALLATION, HEAD1, NUMBER, spec, "build", True, 1, state="done", conclusion="success"
    )
    assert render_gpu_check(build)["status"] == "queued"
    build.conclusion = "failure"  # a failed build is the end of the job
    assert render_gpu_check(build)["status"] == "completed"
