from __future__ import annotations

from collections.abc import Iterator

from app.checks.gpu_tests import gpu_test_reach
from app.checks.model import Severity
from app.checks.rules.base import Hit, Rule, function_name
from app.checks.workspace import IndexedFunction, Workspace


def check(ws: Workspace, item: IndexedFunction) -> Iterator[Hit]:
    """## What it does
    In a diff review, flags GPU code the diff adds or changes (a GPU function with
    backend evidence) that no GPU test reaches: no `#[test]` that builds data on a
    GPU device calls it, directly or through other functions.

    ## Why is this bad?
    Spec Step 2 #8 and check 4d: "The test is part of the work, not a follow-up."
    Without a test on the device the kernel has never run anywhere.

    ## Example
    ```rust
    pub fn gpu_scale(x: &CudaSlice<f32>, dev: &CudaDevice) -> Result<(), GpuError> {
        let f = dev.get_func("k", "scale").ok_or(GpuError::MissingKernel)?;
        unsafe { f.launch(LaunchConfig::for_num_elems(x.len() as u32), (x,)) }?;
        Ok(())
    }
    ```

    ## Use instead
    ```rust
    pub fn gpu_scale(x: &CudaSlice<f32>, dev: &CudaDevice) -> Result<(), GpuError> {
        let f = dev.get_func("k", "scale").ok_or(GpuError::MissingKernel)?;
        unsafe { f.launch(LaunchConfig::for_num_elems(x.len() as u32), (x,)) }?;
        Ok(())
    }

    #[test]
    fn gpu_scale_runs_on_cuda() {
        let dev = CudaDevice::new(0).expect("this test needs a CUDA device");
        let x = dev.htod_copy(vec![1.0f32; 4]).unwrap();
        gpu_scale(&x, &dev).unwrap();
        assert_eq!(dev.dtoh_sync_copy(&x).unwrap(), vec![2.0f32; 4]);
    }
    ```
    """
    fn = item.fn
    if item.support_code or item.cpu_build or not item.claim or not item.evidence:
        return
    if id(item) in gpu_test_reach(ws):
        return
    yield Hit(
        fn.fn_line,
        f"no GPU test reaches {function_name(item)}: add a `#[test]` that builds its input "
        f"on a GPU device, calls it, and asserts on the result (and that it is on the GPU).",
    )


RULE = Rule(
    id="gpu-code-without-test",
    severity=Severity.ERROR,
    spec="Step 2 #8, Step 4d",
    summary="GPU code added or changed by the diff that no GPU test reaches",
    check=check,
    needs_diff=True,
)
