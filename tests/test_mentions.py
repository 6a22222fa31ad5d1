"""Claims by mention: a changed GPU function the description names, in whatever
sentence shape, is claimed as done work; negations, plans, history, tests, the means
of a claim and sentences with no GPU context are not."""

from __future__ import annotations

import pytest

from tests.conftest import run_review
from tests.test_review import FAKE_LAYER_NORM, GPU_TEST, KERNEL

BACKWARD = """
    pub struct SigmoidBackward { out: CudaBuffer<f32> }
    impl GradFn for SigmoidBackward {
        fn backward(&self, grad: &CudaBuffer<f32>, dev: &GpuDevice) -> GpuResult<CudaBuffer<f32>> {
            let f = dev.get_func("act", "sigmoid_backward_f32").ok_or(GpuError::MissingKernel)?;
            unsafe { f.launch(LaunchConfig::for_num_elems(4), (grad, &self.out)) }?;
            Ok(grad.clone())
        }
    }
    pub fn is_capturing(dev: &GpuDevice) -> bool {
        dev.capturing()
    }
    """
FILES = {"src/lib.rs": KERNEL + FAKE_LAYER_NORM + BACKWARD, "tests/gpu.rs": GPU_TEST}


def claimed(body: str) -> dict[str, bool]:
    """The body's claims; the title only gives them a GPU context."""
    found = run_review(FILES, body=body, title="gpu: activations").claims
    return {c.subject: c.backed for c in found if c.line > 0}


def test_a_named_gpu_function_in_a_bullet_is_a_claim_held_to_the_evidence() -> None:
    found = claimed(
        "Activation paths:\n- SigmoidBackward: runs its kernel directly\n- `gpu_layer_norm` done\n"
    )
    assert found == {"SigmoidBackward": False, "gpu_layer_norm": False}  # no GPU test; a host round trip
    assert claimed("The scale op `gpu_scale` launches one kernel per call.") == {"gpu_scale": True}


@pytest.mark.parametrize(
    "body",
    [
        "Next steps:\n- SigmoidBackward on the GPU\n",
        "gpu_layer_norm is not ported yet.",
        "gpu_layer_norm was previously a CPU loop.",
        "The probe test covers gpu_layer_norm on the device.",
        "Normalisation reuses the kernel via gpu_layer_norm.",
        "is_capturing reports the capture state on the device.",  # plumbing, not a GPU op
        "Renamed gpu_layer_norm for clarity.",
    ],
)
def test_names_outside_done_gpu_work_are_not_claims(body: str) -> None:
    assert claimed(body) == {}


def test_a_sentence_without_gpu_context_claims_nothing_under_a_plain_title() -> None:
    found = run_review(FILES, body="gpu_layer_norm handles empty inputs.", title="misc: edge cases")
    assert found.claims == []


def test_a_name_already_claimed_by_a_pattern_is_not_claimed_twice() -> None:
    found = run_review(
        FILES, body="Implemented `gpu_layer_norm` on GPU. gpu_layer_norm launches on the device."
    )
    assert [c.subject for c in found.claims] == ["gpu_layer_norm"]


def test_a_kernel_named_by_its_entry_point_claims_the_function_that_loads_it() -> None:
    loader = """
        pub fn gpu_cumsum(x: &CudaSlice<f32>, dev: &CudaDevice) -> Result<(), GpuError> {
            let f = dev.get_func("scan", "cumsum_kernel").ok_or(GpuError::MissingKernel)?;
            unsafe { f.launch(LaunchConfig::for_num_elems(4), (x,)) }?;
            Ok(())
        }
        """
    # A commit message: its subject is the first line of the body, not a title.
    # (In `src/scan.rs` the subject "GPU scans" would name the module too: a claim of its own.)
    found = run_review({"src/prefix.rs": loader}, body="feat: GPU scans\n\n- cumsum_kernel: prefix sum\n")
    assert [(c.subject, c.backed, [f.fn.name for f in c.functions]) for c in found.claims] == [
        ("cumsum_kernel", False, ["gpu_cumsum"])  # no GPU test reaches it
    ]


def test_a_host_helper_of_a_gpu_crate_is_not_a_gpu_op() -> None:
    """ferrotorch-gpu's allocator rounds lengths on the host: naming `round_len` in a
    GPU commit's body claims nothing; a GPU op of the same crate still is claimed."""
    allocator = "pub fn round_len(len: usize) -> usize { (len + 511) / 512 * 512 }\n"
    files = {"ferrotorch-gpu/src/allocator.rs": allocator, "ferrotorch-gpu/src/kernels.rs": KERNEL}
    body = "Fresh allocations use round_len(len) on the device pool; gpu_scale keeps its kernel."
    found = run_review(files, body=body, title="gpu: allocator fixes").claims
    assert [(c.subject, c.backed) for c in found if c.line > 0] == [("gpu_scale", False)]


def test_the_meta_device_is_no_gpu_context() -> None:
    # PyTorch's meta device has shapes and no data: a title about it puts nothing on the GPU.
    found = run_review(
        FILES, body="gpu_scale gets a meta check at the top.", title="feat: meta device propagation"
    )
    assert found.claims == []
    found = run_review(FILES, body="gpu_scale gets a check at the top.", title="feat: device propagation")
    assert [c.subject for c in found.claims] == ["gpu_scale"]


def test_a_kernel_of_the_host_is_no_gpu_context() -> None:
    # A sentence that puts its kernel on the host (a CPU target, the host) and names no
    # device speaks of host code, whatever the changed functions it names.
    for body in (
        "gpu_scale with Target::CpuC now compiles C source and runs the native kernel.",
        "gpu_scale now runs the native kernel on the host.",
    ):
        assert run_review(FILES, body=body, title="feat(jit): compile caching").claims == []
    found = run_review(
        FILES, body="gpu_scale now runs the native kernel.", title="feat(jit): compile caching"
    )
    assert [c.subject for c in found.claims] == ["gpu_scale"]


def test_an_accessor_of_a_gpu_type_is_no_gpu_op() -> None:
    # "for alloc_len" names a field that a one-line accessor returns: no GPU work.
    buffer = "impl CudaBuffer {\n    pub fn alloc_len(&self) -> usize {\n        self.alloc_len\n    }\n}\n"
    files = {**FILES, "gpu/src/buffer.rs": buffer}
    body = "GPU allocator (2 fixes):\n- Fresh allocations use round_len(len) for alloc_len\n"
    assert run_review(files, body=body, title="fix: allocator QA").claims == []
