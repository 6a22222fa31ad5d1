"""The GPU runner's local part on a machine without a GPU: libtest parsing, one
process per test, timeouts, the credentials kept from tests, and the
gpu-test-ran-on-cpu finding. (The same code on a real GPU: docs/gpu-proof.md.)"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from app.runner import libtest  # the module, so pytest does not take TestOutcome for a test class
from app.runner.agent import gpu_test_findings, outcomes_from_output, traced_processes
from app.runner.execute import clean_environment, run_binary, run_process, traced_environment
from app.runner.gpu import GpuHostError, build_tracer, gpus
from app.runner.libtest import parse_libtest

FIXTURE = Path(__file__).parent / "fixtures" / "gpu-crate"


def _why_no_gpu() -> str:
    try:
        return "" if gpus() else "nvidia-smi lists no GPU"
    except GpuHostError as exc:
        return str(exc)


WHY_NO_GPU = _why_no_gpu()


@pytest.fixture(scope="session")
def fixture_binary(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The fixture crate's test binary, built the way a CPU build runner builds it."""
    if shutil.which("cargo") is None:
        pytest.skip("cargo is not installed: the Rust fixture cannot be built")
    target = tmp_path_factory.mktemp("cargo-target")
    done = subprocess.run(
        ["cargo", "test", "--no-run", "--offline", "--message-format=json", "--target-dir", str(target)],
        cwd=FIXTURE,
        capture_output=True,
        text=True,
        check=True,
    )
    for line in done.stdout.splitlines():
        message = json.loads(line)
        if (
            message.get("reason") == "compiler-artifact"
            and message.get("executable")
            and message["profile"]["test"]
        ):
            return Path(message["executable"])
    raise AssertionError("cargo built no test binary")


def test_every_test_runs_in_its_own_process_with_its_outcome(fixture_binary: Path) -> None:
    runs = {r.outcome.name: r for r in run_binary(fixture_binary, tracer=None)}
    assert {name: r.outcome.status for name, r in runs.items()} == {
        "tests::cpu_sum_passes": "passed",
        "tests::cpu_sum_fails": "failed",
        "tests::ignored_example": "ignored",
        "tests::gpu_add_one_pretends": "passed",
        "tests::gpu_add_one_launches_a_kernel": "failed",  # no GPU on this machine
    }
    failed = runs["tests::cpu_sum_fails"].outcome
    assert (failed.file, failed.line) == ("src/lib.rs", 151)
    assert "deliberately wrong" in failed.message
    assert "needs an NVIDIA GPU" in runs["tests::gpu_add_one_launches_a_kernel"].outcome.message
    assert all(r.launches == 0 for r in runs.values())


def test_a_gpu_test_with_no_kernel_is_a_finding() -> None:
    def test(name: str, status: str, launches: int) -> dict[str, object]:
        return {"binary": "bin", "test": name, "status": status, "launches": launches, "own_process": True}

    tests = [
        test("tests::gpu_add_one_launches_a_kernel", "passed", 1),
        test("tests::gpu_add_one_pretends", "passed", 0),
        test("tests::cuda_matmul", "failed", 0),  # failing: reported as failed, not as a finding
        test("tests::cpu_sum_passes", "passed", 0),  # not a GPU test
    ]
    findings = gpu_test_findings(tests, [], r"gpu|cuda")
    assert [(f["rule"], f["test"]) for f in findings] == [
        ("gpu-test-ran-on-cpu", "tests::gpu_add_one_pretends")
    ]


def test_tests_sharing_a_process_are_judged_by_their_binarys_launches() -> None:
    tests = [
        {"binary": "kernels", "test": "gpu_add", "status": "passed", "own_process": False},
        {"binary": "fake_gpu", "test": "gpu_sub", "status": "passed", "own_process": False},
    ]
    processes = [
        {"binary": "/t/target/debug/deps/kernels-0123456789abcdef", "launches": 3, "kernels": {"add": 3}}
    ]
    findings = gpu_test_findings(tests, processes, "gpu")
    assert [f["test"] for f in findings] == ["gpu_sub"]
    assert "its test binary `fake_gpu`" in findings[0]["message"]


def test_timeout_kills_the_process_group(tmp_path: Path) -> None:
    fake = tmp_path / "fake_test_binary"
    fake.write_text(
        textwrap.dedent(f"""\
        #!{sys.executable}
        import sys, time, subprocess
        if "--list" in sys.argv:
            print("tests::hangs: test")
            sys.exit(0)
        subprocess.Popen(["sleep", "30"])  # a child that must die with it
        time.sleep(30)
        """)
    )
    fake.chmod(0o755)
    (run,) = run_binary(fake, tracer=None, timeout=1.0)
    assert run.timed_out and run.outcome.status == "failed" and run.seconds < 10


