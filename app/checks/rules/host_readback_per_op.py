from __future__ import annotations

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


RULE = Rule(
    id="host-readback-per-op",
    severity=Severity.ERROR,
    spec="Step 2 #7",
    summary="per-op GPU function that reads back to the host, finishes there, and uploads again",
    check=check,
)
