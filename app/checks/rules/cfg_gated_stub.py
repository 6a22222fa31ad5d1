from __future__ import annotations

import re
from collections.abc import Iterator

from app.checks import gpu_code
from app.checks.model import Severity
from app.checks.patterns import cpu_work
from app.checks.rules.base import Hit, Rule, error_type, function_name
from app.checks.workspace import IndexedFunction, Workspace

_NO_OP = re.compile(r"\{(?:Ok\()?(?:\(\)|(\w+)(?:\.clone\(\))?)?\)?;?\}")


def check(ws: Workspace, item: IndexedFunction) -> Iterator[Hit]:
    """## What it does
    Flags an item behind `#[cfg(feature = "cuda")]` (or another GPU feature) whose
    body is CPU work or a no-op: it calls the CPU implementation, or returns its
    input unchanged, or does nothing.

    ## Why is this bad?
    Spec Step 2 #3: the feature gate makes the item look like the CUDA build's
    implementation, so enabling `cuda` appears to switch the op to the GPU while
    the same CPU code runs.

    ## Example
    ```rust
    #[cfg(feature = "cuda")]
    pub fn softmax(x: &Tensor) -> Tensor {
        softmax_cpu(x)
    }
    ```

    ## Use instead
    ```rust
    #[cfg(feature = "cuda")]
    pub fn softmax(x: &Tensor) -> Result<Tensor, GpuError> {
        crate::kernels::launch_softmax(x)
    }

    #[cfg(not(feature = "cuda"))]
    pub fn softmax(x: &Tensor) -> Result<Tensor, GpuError> {
        Err(GpuError::NoCuda)
    }
    ```
    """
    fn = item.fn
    if item.support_code or item.evidence or not gpu_code.has_gpu_cfg(fn.attrs):
        return
    if gpu_code.GPU_NAME.search(fn.name) or item.moves_data:
        return  # fake-gpu-function speaks for GPU-named items
    body = re.sub(rb"\s+", b"", fn.text).decode("utf-8", "replace")
    no_op = _NO_OP.fullmatch(body)
    if no_op and (no_op.group(1) is None or no_op.group(1) in fn.params):
        what = "does nothing" if no_op.group(1) is None else "returns its input unchanged"
    else:
        what = cpu_work(ws, item, 0, len(fn.text))
    if not what:
        return
    yield Hit(
        fn.line,
        f"{function_name(item)} is compiled only with the GPU feature, but it {what}: "
        f"enabling the feature does not move this op to the GPU. Launch the kernel here, "
        f"or return `Err({error_type(ws)}::..)`.",
    )


RULE = Rule(
    id="cfg-gated-stub",
    severity=Severity.ERROR,
    spec="Step 2 #3",
    summary='`#[cfg(feature = "cuda")]` item whose body is CPU work or a no-op',
    check=check,
)
