from __future__ import annotations

from collections.abc import Iterator

from app.checks.model import Severity
from app.checks.patterns import fallback_sites, macros_in
from app.checks.rules.base import Hit, Rule, function_name
from app.checks.rules.silent_fallback import PRINT_MACROS
from app.checks.workspace import IndexedFunction, Workspace


def check(ws: Workspace, item: IndexedFunction) -> Iterator[Hit]:
    """## What it does
    Flags a CPU fallback announced with `eprintln!` or `println!`.

    ## Why is this bad?
    Spec Step 3: "`eprintln!` is not opt-in". The print cannot be silenced or
    routed, the fallback is still default-on, and switching the print to
    `tracing::warn!` does not fix it either. The fix is a structured error, or an
    opt-in gate.

    ## Example
    ```rust
    pub fn cuda_softmax(x: &CudaSlice<f32>, dev: &GpuDevice) -> Result<CudaSlice<f32>, GpuError> {
        match load_softmax_kernel(dev) {
            Ok(k) => launch_softmax(k, x, dev),
            Err(e) => {
                eprintln!("softmax kernel failed ({e}); using CPU");
                let host = gpu_to_cpu(x, dev)?;
                cpu_to_gpu(&softmax_cpu(&host), dev)
            }
        }
    }
    ```

    ## Use instead
    ```rust
    pub fn cuda_softmax(x: &CudaSlice<f32>, dev: &GpuDevice) -> Result<CudaSlice<f32>, GpuError> {
        match load_softmax_kernel(dev) {
            Ok(k) => launch_softmax(k, x, dev),
            Err(e) => Err(GpuError::PtxCompileFailed { kernel: "softmax", source: e }),
        }
    }
    ```
    """
    for site in fallback_sites(ws, item):
        prints = macros_in(item, site.start, site.end, PRINT_MACROS)
        if (site.gate or site.helper) is not None or not prints:
            continue
        yield Hit(
            item.fn.line_of(prints[0].offset),
            f"CPU fallback in {function_name(item)} announced with `{prints[0].name}!`: "
            f"{site.kind} {site.cpu}. A print is not an opt-in; return a structured error, "
            f"or gate the fallback behind `{ws.config.fallback_env_var}` and warn with "
            f"`tracing::warn!`.",
        )


RULE = Rule(
    id="eprintln-fallback",
    severity=Severity.ERROR,
    spec="Step 3",
    summary="CPU fallback announced with `eprintln!`/`println!`",
    check=check,
)
