from __future__ import annotations

import re
from collections.abc import Iterator

from app.checks import gpu_code
from app.checks.model import Severity
from app.checks.patterns import cpu_only, opted_in
from app.checks.rules.base import Hit, Rule, function_name
from app.checks.workspace import IndexedFunction, Workspace

_CPU_PART = gpu_code.CPU_IMPL_NAME


def _op_of(name: str) -> str:
    return re.sub(r"(?:^|_)(?:cpu|reference|naive|host|impl|inner|fallback)(?=_|$)", "", name).strip("_")


def _has_gpu_version(ws: Workspace, op: str) -> bool:
    for other in ws.functions:
        name = other.fn.name
        if op in name and other.evidence and not _CPU_PART.search(name):
            return True
    return False


def check(ws: Workspace, item: IndexedFunction) -> Iterator[Hit]:
    """## What it does
    Flags GPU code (a GPU-named function, or the `Device::Cuda(_)` arm of a
    dispatch) that calls an op's CPU or reference implementation (`*_cpu`,
    `*_reference`, `naive_*`) when the workspace has no GPU implementation of
    that op at all.

    ## Why is this bad?
    Spec Step 2 #4: writing only the CPU reference and wiring it where the GPU
    version should be makes the op look supported on the GPU. The reference is
    welcome; it is not the GPU op.

    ## Example
    ```rust
    fn layer_norm_reference(x: &[f32]) -> Vec<f32> {
        let mean = x.iter().sum::<f32>() / x.len() as f32;
        x.iter().map(|v| v - mean).collect()
    }

    pub fn gpu_layer_norm(x: &[f32]) -> Vec<f32> {
        layer_norm_reference(x)
    }
    ```

    ## Use instead
    ```rust
    fn layer_norm_reference(x: &[f32]) -> Vec<f32> {
        let mean = x.iter().sum::<f32>() / x.len() as f32;
        x.iter().map(|v| v - mean).collect()
    }

    pub fn gpu_layer_norm(x: &CudaSlice<f32>) -> Result<CudaSlice<f32>, GpuError> {
        Err(GpuError::Unsupported { op: "layer_norm", device: "cuda" })
    }
    ```
    """
    fn = item.fn
    if item.support_code or item.cpu_build or item.moves_data:
        return
    cuda_arms = [a for a in fn.arms if gpu_code.GPU_DEVICE_PATTERN.search(a.pattern)]
    for call in fn.calls:
        if not _CPU_PART.search(call.name) or gpu_code.TRANSFER_NAME.search(call.name):
            continue
        in_arm = any(a.body_start <= call.offset < a.end for a in cuda_arms)
        if not (item.claim or in_arm) or cpu_only(item, call.offset):
            continue
        if opted_in(ws, item, call.offset, call.offset + 1):
            continue
        targets = ws.resolve(call, item)
        if not targets or any(t.evidence for t in targets):
            continue
        op = _op_of(call.name)
        if not op or _has_gpu_version(ws, op):
            continue
        yield Hit(
            fn.line_of(call.offset),
            f"GPU code {function_name(item)} calls the CPU reference `{call.name}` and the "
            f"workspace has no GPU implementation of `{op}`: the op is wired for the GPU "
            f"with only its CPU version written. Write the kernel, or return a structured "
            f"error from the GPU path and report the op as CPU-only.",
        )


RULE = Rule(
    id="reference-punt",
    severity=Severity.ERROR,
    spec="Step 2 #4",
    summary="CPU/reference implementation wired where the GPU version should be, with no GPU version",
    check=check,
)
