from __future__ import annotations

import re
from collections.abc import Iterator

from app.checks.model import Severity
from app.checks.patterns import fallback_sites, gate_variable, is_tracing_warn, macros_in
from app.checks.rules.base import Hit, Rule, function_name
from app.checks.workspace import IndexedFunction, Workspace

_KERNEL_FIELD = re.compile(r"\bkernel\s*=|\bop\s*=|\bkernel\s*:")
_STRING_FIELD = re.compile(r"\b\w+\s*=\s*\"(?P<value>\w{3,})\"")


def check(ws: Workspace, item: IndexedFunction) -> Iterator[Hit]:
    """## What it does
    Flags a CPU fallback that is gated by the opt-in environment variable but does
    not emit a `tracing::warn!` naming the kernel and the variable on every
    fallback (a silent gate, `log::warn!`, `eprintln!`, or a warning that names
    neither).

    ## Why is this bad?
    Spec Step 3 allows a fallback only the way PyTorch's MPS fallback does it:
    opt-in, and loud on every call, with a warning that says which kernel fell
    back and which variable to unset to make it an error.

    ## Example
    ```rust
    pub fn gpu_scale(a: &CudaSlice<f64>, s: f64, dev: &GpuDevice) -> Result<CudaSlice<f64>, GpuError> {
        match get_or_compile(SCALE_PTX, "scale_f64") {
            Ok(k) => launch_scale(k, a, s, dev),
            Err(e) => {
                if std::env::var("FERROTORCH_ENABLE_GPU_FALLBACK").is_ok() {
                    let host = gpu_to_cpu(a, dev)?;
                    return cpu_to_gpu(&scale_cpu(&host, s), dev);
                }
                Err(GpuError::PtxCompileFailed { kernel: "scale_f64", source: e })
            }
        }
    }
    ```

    ## Use instead
    ```rust
    pub fn gpu_scale(a: &CudaSlice<f64>, s: f64, dev: &GpuDevice) -> Result<CudaSlice<f64>, GpuError> {
        match get_or_compile(SCALE_PTX, "scale_f64") {
            Ok(k) => launch_scale(k, a, s, dev),
            Err(e) => {
                if std::env::var("FERROTORCH_ENABLE_GPU_FALLBACK").is_ok() {
                    tracing::warn!(
                        kernel = "scale_f64",
                        "falling back to CPU; unset FERROTORCH_ENABLE_GPU_FALLBACK to make this an error"
                    );
                    let host = gpu_to_cpu(a, dev)?;
                    return cpu_to_gpu(&scale_cpu(&host, s), dev);
                }
                Err(GpuError::PtxCompileFailed { kernel: "scale_f64", source: e })
            }
        }
    }
    ```
    """
    for site in fallback_sites(ws, item):
        if site.gate is not None:
            owner, start, end = item, site.gate.then_start, site.gate.then_end
            variable = gate_variable(item, site.gate) or ws.config.fallback_env_var
        elif site.helper is not None:
            # The helper that checks the variable is where the warning belongs.
            owner, start, end = site.helper, 0, len(site.helper.fn.text)
            variable = _helper_variable(site.helper) or ws.config.fallback_env_var
        else:
            continue
        problem = _warning_problem(owner, start, end, variable, kernel_known=owner is not item)
        if not problem and variable != ws.config.fallback_env_var:
            problem = f"it is gated by `{variable}`, not the configured `{ws.config.fallback_env_var}`"
        if problem:
            yield Hit(
                site.line,
                f"opt-in CPU fallback in {function_name(item)}: {problem}. Every fallback "
                f"must `tracing::warn!` with the kernel name and tell the user to unset "
                f"`{ws.config.fallback_env_var}` to make it an error.",
            )


def _warning_problem(owner: IndexedFunction, start: int, end: int, variable: str, kernel_known: bool) -> str:
    """What is wrong with the warning in [start, end) of ``owner`` ("" when nothing).
    A shared opt-in helper gets the kernel's name as an argument (``kernel_known``)."""
    warns = [m for m in macros_in(owner, start, end, {"warn"}) if is_tracing_warn(owner, m)]
    if not warns:
        other = macros_in(owner, start, end, {"warn", "eprintln", "println", "info"})
        if not other:
            return "it falls back without any warning"
        shown = f"{other[0].qualifier}::{other[0].name}" if other[0].qualifier else other[0].name
        return f"it announces the fallback with `{shown}!` instead of `tracing::warn!`"
    args = warns[0].args
    if variable not in args:
        return f"its `tracing::warn!` does not name `{variable}`"
    # `collective = "allreduce"` in `gpu_allreduce` names the op as well as `kernel = ..` does.
    name = owner.fn.name
    names_op = _KERNEL_FIELD.search(args) or name in args or (kernel_known and "{" in args)
    names_op = names_op or any(m.group("value").lower() in name.lower() for m in _STRING_FIELD.finditer(args))
    if not names_op:
        return 'its `tracing::warn!` does not name the kernel (add `kernel = "..."`)'
    return ""


def _helper_variable(helper: IndexedFunction) -> str:
    for literal in helper.fn.literals:
        text = literal.text.strip('"')
        if text.isupper() and "_" in text:
            return text
    return ""


RULE = Rule(
    id="fallback-without-warn",
    severity=Severity.ERROR,
    spec="Step 3",
    summary="opt-in fallback without a `tracing::warn!` naming the kernel and the variable",
    check=check,
)
