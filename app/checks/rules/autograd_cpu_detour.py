from __future__ import annotations

from collections.abc import Iterator

from app.checks import gpu_code
from app.checks.model import Severity
from app.checks.patterns import cpu_only, opted_in
from app.checks.rules.base import Hit, Rule, function_name
from app.checks.workspace import IndexedFunction, Workspace


def _is_backward(item: IndexedFunction) -> bool:
    fn = item.fn
    return bool(
        gpu_code.BACKWARD_NAME.match(fn.name)
        or (
            (fn.name.startswith("backward") or fn.name == "apply")
            and (fn.impl_type.endswith("Backward") or "Grad" in fn.trait or "Backward" in fn.trait)
        )
    )


def check(ws: Workspace, item: IndexedFunction) -> Iterator[Hit]:
    """## What it does
    Flags a backward pass (`fn backward`, a `GradFn` impl, a `*Backward` type) that
    moves its operands to the host to compute gradients (and usually rebuilds the
    result on the device), outside a branch that only CPU tensors reach.

    ## Why is this bad?
    Spec Step 2 #6: forward runs on the GPU, backward quietly runs on the CPU.
    Training looks GPU-accelerated while every step pays two PCIe copies and CPU
    arithmetic, and nobody reading the diff can tell.

    ## Example
    ```rust
    impl GradFn for ReluBackward {
        fn backward(&self, grad: &Tensor) -> Result<Tensor, GpuError> {
            let g = grad.cpu()?;
            let x = self.input.cpu()?;
            let out = relu_grad_host(&g, &x);
            out.to(grad.device())
        }
    }
    ```

    ## Use instead
    ```rust
    impl GradFn for ReluBackward {
        fn backward(&self, grad: &Tensor) -> Result<Tensor, GpuError> {
            let mask = self.input.gt_scalar(0.0)?;
            grad.mul(&mask)
        }
    }
    ```
    """
    fn = item.fn
    if item.support_code or item.cpu_build or not _is_backward(item):
        return
    for signal in fn.signals:
        if signal.kind != "readback" or cpu_only(item, signal.offset):
            continue
        if opted_in(ws, item, signal.offset, signal.offset + 1):
            continue
        yield Hit(
            fn.line_of(signal.offset),
            f"backward {function_name(item)} moves data to the host with "
            f"`{signal.text.strip()}` where GPU tensors arrive: the gradient is computed "
            f"on the CPU. Compose it from device-dispatched tensor ops "
            f"or launch a backward kernel.",
        )
        return


RULE = Rule(
    id="autograd-cpu-detour",
    severity=Severity.ERROR,
    spec="Step 2 #6",
    summary="backward pass that computes gradients on the host and moves them back",
    check=check,
)
