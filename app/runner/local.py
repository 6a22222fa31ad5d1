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
import re
import sys
from pathlib import Path

from app.runner.execute import TestRun, run_binary
from app.runner.gpu import GpuHostError, build_tracer, gpus

# A test is a GPU test by name unless the job's configuration says otherwise.
DEFAULT_GPU_TESTS = r"(?:^|[_:])(?:gpu|cuda|cudnn|cublas|wgpu|cubecl)(?:_|$|::)"


def gpu_test_findings(runs: list[TestRun], gpu_tests: str) -> list[dict[str, object]]:
    pattern = re.compile(gpu_tests, re.I)
    return [
        {
            "rule": "gpu-test-ran-on-cpu",
            "severity": "error",
            "binary": run.binary,
            "test": run.outcome.name,
            "message": f"GPU test `{run.outcome.name}` passed, but its process launched no GPU kernel: "
            f"it tested the CPU path under a GPU name.",
        }
        for run in runs
        if pattern.search(run.outcome.name) and run.outcome.status == "passed" and run.launches == 0
    ]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m app.runner.local", description=__doc__.splitlines()[0])
    parser.add_argument("--binary", action="append", required=True, type=Path)
    parser.add_argument("--gpu-tests", default=DEFAULT_GPU_TESTS, help="regex naming the GPU tests")
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
    report = {
        "gpus": devices,
        "tests": [r.to_json() for r in runs],
        "findings": gpu_test_findings(runs, args.gpu_tests),
    }
    print(json.dumps(report, indent=2))
    return 1 if report["findings"] or any(r.outcome.status == "failed" for r in runs) else 0


if __name__ == "__main__":
    sys.exit(main())
