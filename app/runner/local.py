"""Run Rust test binaries on this GPU host and report, per test, whether it passed and
which kernels its process launched; a GPU test that launched none is the finding
``gpu-test-ran-on-cpu``.

    python -m app.runner.local --binary target/debug/deps/mycrate-1234 [--binary ...] \\
        [--gpu-tests REGEX] [--tracer-dir DIR] [--no-tracer]

Standard library only: it runs where only Python and the CUDA toolkit are installed.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from app.gpu_config import DEFAULT_GPU_TEST_PATTERN
from app.runner.agent import gpu_test_findings
from app.runner.execute import run_binary
from app.runner.gpu import GpuHostError, build_tracer, gpus


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m app.runner.local", description=__doc__.splitlines()[0])
    parser.add_argument("--binary", action="append", required=True, type=Path)
    parser.add_argument("--gpu-tests", default=DEFAULT_GPU_TEST_PATTERN, help="regex naming the GPU tests")
    parser.add_argument("--tracer-dir", type=Path, default=Path("/tmp/gpuproof-tracer"))
    parser.add_argument(
        "--no-tracer", action="store_true", help="run without tracing (no CUPTI on this host)"
    )
    args = parser.parse_args(argv)
    try:
        devices = [g.to_json() for g in gpus()]
        tracer = None if args.no_tracer else build_tracer(args.tracer_dir)
    except GpuHostError as exc:
        print(f"gpuproof runner: {exc}", file=sys.stderr)
        return 2
    runs = [run for binary in args.binary for run in run_binary(binary, tracer)]
    tests = [dict(run.to_json(), own_process=True) for run in runs]
    report = {"gpus": devices, "tests": tests, "findings": gpu_test_findings(tests, [], args.gpu_tests)}
    print(json.dumps(report, indent=2))
    return 1 if report["findings"] or any(t["status"] == "failed" for t in tests) else 0


if __name__ == "__main__":
    sys.exit(main())
