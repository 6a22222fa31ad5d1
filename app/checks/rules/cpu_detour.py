from __future__ import annotations

import re
from collections.abc import Iterator

from app.checks.model import Severity
from app.checks.patterns import cpu_only, gpu_work, opted_in, returns_host_data
from app.checks.rules.base import Hit, Rule, function_name
from app.checks.workspace import IndexedFunction, Workspace

_JUSTIFIED = re.compile(
    r"readback|read back|read-back|end[- ]of[- ]pipeline|returned to the caller|caller needs"
    r"|for (?:display|printing|logging|validation|debugging)|host result|to the user",
    re.I,
)
_EXCUSE = re.compile(r"cheap|small enough|acceptable|follow[- ]?up|for now|temporar|perf", re.I)


def check(ws: Workspace, item: IndexedFunction) -> Iterator[Hit]:
    """## What it does
    Flags a move to the host (`.cpu()`, `.to_cpu()`, `gpu_to_cpu(..)`,
    `.to(Device::Cpu)`, `dtoh` copies) in the middle of GPU code (GPU work or an
    upload follows it) that returns device data, when no more specific rule
    explains it and no comment justifies it as a readback the caller needs. In
    device-agnostic code it flags the round trip: read back, compute in a host
    loop, move the result back to the device.

    ## Why is this bad?
    Spec check 4b: every such occurrence must be justified in writing. The
    legitimate ones are end-of-pipeline readbacks for the user, validation and
    printing; the illegitimate ones quietly move operands to the CPU to do the
    math. Comments that argue the cost away ("cheap enough", "perf follow-up") are
    not a justification.

    ## Example
    ```rust
    pub fn gpu_argsort(x: &GpuTensor) -> Result<GpuTensor, GpuError> {
        let keys = x.to_cpu()?;
        launch_sort_kernel(&keys)
    }
    ```

    ## Use instead
    ```rust
    pub fn gpu_argsort(x: &GpuTensor) -> Result<GpuTensor, GpuError> {
        launch_sort_kernel(x)
    }
    ```
    """
    fn = item.fn
    if item.support_code or item.cpu_build:
        return
    if item.moves_data:
        return
    if not item.is_gpu_code:
        yield from _round_trip(ws, item)
        return
    if returns_host_data(item):
        return  # the caller asked for host data
    for signal in fn.signals:
        if signal.kind != "readback" or cpu_only(item, signal.offset):
            continue
        if opted_in(ws, item, signal.offset, signal.offset + 1):
            continue
        line = fn.line_of(signal.offset)
        if _justified(item, line):
            continue
        if not item.claim.startswith("its name") and not _work_continues(ws, item, signal.offset):
            continue  # the end-of-pipeline readback the caller gets (a `*_gpu` name promises more)
        yield Hit(
            line,
            f"{function_name(item)} moves data to the host with `{signal.text.strip()}` "
            f"in GPU code that returns device data. Keep the computation on the device, or "
            f"justify the readback in a comment on this line (why the host needs it).",
        )
        return


def _work_continues(ws: Workspace, item: IndexedFunction, offset: int) -> bool:
    """After the readback the function still uploads or runs GPU work: the host copy
    is a detour in the middle of the computation, not its result."""
    end = len(item.fn.text)
    uploads = any(s.kind == "upload" and s.offset > offset for s in item.fn.signals)
    return uploads or bool(gpu_work(ws, item, offset + 1, end))


def _round_trip(ws: Workspace, item: IndexedFunction) -> Iterator[Hit]:
    """Device-agnostic code that reads a tensor back, computes in a host loop and moves
    the result back to the tensor's device: for a GPU tensor, the op ran on the CPU."""
    fn = item.fn
    for signal in fn.signals:
        if signal.kind != "readback" or cpu_only(item, signal.offset):
            continue
        if opted_in(ws, item, signal.offset, signal.offset + 1):
            continue
        after = [s for s in fn.signals if s.offset > signal.offset]
        upload = next((s for s in after if s.kind == "upload"), None)
        if upload is None or not any(s.kind == "host_loop" and s.offset < upload.offset for s in after):
            continue
        if _justified(item, fn.line_of(signal.offset)):
            continue
        yield Hit(
            fn.line_of(signal.offset),
            f"{function_name(item)} copies its data to the host with `{signal.text.strip()}`, "
            f"computes there, and moves the result back with `{upload.text.strip()}` (line "
            f"{fn.line_of(upload.offset)}): for a GPU tensor the op runs on the CPU. Use "
            f"device-dispatched tensor ops, or return a structured error for GPU tensors.",
        )
        return


def _justified(item: IndexedFunction, line: int) -> bool:
    fn = item.fn
    for comment in fn.comments:
        comment_line = fn.line_of(comment.offset)
        if (
            line - 2 <= comment_line <= line
            and _JUSTIFIED.search(comment.text)
            and not _EXCUSE.search(comment.text)
        ):
            return True
    return False


RULE = Rule(
    id="cpu-detour",
    severity=Severity.WARNING,
    spec="Step 4b",
    summary="unjustified move to the host inside GPU code",
    check=check,
)
