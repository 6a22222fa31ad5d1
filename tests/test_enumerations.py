"""Claims by enumeration: each op a sentence about GPU work lists is a claim of its
own; the functions a generator macro defines and the kernel sources a diff changes
are part of what claims resolve to."""

from __future__ import annotations

import textwrap

import pytest

from app.checks.enumerations import enumerated_subjects
from app.checks.review import review
from app.checks.rust_index import extract
from app.checks.workspace import SourceFile
from app.config import RepoConfig
from tests.conftest import run_review
from tests.test_review import GPU_TEST, KERNEL

FILES = {"src/lib.rs": KERNEL + KERNEL.replace("gpu_scale", "gpu_shift"), "tests/gpu.rs": GPU_TEST}


def claimed(body: str, title: str = "") -> dict[str, bool]:
    return {c.subject: c.backed for c in run_review(FILES, body=body, title=title).claims}


def test_a_list_after_a_head_of_done_gpu_work_claims_every_item() -> None:
    # scale has a GPU test, shift has none, and nothing the diff changes is a roll.
    found = claimed("Added GPU kernels for three more ops: scale, shift, and roll.")
    assert found == {"scale": True, "shift": False, "roll": False}


@pytest.mark.parametrize(
    "body",
    [
        "Vectorised loads on the GPU now for scale/shift/roll.",
        "All of scale, shift and roll now handle GPU tensors.",
        "Elementwise ops (scale, shift, roll) with GPU dispatch.",
    ],
)
def test_a_list_in_running_text_claims_the_items_that_name_changed_functions(body: str) -> None:
    assert claimed(body) == {"scale": True, "shift": False}


@pytest.mark.parametrize(
    "body",
    [
        "Added GPU kernels for these ops: no scale, shift or roll yet.",
        "scale/shift/roll were computed on the CPU before this change.",
        "Composed on the GPU via device-resident scale / shift / roll calls.",
        "The scale/shift/roll API of the GPU module is unchanged in shape.",
        "Tests for scale, shift and roll on the GPU.",
        "Length guards in gpu_scale_, gpu_shift_ and gpu_roll_ on the GPU.",  # families, and guards
        "The GPU ops' unwrap sites in scale, shift and roll now return errors.",
        "gpu_apply<R>(scale, shift, roll) -> Tensor dispatches the GPU kernel.",  # a signature's parameters
        "Vectorizable scale/shift/roll kernels replace scalar libm calls.",  # host code
        "Dedicated scale/shift/roll SIMD kernels in simd/portable.rs.",  # the CPU's vector units
        "GpuMode::{scale, shift, roll} typed wrapper over the driver's modes.",  # a type's variants
        "GpuGuard RAII type with scale / shift / roll on the GPU stream.",  # a type's methods
        "GPU pool statistics tracking (scale, shift, roll, hits/misses).",  # a record's fields
        # A list that runs on from phrases before it: the GPU word is one item's.
        "Wave 4 — attention GPU, gradient scale, shift, roll.",
        # Two items: a comma inside a parenthetical separates none of the list's.
        "Builds with the system compiler (gcc, or clang), scale it, then the GPU kernel.",
    ],
)
def test_lists_of_means_interfaces_negations_and_history_claim_nothing(body: str) -> None:
    assert claimed(body) == {}


def test_the_places_code_runs_from_are_no_ops() -> None:
    text = "This drops the GPU lock and puts `#[gpu_guard]` on tests, examples and benchmarks."
    assert enumerated_subjects(text, head_about_gpu=True) == []


def test_the_scopes_of_a_conventional_commit_are_no_list() -> None:
    # The title's topic is its claim; the scopes are not a list of ops.
    assert set(claimed("", title="feat(gpu,scale,shift): faster PTX kernel cache")) == {"PTX cache"}


def test_an_item_must_be_a_whole_word_of_the_function_name() -> None:
    # "shift" is not a word of gpu_upshifted: the running-text list resolves nothing.
    files = {"src/lib.rs": KERNEL.replace("gpu_scale", "gpu_upshifted")}
    assert {
        c.subject for c in run_review(files, body="Faster shift/roll/pad in the GPU module.").claims
    } == set()


GENERATED = """
    #[cube(launch)]
    fn kernel_div(a: &Array<f32>, b: &Array<f32>, out: &mut Array<f32>) {
        out[ABSOLUTE_POS] = a[ABSOLUTE_POS] / b[ABSOLUTE_POS];
    }
    define_binary_runner!(run_div, kernel_div);
    define_portable_binary!(portable_div, run_div);
    """
