from __future__ import annotations

from collections.abc import Iterator

from app.checks.model import Severity
from app.checks.patterns import fallback_sites, macros_in
from app.checks.rules.base import Hit, Rule, error_type, function_name
from app.checks.workspace import IndexedFunction, Workspace

PRINT_MACROS = {"eprintln", "println", "eprint", "print"}


def check(ws: Workspace, item: IndexedFunction) -> Iterator[Hit]:
    """## What it does
    Flags default-on CPU execution when the GPU path fails or is unavailable: an
    `Err(_) =>` arm that computes on the CPU, the `else` of `if let Ok(kernel) =`,
    an `.unwrap_or_else(|_| cpu(..))`, a helper's `Ok(None)` that the caller turns
    into CPU work, or a `log::warn!` followed by the CPU path.

    ## Why is this bad?
    Spec Step 3: PyTorch returns an error when an op has no kernel for the device;
    the user always knows when their code hit a slow path. A fallback is allowed
    only when the user opted in through the environment variable.

    ## Example
    ```rust
    pub fn gpu_gelu(x: &CudaSlice<f32>, dev: &GpuDevice) -> Result<CudaSlice<f32>, GpuError> {
        match compile_ptx(GELU_SRC) {
            Ok(kernel) => launch_gelu(kernel, x, dev),
            Err(_) => {
                let host = gpu_to_cpu(x, dev)?;
                cpu_to_gpu(&gelu_cpu(&host), dev)
            }
        }
    }
    ```

    ## Use instead
    ```rust
    pub fn gpu_gelu(x: &CudaSlice<f32>, dev: &GpuDevice) -> Result<CudaSlice<f32>, GpuError> {
        match compile_ptx(GELU_SRC) {
            Ok(kernel) => launch_gelu(kernel, x, dev),
            Err(e) => Err(GpuError::PtxCompileFailed { kernel: "gelu", source: e }),
        }
    }
    ```
    """
    for site in fallback_sites(ws, item):
        if (site.gate or site.helper) is not None or macros_in(item, site.start, site.end, PRINT_MACROS):
            continue
        warned = macros_in(item, site.start, site.end, {"warn", "info", "debug", "error"})
        note = f" The `{warned[0].name}!` does not make it opt-in." if warned else ""
        yield Hit(
            site.line,
            f"silent CPU fallback in {function_name(item)}: {site.kind} {site.cpu}.{note} "
            f"Return `Err({error_type(ws)}::..)` instead, or gate the fallback behind "
            f"`{ws.config.fallback_env_var}` with a `tracing::warn!` naming the kernel.",
        )


RULE = Rule(
    id="silent-fallback",
    severity=Severity.ERROR,
    spec="Step 3",
    summary="default-on CPU fallback when the GPU path fails or is unavailable",
    check=check,
)
