from __future__ import annotations

import re
from collections.abc import Iterator

from app.checks.model import Severity
from app.checks.patterns import cpu_only
from app.checks.rules.base import Hit, Rule, function_name
from app.checks.workspace import IndexedFunction, Workspace

_MARKER = re.compile(r"\b(TODO|FIXME|XXX|HACK)\b")


def check(ws: Workspace, item: IndexedFunction) -> Iterator[Hit]:
    """## What it does
    Flags `// TODO`, `// FIXME`, `// XXX` and `// HACK` comments in GPU code that
    a user can reach, and on the GPU function itself.

    ## Why is this bad?
    Spec check 4c: none of these may be present in a path the user could actually
    trigger. "TODO: GPU path" over a CPU body is the most common way a stub gets
    reported as done. Text inside a structured error message is not a comment and
    is not flagged.

    ## Example
    ```rust
    pub fn gpu_cumsum(x: &CudaSlice<f32>, dev: &GpuDevice) -> Result<CudaSlice<f32>, GpuError> {
        // TODO: write the scan kernel
        launch_naive_cumsum(x, dev)
    }
    ```

    ## Use instead
    ```rust
    pub fn gpu_cumsum(x: &CudaSlice<f32>, dev: &GpuDevice) -> Result<CudaSlice<f32>, GpuError> {
        launch_blelloch_scan(x, dev)
    }
    ```
    """
    fn = item.fn
    if item.test_code or item.cpu_build or not item.is_gpu_code:
        return
    for text in fn.doc:
        marker = _MARKER.search(text)
        if marker:
            yield Hit(fn.line, _message(item, marker.group(1), text))
            return
    for comment in fn.comments:
        marker = _MARKER.search(comment.text)
        if marker and not cpu_only(item, comment.offset):
            yield Hit(fn.line_of(comment.offset), _message(item, marker.group(1), comment.text))


def _message(item: IndexedFunction, marker: str, text: str) -> str:
    shown = " ".join(text.split())[:80]
    return (
        f"`{marker}` left in GPU code {function_name(item)} (`{shown}`): finish the GPU "
        f"path, or make the gap a structured error and report it as not done."
    )


RULE = Rule(
    id="stub-residue",
    severity=Severity.WARNING,
    spec="Step 4c",
    summary="TODO/FIXME/XXX/HACK left in a reachable GPU path",
    check=check,
)
