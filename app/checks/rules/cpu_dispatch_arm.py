from __future__ import annotations

from collections.abc import Iterator

from app.checks import gpu_code
from app.checks.model import Severity
from app.checks.patterns import cpu_work, ends_in_error, gpu_work, opted_in, returns_host_data
from app.checks.rules.base import Hit, Rule, error_type, function_name
from app.checks.workspace import IndexedFunction, Workspace


def check(ws: Workspace, item: IndexedFunction) -> Iterator[Hit]:
    """## What it does
    Flags the GPU branch of a device dispatch that runs the CPU implementation:
    a `Device::Cuda(_)` match arm (alone or or-ed with `Device::Cpu`), or the
    then-block of `if x.is_cuda()`, whose code calls a `*_cpu` routine or moves
    the data to the host, and launches nothing on the GPU.

    ## Why is this bad?
    Spec Step 2 #5 and Step 3: PyTorch raises "not implemented for 'CUDA'" when an
    op has no CUDA kernel; it never silently rebrands CPU work as the CUDA path.

    ## Example
    ```rust
    pub fn relu(t: &Tensor) -> Result<Tensor, GpuError> {
        match t.device() {
            Device::Cpu => relu_cpu(t),
            Device::Cuda(_) => relu_cpu(&t.cpu()?)?.to(t.device()),
        }
    }
    ```

    ## Use instead
    ```rust
    pub fn relu(t: &Tensor) -> Result<Tensor, GpuError> {
        match t.device() {
            Device::Cpu => relu_cpu(t),
            Device::Cuda(_) => Err(GpuError::Unsupported { op: "relu", device: "cuda" }),
        }
    }
    ```
    """
    fn = item.fn
    if item.support_code or item.cpu_build or item.moves_data:
        return
    if fn.trait in ("Display", "Debug"):
        return
    regions: list[tuple[int, int, int, str]] = []
    for arm in fn.arms:
        if gpu_code.GPU_DEVICE_PATTERN.search(arm.pattern):
            regions.append((arm.body_start, arm.end, arm.start, f"the `{arm.pattern[:60]}` arm"))
    for branch in fn.branches:
        cond = branch.condition.strip()
        if not cond.startswith("!") and "||" not in cond and (".is_cuda()" in cond or ".is_gpu()" in cond):
            regions.append((branch.then_start, branch.then_end, branch.start, f"the `if {cond[:60]}` branch"))
    for start, end, head, what in regions:
        cpu = cpu_work(ws, item, start, end)
        if not cpu or gpu_work(ws, item, start, end) or ends_in_error(item, start, end):
            continue
        if opted_in(ws, item, start, end):
            continue
        if (
            cpu.startswith("moves data")
            and returns_host_data(item)
            and not any(s.kind == "host_loop" and s.offset >= start for s in fn.signals)
        ):
            continue  # one result read back for a caller that wants a host value
        yield Hit(
            fn.line_of(head),
            f"{what} of {function_name(item)} is the GPU path but {cpu} and launches nothing on "
            f"the GPU. Call the GPU kernel here, or return `Err({error_type(ws)}::..)` as "
            f"PyTorch raises 'not implemented for CUDA'.",
        )


RULE = Rule(
    id="cpu-dispatch-arm",
    severity=Severity.ERROR,
    spec="Step 2 #5, Step 3",
    summary="`Device::Cuda(_)` arm or `is_cuda()` branch that runs the CPU implementation",
    check=check,
)
