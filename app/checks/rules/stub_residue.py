from __future__ import annotations

import re
from collections.abc import Iterator

from app.checks.model import Severity
from app.checks.patterns import cpu_only
from app.checks.rules.base import Hit, Rule, function_name
from app.checks.workspace import IndexedFunction, Workspace

_MARKER = re.compile(r"\b(TODO|FIXME|XXX|HACK)\b")
# A marker that speaks of missing GPU work, as opposed to a design or tuning note.
_GAP = re.compile(
    r"gpu|cuda|kernel|device|implement|port|cpu|host|fallback|stub|placeholder|not yet|missing"
    r"|unsupported|support|wip|temporar|hack|later",
    re.I,
)
_STRUCTURED_GAP = re.compile(rb"\bErr\s*\(|\bbail!|\bunimplemented!|\btodo!")
# A tuning or design note about code that works is not a missing path.
_DESIGN_NOTE = re.compile(
    r"perf|faster|slow|optimi[sz]|speed|\btun(?:e|ing)\b|heuristic|better|\bgood\b|efficien|clean\s*up"
    r"|refactor|simplif|nicer|benchmark|\bfus(?:e|ion)\b|vectori",
    re.I,
)
# "support more dtypes" next to the typed error the other dtypes already get.
_DTYPE_NOTE = re.compile(r"dtype|\btypes?\b|precision|\b(?:f16|bf16|f64|int\d*|u8|i64)\b", re.I)
_DTYPE_ERROR = re.compile(
    rb"Unsupported\w*|Unexpected\w*|NotImplemented\w*|NotSupported\w*|\w*Mismatch\w*|bail!"
    rb"|as_\w*slice\s*::\s*<"
)


def check(ws: Workspace, item: IndexedFunction) -> Iterator[Hit]:
    """## What it does
    Flags `// TODO`, `// FIXME`, `// XXX` and `// HACK` comments about missing GPU
    work (they mention the GPU, a kernel, the CPU, a port, support, a stub...) in
    GPU code a user can reach, and on the GPU function itself. Not flagged: a note
    whose next statement returns the structured error that reports the gap (the gap
    is visible to callers), a "more dtypes" note in a function whose other dtypes
    already get a typed error, and tuning or design notes about code that works.

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
    if item.support_code or item.cpu_build or not item.is_gpu_code:
        return
    for text in fn.doc:
        marker = _MARKER.search(text)
        if marker and _speaks_of_a_gap(text, fn.text):
            yield Hit(fn.line, _message(item, marker.group(1), text))
            return
    for comment in fn.comments:
        marker = _MARKER.search(comment.text)
        if not marker or not _speaks_of_a_gap(comment.text, fn.text) or cpu_only(item, comment.offset):
            continue
        if _gap_is_reported(fn.text, comment.offset):
            continue
        yield Hit(fn.line_of(comment.offset), _message(item, marker.group(1), comment.text))


def _speaks_of_a_gap(note: str, fn_text: bytes) -> bool:
    """The note is about missing GPU work: not a tuning or design note, and not a
    "more dtypes" note where the function already answers other dtypes with a typed
    error (the gap is visible to callers)."""
    if not _GAP.search(note) or _DESIGN_NOTE.search(note):
        return False
    return not (_DTYPE_NOTE.search(note) and _DTYPE_ERROR.search(fn_text))


def _gap_is_reported(text: bytes, offset: int) -> bool:
    """The statement right after the note returns a structured error for the gap (or
    panics, which deferred-kernel reports): the note documents the gap, it does not
    hide it."""
    return _STRUCTURED_GAP.search(_next_statement(text, offset)) is not None


def _next_statement(text: bytes, offset: int) -> bytes:
    """From the line after ``offset`` to the end of the statement that starts there
    (a ``;`` at depth 0, or the end of the enclosing block)."""
    start = text.find(b"\n", offset)
    if start < 0:
        return b""
    depth = 0
    for i in range(start, len(text)):
        ch = text[i]
        if ch in b"([{":
            depth += 1
        elif ch in b")]}":
            depth -= 1
            if depth < 0:
                return text[start:i]
        elif ch == 0x3B and depth == 0:  # ';'
            return text[start : i + 1]
    return text[start:]


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
