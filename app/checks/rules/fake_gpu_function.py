from __future__ import annotations

import re
from collections.abc import Iterator

from app.checks.model import Severity
from app.checks.patterns import cpu_work, returns_host_data, without_backend_word
from app.checks.rules.base import Hit, Rule, error_type, function_name
from app.checks.workspace import IndexedFunction, Workspace

# A question about the device or the data (`is_cuda`, `has_cuda`, `supports_f16`).
_PREDICATE = re.compile(r"(?:is|has|can|supports?|uses?)_")
# Names of set-up and bookkeeping around the GPU (`cuda_devices`, `plan_cuda`,
# `build_metal_size_for_shape`, `release_cuda_graph_entries`): a loop in one walks
# devices, shapes or entries on the host, as it must; it is not an op's work.
_BOOKKEEPING = re.compile(
    r"^(?:get|set|build|plan|load|account|count|num|find|select|list|parse|collect|release|prepare"
    r"|register|init|setup|configure|make|new|create)_"
    r"|_(?:stats|counts?|capacity|devices?|ids?|config|info|names?|sizes?|tokens|libs?|groups|workers?)$"
)


def check(ws: Workspace, item: IndexedFunction) -> Iterator[Hit]:
    """## What it does
    Flags a function that presents itself as GPU code (a `gpu_*`/`cuda_*` name, a
    GPU impl or trait, GPU buffer types in its signature, or a GPU crate/module)
    while nothing it runs, itself or through its callees, launches GPU work: no
    kernel launch, no cuBLAS/cuDNN call, no CubeCL or wgpu dispatch, no PTX/WGSL
    source. Instead it computes on the host. A predicate (`is_cuda(self) -> bool`),
    device placement (`set_device`, `cast_nm_device`), set-up and bookkeeping named
    after the GPU (`cuda_devices`, `plan_cuda`, `cuda_stats`) and a loop that allocates
    or synchronizes per device make no such claim and are not flagged.

    ## Why is this bad?
    Spec Step 2 #1 and check 4a: "If zero matches are found in the function and
    its callees, the function is not GPU code regardless of its name." Callers
    believe the work runs on the GPU; it runs on the CPU, often with two copies
    across PCIe on top.

    ## Example
    ```rust
    pub fn gpu_relu(input: &[f32]) -> Vec<f32> {
        let host: Vec<f32> = input.to_vec();
        host.iter().map(|x| x.max(0.0)).collect()
    }
    ```

    ## Use instead
    ```rust
    pub fn gpu_relu(input: &CudaSlice<f32>, dev: &CudaDevice) -> Result<CudaSlice<f32>, GpuError> {
        let func = dev.get_func("relu", "relu_f32").ok_or(GpuError::MissingKernel)?;
        let mut out = dev.alloc_zeros::<f32>(input.len())?;
        unsafe { func.launch(LaunchConfig::for_num_elems(input.len() as u32), (&mut out, input)) }?;
        Ok(out)
    }
    ```
    """
    fn = item.fn
    if item.support_code or item.cpu_build or item.evidence or not item.is_gpu_code:
        return
    if item.moves_data or fn.trait == "Drop":
        return
    names = (fn.name, without_backend_word(fn.name))  # `cuda_has_tail` asks what `has_tail` asks
    if any(_PREDICATE.match(name) for name in names) and fn.ret.strip() == "bool":
        return  # `Device::is_cuda(self) -> bool` asks about the device; it computes nothing
    if item.claim.startswith("its `#[cfg"):
        return  # cfg-gated-stub covers items whose only claim is the feature gate
    host = cpu_work(ws, item, 0, len(fn.text))
    loops = [s for s in fn.signals if s.kind == "host_loop"]
    if host.startswith("moves data") and not loops and returns_host_data(item):
        return  # an accessor that hands device data to the caller: reading back is its job
    if any(_BOOKKEEPING.search(name) for name in names) and not host.startswith("moves data"):
        return  # set-up and bookkeeping: its loops and host helpers are no op's work
    drives_the_device = any(s.kind in ("device_memory", "sync") for s in fn.signals)
    if not host and loops and item.claim.startswith("its name") and not drives_the_device:
        # A GPU name is an explicit claim; a signature type alone is not (view and
        # metadata helpers loop over shapes on the host, legitimately). A loop that
        # allocates or synchronizes per layer or device manages the GPU.
        host = f"computes in a host loop at line {fn.line_of(loops[0].offset)}"
    if not host:
        return
    if not item.claim and not (loops and any(s.kind == "upload" for s in fn.signals)):
        return  # location alone: only the read-back, host loop, upload shape
    reason = item.claim or f"its location `{item.path}`"
    yield Hit(
        fn.fn_line,
        f"{function_name(item)} is GPU code by {reason}, but nothing it runs launches GPU "
        f"work (no kernel launch, BLAS call, CubeCL/wgpu dispatch or kernel source, itself "
        f"or through its callees); it {host}. Launch a real kernel, return "
        f"`Err({error_type(ws)}::..)` for the unsupported case, or rename it `*_cpu`.",
    )


RULE = Rule(
    id="fake-gpu-function",
    severity=Severity.ERROR,
    spec="Step 2 #1, Step 4a",
    summary="GPU-named or GPU-located function with no backend evidence that computes on the host",
    check=check,
)
