from __future__ import annotations

import re
from collections.abc import Iterator
from typing import TYPE_CHECKING

from app.checks import gpu_code
from app.checks.model import Severity
from app.checks.prose import GPU_WORD, HOST_WORD, NEXT_STEP
from app.checks.rules import forbidden_phrasing
from app.checks.rules.base import Hit, Rule

if TYPE_CHECKING:
    from app.checks.description import DescriptionContext
    from app.checks.workspace import IndexedFunction

_INCOMPLETE_RULES = frozenset({"deferred-kernel", "stub-residue", "cfg-gated-stub", "reference-punt"})
_UNSUPPORTED_ERROR = re.compile(
    rb"Err\s*\(\s*[\w:]*(?:Unsupported|NotImplemented|NotSupported|NoCuda|Unavailable|MissingKernel)"
)
# A gap report, however it is worded, says what is still missing and what comes next.
_PARTS = {
    "what does not work yet": re.compile(
        r"what\s+(?:does\s+not|doesn't)\s+work|not\s+(?:yet\s+)?(?:supported|implemented|working|done|wired)"
        r"|does\s+not\s+work|doesn't\s+work|\bmissing\b|limitation|known\s+gaps?|\bgaps?\b|unsupported"
        r"|\buntouched\b|\bcpu[- ]only\b|\bstill\s+(?:runs?|uses?|takes?|on)\b|\bonly\s+(?:for|f32|f64)\b"
        r"|(?:\bnot|n't)\s+yet\b|\bremain(?:s|ing)?\b|\bpartial\b|\bno\s+(?:gpu|cuda)\b|returns?\s+err",
        re.I,
    ),
    "the next step": NEXT_STEP,
}


def check(ctx: DescriptionContext) -> Iterator[Hit]:
    """## What it does
    When the diff leaves GPU work incomplete (a `todo!()` or a TODO it writes in GPU
    code, a `cfg`-gated stub, a CPU reference wired for the GPU, a structured
    "unsupported" error the diff adds, an opt-in CPU fallback, a CPU fallback the
    description itself announces, a GPU claim the code does not back or that names
    nothing the diff changes),
    requires the description to say what does not work yet and the next step (what
    works is what the rest of the description is about). A stub the diff only moves
    (three or more lines removed in one place and added in another) was there
    before, and the host method of an op that also runs on the GPU (`cpu_fwd`
    beside `cuda_fwd`) is no CPU reference left in its place.

    ## Why is this bad?
    Spec Step 5: "When something is genuinely incomplete, explicitly list: what
    works, what does NOT work yet, what concrete next step would close the gap."
    Incomplete work described as a whole leaves the reader to discover the gap.

    ## Example
    ```text
    Add the cumsum op.
    ```

    ```rust
    pub fn gpu_cumsum(x: &CudaSlice<f32>) -> Result<CudaSlice<f32>, GpuError> {
        Err(GpuError::Unsupported { op: "cumsum", device: "cuda" })
    }
    ```

    ## Use instead
    ```text
    Add the cumsum op.

    What works: the op's API and its CPU path. What does not work yet: CUDA tensors get
    Err(GpuError::Unsupported). Next step: a Blelloch scan kernel.
    ```

    ```rust
    pub fn gpu_cumsum(x: &CudaSlice<f32>) -> Result<CudaSlice<f32>, GpuError> {
        Err(GpuError::Unsupported { op: "cumsum", device: "cuda" })
    }
    ```
    """
    gaps = _incomplete_work(ctx)
    if not gaps:
        return
    absent = [part for part, pattern in _PARTS.items() if not pattern.search(ctx.text)]
    if not absent:
        return
    shown = "; ".join(gaps[:5]) + (f"; and {len(gaps) - 5} more" if len(gaps) > 5 else "")
    yield Hit(
        0,
        f"the diff leaves GPU work incomplete ({shown}) but the description does not say "
        f"{', '.join(absent)} (spec Step 5). Add a short gap report: what works, what does "
        f"not work yet, and the next step.",
    )


def _incomplete_work(ctx: DescriptionContext) -> list[str]:
    # The diff's own stubs: one it does not write (a TODO in a function it changes
    # elsewhere) or only moves (a function moved to another file) was there before.
    gaps = [
        f"{f.rule} at {f.path}:{f.line}"
        for f in ctx.findings
        if f.rule in _INCOMPLETE_RULES
        and f.line in ctx.touched.get(f.path, ())
        and f.line not in ctx.moved.get(f.path, ())
    ]
    gaps.extend(f'the claim "{c.text}" is not backed' for c in ctx.claims if not c.backed)
    # "Have the CUDA HAL fall back to CPU for Poseidon": the description itself says part
    # of the GPU work is left to the host.
    announced = next(forbidden_phrasing.check(ctx), None)
    if announced is not None:
        where = "the title" if announced.line == 0 else f"line {announced.line} of the body"
        gaps.append(f"a CPU fallback the description announces in {where}")
    # A title about the host alone ("Feature/cpu softmax"): its CPU code is the change,
    # not a gap ("CPU reference + GPU scaffolding for X" names the GPU too).
    host_change = bool(HOST_WORD.search(ctx.title)) and not GPU_WORD.search(ctx.title)
    for item in ctx.changed:
        fn = item.fn
        where = f"`{fn.qualname}` ({item.path}:{fn.fn_line})"
        if not (item.is_gpu_code or item.evidence):
            if gpu_code.CPU_IMPL_NAME.search(fn.name) and not host_change and not _has_a_gpu_twin(ctx, item):
                gaps.append(f"CPU-only reference {where}")
            continue
        added = ctx.touched.get(item.path, frozenset())
        if any(fn.line_of(m.start()) in added for m in _UNSUPPORTED_ERROR.finditer(fn.text)):
            # the diff's own error: a dispatcher's old "unsupported op" arm is not its gap
            gaps.append(f'structured "unsupported" error in {where}')
        env_checks = any(s.kind == "env" for s in fn.signals)
        if env_checks and any("FALLBACK" in lit.text.upper() for lit in fn.literals):
            gaps.append(f"opt-in CPU fallback in {where}")
    return gaps


def _has_a_gpu_twin(ctx: DescriptionContext, item: IndexedFunction) -> bool:
    """A method of a type that also runs on the GPU (candle's `cpu_fwd` beside its
    `cuda_fwd` and `metal_fwd`) is the host's share of an op the GPU has too."""
    impl_type = item.fn.impl_type
    return bool(impl_type) and any(ctx.ws.functions[i].evidence for i in ctx.ws.methods_of(impl_type))


RULE = Rule(
    id="missing-gap-report",
    severity=Severity.WARNING,
    spec="Step 5",
    summary='incomplete GPU work without "what works / what does not / next step"',
    check=None,
    check_description=check,
)