GENERATED_TEST = """
    #[test]
    fn portable_div_runs_on_gpu() {
        let device = WgpuDevice::default();
        let out = portable_div(&a, &b, &device).unwrap();
    }
    """


def test_functions_a_generator_macro_defines_are_in_the_call_graph() -> None:
    names = [fn.name for fn in extract(textwrap.dedent(GENERATED).encode()).functions]
    assert names == ["kernel_div", "run_div", "portable_div"]
    files = {"src/kernels.rs": GENERATED, "tests/wgpu.rs": GENERATED_TEST}
    # The test calls portable_div, which no `fn` defines; through the macros it
    # reaches the kernel, so the claim is backed.
    assert [
        (c.subject, c.backed) for c in run_review(files, body="kernel_div is a CubeCL kernel.").claims
    ] == [("kernel_div", True)]


PTX_SOURCE = """
    const LOG_F64_PTX: &str = "
    .version 7.0
    .entry log_f64_kernel() { ret; }
    ";

    pub fn gpu_log_f64(x: &CudaSlice<f64>, dev: &CudaDevice) -> Result<(), GpuError> {
        let f = dev.load_ptx(LOG_F64_PTX, "log_f64_kernel").ok_or(GpuError::MissingKernel)?;
        unsafe { f.launch(LaunchConfig::for_num_elems(x.len() as u32), (x,)) }?;
        Ok(())
    }
    """


def test_a_changed_kernel_source_changes_the_functions_that_launch_it() -> None:
    # The diff touches only the PTX text; the claim naming it is judged on gpu_log_f64.
    source = SourceFile("src/kernels.rs", extract(textwrap.dedent(PTX_SOURCE).encode()))
    result = review(
        [source], RepoConfig(), {"src/kernels.rs": frozenset({3})}, "", "Implemented LOG_F64_PTX on the GPU."
    )
    assert [(c.subject, [f.fn.name for f in c.functions]) for c in result.claims] == [
        ("LOG_F64_PTX", ["gpu_log_f64"])
    ]
    assert [a.function.fn.name for a in result.answers] == ["gpu_log_f64"]
    untouched = review(
        [source], RepoConfig(), {"src/kernels.rs": frozenset({20})}, "", "Implemented LOG_F64_PTX on the GPU."
    )
    assert [c.functions for c in untouched.claims] == [[]]  # unverifiable: the diff changed no kernel


def test_an_item_of_a_kernel_list_may_name_its_kernel_in_words() -> None:
    body = "Activation GPU kernels (2 new PTX kernels):\n\n- Scale forward (one pass)\n- Roll forward + backward\n"
    # "Scale" names the changed gpu_scale; nothing the diff changes is a roll, and an
    # item in words claims only what it names.
    assert claimed(body) == {"Scale": True}


def test_a_nested_parenthetical_is_part_of_its_item() -> None:
    found = claimed("Added GPU kernels for three more ops: scale, roll, and shift (as x + (1 - exp(-y))).")
    assert found == {"scale": True, "roll": False, "shift": False}


DEVICE_TESTS = """
    fn scale_checks(device: &Device) -> Result<()> {
        let dev = CudaDevice::new(0).expect("a CUDA device");
        let x = dev.htod_copy(vec![1.0f32; 4]).unwrap();
        gpu_scale(&x, &dev)
    }
    test_device!(scale_checks, scale_checks_cpu, scale_checks_gpu, scale_checks_metal);
    impl_op!(scale_checks, scale_checks_twice);
    """


def test_a_test_macro_over_a_function_generates_the_tests_it_names() -> None:
    names = [(fn.name, fn.attrs) for fn in extract(textwrap.dedent(DEVICE_TESTS).encode()).functions]
    # test_device! writes the three tests, each calling scale_checks; impl_op! over an
    # existing function is a macro of unknown meaning and adds nothing.
    assert names == [
        ("scale_checks", ()),
        ("scale_checks_cpu", ("#[test]",)),
        ("scale_checks_gpu", ("#[test]",)),
        ("scale_checks_metal", ("#[test]",)),
    ]
    files = {"src/lib.rs": KERNEL, "tests/ops.rs": DEVICE_TESTS}
    assert [
        (c.subject, c.backed) for c in run_review(files, body="Implemented scale on the GPU.").claims
    ] == [("scale", True)]


@pytest.mark.parametrize("failure", ["GPU panic", "GPU crashes", "CUDA panics"])
def test_fixing_a_gpu_panic_of_listed_ops_claims_each_op(failure: str) -> None:
    # "Fix X GPU panic" says X now works on the GPU, as "Fix X GPU crashes" does.
    assert claimed(f"Core:\n- Fix in-place ops (scale, shift, roll) {failure}\n") == {
        "scale": True,
        "shift": False,
    }


