from __future__ import annotations

import re
from collections.abc import Iterator

from app.checks.model import Severity
from app.checks.patterns import cpu_only, opted_in
from app.checks.rules.base import Hit, Rule, function_name
from app.checks.workspace import IndexedFunction, Workspace


def check(ws: Workspace, item: IndexedFunction) -> Iterator[Hit]:
    """## What it does
    Flags a per-op GPU function that copies its data (or partial results) back to
    the host, finishes on the CPU, and uploads the result again: a host round trip
    on every call. A `synchronize()` followed by `.to_vec()` counts as a readback.
    So does an op with no launch of its own whose runner uploads the inputs,
    launches, and hands the result back as a `Vec` (`portable_sub` calling `run_sub`).

    ## Why is this bad?
    Spec Step 2 #7: every call stalls the stream and crosses PCIe twice, so the
    "GPU" op is GPU-in-name-only. "It's just one number" is how the pattern is
    usually defended; the spec does not accept it.

    ## Example
    ```rust
    pub fn gpu_sum(x: &CudaSlice<f32>, dev: &GpuDevice) -> Result<CudaSlice<f32>, GpuError> {
        let partials = launch_partial_sums(x, dev)?;
        let host = gpu_to_cpu(&partials, dev)?;
        let total: f32 = host.iter().sum();
        cpu_to_gpu(&[total], dev)
    }
    ```

    ## Use instead
    ```rust
    pub fn gpu_sum(x: &CudaSlice<f32>, dev: &GpuDevice) -> Result<CudaSlice<f32>, GpuError> {
        let partials = launch_partial_sums(x, dev)?;
        launch_final_sum(&partials, dev)
    }
    ```
    """
    fn = item.fn
    if item.support_code or item.cpu_build or not item.is_gpu_code or not item.evidence:
        return  # with no GPU work at all it is a fake-gpu-function
    if item.moves_data:
        return
    round_trip = _round_trip_callee(ws, item)
    if round_trip:
        yield round_trip
        return
    synced = False
    for signal in fn.signals:
        if signal.kind == "sync":
            synced = True
        readback = signal.kind == "readback" or (signal.kind == "to_vec" and synced)
        if not readback or cpu_only(item, signal.offset):
            continue
        if opted_in(ws, item, signal.offset, signal.offset + 1):
            continue
        upload = next(
            (
                s
                for s in fn.signals
                if s.kind == "upload"
                and s.offset > signal.offset
                and not opted_in(ws, item, s.offset, s.offset + 1)
            ),
            None,
        )
        if upload is None:
            continue
        yield Hit(
            fn.line_of(signal.offset),
            f"{function_name(item)} reads back with `{signal.text.strip()}` (line "
            f"{fn.line_of(signal.offset)}), works on the host, and uploads again with "
            f"`{upload.text.strip()}` (line {fn.line_of(upload.offset)}): every call "
            f"round-trips through host memory. Keep the data on the device: do the "
            f"host step in a kernel.",
        )
        return


_HOST_RESULT = re.compile(r"^(?:\w+::)*Vec\s*<")


def _round_trip_callee(ws: Workspace, item: IndexedFunction) -> Hit | None:
    """An op with no launch of its own that runs its kernel through a helper which
    uploads the inputs and hands the result back as host data (a `Vec`): the round
    trip is the helper's, the op pays it on every call (`portable_sub` calling
    `run_sub`)."""
    fn = item.fn
    if any(s.kind == "launch" for s in fn.signals):
        return None
    for call in fn.calls:
        for callee in ws.resolve(call, item):
            if (
                callee.support_code
                or callee.moves_data
                or not callee.direct_evidence
                or not _HOST_RESULT.search(callee.fn.ret)
            ):
                continue
            signals = callee.fn.signals
            upload = next((s for s in signals if s.kind == "upload"), None)
            if upload is None:
                continue
            readback = next((s for s in signals if s.kind == "readback" and s.offset > upload.offset), None)
            if readback is None:
                continue
            line = fn.line_of(call.offset)
            return Hit(
                line,
                f"{function_name(item)} runs its kernel through `{callee.fn.qualname}` (line {line}), "
                f"which uploads with `{upload.text.strip()}` and reads the result back with "
                f"`{readback.text.strip()}`: every call round-trips through host memory. Keep the "
                f"data on the device between ops.",
            )
    return None


RULE = Rule(
    id="host-readback-per-op",
    severity=Severity.ERROR,
    spec="Step 2 #7",
    summary="per-op GPU function that reads back to the host, finishes there, and uploads again",
    check=check,
)
