from __future__ import annotations

import re
from collections.abc import Iterator

from app.checks.model import Severity
from app.checks.patterns import (
    always_returns,
    block_end,
    cpu_only,
    cpu_work,
    ends_in_error,
    gpu_work,
    has_return,
    opted_in,
)
from app.checks.rules.base import Hit, Rule, function_name
from app.checks.workspace import IndexedFunction, Workspace

_SHAPE_TEST = re.compile(
    r"is_contiguous|contiguous|\bndim\b|\brank\b|shape|\bdims?\b|stride|batch|numel|\.len\(\)"
    r"|dtype|DType|TypeId|size_of|is_f32|is_f64|\bf16\b|\bbf16\b|amsgrad|transpos|square"
    r"|[=!<>]=\s*\d|[<>]\s*\d"
    # A size threshold kept in a constant: `if order < FFT_GPU_MIN_LOG_SIZE`.
    r"|[<>]=?\s*(?:\w+::)*(?:[A-Z][A-Z0-9_]*)?(?:MIN|MAX|THRESHOLD|CUTOFF|LIMIT|SIZE|LEN|ELEMS|NUMEL)\b",
)
_GPU_CHOICE = re.compile(
    r"\b(?:use|can|run|on|try)_(?:gpu|cuda|device|kernel|fast)\w*|\bgpu_ok\b|\bfast_path\b"
)
_DEVICE_TEST = re.compile(r"\.is_(?:cuda|gpu)\(\)|Device::Cuda")


def check(ws: Workspace, item: IndexedFunction) -> Iterator[Hit]:
    """## What it does
    Flags GPU code that sends the "hard" cases to the CPU: an `if` on contiguity,
    shape, batch size, dtype or input size (`if n < GPU_MIN_SIZE`) whose branch runs
    the CPU implementation (a `*_cpu` function, or `fft` in `fft_gpu`), an
    `if x.is_cuda() && <easy case>` whose `else` runs on the CPU, a
    `use_gpu = <dtype test>` switch, or the arm of a `match dtype` that computes on
    the host backend (`F64 => CpuDevice.ones_impl(..)`) while the others launch.

    ## Why is this bad?
    Spec Step 2 #10: the op is reported as supported on the GPU, but only square,
    contiguous, f32, batch-1 inputs get there; everything else silently takes the
    CPU detour.

    ## Example
    ```rust
    pub fn gpu_matmul(a: &Tensor, b: &Tensor) -> Result<Tensor, GpuError> {
        if !a.is_contiguous() || a.shape()[0] != 1 {
            return matmul_cpu(a, b);
        }
        launch_matmul_kernel(a, b)
    }
    ```

    ## Use instead
    ```rust
    pub fn gpu_matmul(a: &Tensor, b: &Tensor) -> Result<Tensor, GpuError> {
        let a = a.contiguous()?;
        launch_matmul_kernel(&a, b)
    }
    ```
    """
    fn = item.fn
    if item.support_code or item.cpu_build or item.moves_data:
        return
    for branch in fn.branches:
        cond = _expanded(item, branch.condition)
        choices: list[tuple[int, int]] = []
        in_gpu_branch = _inside_device_branch(item, branch.start)
        if not (item.is_gpu_code or in_gpu_branch or _DEVICE_TEST.search(cond) or _GPU_CHOICE.search(cond)):
            # Device-agnostic code: a layout test whose branch rebuilds the tensor from a
            # host copy sends a GPU tensor with that layout to the CPU.
            if _LAYOUT_TEST.search(cond) and _demotes_to_host(item, branch.then_start, branch.then_end):
                choices.append((branch.then_start, branch.then_end))
            else:
                continue
        if branch.else_start < 0 and _fast_path_then_cpu(item, cond, branch.then_start, branch.then_end):
            choices.append((branch.then_end, block_end(item, branch.start)))
        if _GPU_CHOICE.search(cond) and branch.else_start >= 0:
            choices.append((branch.else_start, branch.else_end))
        elif _SHAPE_TEST.search(cond):
            if _DEVICE_TEST.search(cond) and "&&" in cond and branch.else_start >= 0:
                choices.append((branch.else_start, branch.else_end))
            elif not _DEVICE_TEST.search(cond):
                choices.append((branch.then_start, branch.then_end))
                if branch.else_start >= 0 and gpu_work(ws, item, branch.then_start, branch.then_end):
                    # `if is_f32 { kernel } else { cpu }`: the other dtypes go to the CPU.
                    choices.append((branch.else_start, branch.else_end))
        for start, end in choices:
            cpu = cpu_work(ws, item, start, end)
            if not cpu or cpu_only(item, start) or ends_in_error(item, start, end):
                continue
            if gpu_work(ws, item, start, end) or opted_in(ws, item, start, end):
                continue
            yield Hit(
                fn.line_of(branch.start),
                f"{function_name(item)} chooses the CPU by shape, layout or dtype "
                f"(`if {branch.condition.strip()[:70]}`): that case {cpu}. Handle it on the device "
                f"(make the input contiguous there, add the kernel variant) or return a "
                f"structured error for the unsupported case.",
            )
            return
    yield from _dtype_arm_to_host(ws, item)