def test_a_panic_of_the_host_is_no_gpu_work() -> None:
    assert claimed("Core:\n- Fix scale, shift and roll panics on empty input\n") == {}


def test_an_item_that_names_a_member_of_a_counted_head_before_a_colon_claims_it() -> None:
    body = (
        "Ops refactored (2 ops now GPU-native):\n- scale: one mul per element\n- shift: one add per element\n"
    )
    assert claimed(body, title="GPU op pass") == {"scale": True, "shift": False}


def test_a_listed_host_helper_in_a_gpu_crate_is_no_gpu_op() -> None:
    helpers = "pub fn pool_take(len: usize) -> usize { len * 4 }\npub fn pool_return(len: usize) -> usize { len / 4 }\n"
    files = {"gpu/src/pool.rs": helpers}
    body = "GPU allocator (2 fixes):\n- Consistent byte_size computation in pool_take/pool_return\n"
    assert run_review(files, body=body, title="fix: allocator QA").claims == []


def test_a_listed_function_of_a_cpu_backend_is_no_gpu_op() -> None:
    # The only GPU word is "kernels", the CPU backend's own; its ops do no GPU work.
    ops = "".join(
        f"pub fn {op}(x: &[i64]) -> Vec<i64> {{ x.to_vec() }}\n" for op in ("gather", "select", "scatter")
    )
    body = "gather, select and scatter each carried an assert that contradicted what the kernels accept."
    assert run_review({"flex/src/int.rs": ops}, body=body, title="Drop the I64 asserts").claims == []
    # Under a device word the same names are the ops claimed, and they do no GPU work.
    on_the_gpu = "gather, select and scatter now keep their GPU storage."
    claims = run_review({"flex/src/int.rs": ops}, body=on_the_gpu, title="Drop the I64 asserts").claims
    assert {c.subject: c.backed for c in claims} == {"gather": False, "select": False, "scatter": False}


def test_only_a_type_named_in_camel_case_has_the_methods_listed_after_its_with() -> None:
    # "CudaEventWrapper with record/sync/query" lists a type's methods; "GPU loads with
    # add/sub/mul" lists the ops that got them.
    assert enumerated_subjects("CUDA events: CudaEventWrapper with record/sync/query", False) == []
    found = enumerated_subjects("Added vec4 GPU loads with add/sub/mul", False)
    assert [name for name, _ in found] == ["add", "sub", "mul"]


def test_a_slash_list_within_a_phrase_of_an_aside_names_variants_not_ops() -> None:
    # mistral.rs 7d8fa17140: the aside details the GDN kernels; "scalar/warp/chunked" are
    # kinds of prefill recurrence and "update/full" of causal conv, not ops of their own.
    gdn = (
        "GDN CUDA kernels (decode recurrence, scalar/warp/chunked prefill recurrence, causal conv "
        "update/full) now take an optional per-batch slot table."
    )
    assert enumerated_subjects(gdn, False) == []
    # A slash list that is the whole aside, or one outside any aside, lists ops.
    found = enumerated_subjects("New GPU kernels (add/sub/mul) on cuda.", False)
    assert [name for name, _ in found] == ["add", "sub", "mul"]
    found = enumerated_subjects("Vectorised GPU loads for add/sub/mul kernels.", False)
    assert [name for name, _ in found] == ["add", "sub", "mul"]


def test_a_count_of_gpu_fixes_then_their_names_claims_each() -> None:
    # candle's "Fix two cuda bugs (matmul and where_cond)": two claims, the one whose
    # function the diff does not change among them.
    assert enumerated_subjects("Fix two cuda bugs (matmul and where_cond).", False) == [
        ("matmul", False),
        ("where_cond", False),
    ]
    assert enumerated_subjects("Fix 3 metal bugs (gather, scatter & index_add)", False) == [
        ("gather", False),
        ("scatter", False),
        ("index_add", False),
    ]
    found = run_review(
        {"cuda/src/scale.rs": KERNEL, "tests/gpu.rs": GPU_TEST},
        body="",
        title="Fix two cuda bugs (matmul and scale)",
    )
    assert [(c.subject, c.backed) for c in found.claims] == [("matmul", False), ("scale", True)]
    assert enumerated_subjects("Fix two bugs (matmul and where_cond).", False) == []  # of no GPU
    # ferrotorch's verification debt: the kernels a sweep touched, no claim of each.
    debt = "The other 3 sibling CUDA kernels (mish, log) remain pending phase 2.5 verification."
    assert enumerated_subjects(debt, False) == []