def test_credentials_never_reach_the_tests() -> None:
    env = clean_environment(
        {
            "PATH": "/bin",
            "GITHUB_TOKEN": "t",
            "GPUPROOF_RUNNER_TOKEN": "r",
            "REDIS_URL": "redis://x",
            "MY_SECRET": "s",
            "HOME": "/root",
        }
    )
    assert env == {"PATH": "/bin", "HOME": "/root"}


def test_parse_libtest_output() -> None:
    output = textwrap.dedent("""\
        running 3 tests
        test a::ok_one ... ok
        test a::bad ... FAILED
        test a::skip ... ignored, needs hardware

        failures:

        ---- a::bad stdout ----

        thread 'a::bad' panicked at src/kernels.rs:42:9:
        values differ
        note: run with `RUST_BACKTRACE=1` environment variable to display a backtrace
        """)
    assert parse_libtest(output) == [
        libtest.TestOutcome("a::ok_one", "passed"),
        libtest.TestOutcome("a::bad", "failed", "values differ", "src/kernels.rs", 42),
        libtest.TestOutcome("a::skip", "ignored"),
    ]


def _gpu_fixture_binary(request: pytest.FixtureRequest) -> Path:
    """A GPU host has no Rust toolchain: GPUPROOF_FIXTURE_BINARY names a test binary
    built elsewhere with `cargo test --no-run`, as a CPU build runner would ship it."""
    prebuilt = os.environ.get("GPUPROOF_FIXTURE_BINARY")
    return Path(prebuilt) if prebuilt else Path(request.getfixturevalue("fixture_binary"))


@pytest.mark.skipif(bool(WHY_NO_GPU), reason=f"needs an NVIDIA GPU with CUDA and CUPTI ({WHY_NO_GPU})")
def test_on_a_real_gpu_the_tracer_counts_each_tests_kernels(
    tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    binary = _gpu_fixture_binary(request)
    runs = {r.outcome.name: r for r in run_binary(binary, build_tracer(tmp_path / "tracer"))}
    launched = runs["tests::gpu_add_one_launches_a_kernel"]
    assert (launched.outcome.status, launched.launches, launched.kernels) == ("passed", 1, {"add_one": 1})
    assert runs["tests::gpu_add_one_pretends"].launches == 0
    tests = [dict(r.to_json(), own_process=True) for r in runs.values()]
    findings = gpu_test_findings(tests, [], r"gpu|cuda")
    assert [f["test"] for f in findings] == ["tests::gpu_add_one_pretends"]


@pytest.mark.skipif(bool(WHY_NO_GPU), reason=f"needs an NVIDIA GPU with CUDA and CUPTI ({WHY_NO_GPU})")
def test_on_a_real_gpu_processes_sharing_a_trace_directory_report_per_binary(
    tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    # The `commands` form of a job: `cargo test` runs every test of a binary in one
    # process; each traced process writes its own report, named by its program.
    binary = _gpu_fixture_binary(request)
    traces = tmp_path / "traces"
    traces.mkdir()
    env = traced_environment(os.environ, build_tracer(tmp_path / "tracer"), None)
    env["GPUPROOF_TRACE_DIR"] = str(traces)
    done = run_process([str(binary), "--test-threads=1"], cwd=tmp_path, env=env, timeout=120)
    statuses = {t["test"]: t["status"] for t in outcomes_from_output(done.output)}
    assert statuses["tests::gpu_add_one_launches_a_kernel"] == "passed", done.output
    assert traced_processes(traces) == [{"binary": "gpu_fixture", "launches": 1, "kernels": {"add_one": 1}}]


def test_output_is_capped_to_its_head_and_tail(tmp_path: Path) -> None:
    from app.runner.execute import OUTPUT_CAP

    loud = f"{sys.executable} -c \"print('first'); print('x' * {3 * OUTPUT_CAP}); print('last')\""
    done = run_process(["bash", "-c", loud], cwd=tmp_path, env=os.environ, timeout=60)
    assert done.returncode == 0 and len(done.output) < OUTPUT_CAP + 200
    assert done.output.startswith("first") and done.output.rstrip().endswith("last")
    assert "bytes of output dropped" in done.output