_DTYPE_ARM = re.compile(
    r"\b(?:DType|Dtype|ScalarType|DataType|ElemType|ElementType|Precision)\s*::\s*\w+|^\s*(?:BF|F|I|U)\d+\b"
)
_DTYPE_SCRUTINEE = re.compile(r"dtype|DType|\bdt\b|elem_type|scalar_type|precision")


def _dtype_arm_to_host(ws: Workspace, item: IndexedFunction) -> Iterator[Hit]:
    """``match dtype { F32 => kernel, F64 => cpu_impl(..) }``: the arm of one dtype
    computes on the host while the others run on the device."""
    fn = item.fn
    for arm in fn.arms:
        if not (_DTYPE_ARM.search(arm.pattern) or _DTYPE_SCRUTINEE.search(arm.scrutinee)):
            continue
        if not (item.is_gpu_code or _inside_device_branch(item, arm.start)):
            continue
        cpu = cpu_work(ws, item, arm.body_start, arm.end)
        if not cpu or cpu_only(item, arm.body_start) or ends_in_error(item, arm.body_start, arm.end):
            continue
        if gpu_work(ws, item, arm.body_start, arm.end) or opted_in(ws, item, arm.body_start, arm.end):
            continue
        if not (gpu_work(ws, item, 0, arm.start) or gpu_work(ws, item, arm.end, len(fn.text))):
            continue  # nothing here runs on the device: not a GPU dispatch over dtypes
        yield Hit(
            fn.line_of(arm.start),
            f"{function_name(item)} sends one dtype to the CPU (`{arm.pattern.strip()[:40]} =>`): "
            f"that arm {cpu} while the other dtypes run on the device. Add the kernel variant "
            f"or return a structured error for the unsupported dtype.",
        )
        return


_LAYOUT_TEST = re.compile(r"is_contiguous|contiguous\(\)|\bstrides?\b")
_HOST_REBUILD = re.compile(rb"TensorStorage::cpu|Storage::Cpu|Device::Cpu|from_vec\(|::from_slice\(")


def _demotes_to_host(item: IndexedFunction, start: int, end: int) -> bool:
    """The block reads the data back and rebuilds it as a host tensor."""
    fn = item.fn
    readback = any(s.kind == "readback" and start <= s.offset < end for s in fn.signals)
    return readback and _HOST_REBUILD.search(fn.text, start, end) is not None


def _expanded(item: IndexedFunction, cond: str) -> str:
    """A condition that is a bare flag (``if use_gpu``) stands for the expression the
    flag was set from (``let use_gpu = is_f32 && x.is_cuda() && !amsgrad;``)."""
    name = cond.strip().lstrip("!").strip()
    if not re.fullmatch(r"\w+", name):
        return cond
    found = re.search(
        rb"let\s+(?:mut\s+)?" + re.escape(name.encode()) + rb"\s*(?::[^=;]+)?=([^;]+);", item.fn.text
    )
    return f"{cond} /* = {found.group(1).decode('utf-8', 'replace')} */" if found else cond


def _inside_device_branch(item: IndexedFunction, offset: int) -> bool:
    """Inside the then-block of `if x.is_cuda()`: only GPU tensors get here."""
    return any(
        b.then_start <= offset < b.then_end
        and _DEVICE_TEST.search(b.condition)
        and not b.condition.strip().startswith("!")
        for b in item.fn.branches
    )


def _fast_path_then_cpu(item: IndexedFunction, cond: str, then_start: int, then_end: int) -> bool:
    """``if x.is_cuda() && <easy case> { ..; return }`` (or a device test whose block
    returns only for the easy case): whatever the test rejects continues below."""
    if cond.strip().startswith("!") or not (_DEVICE_TEST.search(cond) or _GPU_CHOICE.search(cond)):
        return False
    if not has_return(item, then_start, then_end):
        return False
    if _SHAPE_TEST.search(cond):
        return not ends_in_error(item, then_start, then_end)
    # Any test inside decides which GPU tensors take the fast path (a dtype, a layout,
    # a storage variant, a backend being present); the others fall through to the CPU.
    nested_gate = any(then_start <= b.start < then_end for b in item.fn.branches)
    return nested_gate and not always_returns(item, then_start, then_end)


RULE = Rule(
    id="shape-bypass",
    severity=Severity.ERROR,
    spec="Step 2 #10",
    summary="GPU code that sends hard shapes, layouts or dtypes to the CPU",
    check=check,
)
