from __future__ import annotations

import re
from collections.abc import Iterator

from app.checks import gpu_code
from app.checks.model import Severity
from app.checks.patterns import cpu_only
from app.checks.rules.base import Hit, Rule, error_type, function_name
from app.checks.workspace import IndexedFunction, Workspace

_NOT_YET = re.compile(
    r"not\s+(?:yet\s+)?(?:implemented|supported|done|ported)|not yet|unimplemented"
    r"|\btodo\b|\bTODO\b|\bFIXME\b",
    re.I,
)
_STRING = re.compile(r'"((?:[^"\\]|\\.)*)"')
_ASSERTS = frozenset({"assert", "assert_eq", "assert_ne"})


def check(ws: Workspace, item: IndexedFunction) -> Iterator[Hit]:
    """## What it does
    Flags `todo!()`, `unimplemented!()`, `panic!("not yet ...")` and an assertion
    whose message says the rest is not done yet (`assert!(mode == Mode::Llama, "TODO:
    only support Llama mode yet")`) in GPU code, and in the `Device::Cuda(_)` arm of
    any dispatch.

    ## Why is this bad?
    Spec Step 2 #2: a deferred kernel is not a kernel. The function compiles,
    the PR reads as done, and the first user with a CUDA tensor gets a panic.

    ## Example
    ```rust
    pub fn gpu_layer_norm(x: &CudaSlice<f32>, eps: f32) -> Result<CudaSlice<f32>, GpuError> {
        todo!("layer norm kernel")
    }
    ```

    ## Use instead
    ```rust
    pub fn gpu_layer_norm(x: &CudaSlice<f32>, eps: f32) -> Result<CudaSlice<f32>, GpuError> {
        Err(GpuError::Unsupported { op: "layer_norm", device: "cuda" })
    }
    ```
    """
    fn = item.fn
    if item.support_code or item.cpu_build:
        return
    cuda_arms = [a for a in fn.arms if gpu_code.GPU_DEVICE_PATTERN.search(a.pattern)]
    for macro in fn.macros:
        if macro.name in ("todo", "unimplemented"):
            what = f"`{macro.name}!()`"
        elif macro.name == "panic" and _NOT_YET.search(macro.args):
            what = f"`panic!{macro.args[:60]}`"
        elif macro.name in _ASSERTS and any(_NOT_YET.search(m) for m in _STRING.findall(macro.args)):
            # `assert!(mode == RopeMode::Llama, "TODO: only support Llama mode yet")`: the
            # other modes are deferred work that panics on the user's data.
            what = f"`{macro.name}!{macro.args[:60]}`"
        else:
            continue
        holding = [a for a in fn.arms if a.body_start <= macro.offset < a.end]
        innermost = max(holding, key=lambda a: a.body_start) if holding else None
        in_cuda_arm = innermost is not None and innermost in cuda_arms
        if macro.name not in ("todo", "unimplemented") and any(
            gpu_code.KERNEL_ATTR.search(a) for a in fn.attrs
        ):
            continue  # a panic or assertion in #[cube] code fires at kernel expansion, not on the user's data
        # A helper that merely lives in a GPU crate (an enum mapping, say) is no kernel.
        gpu_op = item.claim or (item.gpu_location and item.evidence) or in_cuda_arm
        if not gpu_op or cpu_only(item, macro.offset):
            continue
        where = "the GPU arm of the dispatch in " if in_cuda_arm else ""
        yield Hit(
            fn.line_of(macro.offset),
            f"{what} in {where}GPU code {function_name(item)}: the kernel is deferred, not "
            f"written. Implement it, or return `Err({error_type(ws)}::..)` naming the "
            f"unsupported op so callers can see the gap.",
        )


RULE = Rule(
    id="deferred-kernel",
    severity=Severity.ERROR,
    spec="Step 2 #2",
    summary='`todo!`/`unimplemented!`/`panic!("not yet")` in GPU code',
    check=check,
)
