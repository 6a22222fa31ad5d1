from __future__ import annotations

from app.checks.model import Severity
from app.checks.rules.base import Rule

RULE = Rule(
    id="gpu-test-ran-on-cpu",
    severity=Severity.ERROR,
    spec="Step 2 #8-#9, Step 4d (at run time)",
    summary="a GPU test whose process launched no GPU kernel",
    check=None,
    runtime=True,
    doc="""
    ## What it does
    On a GPU runner, each test runs in its own process under a CUPTI tracer that
    counts the kernels the process launched. A test named (or configured) as a GPU
    test that passed without launching a single kernel is reported: it tested the
    CPU path under a GPU name. This is the dynamic counterpart of the static
    fake-GPU rules, and it needs a GPU to run (`python -m app.runner.local`).

    ## Why is this bad?
    Spec check 4d asks for a test that exercises the GPU path on a GPU device. A
    green GPU test that never touched the GPU is the strongest form of "fake
    confirmation": it passes everywhere and proves nothing about the kernel.

    ## Example
    ```rust
    #[test]
    fn gpu_add_one_pretends() {
        assert_eq!(add_one_on_host(&[1, 2]), vec![2, 3]);
    }
    ```

    ## Use instead
    ```rust
    #[test]
    fn gpu_add_one_launches_a_kernel() {
        let out = gpu_add_one(&[1, 2, 3, 4]).expect("this test needs an NVIDIA GPU");
        assert_eq!(out, vec![2, 3, 4, 5]);
    }
    ```
    """,
)
