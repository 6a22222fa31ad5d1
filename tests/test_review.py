"""Holding the PR description to its diff: claims, phrasings, gap reports, the hostile
reviewer, and `gpuproof review` on a real git checkout."""

from __future__ import annotations

import json
import os
import subprocess
import textwrap
from pathlib import Path

import pytest

from app.checks import gpu_code
from app.checks.claims import Claim, answer_questions
from app.checks.gpu_tests import is_gpu_test
from app.checks.prose import sentences, words
from app.checks.review import review
from app.checks.rust_index import extract
from app.checks.workspace import SourceFile, Workspace
from app.cli import main
from app.config import RepoConfig
from app.diff import moved_lines, touched_lines
from app.report.checkrun import GITHUB_TEXT_LIMIT, fit, render
from tests.conftest import run_review

KERNEL = """
    pub fn gpu_scale(x: &CudaSlice<f32>, dev: &CudaDevice) -> Result<(), GpuError> {
        let f = dev.get_func("k", "scale").ok_or(GpuError::MissingKernel)?;
        unsafe { f.launch(LaunchConfig::for_num_elems(x.len() as u32), (x,)) }?;
        Ok(())
    }
    """
GPU_TEST = """
    #[test]
    fn scale_on_cuda() {
        let dev = CudaDevice::new(0).expect("this test needs a CUDA device");
        let x = dev.htod_copy(vec![1.0f32; 4]).unwrap();
        gpu_scale(&x, &dev).unwrap();
    }
    """
FAKE_LAYER_NORM = """
    pub fn gpu_layer_norm(x: &CudaBuffer<f32>, dev: &GpuDevice) -> GpuResult<CudaBuffer<f32>> {
        let host = gpu_to_cpu(x, dev)?;
        let mean = host.iter().sum::<f32>() / host.len() as f32;
        cpu_to_gpu(&host.iter().map(|v| v - mean).collect::<Vec<f32>>(), dev)
    }
    """


def claims_of(body: str, files: dict[str, str]) -> list[tuple[str, bool]]:
    return [(c.subject, c.backed) for c in run_review(files, body=body).claims]


def test_backed_claim_needs_evidence_and_a_gpu_test() -> None:
    untested = {"src/lib.rs": KERNEL}
    assert claims_of("Implemented scale on the GPU.", untested) == [("scale", False)]
    tested = {"src/lib.rs": KERNEL, "tests/gpu.rs": GPU_TEST}
    assert claims_of("Implemented scale on the GPU.", tested) == [("scale", True)]


def test_a_claim_about_dtypes_needs_a_gpu_test_that_uses_one() -> None:
    # candle's "Support for where-cond on cuda for u8 and u32": the f32 tests reach the
    # kernel, but none runs it on the dtypes claimed.
    tested_on_f32 = {"src/lib.rs": KERNEL, "tests/gpu.rs": GPU_TEST}
    (claim,) = run_review(tested_on_f32, body="", title="Support for scale on cuda for u8 and u32.").claims
    assert not claim.backed
    assert claim.missing == ["`gpu_scale` (src/lib.rs:2): no GPU test that reaches it uses u32 or u8 — 4d"]
    tested_on_u8 = {"src/lib.rs": KERNEL, "tests/gpu.rs": GPU_TEST.replace("1.0f32", "1u8")}
    (claim,) = run_review(tested_on_u8, body="", title="Support for scale on cuda for u8 and u32.").claims
    assert claim.backed, claim.missing
    # "bfloat" is bf16.
    (claim,) = run_review(tested_on_f32, body="", title="Add missing bfloat scale kernels on cuda").claims
    assert claim.missing == ["`gpu_scale` (src/lib.rs:2): no GPU test that reaches it uses bf16 — 4d"]
    # A dtype in a name (`add_f32`) is the name's, not a claim about the dtype.
    (claim,) = run_review(tested_on_u8, body="Implemented gpu_scale_f32 on the GPU.", title="").claims
    assert claim.functions and claim.backed, claim.missing


@pytest.mark.parametrize(
    ("gate", "backed"),
    [
        ('#[cfg(all(any(feature = "gpu", feature = "opencl"), not(target_os = "macos")))]', True),
        ('#[cfg(all(feature = "x", not(feature = "cuda")))]', False),  # the build without CUDA
    ],
)
def test_a_test_gated_on_a_gpu_feature_is_a_gpu_test_whatever_else_it_negates(
    gate: str, backed: bool
) -> None:
    gated_test = f"""
    #[test]
    {gate}
    fn scale_matches() {{
        let x = upload(vec![1.0f32; 4]);
        gpu_scale(&x, &default_device()).unwrap();
    }}
    """
    files = {"src/lib.rs": KERNEL, "tests/scale.rs": gated_test}
    assert claims_of("Implemented scale on the GPU.", files) == [("scale", backed)]


@pytest.mark.parametrize(
    "body",
    [
        "Implemented LayerNorm on GPU.",
        "GPU-accelerated layer norm.",
        "Ported layer_norm to CUDA",
        "Added GPU support for LayerNorm.",
        "layer norm now runs on the GPU",
        "## Summary\n- **LayerNorm** now runs on the GPU\n",
        "It is now possible to run layer norm on the GPU.",
        # A negation in an aside negates nothing the sentence claims.
        "LayerNorm (native, no host round-trip) now runs on the GPU.",
        # The library is the means of the nearest thing named, past the clauses before it.
        "Faster casts (works on old cards, no special hardware needed), and layer_norm via cuBLAS.",
        "Added a differentiable layer norm with GPU-aware backward.",
    ],
)
def test_claim_phrasings_resolve_to_the_changed_function(body: str) -> None:
    found = run_review({"src/norm.rs": FAKE_LAYER_NORM}, body=body)
    (claim,) = found.claims
    assert [f.fn.name for f in claim.functions] == ["gpu_layer_norm"]
    assert not claim.backed
    assert any("4a" in m for m in claim.missing) and any("4d" in m for m in claim.missing)
    assert "unbacked-claim" in {f.rule for f in found.description}


def test_collective_subject_resolves_to_each_member() -> None:
    files = {
        "src/reduce.rs": KERNEL.replace("gpu_scale", "gpu_sum_f64")
        + KERNEL.replace("gpu_scale", "gpu_max_f64")
        + KERNEL.replace("gpu_scale", "gpu_sum_f32"),
    }
    (claim,) = run_review(files, body="Implemented the f64 reductions on GPU.").claims
    assert sorted(f.fn.name for f in claim.functions) == ["gpu_max_f64", "gpu_sum_f64"]


def test_claim_naming_nothing_changed_is_unverifiable() -> None:
    found = run_review({"src/lib.rs": KERNEL}, body="Ported the attention block to CUDA.")
    (claim,) = found.claims
    assert claim.functions == [] and not claim.backed
    (finding,) = [f for f in found.description if f.rule == "unbacked-claim"]
    assert "unverifiable" in finding.message


@pytest.mark.parametrize(
    "body",
    [
        "This does not implement LayerNorm on GPU yet.",
        "Wrote a CPU reference + scaffolding for the GPU path of LayerNorm.",
        "Stubbed the GPU dispatch for LayerNorm and wrote a unit test that currently runs on CPU.",
        "We will port LayerNorm to CUDA in a follow-up.",
        "```\nImplemented LayerNorm on GPU\n```",
        "> Implemented LayerNorm on GPU (quoting the issue)",
        # A plan in an aside: the aside is all there is of the claim.
        "Its existing path is untouched (a follow-up could add a GPU layer norm similarly).",
        # What may be done is not done (burn's AdaptiveAvgPool3d, todo!() stubs on cubecl).
        "Native GPU kernel can be implemented in a follow-up PR.",
    ],
)
def test_negations_plans_underclaims_and_quotes_are_not_claims(body: str) -> None:
    assert claims_of(body, {"src/norm.rs": FAKE_LAYER_NORM}) == []


@pytest.mark.parametrize(
    "body",
    [
        "Softmax works on GPU when available, CPU otherwise.",
        "softmax: uses the GPU if it is available and the host otherwise",
        "On error it **falls back to the CPU**.",
        "Adds a graceful CPU fallback.",
        "If CUDA is unavailable we simply run on the host.",
        "It degrades gracefully to the CPU.",
        "Without a driver it degrades gracefully to the host.",
        "Both launchers keep CPU-fallback paths for when the build fails.",
        "Detours: only the usual PTX-compile-failure fallback.",
        "On a launch error it falls through to a new norm_cpu helper.",
        "Unsupported shapes fall back to the existing reference path.",
        "Routes f32 to the kernel; the reference implementation otherwise.",
        "Automatic fallback to the host for non-mesh backends.",
        # A limitation without a next step is a fallback presented as the behaviour.
        "With grouped configurations the dispatch falls through to the CPU.",
        # A next step does not excuse a fallback on a missing device.
        "If the GPU is unavailable it falls back to the CPU. Follow-up: #12.",
        "gpu_scale keeps its CPU round-trip fallbacks if the module fails to load.",
        "It's a CPU fallback, isn't it?",  # apostrophes quote nothing
        "Softmax gets a graceful fallback when the kernel fails to build.",  # the kernel's
        # burn-tch's MPS workaround: the host round trip offered as the fix.
        "Works around the MPS error by performing scale operations on CPU and transferring results back to MPS.",
    ],
)
def test_forbidden_phrasings_are_flagged(body: str) -> None:
    # The fallback the description announces is GPU work left undone: a gap report is due.
    found = run_review({"src/lib.rs": KERNEL}, body=body).description
    assert sorted(f.rule for f in found) == ["forbidden-phrasing", "missing-gap-report"]
    reported = f"{body}\nWhat does not work yet: the fallback stays. Next step: #12 removes it."
    found = run_review({"src/lib.rs": KERNEL}, body=reported).description
    assert "missing-gap-report" not in {f.rule for f in found}


def test_best_effort_support_is_both_a_forbidden_phrasing_and_a_claim() -> None:
    # The claim names nothing the diff changes: unbacked, so the gap report is due too.
    found = run_review({"src/lib.rs": KERNEL}, body="Best-effort CUDA support for softmax.").description
    assert sorted(f.rule for f in found) == ["forbidden-phrasing", "missing-gap-report", "unbacked-claim"]


@pytest.mark.parametrize(
    "body",
    [
        "Removed silent CPU fallback in softmax; now returns Err(GpuError::PtxCompileFailed).",
        "Softmax no longer falls back to the CPU.",
        "Implemented softmax on GPU; opt-in CPU fallback gated by FERROTORCH_ENABLE_GPU_FALLBACK, "
        "logs tracing::warn! per fallback.",
        "```rust\n// falls back to the CPU\n```",
        "> the old code fell back to the CPU",
        "Instead of falling back to the CPU, it returns an error.",
        "No PTX-compile-failure fallback: a build error is returned.",
        "It no longer falls back to the reference path.",
        "Fixes the kernel bug that caused a silent CPU fallback.",
        "The example refuses CPU fallback on a build without cuda.",
        "The test returns early when the GPU is absent (no panic on CPU-only CI).",
        "GELU erf backward fell back to CPU for all modes; added a fused PTX kernel.",  # history
        "The reduction was falling back to the host before this change.",
        "apply_sgd falls through to the existing CPU path when param.is_cpu().",  # CPU inputs
        "gpu_add tries the vec4 kernel first, with automatic fallback to the scalar kernel.",
        "Ring allreduce, with automatic fallback to star topology for non-mesh backends.",
        # A fallback of something that is neither the GPU nor the host.
        "Phase 12's graceful fallback in conformance_tests.rs simplified back to direct fvec().",
        # A limitation stated as a gap, with its next step: a gap report, not a phrasing.
        "With grouped or dilated configurations, the dispatch falls through to the CPU "
        "implementation. Wiring groups through gpu_conv2d is tracked as #1003.",
        "Object / Array inners return None so the caller falls through to CPU.\n\n"
        "Stage 5 follow-on: Object and Array on the GPU.",
        # A fallback for CPU inputs is not a fallback to the CPU.
        "The CPU-input fallback continues to use run_matmul.",
        # A phrasing in quotation marks is named, not said.
        'The checker now catches the wording "graceful CPU fallback" in titles.',
        "The rule now flags 'graceful CPU fallback' wording.",
        # The fallback named to say it falls short, in a change that removes it.
        "This addresses maintainer feedback that the CPU fallback doesn't fully close issue #4832.",
        # The round trip the change removes.
        "No longer runs scale on the CPU and copies the result back to the GPU.",
        # The caller opts in by asking for a mode whose name says the CPU.
        'runtime_for_name("gpu-or-cpu") does the same lookup, but falls through to the `default` CPU runtime.',
    ],
)
def test_negations_allowed_vocabulary_code_and_quotes_are_not_flagged(body: str) -> None:
    found = run_review({"src/lib.rs": KERNEL}, body=body).description
    assert [f.rule for f in found if f.rule == "forbidden-phrasing"] == []


def test_gap_report_required_for_incomplete_work() -> None:
    stub = """
        pub fn gpu_cumsum(x: &CudaSlice<f32>) -> Result<CudaSlice<f32>, GpuError> {
            Err(GpuError::Unsupported { op: "cumsum", device: "cuda" })
        }
        """
    silent = run_review({"src/scan.rs": stub}, body="Add the cumsum op.").description
    assert [f.rule for f in silent] == ["missing-gap-report"]
    assert 'structured "unsupported" error' in silent[0].message
    for report in (
        "Add cumsum.\n\n## What works\nThe API.\n## What does not work yet\nCUDA tensors.\n"
        "## Next step\nA scan kernel.",
        # burn's AdaptiveAvgPool3d: "doesn't yet" says what does not work, in a sentence.
        "Add cumsum. CUDA returns an error since the scan library doesn't yet support it. "
        "A native GPU kernel can come in a follow-up PR.",
    ):
        assert run_review({"src/scan.rs": stub}, body=report).description == [], report


@pytest.mark.parametrize(
    ("title", "reported"),
    [
        # The number a squash merge appends is the pull request's own, and a merge
        # commit's title names its own pull request: neither is a follow-up.
        ("Add the missing cumsum kernel (#2203)", False),
        ("Merge pull request #22 from dev/missing-cumsum", False),
        ("Add the cumsum op; the missing kernel is tracked in #2204", True),
    ],
)
def test_the_pull_requests_own_number_is_no_next_step(title: str, reported: bool) -> None:
    stub = """
        pub fn gpu_cumsum(x: &CudaSlice<f32>) -> Result<CudaSlice<f32>, GpuError> {
            Err(GpuError::Unsupported { op: "cumsum", device: "cuda" })
        }
        """
    found = run_review({"src/scan.rs": stub}, body="", title=title).description
    assert ("missing-gap-report" not in {f.rule for f in found}) is reported, found


def test_a_cpu_implementation_is_a_gap_unless_the_change_is_about_the_host() -> None:
    cpu_twin = "pub fn cpu_scale(x: &[f32]) -> Vec<f32> { x.iter().map(|v| v * 2.0).collect() }\n"
    gaps = {
        title: [f.rule for f in run_review({"src/cpu.rs": cpu_twin}, body="", title=title).description]
        for title in ("Scale", "Feature/cpu scale")
    }
    assert gaps == {"Scale": ["missing-gap-report"], "Feature/cpu scale": []}


@pytest.mark.parametrize("with_gpu_twin", [False, True])
def test_the_host_method_of_an_op_the_gpu_also_runs_is_no_cpu_reference_left_for_it(
    with_gpu_twin: bool,
) -> None:
    # candle's CustomOp: `cpu_fwd` beside `cuda_fwd` is the host's share of the op.
    cuda_fwd = """
            fn cuda_fwd(&self, x: &CudaSlice<f32>, dev: &CudaDevice) -> Result<(), GpuError> {
                let f = dev.get_func("rope", "rope_thd").ok_or(GpuError::MissingKernel)?;
                unsafe { f.launch(LaunchConfig::for_num_elems(x.len() as u32), (x,)) }?;
                Ok(())
            }
    """
    op = f"""
        pub struct RotaryEmbThd;
        impl RotaryEmbThd {{
            fn cpu_fwd(&self, x: &[f32]) -> Vec<f32> {{ x.iter().map(|v| v * 2.0).collect() }}
            {cuda_fwd if with_gpu_twin else ""}
        }}
    """
    found = run_review({"src/rope.rs": op}, body="", title="Add the rope THD op").description
    assert any("CPU-only reference" in f.message for f in found) is not with_gpu_twin


@pytest.mark.parametrize("stub_written", [False, True])
def test_only_a_stub_the_diff_writes_is_its_gap(stub_written: bool) -> None:
    code = textwrap.dedent(
        """\
        pub fn gpu_scale(x: &CudaSlice<f32>, dev: &CudaDevice) -> Result<(), GpuError> {
            let f = dev.get_func("k", "scale").ok_or(GpuError::MissingKernel)?;
            // TODO: the f64 kernel
            unsafe { f.launch(LaunchConfig::for_num_elems(x.len() as u32), (x,)) }?;
            Ok(())
        }
        """
    )
    sources = [
        SourceFile("src/lib.rs", extract(code.encode())),
        SourceFile("tests/gpu.rs", extract(GPU_TEST.encode())),
    ]
    # The diff changes the launch; the TODO above it is old unless the diff writes it too.
    touched = {"src/lib.rs": frozenset({3, 4} if stub_written else {4})}
    found = review(sources, RepoConfig(), touched, "Launch scale with the element count", "").description
    assert ("missing-gap-report" in {f.rule for f in found}) is stub_written


def test_hostile_reviewer_answers_from_the_code_and_marks_the_unanswered() -> None:
    found = run_review({"src/lib.rs": KERNEL + FAKE_LAYER_NORM, "tests/gpu.rs": GPU_TEST}, body="")
    answers = {a.function.fn.name: a for a in found.answers}
    scale = answers["gpu_scale"]
    assert "launch(" in scale.kernel_launch and "src/lib.rs:4" in scale.kernel_launch
    assert "scale_on_cuda" in scale.gpu_test and "tests/gpu.rs" in scale.gpu_test
    assert "htod_copy" in scale.device_memory
    assert scale.without_gpu.startswith("no:")
    norm = answers["gpu_layer_norm"]
    assert norm.kernel_launch == "" and norm.gpu_test == ""
    summary = render(found)["checks"][1]["summary"]
    assert "The hostile reviewer (spec 4e)" in summary and "**unanswered**" in summary


def test_a_test_named_like_the_op_is_not_the_op_a_gpu_test_calls() -> None:
    """candle's flash-attention test calls `candle_nn::ops::softmax` on CUDA; the CPU test
    `fn softmax` of `tests/ops.rs` calls the changed CUDA softmax. Nothing calls a
    `#[test]`, so the GPU test does not reach the changed code through it: the claim
    lacks a GPU test, and the hostile reviewer names none."""
    ops = """
        pub fn softmax_last_dim(x: &CudaSlice<f32>, dev: &CudaDevice) -> Result<(), GpuError> {
            let f = dev.get_func("k", "softmax").ok_or(GpuError::MissingKernel)?;
            unsafe { f.launch(LaunchConfig::for_num_elems(x.len() as u32), (x,)) }?;
            Ok(())
        }
        pub fn softmax(x: &Tensor) -> Tensor { x.exp() }
        """
    cpu_test = """
        #[test]
        fn softmax() {
            let dev = test_device();
            softmax_last_dim(&dev.alloc(4), &dev).unwrap();
        }
        """
    gpu_test = """
        #[test]
        fn flash_attn_on_cuda() {
            let dev = CudaDevice::new(0).expect("this test needs a CUDA device");
            let x = Tensor::ones(4, &dev);
            candle_nn::ops::softmax(&x);
        }
        """
    files = {"nn/src/ops.rs": ops, "nn/tests/ops.rs": cpu_test, "flash-attn/tests/flash.rs": gpu_test}
    found = run_review(files, body="Softmax implementation for cuda: softmax_last_dim now runs on the GPU.")
    (claim,) = found.claims
    assert not claim.backed and any("no GPU test reaches it" in m for m in claim.missing)
    answers = {a.function.fn.name: a for a in found.answers}
    assert answers["softmax_last_dim"].gpu_test == ""
    # Called by a GPU test, the same op is exercised, and the reviewer says by which.
    files["flash-attn/tests/flash.rs"] = gpu_test.replace(
        "candle_nn::ops::softmax(&x);", "softmax_last_dim(&x, &dev);"
    )
    found = run_review(files, body="Softmax implementation for cuda: softmax_last_dim now runs on the GPU.")
    assert [c.backed for c in found.claims] == [True]
    assert "flash_attn_on_cuda" in {a.function.fn.name: a for a in found.answers}["softmax_last_dim"].gpu_test


def test_disabled_test_is_said_to_pass_without_a_gpu() -> None:
    skipping = GPU_TEST.replace(
        'let dev = CudaDevice::new(0).expect("this test needs a CUDA device");',
        "let Ok(dev) = CudaDevice::new(0) else { return; };",
    )
    found = run_review({"src/lib.rs": KERNEL, "tests/gpu.rs": skipping}, body="")
    (answers,) = found.answers
    assert answers.without_gpu.startswith("yes, and then it tests nothing")


def test_sentences_drop_code_quotes_comments_and_keep_lines() -> None:
    body = "First line.\n\n```\ncode here\n```\n> quoted\n<!-- hidden -->\n- bullet `inline` item\n"
    said = sentences("The title", body)
    assert [(s.text, s.line) for s in said] == [("The title", 0), ("First line.", 1), ("bullet item", 8)]


def test_sentences_drop_rust_pasted_without_a_fence() -> None:
    # candle 0374ff326b: an example pasted into a commit message without a code fence.
    body = (
        "Example usage:\n"
        '    "model-00001-of-00002.safetensors",\n'
        "];\n"
        "let unet = config.build_unet_sharded(&unet_files, &device, 4, false, DType::F32)?;\n"
        'report.save_trace("./logs", Some("epoch1"), None)?;\n'
        "}\n"
        "\n"
        "Fixed the softmax kernel (see #12).\n"
    )
    said = sentences("Add build_unet_sharded", body)
    assert [(s.text, s.line) for s in said] == [
        ("Add build_unet_sharded", 0),
        ("Example usage:", 1),
        ("Fixed the softmax kernel (see #12).", 8),
    ]


def test_sentences_read_w_slash_as_with() -> None:
    # mistral.rs 1d0884d89f "fixes w/ multimodal edge cases": not a list of "w" and "multimodal".
    (said,) = sentences("Improve cuda graphs and fixes w/ multimodal edge cases, w/o host syncs", "")
    assert said.text == "Improve cuda graphs and fixes with multimodal edge cases, without host syncs"
    assert sentences("Read a/w/b paths", "")[0].text == "Read a/w/b paths"


def test_summary_is_cut_to_githubs_limit_with_a_note() -> None:
    text = "\n".join(f"| row {i} | " + "x" * 80 + " |" for i in range(2000))
    cut = fit(text)
    assert len(cut) <= GITHUB_TEXT_LIMIT
    assert cut.endswith("for the full report.") and "truncated" in cut


def git(root: Path, *args: str) -> str:
    env = {
        **os.environ,
        "GIT_AUTHOR_NAME": "t",
        "GIT_AUTHOR_EMAIL": "t@t",
        "GIT_COMMITTER_NAME": "t",
        "GIT_COMMITTER_EMAIL": "t@t",
    }
    done = subprocess.run(
        ["git", "-C", str(root), *args], check=True, capture_output=True, env=env, text=True
    )
    return done.stdout.strip()


def write(root: Path, rel: str, text: str) -> None:
    path = root / rel
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(textwrap.dedent(text))


def test_review_command_on_a_checkout(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    write(tmp_path, "src/lib.rs", KERNEL)
    git(tmp_path, "init", "-q")
    git(tmp_path, "add", ".")
    git(tmp_path, "commit", "-qm", "base")
    base = git(tmp_path, "rev-parse", "HEAD")
    # The head tries to switch off the check; the config is read from the base.
    write(tmp_path, ".github/gpuproof.yml", 'severities:\n  fake-gpu-function: "off"\n')
    write(tmp_path, "src/lib.rs", textwrap.dedent(KERNEL) + textwrap.dedent(FAKE_LAYER_NORM))
    git(tmp_path, "add", ".")
    git(tmp_path, "commit", "-qm", "Implemented LayerNorm on GPU", "-m", "Falls back to the CPU on error.")
    git(tmp_path, "checkout", "-q", base)  # the working tree is not what is reviewed

    code = main(
        [
            "review",
            "--root",
            str(tmp_path),
            "--base",
            base,
            "--head",
            "main" if git(tmp_path, "branch", "--list", "main") else "master",
            "--format",
            "json",
        ]
    )
    out = json.loads(capsys.readouterr().out)
    assert code == 1
    checks = {c["name"]: c for c in out["checks"]}
    assert set(checks) == {"gpuproof / code", "gpuproof / description"}
    code_check = checks["gpuproof / code"]
    assert code_check["conclusion"] == "failure"
    assert [a["title"] for a in code_check["annotations"]] == ["fake-gpu-function"]
    description = checks["gpuproof / description"]
    assert description["conclusion"] == "failure"
    assert [c["subject"] for c in out["claims"]] == ["LayerNorm"]
    assert [p["text"] for p in out["phrasings"]] == ["Falls back to the CPU"]
    (comment,) = out["comments"]
    assert (comment["path"], comment["rule"]) == ("src/lib.rs", "fake-gpu-function")
    assert comment["line"] == 8  # the fn line of gpu_layer_norm, which the diff added
    assert "<!-- gpuproof:finding " in comment["body"]


DEFERRED_CUMSUM = """
    pub fn gpu_cumsum(x: &CudaSlice<f32>, dev: &CudaDevice) -> Result<CudaSlice<f32>, GpuError> {
        let n = x.len();
        assert!(n > 0, "empty input");
        todo!("scan kernel for {n} elements")
    }
    """


@pytest.mark.parametrize(("new_todo", "gap_reported"), [(False, False), (True, True)])
def test_a_stub_the_diff_only_moves_was_there_before(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], new_todo: bool, gap_reported: bool
) -> None:
    # The stub moves from ops.rs to scan.rs beside a new kernel: it is no gap of this
    # change; a stub the change writes into the moved function is.
    write(tmp_path, "src/ops.rs", DEFERRED_CUMSUM)
    git(tmp_path, "init", "-q")
    git(tmp_path, "add", ".")
    git(tmp_path, "commit", "-qm", "base")
    moved = textwrap.dedent(DEFERRED_CUMSUM)
    if new_todo:
        moved = moved.replace("let n = x.len();", "let n = x.len(); // TODO: the f64 kernel")
    write(tmp_path, "src/ops.rs", "")
    write(tmp_path, "src/scan.rs", textwrap.dedent(KERNEL) + moved)
    write(tmp_path, "tests/gpu.rs", GPU_TEST)
    git(tmp_path, "add", ".")
    git(tmp_path, "commit", "-qm", "Implemented scale on the GPU.")
    main(["review", "--root", str(tmp_path), "--base", "HEAD~1", "--head", "HEAD", "--format", "json"])
    (description,) = [c for c in json.loads(capsys.readouterr().out)["checks"] if "description" in c["name"]]
    assert ("missing-gap-report" in description["summary"]) is gap_reported


def test_moved_lines_are_blocks_removed_in_one_place_and_added_in_another() -> None:
    diff = textwrap.dedent(
        """\
        --- a/src/ops.rs
        +++ b/src/ops.rs
        @@ -1,6 +1,1 @@
        -fn a() {
        -    let n = 1;
        -    todo!()
        -}
        -Ok(())
         // end
        --- a/src/scan.rs
        +++ b/src/scan.rs
        @@ -1,1 +1,7 @@
         // start
        +Ok(())
        +
        +    fn a() {
        +        let n = 1;
        +        todo!()
        +    }
        """
    )
    # the function moves, indented anew; the lone "Ok(())" only looks the same
    assert moved_lines(diff) == {"src/scan.rs": frozenset({4, 5, 6, 7})}
    assert touched_lines(diff)["src/scan.rs"] == frozenset(range(2, 8))


def test_review_body_file_and_bad_revision(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    write(tmp_path, "src/lib.rs", KERNEL)
    git(tmp_path, "init", "-q")
    git(tmp_path, "add", ".")
    git(tmp_path, "commit", "-qm", "base")
    write(tmp_path, "tests/gpu.rs", GPU_TEST)
    body = tmp_path / "body.md"
    body.write_text("Adds a GPU test for scale.\n")
    assert main(["review", "--root", str(tmp_path), "--base", "HEAD", "--body", str(body)]) == 0
    assert "gpuproof / description: success" in capsys.readouterr().out
    assert main(["review", "--root", str(tmp_path), "--base", "no-such-rev"]) == 2
    assert "git rev-parse" in capsys.readouterr().err


def test_the_code_check_counts_only_the_rust_files_of_the_change(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    write(tmp_path, "src/lib.rs", KERNEL)
    git(tmp_path, "init", "-q")
    git(tmp_path, "add", ".")
    git(tmp_path, "commit", "-qm", "base")
    write(tmp_path, "README.md", "# docs\n")
    write(tmp_path, "Cargo.toml", "[package]\nname = 'k'\n")
    git(tmp_path, "add", ".")  # the working tree against the base, new files included
    assert main(["review", "--root", str(tmp_path), "--base", "HEAD", "--format", "json"]) == 0
    (code_check,) = [
        c for c in json.loads(capsys.readouterr().out)["checks"] if c["name"] == "gpuproof / code"
    ]
    assert (code_check["conclusion"], code_check["title"]) == ("neutral", "No Rust code in this change")
    assert "Rust files only" in code_check["summary"]
    write(tmp_path, "tests/gpu.rs", GPU_TEST)
    git(tmp_path, "add", ".")
    assert main(["review", "--root", str(tmp_path), "--base", "HEAD", "--format", "json"]) == 0
    (code_check,) = [
        c for c in json.loads(capsys.readouterr().out)["checks"] if c["name"] == "gpuproof / code"
    ]
    assert code_check["conclusion"] == "success"
    assert "1 changed Rust file(s) checked" in code_check["summary"]


@pytest.mark.parametrize(
    ("title", "body", "subjects"),
    [
        ("elementwise kernels", "GPU kernels:\n\n- `gpu_scale`\n", ["gpu_scale"]),
        ("feat(gpu): CUDA kernel for scale", "", ["scale"]),
        ("scale", "The scale op has been ported over to CUDA.", ["scale"]),
        ("scale on GPU", "", ["scale"]),  # a soft shape, kept because it resolves
        ("attention on GPU", "", ["attention"]),  # a GPU title naming nothing: the diff's GPU code
        ("", "Attention on GPU.", []),  # the same soft shape in the body names nothing changed: dropped
        ("", "Moved the GPU tensors to the CPU before reading them.", []),
        ("Move scale onto the device", "", ["scale"]),
        ("", "Scale is now computed by a hand-written PTX kernel (`gpu_scale`).", ["Scale"]),
        ("", "Scale is now a CubeCL kernel.", ["Scale"]),
        ("fix: proper GPU kernels for scale and gather [CL-1]", "", ["scale", "gather"]),
        ("fix: GPU-native scale — eliminate CPU round-trip in backward", "", ["scale"]),
        ("feat(scale): GPU-aware path", "", ["scale"]),
        # A soft shape: "gather" names nothing the diff changes, so only "scale" stays.
        ("feat(ops): GPU-aware fast paths for scale/gather [CL-2]", "", ["scale"]),
        ("fix(ops): migrate transforms.rs to device-resident ops", "", ["transforms.rs"]),
        ("", "All indexing ops now keep tensors on-device.", ["indexing"]),
        ("feat: native CUDA path for scale forward + backward", "", ["scale", "scale backward"]),
        ("", "Add a GPU CI job that runs the tests on the self-hosted runner.", []),  # tooling, not an op
        ("", "The loader wraps output as device-resident Tensor.", []),  # ends in a preposition
        ("", "Add GPU kernels for scale (f32), shift and gather.", ["scale", "shift", "gather"]),
        ("feat(gpu): native PTX gather/shift + Tensor::scale", "", ["gather", "shift", "Tensor::scale"]),
        # each item of a title's list is tried on its own; a soft one stays when it resolves
        ("feat(gpu): gather PTX kernel + scale() GPU path [CL-3]", "", ["scale"]),
        ("feat(gpu,nn): scale kernels, loader cleanup", "", ["scale"]),
        ("feat(optim): foreach (on-device) update path for scale", "", ["scale"]),
        ("", "Hand-written PTX for scale (mul.f32) and gather (ld.global).", ["scale", "gather"]),
        ("", "Wired through the existing module_cache::get_or_compile PTX path.", []),
        ("", "Intro.\n\n--- feat: GPU scale (CL-4) ---\n\nDetails.\n", ["scale"]),  # a framed heading
        ("", "The update is expressed via device-resident scale on the flat tensor.", []),  # a means
        ("feat: wire CUDA scale into the dispatch table", "", ["scale"]),  # the subject ends at "into"
        ("feat: add GPU dispatch for scale, shift and gather", "", ["scale", "shift", "gather"]),
        ("", "scale(): GPU dispatch via scale_f32 for f32 tensors.", ["scale"]),
        # terse merge titles: the PR number is no part of the sentence
        ("Scale implementation for cuda. (#747)", "", ["Scale"]),
        ("", "Efficient implementation of `scale()` for `metal` (#2512)", ["scale"]),
        ("fix: add missing gpu scale_* (#996)", "", ["scale_*"]),
        ("Add the scale kernels.", "", ["scale"]),
        ("", "Add the gather kernels.", []),  # "kernels" alone is a soft shape: gather is not changed
        ("", "Add a test for the fast CPU kernel.", []),
        ("Fast kernels.", "* Scale cuda bindings.\n* Metal kernel (part 1).", ["Scale"]),
        ("", "Replaced with the device-aware path which uses scale_* kernels on GPU.", []),
        ("", "Use the slow implementation on cuda.", []),  # a choice of path, not an op
        ("Scale kernel from CPA to CubeCL (#2169)", "", ["Scale"]),
        ("feat: cubecl scale kernel (#4242)", "", ["scale"]),
        ("Feat/wgpu/scale (#1068)", "", ["scale"]),
        ("Scale for wgpu backend", "", ["Scale"]),
        ("Add cubecl scale kernels", "", ["scale"]),
        ("", "Add the metal kernels.", []),  # a backend is no subject
        ("", "Add the cuda kernel impl.", []),
        ("Fix non-cuda scale", "", []),  # a fix for the builds without the GPU
        ("Mistral fix", "* Fix when running on the gpu.", []),  # the case a fix is for names nothing
        ("Add the where kernels.", "", ["where"]),  # `where_cond`: an op, not a case
        ("Infer convolution kernel shape from weight", "", []),  # a convolution's kernel: its weights
        ("Fix Conv1d kernel for ONNX importing", "", []),  # importing a model is host work
        ("Housekeeping", "* Make the cuda kernels build with max sm_90 capability", []),  # a build setting
        ("fix(flash-attn): add -fPIC on non-MSVC targets", "", []),  # a compiler flag
        ("Housekeeping", "* Add build.rs to avoid metal kernel jit compile overhead", []),  # a build script
        ("fix(windows): Fix windows builds and cuDNN discovery", "", []),  # the build, not the op
        ("Add GB10 gpu runner", "", []),  # a CI machine
        ("feat(cuda): update cutlass git revision", "", []),  # a dependency's pinned commit
        ("Handle xcode 26+ default metal standard", "", []),  # the toolchain's language version
        ("[Cuda] Use upstream bindgen_cuda crate", "", []),  # a dependency's release
        ("Fix cuda build again", "", []),  # the build, not the op
        ("Use cudaforge for kernel build (#1856)", "", []),  # the tool that builds kernels
        ("Fix nccl blocking case (#1228)", "", ["nccl blocking case"]),  # NCCL's collectives run on GPUs
        ("nccl: update bindings to 2.28.3", "", []),  # upkeep after a scope's label
        ("Housekeeping", "* add cuda scale fuzzer in honggfuzz", []),  # a fuzzer is a test
        ("Housekeeping", "* Fix tests on metal", []),  # the tests', like "Fix metal tests"
        ("Fix cubecl std usage", "", []),  # the standard library a build links
        ("Housekeeping", "* Add better backend support for flashinfer", ["flashinfer"]),  # CUDA kernels
        ("Housekeeping", "* Add a notice for wgpu", []),  # a message to the user
        ("Fix/ci autotune", "* Fix f16 vulkan tolerances", []),  # how close a test's results must be
        ("Add some metal scale benchark.", "", []),  # a benchmark, misspelled
        ("Housekeeping", "* run selected benchmarks + add cuda backend in benches", []),  # a benchmark's
        ("Activate scale on cuda and add benchmark (#1543)", "", ["scale"]),  # the upkeep after
        ("Refactor/cuda/scale (#1068)", "", []),  # a refactor's branch
        ("Housekeeping", "* enable cuda scale on ci", []),  # CI's work
        ("Add scale to cuda wf", "", []),  # the CUDA CI workflow's
        ("Batch", "* Use the fused scale kernel", ["fused scale"]),  # a change of what the GPU runs
        ("Batch", "* Use correct kernel", []),  # a fix of a name
        ("Batch", "* Use released cubecl", []),  # a dependency
        ("Batch", "* Add metal bindings", []),  # an interface's declarations
        ("Fix scale ops.rs for cuda", "", ["scale ops.rs"]),  # a file's name keeps its words
        ("Optimize scale", "* Add the missing kernel.", ["Optimize scale"]),  # "missing" names nothing
        ("", "Added some scale kernels on cuda.", ["scale"]),
        ("fix: make cuda scale opt-in for guide example", "", []),  # an example's
        ("", "Implemented scale on cuda for example inputs.", ["scale"]),  # "for example": e.g.
        ("Housekeeping", "* add CubeCL impl", []),  # a backend's implementation of nothing named
        ("Housekeeping", "* add cuda impl", ["cuda backend"]),
        ("Scale for the non-flash-attn version", "", []),  # the path without FlashAttention's kernels
        ("Add flash-attn support for scale.", "", ["flash-attn scale"]),  # FlashAttention is CUDA's
        ("Fix flash attention scale", "", ["flash attention scale"]),
        ("Scale (#54)", "* Host functionality, tests\n* Scale on CUDA added", ["Scale"]),  # the verb after
        ("", "Scale for the GPU was implemented.", ["Scale"]),
        ("", "Claim shapes 'Scale on CUDA added' and 'scale for the GPU' are read.", []),  # quoted
    ],
)
def test_claim_shapes(title: str, body: str, subjects: list[str]) -> None:
    found = run_review({"src/lib.rs": KERNEL, "tests/gpu.rs": GPU_TEST}, body=body, title=title)
    assert [c.subject for c in found.claims] == subjects


def test_a_pull_requests_title_is_a_claim_of_its_own_beside_the_bodys_claims_of_other_things() -> None:
    tested = {"src/lib.rs": KERNEL, "tests/gpu.rs": GPU_TEST}
    body = "* Add the gather kernel on CUDA."
    subjects = [
        c.subject for c in run_review(tested, body=body, title="New, faster scale on CUDA! (#12)").claims
    ]
    assert subjects == ["scale", "gather"]
    # A commit's title, or one the body's claims already cover, is no second claim.
    assert [c.subject for c in run_review(tested, body=body, title="New, faster scale on CUDA!").claims] == [
        "gather"
    ]
    covered = run_review(tested, body="* Add the scale kernel on CUDA.", title="Faster scale on CUDA (#12)")
    assert [c.subject for c in covered.claims] == ["scale"]


def test_a_listed_item_that_names_nothing_repeats_the_claim_that_covers_its_functions() -> None:
    # mistral.rs and candle squash merges list "Fix metal", "Add a metal kernel." or "Add
    # some bf16 kernels." beside the item that names the op: one finding, not two.
    untested = {"src/lib.rs": KERNEL}
    for vague in ("Fix cuda", "Add some bf16 kernels.", "Add a couple kernels.", "Add a few cuda kernels."):
        body = f"* Add the scale kernel on CUDA.\n\n* {vague}\n"
        claims = run_review(untested, body=body, title="Scale (#12)").claims
        assert [(c.subject, c.backed) for c in claims] == [("scale", False)]
    # Alone, it is the claim.
    (claim,) = run_review(untested, body="* Fix cuda\n\n* Docs\n", title="Misc (#12)").claims
    assert (claim.subject, claim.backed, [f.fn.name for f in claim.functions]) == (
        "cuda backend",
        False,
        ["gpu_scale"],
    )


def test_a_title_without_a_gpu_word_is_not_about_a_front_end_calling_another_crates_gpu_work() -> None:
    # mistral.rs's "Add immediate isq predicates for qwen3" named the server's `re_isq`,
    # whose callees in the engine crate launch kernels; the front end is not the GPU work
    # of such a title.
    requantize = (
        "pub fn requantize_all(level: u8) -> Result<(), Error> {\n"
        "    let dev = CudaDevice::new(0)?;\n"
        "    let x = dev.alloc_zeros::<f32>(4)?;\n"
        "    gpu_scale(&x, &dev)\n"
        "}\n"
    )
    front_end = "pub fn re_quantize(level: u8) -> Result<(), Error> {\n    requantize_all(level)\n}\n"
    files = {
        "core/src/lib.rs": KERNEL + requantize,
        "server/src/main.rs": front_end,
        "core/tests/gpu.rs": GPU_TEST,
    }
    assert run_review(files, body="", title="Add immediate quantize support").claims == []
    # GPU work through launchers of its own crate is its work (burn's fusion code).
    files = {"core/src/lib.rs": KERNEL + requantize, "core/src/server.rs": front_end}
    (claim,) = run_review(files, body="", title="Add immediate quantize support").claims
    assert [f.fn.name for f in claim.functions] == ["re_quantize"]


def test_a_title_naming_code_the_diff_does_not_change_cannot_be_verified() -> None:
    # "Optimized Metal qmv_fast path" in a squash merge whose diff changes other Metal
    # code: the title names a function, and it is none of the diff's, so it does not stand
    # for the diff's GPU code as a title naming only an op would ("attention on GPU").
    tested = {"src/lib.rs": KERNEL, "tests/gpu.rs": GPU_TEST}
    (claim,) = run_review(tested, body="", title="Optimized CUDA qmv_fast path").claims
    assert (claim.backed, claim.functions) == (False, [])
    assert "cannot be verified" in claim.missing[0]
    for title in (
        "Optimized CUDA gpu_scale path",
        "fix(cuda): probe the device in gpu_scale() instead of cfg!",
        "Fix intptr_t usage on cuda",  # a C type: the title stands for the diff's GPU code
    ):
        (claim,) = run_review(tested, body="", title=title).claims
        assert (claim.backed, [f.fn.name for f in claim.functions]) == (True, ["gpu_scale"])
    # tract's "fix kv_max kernel ..." of `get_func(.., "mask_to_KV_max")`: a kernel launched.
    kv_max = "fix kv_max kernel that assumes a batch dimension"
    (claim,) = run_review(tested, body="", title=kv_max).claims
    assert (claim.backed, claim.functions) == (False, [])
    launched = {"src/lib.rs": KERNEL.replace('"scale"', '"mask_to_KV_max"'), "tests/gpu.rs": GPU_TEST}
    (claim,) = run_review(launched, body="", title=kv_max).claims
    assert (claim.backed, [f.fn.name for f in claim.functions]) == (True, ["gpu_scale"])
    # dfdx's "JIT compiling kernel for to_dtype": the name of the module the kernel is in.
    in_a_module = {
        "src/to_dtype/cuda_kernel.rs": KERNEL.replace("gpu_scale", "forward"),
        "tests/gpu.rs": GPU_TEST.replace("gpu_scale", "forward"),
    }
    (claim,) = run_review(in_a_module, body="", title="JIT compiling kernel for to_dtype").claims
    assert (claim.backed, [f.fn.name for f in claim.functions]) == (True, ["forward"])


def test_a_title_that_only_says_kernel_over_the_cpu_backend_claims_no_gpu_work() -> None:
    # candle 6fb665004c: "Add a const to select the conv2d kernel", an item of a squash
    # merge whose diff changes only `cpu_backend.rs`: the kernel is the CPU's.
    host = {"src/cpu_backend.rs": "pub fn im2col(x: &[f32]) -> Vec<f32> { x.to_vec() }\n"}
    for title, body in (
        ("Add a const to select the conv2d kernel", ""),
        ("Faster im2col", "* Add a const to select the conv2d kernel."),
    ):
        assert run_review(host, body=body, title=title).claims == []
    # Naming a device, it is a claim the diff cannot back.
    (claim,) = run_review(host, body="", title="Add a cuda kernel for conv2d").claims
    assert not claim.backed and "cannot be verified" in claim.missing[0]
    # Over other host code the kernel may be a dependency's (vllm.rs' "Use faster kernel for
    # sampling" calls attention_rs): a claim that cannot be verified, not no claim.
    elsewhere = {"src/sampling.rs": "pub fn sample(x: &[f32]) -> Vec<f32> { x.to_vec() }\n"}
    (claim,) = run_review(elsewhere, body="", title="Use faster kernel for sampling").claims
    assert not claim.backed and "cannot be verified" in claim.missing[0]
    # Over GPU code, "kernel" is that code's.
    tested = {"src/lib.rs": KERNEL, "tests/gpu.rs": GPU_TEST}
    (claim,) = run_review(tested, body="", title="Add the conv2d kernel").claims
    assert [f.fn.name for f in claim.functions] == ["gpu_scale"]


def test_a_claim_made_twice_is_reported_once() -> None:
    # A squash merge's first item is often the PR's title, and mistral.rs e1dd7c8fed lists
    # "Fix mrope with new rope kernels" twice: one claim each, where it is first made.
    tested = {"src/lib.rs": KERNEL, "tests/gpu.rs": GPU_TEST}
    for title, body in (
        ("feat(cuda): scale kernel (#12)", "* feat(cuda): scale kernel\n* fix: typo\n"),
        ("Housekeeping", "* Fix scale on cuda\n* Fix scale on cuda\n"),
    ):
        claims = run_review(tested, body=body, title=title).claims
        assert [(c.subject, c.line, c.backed) for c in claims] == [("scale", 0 if "(" in title else 1, True)]
    # Claims of the same words about different code are two.
    two = {"src/lib.rs": KERNEL + KERNEL.replace("gpu_scale", "gpu_scale_f64"), "tests/gpu.rs": GPU_TEST}
    body = "Implemented gpu_scale on the GPU. Implemented gpu_scale_f64 on the GPU."
    assert len(run_review(two, body=body, title="").claims) == 2


def test_a_listed_commit_title_may_start_with_its_type_and_scope() -> None:
    # mistral.rs e1dd7c8fed: "* perf(cuda): optimize hybrid qwen decode path", an item of
    # a squash merge whose PR title claims other work.
    tested = {"src/lib.rs": KERNEL, "tests/gpu.rs": GPU_TEST}
    (claim,) = run_review(
        tested, body="* perf(cuda): optimize scale\n* Cleanup\n", title="Housekeeping"
    ).claims
    assert (claim.subject, claim.line, claim.backed) == ("optimize scale", 1, True)
    # A type alone is no verb: "fix: panic reducing a zero-length axis" still reads as a title.
    assert run_review(tested, body="* fix: panic on cuda scale\n", title="Housekeeping").claims


def test_a_title_naming_only_a_model_claims_no_gpu_work() -> None:
    # mistral.rs' "Implement Llama 4!": the model's layers run on the framework's ops,
    # some of them GPU code; the title claims the model, not GPU work of its own.
    model = """
        pub struct Llama4 { dev: CudaDevice }
        impl Llama4 {
            pub fn forward(&self, x: &CudaSlice<f32>) -> Result<(), GpuError> { gpu_scale(x, &self.dev) }
        }
        """
    files = {"src/lib.rs": KERNEL, "src/models/llama4.rs": model}
    for title in ("Implement Llama 4! (#1268)", "feat(models): support Llama 4 model family"):
        assert run_review(files, body="", title=title).claims == []
    # A device or a kernel named: the work claimed is on the GPU.
    assert [c.subject for c in run_review(files, body="", title="Llama 4 on cuda").claims] == ["Llama 4"]


def test_claim_about_two_ops_is_two_claims() -> None:
    files = {"src/act.rs": KERNEL.replace("gpu_scale", "gpu_gelu") + KERNEL.replace("gpu_scale", "gpu_silu")}
    claims = run_review(files, body="Implemented GELU and SiLU on the GPU.").claims
    assert [(c.subject, [f.fn.name for f in c.functions]) for c in claims] == [
        ("GELU", ["gpu_gelu"]),
        ("SiLU", ["gpu_silu"]),
    ]


def test_inline_host_computation_in_an_error_arm_is_a_silent_fallback() -> None:
    code = """
        pub fn gpu_square(input: &[f32]) -> Result<Vec<f32>, GpuError> {
            let ctx = match CudaContext::new(0) {
                Ok(ctx) => ctx,
                Err(_) => return Ok(input.iter().map(|x| x * x).collect()),
            };
            launch_square(&ctx, input)
        }
        """
    found = run_review({"src/lib.rs": code}, body="").code.findings
    assert "silent-fallback" in {f.rule for f in found}


CUBECL_RELU = """
    #[cube(launch)]
    fn relu_kernel<F: Float>(input: &Array<F>, output: &mut Array<F>) {
        output[ABSOLUTE_POS] = F::max(input[ABSOLUTE_POS], F::new(0.0));
    }

    pub fn gpu_relu<R: Runtime>(client: &ComputeClient<R::Server, R::Channel>, input: &Handle, n: usize) -> Handle {
        let output = client.empty(n * 4);
        unsafe {
            relu_kernel::launch::<f32, R>(client, CubeCount::Static(1, 1, 1), CubeDim::new(n as u32, 1, 1),
                ArrayArg::from_raw_parts::<f32>(input, n, 1), ArrayArg::from_raw_parts::<f32>(&output, n, 1));
        }
        output
    }
    """
CUBECL_TEST = """
    #[test]
    fn relu_on_wgpu() {
        let device = WgpuDevice::default();
        let client = WgpuRuntime::client(&device);
        let input = client.create(f32::as_bytes(&[-1.0f32, 2.0]));
        gpu_relu::<WgpuRuntime>(&client, &input, 2);
    }
    """


def test_cubecl_kernel_is_reached_through_its_generated_launcher() -> None:
    # `#[cube(launch)] fn relu_kernel` is called as `relu_kernel::launch`: the test that
    # calls gpu_relu reaches the kernel, so a claim about ReLU is backed.
    files = {"src/relu.rs": CUBECL_RELU, "tests/wgpu.rs": CUBECL_TEST}
    assert claims_of("ReLU is now a CubeCL kernel.", files) == [("ReLU", True)]
    assert claims_of("ReLU is now a CubeCL kernel.", {"src/relu.rs": CUBECL_RELU}) == [("ReLU", False)]


def test_items_of_a_kernel_list_claim_the_functions_they_start_with() -> None:
    files = {"src/lib.rs": KERNEL + KERNEL.replace("gpu_scale", "gpu_shift"), "tests/gpu.rs": GPU_TEST}
    body = (
        "Two more hand-written PTX kernels for the bf16 forward:\n\n"
        "- gpu_scale  - multiply by a scalar. Verified on an RTX 3090.\n"
        "- gpu_shift  - add a scalar.\n\n"
        "Together with the pre-existing GPU paths for relu/exp, the forward is complete.\n"
    )
    assert claims_of(body, files) == [("gpu_scale", True), ("gpu_shift", False)]


def test_a_name_in_a_list_after_the_word_kernel_claims_only_what_the_diff_has() -> None:
    # "the kernel" of an operating system: the names listed are telemetry fields the
    # diff does not define, not kernels claimed and missing.
    body = (
        "The system block reported figures that ignore the limits the kernel enforces:\n\n"
        "- `ram_size`  <- sys_info::mem_info()  (total RAM)\n"
        "- `gpu_scale` <- the scale op\n"
    )
    assert claims_of(body, {"src/lib.rs": KERNEL}) == [("gpu_scale", False)]


def _grad_fns(names: list[str]) -> str:
    """``GradFn`` impls for the given types, each launching through ``gpu_scale``."""
    return "".join(
        f"""
    pub struct {name} {{ factor: f32 }}
    impl GradFn for {name} {{
        fn backward(&self, x: &CudaSlice<f32>, dev: &CudaDevice) -> Result<(), GpuError> {{
            gpu_scale(x, dev)
        }}
    }}
    """
        for name in names
    )


def test_dynamic_dispatch_reaches_the_impls_of_the_types_the_test_builds() -> None:
    # `node.backward()` names too many methods to resolve by name; the test builds a
    # ScaleBackward (through scale_op), so ScaleBackward::backward is what it reaches,
    # and no other impl that nothing reached constructs.
    others = [f"Other{i}Backward" for i in range(8)]
    ops = """
    pub trait GradFn { fn backward(&self, x: &CudaSlice<f32>, dev: &CudaDevice) -> Result<(), GpuError>; }
    pub fn scale_op() -> Box<dyn GradFn> { Box::new(ScaleBackward { factor: 2.0 }) }
    """
    test = """
    #[test]
    fn scale_backward_on_cuda() {
        let dev = CudaDevice::new(0).expect("this test needs a CUDA device");
        let x = dev.htod_copy(vec![1.0f32; 4]).unwrap();
        let node = scale_op();
        node.backward(&x, &dev).unwrap();
    }
    """
    files = {
        "src/lib.rs": KERNEL + ops + _grad_fns(["ScaleBackward", "ShiftBackward", *others]),
        "tests/gpu.rs": test,
    }
    assert claims_of("Implemented ScaleBackward on the GPU.", files) == [("ScaleBackward", True)]
    assert claims_of("Implemented ShiftBackward on the GPU.", files) == [("ShiftBackward", False)]


def test_a_method_called_on_a_local_runs_the_method_of_the_type_its_let_builds() -> None:
    # mistral.rs's fp8 test: `let lin = Linear::new(..); lin.forward(&xs)` runs the
    # `forward` of candle's `Linear` (a type of another crate, of which the workspace
    # has only a trait impl), not the workspace's `ScaleLinear::forward`, though
    # code the test reaches builds a ScaleLinear.
    others = [f"Other{i}Backward" for i in range(8)]
    ops = """
    pub trait GradFn { fn backward(&self, x: &CudaSlice<f32>, dev: &CudaDevice) -> Result<(), GpuError>; }
    pub trait Merge { fn merge(&self) -> f32; }
    impl Merge for Linear { fn merge(&self) -> f32 { 1.0 } }
    pub struct ScaleLinear { factor: f32 }
    impl ScaleLinear {
        pub fn new(factor: f32) -> Self { Self { factor } }
        pub fn forward(&self, x: &CudaSlice<f32>, dev: &CudaDevice) -> Result<(), GpuError> { gpu_scale(x, dev) }
    }
    pub fn load_layers(dev: &CudaDevice) -> Vec<ScaleLinear> { vec![ScaleLinear { factor: 1.0 }] }
    """
    forwards = "".join(
        f"""
    pub struct Layer{i};
    impl Layer{i} {{ pub fn forward(&self, x: &CudaSlice<f32>) -> f32 {{ {i}.0 }} }}
    """
        for i in range(8)
    )
    test = """
    #[test]
    fn linear_on_cuda() {
        let dev = CudaDevice::new(0).expect("this test needs a CUDA device");
        let x = dev.htod_copy(vec![1.0f32; 4]).unwrap();
        let _layers = load_layers(&dev);
        let lin = Linear::new(x.clone(), None);
        lin.forward(&x, &dev).unwrap();
    }
    """
    files = {"src/lib.rs": KERNEL + ops + forwards + _grad_fns(others), "tests/gpu.rs": test}
    assert claims_of("Implemented ScaleLinear on the GPU.", files) == [("ScaleLinear", False)]
    # Built as the workspace's own type, the local runs that type's method.
    files["tests/gpu.rs"] = test.replace("Linear::new(x.clone(), None)", "ScaleLinear::new(2.0)")
    assert claims_of("Implemented ScaleLinear on the GPU.", files) == [("ScaleLinear", True)]
    # A type annotation says it too.
    files["tests/gpu.rs"] = test.replace(
        "let lin = Linear::new(x.clone(), None);", "let lin: ScaleLinear = make_linear();"
    )
    assert claims_of("Implemented ScaleLinear on the GPU.", files) == [("ScaleLinear", True)]
    # A type the workspace has no method of, or one that derefs to another, says nothing
    # of the method: the name decides, as before.
    files["tests/gpu.rs"] = test.replace("Linear::new(x.clone(), None)", "Foreign::new()")
    assert claims_of("Implemented ScaleLinear on the GPU.", files) == [("ScaleLinear", True)]
    files["src/lib.rs"] += """
    pub struct Wrapper { inner: ScaleLinear }
    impl Deref for Wrapper { type Target = ScaleLinear; fn deref(&self) -> &ScaleLinear { &self.inner } }
    """
    files["tests/gpu.rs"] = test.replace("Linear::new(x.clone(), None)", "Wrapper::new()")
    assert claims_of("Implemented ScaleLinear on the GPU.", files) == [("ScaleLinear", True)]


def test_a_fallback_the_diff_adds_in_a_helper_counts_against_the_op() -> None:
    helper = """
    fn compile_and_launch(x: &CudaSlice<f32>, dev: &GpuDevice) -> Result<CudaSlice<f32>, GpuError> {
        match compile_ptx(SCALE_SRC) {
            Ok(kernel) => launch(kernel, x, dev),
            Err(_) => {
                let host = gpu_to_cpu(x, dev)?;
                cpu_to_gpu(&scale_cpu(&host), dev)
            }
        }
    }

    pub fn gpu_scale(x: &CudaSlice<f32>, dev: &GpuDevice) -> Result<CudaSlice<f32>, GpuError> {
        compile_and_launch(x, dev)
    }
    """
    test = GPU_TEST.replace("CudaDevice", "GpuDevice")
    (claim,) = run_review(
        {"src/lib.rs": helper, "tests/gpu.rs": test}, body="Implemented scale on GPU."
    ).claims
    assert [f.fn.name for f in claim.functions] == ["gpu_scale"]
    assert any("silent-fallback" in m for m in claim.missing)


def test_a_fallback_the_function_already_had_is_not_held_against_the_new_kernel() -> None:
    kernel = textwrap.dedent(
        """
        pub fn gpu_scale(x: &CudaSlice<f32>, dev: &GpuDevice) -> Result<CudaSlice<f32>, GpuError> {
            if let Some(out) = try_launch_vec4(x, dev, SCALE_VEC4_PTX)? {
                return Ok(out);
            }
            match compile_ptx(SCALE_SRC) {
                Ok(kernel) => launch(kernel, x, dev),
                Err(_) => {
                    let host = gpu_to_cpu(x, dev)?;
                    cpu_to_gpu(&scale_cpu(&host), dev)
                }
            }
        }
        """
    )
    test = textwrap.dedent(GPU_TEST.replace("CudaDevice", "GpuDevice"))
    files = {"src/lib.rs": kernel, "tests/gpu.rs": test}
    sources = [SourceFile(path, extract(code.encode())) for path, code in files.items()]

    def judged(touched_lines: frozenset[int]) -> list[str]:
        touched = {"src/lib.rs": touched_lines, "tests/gpu.rs": frozenset(range(1, 10))}
        result = review(sources, RepoConfig(), touched, "", "Implemented the vec4 scale kernel on GPU.")
        assert "silent-fallback" in {f.rule for f in result.code.findings}  # the code check still says so
        (claim,) = result.claims
        return claim.missing

    assert judged(frozenset({3, 4, 5})) == []  # the diff adds the vec4 launch only
    assert any("silent-fallback" in m for m in judged(frozenset(range(1, 15))))


def test_a_test_named_for_the_cpu_in_a_gpu_test_file_is_no_gpu_test() -> None:
    cpu_twin = GPU_TEST.replace("scale_on_cuda", "scale_on_cpu").replace(
        'let dev = CudaDevice::new(0).expect("this test needs a CUDA device");', "let dev = host_device();"
    )
    files = {"src/lib.rs": KERNEL, "tests/gpu_scale.rs": cpu_twin}
    assert claims_of("Implemented scale on the GPU.", files) == [("scale", False)]
    files["tests/gpu_scale.rs"] = cpu_twin.replace("scale_on_cpu", "gpu_scale_matches_cpu")
    assert claims_of("Implemented scale on the GPU.", files) == [("scale", True)]


@pytest.mark.parametrize(
    ("test_path", "gpu_test"),
    [
        ("crates/cubecl-common/src/arena.rs", False),  # cubecl's own crates run on no device
        ("crates/cubecl-runtime/tests/autotune.rs", False),
        ("src/tensor_ops/add/cpu_kernel.rs", False),  # a kernel file of the CPU backend
        ("crates/burn-backend-tests/tests/cubecl/reduce.rs", True),  # a GPU backend's tests
        ("crates/burn-cubecl/src/ops.rs", True),
        ("src/tensor_ops/sum_to/webgpu_kernel.rs", True),
        ("tests/cuda_scale.rs", True),
    ],
)
def test_a_test_is_a_gpu_test_by_its_file_only_where_the_file_is_a_backends(
    test_path: str, gpu_test: bool
) -> None:
    """A test that builds no device is about the GPU only in a backend's directory or
    kernel file; a `cubecl-*` crate or a `*_kernel.rs` file says nothing by itself."""
    plain = GPU_TEST.replace('let dev = CudaDevice::new(0).expect("this test needs a CUDA device");', "")
    plain = plain.replace("scale_on_cuda", "scale_matches")
    files = {"src/lib.rs": KERNEL, test_path: plain}
    assert claims_of("Implemented scale on the GPU.", files) == [("scale", gpu_test)]


@pytest.mark.parametrize(
    ("title", "body", "subjects"),
    [
        (
            "feat: device-resident paths for 3 ops",
            "Auto-routed (3 ops, small each):\n\n- scale, shift, gather.\n",
            ["scale", "shift"],
        ),
        (
            "feat: GPU paths for 3 ops",
            "Three ops: none.\n\n3 ops auto-routed: scale, shift and gather.\n",
            ["scale", "shift"],
        ),
        (
            "feat: paths for 3 ops",
            "3 ops auto-routed: scale, shift and gather.\n",
            [],
        ),  # nothing said of the GPU
        ("feat: GPU paths", "5 tests covering 2 ops: scale, shift.\n", []),  # a count of tests
        (
            "",
            "feat: GPU paths for 2 ops\n\n2 ops auto-routed: scale, shift.\n",
            ["scale", "shift"],
        ),  # a message
    ],
)
def test_names_listed_under_a_counted_collective_are_its_members(
    title: str, body: str, subjects: list[str]
) -> None:
    files = {"src/lib.rs": KERNEL + KERNEL.replace("gpu_scale", "gpu_shift"), "tests/gpu.rs": GPU_TEST}
    assert [c.subject for c in run_review(files, body=body, title=title).claims] == subjects


def test_plural_of_a_generic_word_is_generic_too() -> None:
    # "passes" is "pass", a word every claim may use: the subject is "backward".
    files = {"src/lib.rs": KERNEL.replace("gpu_scale", "gpu_scale_backward")}
    (claim,) = run_review(files, body="Add GPU kernels for backward passes.").claims
    assert [f.fn.name for f in claim.functions] == ["gpu_scale_backward"]
    assert claims_of("Phase 5: wire GPU kernels into autograd paths.", files) == []


@pytest.mark.parametrize(
    ("body", "subjects"),
    [
        ("GpuScale refactor (small):\n\n- buffers now stored as tensors (device-resident).\n", ["GpuScale"]),
        ("GpuScale refactor:\n\n- solve now operates on tensors (LU on CUDA).\n", ["GpuScale"]),
        (
            "GpuScale refactor:\n\n- buffers no longer copied; on the device.\n",
            [],
        ),  # negated before it says so
        ("Scale refactor:\n\n- buffers stored as tensors (device-resident).\n", []),  # a word, not a name
        ("GpuScale refactor:\n\n- buffers stored as tensors.\n", []),  # nothing said of the device
    ],
)
def test_a_device_statement_in_a_named_section_is_about_the_section(body: str, subjects: list[str]) -> None:
    assert [c.subject for c in run_review({"src/lib.rs": KERNEL}, body=body).claims] == subjects


def test_a_changed_kernel_file_changes_the_functions_that_launch_it() -> None:
    lib = """
        pub const FILL: &str = include_str!(concat!(env!("OUT_DIR"), "/fill.ptx"));
        pub fn ones(dev: &CudaDevice, n: usize) -> Result<CudaSlice<f32>, GpuError> {
            let out = dev.alloc_zeros::<f32>(n)?;
            let f = dev.get_or_load_func("fill_f32", FILL)?;
            unsafe { f.launch(LaunchConfig::for_num_elems(n as u32), (&out, 1.0f32, n)) }?;
            Ok(out)
        }
        """
    sources = [SourceFile("src/lib.rs", extract(textwrap.dedent(lib).encode()))]
    title = "fix: add missing gpu fill_* (#996)"
    # The diff touches only the CUDA C file that FILL's PTX is built from.
    result = review(sources, RepoConfig(), {"kernels/src/fill.cu": frozenset({3})}, title, "")
    assert [(c.subject, [f.fn.name for f in c.functions]) for c in result.claims] == [("fill_*", ["ones"])]
    assert [a.function.fn.name for a in result.answers] == ["ones"]
    # A header is shared by every kernel: touching it changes no function of its own.
    result = review(sources, RepoConfig(), {"kernels/src/cuda_utils.cuh": frozenset({1})}, title, "")
    assert [(c.subject, c.functions) for c in result.claims] == [("fill_*", [])]
    # The Metal shader of the same name is another backend's: candle's CUDA backend
    # launches the `FILL` of its kernels crate, not the Metal crate's.
    backend = lib.replace("pub const FILL", "// pub const FILL").replace("FILL)", "kernels::FILL)")
    metal = 'pub const FILL: &str = include_str!("fill.metal");\n'
    sources = [
        SourceFile(
            "cuda-kernels/src/lib.rs", extract(b'pub const FILL: &str = include_str!("/fill.ptx");\n')
        ),
        SourceFile("metal-kernels/src/lib.rs", extract(metal.encode())),
        SourceFile("core/src/cuda_backend/mod.rs", extract(textwrap.dedent(backend).encode())),
    ]
    result = review(sources, RepoConfig(), {"metal-kernels/src/fill.metal": frozenset({3})}, title, "")
    assert [(c.subject, c.functions) for c in result.claims] == [("fill_*", [])]
    result = review(sources, RepoConfig(), {"cuda-kernels/src/fill.cu": frozenset({3})}, title, "")
    assert [(c.subject, [f.fn.name for f in c.functions]) for c in result.claims] == [("fill_*", ["ones"])]


def test_a_wrapper_of_a_tested_launcher_is_tested_through_it() -> None:
    wrapper = """
        impl Tensor {
            pub fn scale(&self) -> Result<Tensor, GpuError> {
                gpu_scale(&self.buf, &self.dev)?;
                Ok(self.clone())
            }
        }
        """
    files = {"src/lib.rs": KERNEL, "src/tensor.rs": wrapper, "tests/gpu.rs": GPU_TEST}
    assert claims_of("Implemented scale on the GPU.", files) == [("scale", True)]
    untested = {"src/lib.rs": KERNEL, "src/tensor.rs": wrapper}
    assert claims_of("Implemented scale on the GPU.", untested) == [("scale", False)]


def test_words_keep_an_acronym_whole() -> None:
    assert words("FILL") == ["fill"]
    assert words("RMSNorm") == ["rms", "norm"]
    assert words("GELU_F32_PTX") == ["gelu", "f", "32", "ptx"]
    assert words("LayerNorm") == ["layer", "norm"]


def test_a_claim_about_one_backend_is_judged_on_that_backends_code() -> None:
    metal = """
        pub fn call_scale(encoder: &ComputeCommandEncoderRef, pipeline: &Pipeline) {
            encoder.set_compute_pipeline_state(pipeline);
            encoder.dispatch_thread_groups(grid(), group());
        }
        """
    files = {"src/lib.rs": KERNEL, "tests/gpu.rs": GPU_TEST, "metal-kernels/src/lib.rs": metal}
    claims = run_review(files, body="Scale cuda bindings.").claims
    assert [(c.subject, [f.fn.name for f in c.functions], c.backed) for c in claims] == [
        ("Scale", ["gpu_scale"], True)
    ]


def test_a_dtype_the_name_does_not_spell_still_names_the_op() -> None:
    files = {"src/lib.rs": KERNEL, "tests/gpu.rs": GPU_TEST}
    assert claims_of("Scale f32 implementation for cuda.", files) == [("Scale f32", True)]


# A backend-generic framework in the shape of burn: the op's tests are templates in
# the tensor crate, written out for a GPU backend by a macro the GPU crate invokes, and
# they reach the backend's kernel through calls on type parameters.
_TENSOR_CRATE = {
    "crates/tensor/src/api.rs": """
        pub trait FloatOps<B> { fn float_scale(x: B::Prim) -> B::Prim; }
        pub struct Tensor<B> { prim: B::Prim }
        impl<B: Backend> Tensor<B> {
            pub fn scale(self) -> Self { Tensor { prim: B::float_scale(self.prim) } }
        }
        """,
    "crates/tensor/src/tests/scale.rs": """
        #[tensor_testgen::testgen(scale)]
        mod tests {
            use super::*;
            #[test]
            fn should_scale() {
                let t = Tensor::<TestBackend>::ones([4], &Default::default());
                t.scale();
            }
        }
        """,
    "crates/cpu-backend/src/ops.rs": """
        impl FloatOps<Self> for CpuBackend {
            fn float_scale(x: Vec<f32>) -> Vec<f32> { x.iter().map(|v| v * 2.0).collect() }
        }
        """,
}
_GPU_BACKEND = {
    "crates/gpu-backend/src/ops.rs": """
        impl FloatOps<Self> for GpuBackend {
            fn float_scale(x: CudaSlice<f32>) -> CudaSlice<f32> { gpu_scale(&x, &device()).unwrap(); x }
        }
        """
    + KERNEL,
}


def test_templates_a_gpu_crate_writes_out_are_gpu_tests_that_reach_through_generics() -> None:
    instantiated = {
        "crates/wgpu/src/lib.rs": "mod tests { type TestBackend = GpuBackend; tensor::testgen_all!(); }"
    }
    files = {**_TENSOR_CRATE, **_GPU_BACKEND, **instantiated}
    assert claims_of("Implemented scale on the GPU.", files) == [("scale", True)]
    # Written out only by the CPU backend's crate: the templates test nothing on a GPU.
    cpu_only = {
        "crates/cpu-backend/src/lib.rs": "mod tests { type TestBackend = CpuBackend; tensor::testgen_all!(); }"
    }
    assert claims_of("Implemented scale on the GPU.", {**_TENSOR_CRATE, **_GPU_BACKEND, **cpu_only}) == [
        ("scale", False)
    ]


def test_a_call_on_an_alias_of_a_backend_reaches_its_trait_impls() -> None:
    test = """
        #[test]
        fn scale_on_wgpu() {
            let x = TestBackend::float_scale(TestBackend::ones(4));
        }
        """
    files = {**_TENSOR_CRATE, **_GPU_BACKEND, "crates/wgpu/tests/scale.rs": test}
    found = run_review(files, body="Implemented gpu_scale on the GPU.")
    assert [(c.subject, c.backed) for c in found.claims] == [("gpu_scale", True)]
    # The test reaches it through the trait, not as a caller: the hostile reviewer still
    # names the test the claim's evidence came from.
    answers = {a.function.fn.name: a for a in found.answers}
    assert "scale_on_wgpu" in answers["gpu_scale"].gpu_test


def test_a_kernel_an_item_macro_defines_from_a_wgsl_file_is_backend_evidence() -> None:
    ops = """
        kernel_wgsl!(ScaleRaw, "../template/scale.wgsl");

        pub fn scale(input: WgpuTensor<f32>) -> WgpuTensor<f32> {
            let kernel = StaticKernel::<KernelSettings<ScaleRaw, f32>>::new(workgroup(input.len()));
            input.client.execute(Box::new(kernel), &[&input.handle]);
            input
        }
        """
    test = """
        #[test]
        fn scale_on_wgpu() {
            let device = WgpuDevice::default();
            scale(WgpuTensor::ones(4, &device));
        }
        """
    files = {"burn-wgpu/src/kernel/scale.rs": ops, "burn-wgpu/tests/scale.rs": test}
    assert claims_of("Scale for wgpu backend", files) == [("Scale", True)]
    without_kernel = {"burn-wgpu/src/kernel/scale.rs": ops.replace('"../template/scale.wgsl"', "SCALE_SRC")}
    assert claims_of(
        "Implemented scale on the GPU.", {**without_kernel, "burn-wgpu/tests/scale.rs": test}
    ) == [("scale", False)]


def test_a_unit_struct_handed_to_the_framework_reaches_its_dispatched_methods() -> None:
    # candle's custom ops: `xs.apply_op(&ScaleOp)` hands a unit struct to the framework,
    # whose storage dispatches `c.cuda_fwd(..)` on it. `cuda_fwd` names eight impls,
    # too many to follow by name: the one reached is the one built.
    others = "".join(
        f"impl CustomOp for Other{i} {{ fn cuda_fwd(&self, s: &CudaStorage) -> CudaStorage {{ s.clone() }} }}\n"
        for i in range(7)
    )
    core = """
        impl Tensor {
            pub fn apply_op(&self, c: &dyn CustomOp) -> Tensor { Tensor { s: c.cuda_fwd(&self.s) } }
        }
        impl CustomOp for ScaleOp {
            fn cuda_fwd(&self, s: &CudaStorage) -> CudaStorage { gpu_scale(&s.slice, &s.dev).unwrap(); s.clone() }
        }
        """
    ops = "pub fn scale_op(xs: &Tensor) -> Tensor { xs.apply_op(&ScaleOp) }"
    test = """
        #[test]
        fn scale_op_gpu() {
            let dev = CudaDevice::new(0).expect("this test needs a CUDA device");
            scale_op(&Tensor::ones(4, &dev));
        }
        """
    files = {"src/lib.rs": KERNEL + core + others, "src/ops.rs": ops, "tests/gpu.rs": test}
    assert claims_of("Implemented gpu_scale on the GPU.", files) == [("gpu_scale", True)]


def test_a_value_handed_to_an_external_framework_reaches_its_device_methods() -> None:
    # mistral.rs's custom ops: `self.apply_op1_no_bwd(&Sort { .. })` hands the value to
    # candle, a dependency, whose storage calls `metal_fwd` of it on a Metal tensor. No
    # code of the workspace calls `metal_fwd`: the device method of the value built runs.
    ops = """
        pub struct Sort { axis: usize }
        impl CustomOp1 for Sort {
            fn name(&self) -> &'static str { "sort" }
            fn cpu_fwd(&self, s: &CpuStorage) -> Result<CpuStorage> { bail!("no cpu sort") }
            fn metal_fwd(&self, s: &MetalStorage) -> Result<MetalStorage> { gpu_scale(&s.slice, &s.dev)?; Ok(s.clone()) }
        }
        pub trait SortOp { fn fast_sort(&self) -> Result<Tensor>; }
        impl SortOp for Tensor {
            fn fast_sort(&self) -> Result<Tensor> { self.apply_op1_no_bwd(&Sort { axis: 0 }) }
        }
        """
    test = """
        #[test]
        fn sort_metal() {
            let device = Device::new_metal(0).unwrap();
            let a = Tensor::from_vec(vec![3i32, 1], &[2], &device).unwrap();
            assert_eq!(a.fast_sort().unwrap().to_vec1::<i32>().unwrap(), [1, 3]);
        }
        """
    files = {"src/lib.rs": KERNEL, "src/ops.rs": ops, "tests/metal.rs": test}
    assert claims_of("Implemented gpu_scale on the GPU.", files) == [("gpu_scale", True)]
    # Built but never handed on: the value's device method is not what the test runs.
    unused = {**files, "tests/metal.rs": test.replace("a.fast_sort().unwrap()", "a")}
    assert claims_of("Implemented gpu_scale on the GPU.", unused) == [("gpu_scale", False)]


def test_a_tuple_struct_built_for_a_call_reaches_its_trait_methods() -> None:
    # candle's `Conv2D(params).map(..)`: `map`, a default method of a trait of many
    # types, runs `self.f(..)` of the one built, which a tuple struct's constructor builds.
    others = "".join(
        f"impl Map1 for Other{i} {{ fn f(&self, s: &CudaStorage) -> CudaStorage {{ s.clone() }} }}\n"
        for i in range(7)
    )
    core = """
        pub trait Map1 {
            fn f(&self, s: &CudaStorage) -> CudaStorage;
            fn map(&self, s: &CudaStorage) -> CudaStorage { self.f(s) }
        }
        impl Map1 for Scale {
            fn f(&self, s: &CudaStorage) -> CudaStorage { gpu_scale(&s.slice, &s.dev).unwrap(); s.clone() }
        }
        impl CudaStorage {
            pub fn scale(&self, factor: f32) -> CudaStorage { Scale(factor).map(self) }
        }
        """
    test = """
        #[test]
        fn scale_gpu() {
            let dev = CudaDevice::new(0).expect("this test needs a CUDA device");
            CudaStorage::ones(4, &dev).scale(2.0);
        }
        """
    files = {"src/lib.rs": KERNEL + core + others, "tests/gpu.rs": test}
    assert claims_of("Implemented gpu_scale on the GPU.", files) == [("gpu_scale", True)]


def test_a_function_declared_in_a_method_is_called_by_its_name() -> None:
    # candle's `fn inner<T>(..)` in each `cuda_fwd`: a free function of the method's
    # body, called as `inner(..)`, not a method of the impl around it.
    core = """
        impl CustomOp for ScaleOp {
            fn cuda_fwd(&self, s: &CudaStorage) -> CudaStorage {
                fn gpu_scale(x: &CudaSlice<f32>, dev: &CudaDevice) -> Result<(), GpuError> {
                    let f = dev.get_func("k", "scale").ok_or(GpuError::MissingKernel)?;
                    unsafe { f.launch(LaunchConfig::for_num_elems(x.len() as u32), (x,)) }?;
                    Ok(())
                }
                gpu_scale(&s.slice, &s.dev).unwrap();
                s.clone()
            }
        }
        """
    test = """
        #[test]
        fn scale_op_gpu() {
            let dev = CudaDevice::new(0).expect("this test needs a CUDA device");
            ScaleOp.cuda_fwd(&CudaStorage::ones(4, &dev));
        }
        """
    files = {"src/lib.rs": core, "tests/gpu.rs": test}
    assert claims_of("Implemented gpu_scale on the GPU.", files) == [("gpu_scale", True)]


# A terse title is the claim of the whole change: it stands for the diff's GPU code
# of the backend it names when its words are those of that code.
METAL_DISPATCH = """
    pub fn encode_concurrent(enc: &ComputeCommandEncoder, pipeline: &ComputePipelineState) {
        enc.set_compute_pipeline_state(pipeline);
        enc.dispatch_thread_groups(MTLSize::new(1, 1, 1), MTLSize::new(32, 1, 1));
    }
    """
METAL_TEST = """
    #[test]
    fn concurrent_on_metal() {
        let device = metal::Device::system_default().expect("this test needs a Metal device");
        encode_concurrent(&device.new_encoder(), &device.pipeline("k"));
    }
    """


@pytest.mark.parametrize(
    ("title", "body", "expected"),
    [
        ("[Metal] Concurrent dispatching (#3511)", "", [("Concurrent dispatching", True)]),
        ("[Metal] Concurrent dispatching (#3511)", "* fmt\n* Tweak.", [("Concurrent dispatching", True)]),
        # Its words name none of the Metal code the diff changes: that code stands for it.
        ("Fix attention on Metal", "", [("attention", True)]),
        ("Disable the fast kernels on Metal", "", []),  # switches GPU work off
        ("Simplify the Metal dispatch", "", []),  # upkeep
        ("Metal commands refactoring", "", []),  # upkeep claims nothing
        # The plumbing around GPU code (its messages, settings, names, macros) is no GPU work.
        ("Small improvement to the Metal panic.", "", []),
        ("Metal better workspace setting", "", []),
        ("feat: parse Metal family from env", "", []),
        ("Migrate the metal macro", "", []),
        ("Fix the panic in Metal concurrent dispatching", "", [("panic concurrent dispatching", True)]),
        ("Fix the cpu kernel for concurrent encoding", "", []),  # about the host
        # A title's label, its verb in any form and its scaffolding are not its topic.
        ("feat/metal: concurrent dispatching", "", [("concurrent dispatching", True)]),
        ("Fixing Metal concurrent dispatching.", "", [("concurrent dispatching", True)]),
        ("feat/metal: add metal structure", "", []),
        ("feat/metal: partial DispatchOptions struct implementation", "", []),
        # A title naming only the backend is about the backend's code in the diff.
        ("Fixing Metal backend.", "", [("Metal backend", True)]),
        ("added metal support", "", [("metal backend", True)]),
        ("[Metal]", "", []),
        # What the work replaces is not claimed, nor does it negate the claim.
        ("Reuse Metal encoders instead of creating one per dispatch", "", [("Reuse encoders", True)]),
        # A drop with Metal is a regression fixed, not support dropped.
        ("Fix hang and performance drop with Metal", "", [("hang performance drop", True)]),
        ("Drop Metal concurrent dispatching", "", []),
        ("Run concurrent dispatching on the cpu instead of Metal", "", []),
        # Tests, CI, docker images and debug output are upkeep.
        ("fix/metal/test: concurrent dispatching too large", "", []),
        ("fix(tests): Metal concurrent dispatching", "", []),
        ("Fix the Metal docker image", "", []),
        ("Improve debug output of Metal dispatching", "", []),
        # A backend's toolkit release is upkeep of the build, not GPU work.
        ("Support Metal 3.1 and 3.2 (#173)", "", []),
        # A squash merge lists its commits' titles: each one that puts work on the GPU
        # is a claim of its own, held to the diff's GPU code like a title.
        (
            "Remove duplicate calls",
            "* Remove duplicate calls\n\n* Fix home folder for metal",
            [("home folder", True)],
        ),
        ("Local cache", "* Support local cache\n* Improve loading speed on metal", [("loading speed", True)]),
        # The first commit's title is often the pull request's: one claim, not two.
        (
            "Fix home folder for metal (#1474)",
            "* Fix home folder for metal\n* Capitalized",
            [("home folder", True)],
        ),
        # Items that say nothing was done on the GPU, name plumbing first, or are too
        # long to be a title.
        ("Housekeeping", "* Check device is cuda for flash attn", []),
        ("Housekeeping", "* CUDA tensors get Err(GpuError::Unsupported)", []),
        ("Housekeeping", "* Add error handling for CUDA's softmax implementation", []),
        ("Housekeeping", "* Fix home folder for metal, which the loader reads before it picks a device", []),
    ],
)
def test_a_terse_title_is_the_claim_of_the_change(
    title: str, body: str, expected: list[tuple[str, bool]]
) -> None:
    files = {"metal-kernels/src/dispatch.rs": METAL_DISPATCH, "metal-kernels/tests/metal.rs": METAL_TEST}
    found = run_review(files, body=body, title=title)
    assert [(c.subject, c.backed) for c in found.claims] == expected


def test_a_terse_title_is_held_to_the_evidence_of_the_change() -> None:
    files = {"metal-kernels/src/dispatch.rs": METAL_DISPATCH}  # no test runs it on a Metal device
    (claim,) = run_review(files, body="", title="[Metal] Concurrent dispatching").claims
    assert [f.fn.name for f in claim.functions] == ["encode_concurrent"]
    assert not claim.backed and any("4d" in m for m in claim.missing)


@pytest.mark.parametrize(
    "title",
    [
        "rope kernel",
        "Metal training works",
        "Pool query sets to fix metal",
        "feat: expanded DirectML options",  # ONNX Runtime's GPU execution providers
        "fix: register the TensorRT provider",
        "Add flash-attn support for stable-lm.",  # FlashAttention's kernels are CUDA's
        "Fix flash attn v3 for bf16",
    ],
)
def test_a_title_that_puts_its_work_on_the_gpu_is_a_claim_even_naming_no_function(title: str) -> None:
    """Neither "rope" nor "training" names a function the diff changes: the title is held
    to all of the diff's GPU code, here untested, not dropped."""
    (claim,) = run_review({"metal-kernels/src/dispatch.rs": METAL_DISPATCH}, body="", title=title).claims
    assert [f.fn.name for f in claim.functions] == ["encode_concurrent"]
    assert not claim.backed and any("4d" in m for m in claim.missing)


def test_opencl_is_a_gpu_backend() -> None:
    """juice's `frameworks/opencl/` is GPU code, and a claim "on OpenCL" is a claim."""
    kernel = KERNEL.replace("gpu_scale", "scale")
    (claim,) = run_review(
        {"coaster/src/frameworks/opencl/ops.rs": kernel}, body="Implemented scale on OpenCL."
    ).claims
    assert [f.fn.name for f in claim.functions] == ["scale"]
    assert not claim.backed and any("4d" in m for m in claim.missing)
    assert gpu_code.in_gpu_path("coaster/src/frameworks/opencl/ops.rs", ())
    assert gpu_code.GPU_TYPE_NAME.search("OpenCL") and gpu_code.GPU_TYPE_NAME.search("OpenclDevice")
    assert not gpu_code.GPU_TYPE_NAME.search("OpenClipTextTransformer")  # a CLIP model


VULKAN_DEVICE = """
    impl VulkanDevice {
        pub fn dispatch_compute(&self, name: &str, buffers: Vec<Subbuffer<[u8]>>, groups: [u32; 3]) {
            let pipeline = self.pipelines.get(name).unwrap();
            let mut builder = AutoCommandBufferBuilder::primary(&self.alloc, self.queue_family, OneTimeSubmit).unwrap();
            builder.bind_pipeline_compute(pipeline.clone()).unwrap();
            builder.dispatch(groups).unwrap();
            self.submit(builder.build().unwrap());
        }
    }
    impl VulkanTensor {
        pub fn matmul_vec(&self, rhs: &Self) -> Self {
            let out = self.device.alloc(self.rows());
            self.device.dispatch_compute("sgemv", vec![self.buf(), rhs.buf(), out.buf()], [self.rows() / 32, 1, 1]);
            out
        }
    }
    """


def test_a_vulkan_compute_dispatch_is_backend_evidence() -> None:
    """crabml's Vulkan tensors record `bind_pipeline_compute` + `dispatch` with vulkano:
    the op that calls that dispatch launches work on the GPU."""
    test = """
        #[test]
        fn matmul_vec_on_vulkan() {
            let device = VulkanDevice::new().expect("this test needs a Vulkan device");
            let a = VulkanTensor::new(&device, 64);
            a.matmul_vec(&a);
        }
        """
    files = {"crabml-vulkan/src/vulkan_tensor.rs": VULKAN_DEVICE, "crabml-vulkan/tests/ops.rs": test}
    assert claims_of("matmul_vec now runs on the GPU.", files) == [("matmul_vec", True)]
    without_launch = VULKAN_DEVICE.replace("builder.bind_pipeline_compute(pipeline.clone()).unwrap();", "")
    files["crabml-vulkan/src/vulkan_tensor.rs"] = without_launch.replace(
        "builder.dispatch(groups)", "builder.noop()"
    )
    (claim,) = run_review(files, body="matmul_vec now runs on the GPU.").claims
    assert not claim.backed and any("4a" in m for m in claim.missing)


def test_an_objc2_metal_dispatch_is_backend_evidence() -> None:
    """objc2-metal spells Metal's selectors in camelCase (ferrotorch-mps)."""
    code = """
        pub fn sum_axis_f32(enc: &ProtocolObject<dyn MTLComputeCommandEncoder>, p: &Pipeline) {
            enc.setComputePipelineState(p);
            enc.dispatchThreadgroups_threadsPerThreadgroup(grid, tg);
        }
        """
    (function,) = extract(code.encode()).functions
    assert [s.kind for s in function.signals] == ["launch", "launch"]


OPENCL_FFT = """
    pub struct FftKernel { proque: ProQue, src: Buffer<u32> }
    impl FftKernel {
        pub fn create(device: Device, n: usize) -> ocl::Result<FftKernel> {
            let proque = ProQue::builder().device(device).src(FFT_SRC).dims(n).build()?;
            let src = Buffer::builder().queue(proque.queue().clone()).len(n).build()?;
            Ok(FftKernel { proque, src })
        }
        pub fn radix_fft(&mut self, a: &mut [u32]) -> ocl::Result<()> {
            self.src.write(&*a).enq()?;
            let kernel = self.proque.kernel_builder("radix_fft").arg(&self.src).build()?;
            unsafe { kernel.enq()?; }
            self.src.read(a).enq()?;
            Ok(())
        }
    }
    """


def test_an_opencl_kernel_built_and_enqueued_with_ocl_is_backend_evidence() -> None:
    """bellperson's FFT builds an ocl `ProQue`, then a kernel with `kernel_builder` and
    enqueues it; the buffer writes and reads around it are transfers, not launches."""
    test = """
        #[test]
        fn radix_fft_on_gpu() {
            let device = Device::first(Platform::default()).expect("this test needs an OpenCL GPU");
            let mut kern = FftKernel::create(device, 8).unwrap();
            kern.radix_fft(&mut [1u32; 8]).unwrap();
        }
        """
    files = {"src/gpu/fft.rs": OPENCL_FFT, "tests/gpu_fft.rs": test}
    assert claims_of("radix_fft now runs on the GPU.", files) == [("radix_fft", True)]
    kinds = {s.kind for f in extract(OPENCL_FFT.encode()).functions for s in f.signals}
    assert {"launch", "upload", "readback", "device_memory"} <= kinds
    no_kernel = OPENCL_FFT.replace('self.proque.kernel_builder("radix_fft")', "self.proque.noop()")
    (claim,) = run_review(
        {"src/gpu/fft.rs": no_kernel, "tests/gpu_fft.rs": test}, body="radix_fft now runs on the GPU."
    ).claims
    assert not claim.backed and any("4a" in m for m in claim.missing)


def test_a_method_called_on_a_unit_struct_is_reached_by_the_test() -> None:
    """tract's tests call ops on unit structs (`GgmlFlashAttn.eval(..)`): the methods
    `eval` reaches are tested, though dozens of types define an `eval`."""
    op = """
        pub struct FlashAttn;
        impl FlashAttn {
            pub fn eval(&self, x: &CudaSlice<f32>, dev: &CudaDevice) -> Result<(), GpuError> { self.launch_with_plan(x, dev) }
            fn launch_with_plan(&self, x: &CudaSlice<f32>, dev: &CudaDevice) -> Result<(), GpuError> {
                let f = dev.get_func("k", "fattn").ok_or(GpuError::MissingKernel)?;
                unsafe { f.launch(LaunchConfig::for_num_elems(x.len() as u32), (x,)) }?;
                Ok(())
            }
        }
        """
    others = "".join(
        f"pub struct Op{i}; impl Op{i} {{ pub fn eval(&self) -> u32 {{ {i} }} }}\n" for i in range(12)
    )
    test = """
        #[test]
        fn flash_attn_on_cuda() {
            let dev = CudaDevice::new(0).expect("this test needs a CUDA device");
            let x = dev.htod_copy(vec![1.0f32; 4]).unwrap();
            FlashAttn.eval(&x, &dev).unwrap();
        }
        """
    files = {"cuda/src/flash_attn.rs": op, "core/src/ops.rs": others, "cuda/tests/fattn.rs": test}
    assert claims_of("Fixed launch_with_plan on the GPU.", files) == [("launch_with_plan", True)]


def test_a_helper_of_a_gpu_op_is_backed_by_the_op_s_launch() -> None:
    """ "Guard metal matmul dispatch against exotic tensors" changes a check of the
    gemm op, which launches nothing itself: the op's own `eval` dispatches the kernel,
    and the guard is part of that op."""
    op = """
        pub struct MetalGemm;
        impl MetalGemm {
            pub fn resolve_output_facts(&self, a: &Fact) -> Result<Fact, GpuError> {
                if !a.is_plain() { return Err(GpuError::Unsupported); }
                Ok(a.clone())
            }
            pub fn eval(&self, enc: &ComputeCommandEncoder, a: &Buffer) {
                enc.set_compute_pipeline_state(&self.pipeline);
                enc.dispatch_thread_groups(grid, group);
            }
        }
        """
    test = """
        #[test]
        fn gemm_on_metal() {
            let device = Device::system_default().expect("this test needs a Metal device");
            let gemm = MetalGemm;
            gemm.resolve_output_facts(&Fact::plain()).unwrap();
            gemm.eval(&device.encoder(), &device.buffer());
        }
        """
    files = {"metal/src/ops/gemm.rs": op, "metal/tests/gemm.rs": test}
    assert claims_of("Guarded resolve_output_facts on Metal.", files) == [("resolve_output_facts", True)]
    no_dispatch = op.replace("enc.dispatch_thread_groups(grid, group);", "").replace(
        "enc.set_compute_pipeline_state(&self.pipeline);", ""
    )
    files["metal/src/ops/gemm.rs"] = no_dispatch
    (claim,) = run_review(files, body="Guarded resolve_output_facts on Metal.").claims
    assert not claim.backed and any("4a" in m for m in claim.missing)


def test_a_gpu_claim_is_not_about_the_host_twin_of_its_op() -> None:
    """ "PTX im2col kernel" of a diff that changes `im2col_cpu` and the GPU conv that
    launches `IM2COL_PTX`: the claim is about the kernel, not the host function whose
    name says im2col."""
    code = """
        pub const IM2COL_PTX: &str = ".visible .entry im2col(.param .u64 x) { ret; }";
        pub fn im2col_cpu(x: &[f32]) -> Vec<f32> { x.to_vec() }
        pub fn gpu_conv2d(x: &CudaSlice<f32>, dev: &CudaDevice) -> Result<(), GpuError> {
            dev.load_ptx(IM2COL_PTX.into(), "conv", &["im2col"])?;
            let f = dev.get_func("conv", "im2col").ok_or(GpuError::MissingKernel)?;
            unsafe { f.launch(LaunchConfig::for_num_elems(x.len() as u32), (x,)) }?;
            Ok(())
        }
        """
    test = GPU_TEST.replace("gpu_scale", "gpu_conv2d")
    (claim,) = run_review(
        {"src/conv.rs": code, "tests/gpu.rs": test}, body="Added a PTX kernel for im2col."
    ).claims
    assert [f.fn.name for f in claim.functions] == ["gpu_conv2d"] and claim.backed


def test_a_cuda_test_does_not_exercise_the_metal_impl_of_a_trait_method() -> None:
    """ferrotorch's CUDA tests call `backend.add_f32(..)` on the registered backend: the
    call names every impl of the trait method, but a test that builds a CUDA device
    runs none of `ferrotorch-mps`'s."""
    trait = """
        pub trait GpuBackend { fn add_f32(&self, a: &Buf) -> Result<Buf, GpuError>; }
        pub fn add(backend: &dyn GpuBackend, a: &Buf) -> Result<Buf, GpuError> { backend.add_f32(a) }
        """
    cuda = (
        KERNEL
        + """
        impl GpuBackend for CudaBackend {
            fn add_f32(&self, a: &Buf) -> Result<Buf, GpuError> { gpu_scale(&a.slice, &self.dev)?; Ok(a.clone()) }
        }
        """
    )
    metal = """
        impl GpuBackend for MtlBackend {
            fn add_f32(&self, a: &Buf) -> Result<Buf, GpuError> {
                self.encoder.set_compute_pipeline_state(&self.add);
                self.encoder.dispatch_thread_groups(grid, group);
                Ok(a.clone())
            }
        }
        """
    test = """
        #[test]
        fn add_on_cuda() {
            let dev = CudaDevice::new(0).expect("this test needs a CUDA device");
            let backend = CudaBackend::new(dev);
            add(&backend, &Buf::zeros(4)).unwrap();
        }
        """
    files = {
        "core/src/dispatch.rs": trait,
        "ferrotorch-cuda/src/backend.rs": cuda,
        "ferrotorch-mps/src/backend.rs": metal,
    }
    files["ferrotorch-cuda/tests/add.rs"] = test
    (on_metal,) = run_review(files, body="Implemented add_f32 on Metal.").claims
    assert [f.path for f in on_metal.functions] == ["ferrotorch-mps/src/backend.rs"]
    assert not on_metal.backed and any("4d" in m for m in on_metal.missing)
    (on_cuda,) = run_review(files, body="Implemented add_f32 on CUDA.").claims
    assert [f.path for f in on_cuda.functions] == ["ferrotorch-cuda/src/backend.rs"] and on_cuda.backed


TRAIT_BACKENDS = {
    "core/src/dispatch.rs": """
        pub trait GpuBackend { fn add_f32(&self, a: &Buf) -> Result<Buf, GpuError>; }
        pub fn add(backend: &dyn GpuBackend, a: &Buf) -> Result<Buf, GpuError> { backend.add_f32(a) }
        """,
    "gpu/src/backend_a.rs": KERNEL
    + """
        impl GpuBackend for BackendA {
            fn add_f32(&self, a: &Buf) -> Result<Buf, GpuError> { gpu_scale(&a.slice, &self.dev)?; Ok(a.clone()) }
        }
        """,
    "gpu/src/backend_b.rs": KERNEL.replace("gpu_scale", "gpu_scale_b")
    + """
        impl GpuBackend for BackendB {
            fn add_f32(&self, a: &Buf) -> Result<Buf, GpuError> { gpu_scale_b(&a.slice, &self.dev)?; Ok(a.clone()) }
        }
        """,
}


@pytest.mark.parametrize(
    ("builds", "b_tested"),
    [("let backend = BackendA::new(dev);", False), ("let backend = registry();", True)],
)
def test_a_trait_method_reaches_the_impls_of_the_types_the_test_builds(builds: str, b_tested: bool) -> None:
    """`backend.add_f32(..)` runs the impl of the value's type: a test that builds a
    `BackendA` does not test `BackendB`'s. When the test builds none of them (the value
    comes from a registry it does not show), every impl may run."""
    test = f"""
        #[test]
        fn add_on_gpu() {{
            let dev = CudaDevice::new(0).expect("this test needs a GPU");
            {builds}
            add(&backend, &Buf::zeros(4)).unwrap();
        }}
        """
    files = {**TRAIT_BACKENDS, "gpu/tests/add.rs": test}
    (claim,) = run_review(files, body="Implemented gpu_scale_b on the GPU.").claims
    assert claim.backed is b_tested


@pytest.mark.parametrize(
    ("title", "claimed"), [("move sync rule to gpu", []), ("Move scale to GPU", [("scale", False)])]
)
def test_code_moved_into_a_folder_of_that_name_is_no_gpu_claim(
    title: str, claimed: list[tuple[str, bool]]
) -> None:
    """tract's "move sync rule to gpu" moves code into its `gpu` crate; "to GPU",
    spelled as no folder of the diff, is a claim."""
    code = KERNEL.replace("gpu_scale", "scale").replace("sync_rule", "scale")
    files = {"gpu/src/sync.rs": code.replace("scale", "sync_rule") if not claimed else code}
    assert [(c.subject, c.backed) for c in run_review(files, body="", title=title).claims] == claimed


def test_a_gpu_title_over_a_diff_without_gpu_code_cannot_be_verified() -> None:
    files = {"src/config.rs": "pub fn parse_compute_cap(s: &str) -> u32 { s.parse().unwrap_or(80) }"}
    (claim,) = run_review(files, body="", title="Faster cuda FP8 performance").claims
    assert not claim.functions and not claim.backed
    assert claim.missing == [
        "the title puts work on the GPU, but the diff adds or changes no GPU code: the claim cannot be verified"
    ]
    # A title that names no backend and no kernel still claims nothing it cannot resolve.
    assert run_review(files, body="", title="Faster FP8 performance").claims == []


def test_a_gpu_title_over_a_change_of_kernel_source_only_says_gpuproof_cannot_read_it() -> None:
    files = {"cuda/src/keyswitch.cuh": "__host__ void scratch_keyswitch(size_t *size) { *size = 0; }\n"}
    found = run_review(files, body="", title="fix(gpu): fix the keyswitch size computation")
    (claim,) = found.claims
    assert not claim.backed
    assert claim.missing == [
        "the title puts work on the GPU, but the diff changes GPU code only in kernel source "
        "(`cuda/src/keyswitch.cuh`), which gpuproof does not read: the claim cannot be verified"
    ]
    summary = " ".join(render(found)["checks"][1]["summary"].split())
    assert (
        "The diff adds or changes no GPU op in Rust. It changes kernel source (`cuda/src/keyswitch.cuh`), "
        "which gpuproof does not read: these questions stay unanswered for it." in summary
    )


def test_a_title_naming_a_backend_is_about_that_backends_code() -> None:
    files = {
        # a module's constructor that fills its weights on the device: GPU work, not the kernel
        "burn-core/src/nn/conv.rs": textwrap.dedent(KERNEL.replace("gpu_scale", "fill_weights"))
        + "pub fn conv_config_init(x: &CudaSlice<f32>, dev: &CudaDevice) { fill_weights(x, dev).unwrap() }\n",
        "burn-wgpu/src/kernel/conv.rs": KERNEL.replace("gpu_scale", "conv2d"),
    }
    (claim,) = run_review(files, body="", title="Feat/wgpu/conv (#512)").claims
    assert [f.path for f in claim.functions] == ["burn-wgpu/src/kernel/conv.rs"]


def test_a_type_defined_in_several_files_is_the_one_the_caller_imports() -> None:
    # Each model of a crate has its own `RmsNorm`; evidence of one is not the other's.
    files = {
        "models/src/with_tracing.rs": "pub struct RmsNorm;\nimpl RmsNorm { pub fn new() -> Self { RmsNorm } }\n",
        "models/src/mimi.rs": textwrap.dedent(KERNEL)
        + "pub struct RmsNorm;\nimpl RmsNorm { pub fn new(x: &CudaSlice<f32>, dev: &CudaDevice) -> Self "
        "{ gpu_scale(x, dev).unwrap(); RmsNorm } }\n",
        "models/src/qwen.rs": "use crate::with_tracing::RmsNorm;\n"
        "pub fn qwen_attention_new() -> RmsNorm { RmsNorm::new() }\n",
    }

    def evidence_of_qwen(sources: dict[str, str]) -> str:
        ws = Workspace([SourceFile(p, extract(c.encode())) for p, c in sources.items()], RepoConfig())
        (qwen,) = [f for f in ws.functions if f.fn.name == "qwen_attention_new"]
        return qwen.evidence

    assert evidence_of_qwen(files) == ""
    imports_mimi = {
        **files,
        "models/src/qwen.rs": files["models/src/qwen.rs"].replace("with_tracing", "mimi"),
    }
    assert "mimi.rs" in evidence_of_qwen(imports_mimi)


def test_a_claim_naming_a_module_is_about_its_changed_functions() -> None:
    # "einops" is no function's name: it is the module `rearrange` lives in.
    files = {"core/src/einops.rs": KERNEL.replace("gpu_scale", "rearrange"), "core/tests/gpu.rs": GPU_TEST}
    body = "- Fix permute, split and einops GPU crashes"
    assert claims_of(body, files) == [("einops", False)]  # no GPU test reaches `rearrange`
    tested = {**files, "core/tests/gpu.rs": GPU_TEST.replace("gpu_scale", "rearrange")}
    assert claims_of(body, tested) == [("einops", True)]


def test_a_counted_set_of_kernels_claims_every_op_it_lists() -> None:
    files = {"src/kernels.rs": KERNEL.replace("gpu_scale", "gpu_add_bf16"), "tests/gpu.rs": GPU_TEST}
    body = "bf16: 3 mixed-precision PTX kernels covering add/gelu/softmax with f32 accumulation."
    found = claims_of(body, files)
    # `gelu` and `softmax` name nothing the diff changes: claimed, so unverifiable.
    assert [(s, b) for s, b in found if s != "add"] == [("gelu", False), ("softmax", False)]
    assert ("add", False) in found  # resolved, and held to 4d like any claim


def test_a_quantifier_is_no_subject() -> None:
    assert (
        claims_of("No CPU round-trips anywhere; every op executes on the GPU.", {"src/lib.rs": KERNEL}) == []
    )


def test_a_test_file_gated_on_the_gpu_feature_holds_gpu_tests() -> None:
    gated = (
        '#![cfg(feature = "gpu")]\n#[test]\nfn scale_basic() {\n    gpu_scale(&upload(), &backend());\n}\n'
    )
    files = {"src/lib.rs": KERNEL, "tests/probe.rs": gated}
    assert claims_of("Implemented scale on the GPU.", files) == [("scale", True)]
    ungated = {**files, "tests/probe.rs": gated.split("\n", 1)[1]}
    assert claims_of("Implemented scale on the GPU.", ungated) == [("scale", False)]


def test_a_plain_call_reaches_the_function_of_its_own_crate_wherever_it_was_reached_first() -> None:
    # Both crates define `cross`; the test reaches burn-candle's first, then burn-cubecl's.
    files = {
        "crates/burn-candle/src/ops.rs": "pub fn cross() {}\npub fn candle_cross() { cross() }\n",
        "crates/burn-cubecl/src/kernel/cross.rs": textwrap.dedent(KERNEL.replace("gpu_scale", "cross")),
        "crates/burn-cubecl/src/ops.rs": "pub fn cubecl_cross(x: &CudaSlice<f32>, dev: &CudaDevice) "
        "{ cross(x, dev).unwrap() }\n",
        "crates/burn-cubecl/tests/gpu.rs": GPU_TEST.replace(
            "gpu_scale(&x, &dev)", "candle_cross(); cubecl_cross(&x, &dev)"
        ),
    }
    assert claims_of("Implemented cross on the GPU.", files) == [("cross", True)]


# dfdx's shape: kernels are trait impls on the device type, reached from generic ops
# through a method name many types define, and tests pick their device through an alias
# that is the CUDA device under the test feature.
_DEVICE_ALIAS = """
#[cfg(test)]
pub(crate) mod tests {
    #[cfg(not(feature = "test-cuda"))]
    pub type TestDevice = crate::Cpu;
    #[cfg(feature = "test-cuda")]
    pub type TestDevice = crate::Cuda;
}
"""
_CONV2D_CUDA = """
impl Conv2DKernel<f32> for Cuda {
    fn forward(&self, x: &CudaSlice<f32>) -> Result<(), GpuError> {
        let f = self.dev.get_func("conv2d", "conv2d_fwd").unwrap();
        unsafe { f.launch(LaunchConfig::for_num_elems(4), (x,)) }?;
        Ok(())
    }
}
"""
_CONV2D_OP = """
pub fn conv2d<D: Conv2DKernel<f32>>(dev: &D, x: &D::Storage) {
    dev.forward(x).unwrap()
}
#[cfg(test)]
mod tests {
    use crate::tests::*;
    #[test]
    fn test_conv2d() {
        let dev: TestDevice = Default::default();
        conv2d(&dev, &dev.zeros());
    }
}
"""
# Seven other types with a `forward` of their own: the name alone resolves nothing.
_OTHER_FORWARDS = "".join(f"impl Module for Layer{i} {{ fn forward(&self) {{}} }}\n" for i in range(7))


def _claims_of_a_change_to(changed: str, body: str, files: dict[str, str]) -> list[tuple[str, bool]]:
    """Claims judged when the diff touches only the file ``changed`` of ``files``."""
    sources = [SourceFile(path, extract(textwrap.dedent(code).encode())) for path, code in files.items()]
    touched = {changed: frozenset(range(1, files[changed].count("\n") + 2))}
    return [(c.subject, c.backed) for c in review(sources, RepoConfig(), touched, "", body).claims]


def test_a_test_on_a_device_alias_of_cuda_reaches_the_cuda_impl_of_its_trait_method() -> None:
    files = {
        "src/lib.rs": _DEVICE_ALIAS + _OTHER_FORWARDS,
        "src/conv2d/mod.rs": _CONV2D_OP,
        "src/conv2d/cuda_kernel.rs": _CONV2D_CUDA,
    }
    kernel = "src/conv2d/cuda_kernel.rs"
    # "conv2d" names `Cuda::forward` by its module; the test's `TestDevice` is `Cuda`.
    assert _claims_of_a_change_to(kernel, "Add cuda kernels for conv2d", files) == [("conv2d", True)]
    cpu_only = {**files, "src/lib.rs": _DEVICE_ALIAS.replace("crate::Cuda", "crate::Cpu") + _OTHER_FORWARDS}
    assert _claims_of_a_change_to(kernel, "Add cuda kernels for conv2d", cpu_only) == [("conv2d", False)]


_CUSTOM_OP = """
pub trait CustomOp3 {
    fn cpu_fwd(&self, x: &[f32]) -> Vec<f32>;
    fn metal_fwd(&self, x: &MetalStorage) -> Result<MetalStorage>;
}
impl Tensor {
    pub fn apply_op3_no_bwd<C: CustomOp3>(&self, c: &C) -> Result<Tensor> {
        match &self.storage {
            Storage::Cpu(s) => Ok(Tensor::from_vec(c.cpu_fwd(s))),
            Storage::Metal(s) => Ok(Tensor::from_storage(c.metal_fwd(s)?)),
        }
    }
}
"""
_ROPE_THD = """
struct RotaryEmbThd;
impl CustomOp3 for RotaryEmbThd {
    fn cpu_fwd(&self, x: &[f32]) -> Vec<f32> { x.to_vec() }
    fn metal_fwd(&self, x: &MetalStorage) -> Result<MetalStorage> {
        let encoder = x.device().command_encoder();
        encoder.set_compute_pipeline_state(&x.device().pipeline("rope_thd"));
        encoder.dispatch_thread_groups(x.grid(), x.group());
        Ok(x.output())
    }
}
pub fn rope_thd(xs: &Tensor) -> Result<Tensor> {
    xs.apply_op3_no_bwd(&RotaryEmbThd)
}
#[cfg(feature = "metal")]
#[test]
fn rope_thd_metal() {
    let device = Device::new_metal(0).unwrap();
    let xs = Tensor::ones(8, &device);
    assert_eq!(rope_thd(&xs).unwrap().to_vec(), xs.to_vec());
}
"""
# Six other types with a `metal_fwd`: the method name alone resolves nothing.
_OTHER_OPS = "".join(
    f"struct Op{i};\nimpl CustomOp3 for Op{i} {{ fn cpu_fwd(&self, x: &[f32]) -> Vec<f32> {{ x.to_vec() }}"
    f" fn metal_fwd(&self, x: &MetalStorage) -> Result<MetalStorage> {{ Ok(x.output()) }} }}\n"
    for i in range(6)
)


def test_a_composite_that_hands_its_op_to_a_dispatcher_has_the_op_s_launch() -> None:
    # candle's `rope_thd` launches nothing itself: it hands `&RotaryEmbThd` to
    # `apply_op3_no_bwd`, whose `c.metal_fwd(..)` runs that type's kernel.
    files = {"src/tensor.rs": _CUSTOM_OP + _OTHER_OPS, "src/rotary_emb.rs": _ROPE_THD}
    assert _claims_of_a_change_to("src/rotary_emb.rs", "Implemented rope_thd on the GPU.", files) == [
        ("rope_thd", True)
    ]


def test_an_associated_type_naming_a_gpu_type_is_no_device_alias() -> None:
    facts = extract(
        b"impl Backend for B { type Device = Cuda; }\ntype Error = GpuError;\ntype Dev = Wgpu<f32>;\n"
    )
    assert facts.gpu_device_aliases == (("Dev", ("Wgpu",)),)


def test_an_optimizer_claim_names_the_kernel_in_the_optimizer_module() -> None:
    files = {
        "src/optim/adam/cuda_kernel.rs": _CONV2D_CUDA.replace("Conv2DKernel", "AdamKernel"),
        "src/lib.rs": _DEVICE_ALIAS,
        "src/optim/adam/mod.rs": _CONV2D_OP.replace("Conv2DKernel", "AdamKernel"),
    }
    body = "Implement cuda kernels for the Adam optimizer"
    assert _claims_of_a_change_to("src/optim/adam/cuda_kernel.rs", body, files) == [("Adam optimizer", True)]


def test_a_changed_kernel_file_changes_the_launchers_of_its_own_files_constant() -> None:
    # dfdx names the compiled kernel `PTX_SRC` in every kernel file.
    def kernel_file(op: str) -> str:
        return (
            f'const PTX_SRC: &str = include_str!(concat!(env!("OUT_DIR"), "/{op}.ptx"));\n'
            + _CONV2D_CUDA.replace("Conv2DKernel", f"{op.title()}Kernel").replace('"conv2d"', "PTX_SRC")
        )

    files = {
        "src/optim/adam/cuda_kernel.rs": kernel_file("adam"),
        "src/max_to/cuda_kernel.rs": kernel_file("max_to"),
    }
    sources = [SourceFile(path, extract(code.encode())) for path, code in files.items()]
    result = review(sources, RepoConfig(), {"src/max_to/max_to.cu": frozenset({1})}, "", "Optimize max_to.")
    assert {a.function.path for a in result.answers} == {"src/max_to/cuda_kernel.rs"}


def test_a_list_head_naming_a_module_does_not_claim_the_module_whole() -> None:
    # The bullets under the head name what was done; the head's words are a category.
    impl = "impl GradFn for SigmoidBackward {\n" + KERNEL.replace("gpu_scale", "backward") + "}\n"
    files = {"core/src/grad_fns/activation.rs": impl}
    head = "Activation backward GPU paths (activation.rs):\n- fused kernel for the sigmoid grad\n"
    assert claims_of(head, files) == []
    said = "Activation backward now runs on the GPU.\n"
    assert claims_of(said, files) == [("Activation backward", False)]  # no GPU test reaches it


# candle's backends: an op is a struct implementing `Map1`, whose default `map` calls
# `self.f(..)` per dtype; `map` is too common a name to resolve by name alone.
_MAP1_TRAIT = """
pub trait Map1 {
    fn f(&self, s: &CudaSlice<f32>, dev: &CudaDevice) -> CudaSlice<f32>;
    fn map(&self, s: &Storage, dev: &CudaDevice) -> Storage { Storage(self.f(&s.0, dev)) }
}
"""
_MAP1_OP = """
struct {op} {{ arg: usize }}
impl Map1 for {op} {{
    fn f(&self, s: &CudaSlice<f32>, dev: &CudaDevice) -> CudaSlice<f32> {{
        let func = dev.get_func("{module}", "{kernel}").unwrap();
        unsafe {{ func.launch(LaunchConfig::for_num_elems(s.len() as u32), (s,)) }}.unwrap();
        s.clone()
    }}
}}
"""
_MAP1_OPS = (
    _MAP1_OP.format(op="Pool2D", module="conv", kernel="avg_pool2d")
    + _MAP1_OP.format(op="Affine", module="affine", kernel="affine")
    + """
impl CudaStorage {
    pub fn avg_pool2d(&self, k: usize) -> Storage { Pool2D { arg: k }.map(&self.s, &self.dev) }
    pub fn affine(&self, mul: usize) -> Storage { Affine { arg: mul }.map(&self.s, &self.dev) }
}
"""
)


# ratchet's `MetaOperation`: the trait's file has a default of the method its default
# `compile` calls on `self`, which the op types in other files override.
_MAP1_TRAIT_WITH_DEFAULT_F = _MAP1_TRAIT.replace("-> CudaSlice<f32>;", "-> CudaSlice<f32> { s.clone() }")


@pytest.mark.parametrize("trait", [_MAP1_TRAIT, _MAP1_TRAIT_WITH_DEFAULT_F])
@pytest.mark.parametrize(("op", "backed"), [("avg_pool2d", True), ("affine", False)])
def test_a_default_method_of_a_trait_reaches_the_impls_of_the_types_built(
    op: str, backed: bool, trait: str
) -> None:
    test = """
        #[test]
        fn avg_pool2d_gpu() {
            let dev = CudaDevice::new(0).expect("this test needs a CUDA device");
            CudaStorage::zeros(&dev).avg_pool2d(2);
        }
        """
    files = {"src/utils.rs": trait, "src/backend.rs": _MAP1_OPS, "tests/gpu.rs": test}
    # Both ops launch through `Map1::map` (4a); only the pool is built by a GPU test (4d).
    (claim,) = run_review(files, body=f"Add a cuda kernel for {op}.").claims
    assert claim.backed is backed
    assert not any("4a" in m for m in claim.missing)


def test_a_title_on_a_backend_does_not_stand_for_an_accessor_of_its_gpu_type() -> None:
    # candle's "Fixing quantized llama demo on metal.": the diff changes the model (host
    # code) and adds `QMetalStorage::device`, which returns a field; that accessor is no
    # GPU work the title could be backed by, though the type's other method launches.
    metal = """
        pub struct QMetalStorage { buffer: Buffer, device: MetalDevice }
        impl QMetalStorage {
            pub fn dequantize(&self) -> Result<Buffer> {
                let pipeline = self.device.kernels.load_pipeline("dequantize")?;
                let encoder = self.device.command_encoder();
                encoder.set_compute_pipeline_state(&pipeline);
                encoder.dispatch_thread_groups(grid, group);
                Ok(self.buffer.clone())
            }
            pub fn device(&self) -> &MetalDevice {
                &self.device
            }
        }
        """
    model = """
        impl ModelWeights {
            pub fn forward(&self, x: &Tensor) -> Result<Tensor> {
                let mask = Tensor::zeros((4, 4), DType::F32, x.device())?;
                x.add(&mask)
            }
        }
        """
    test = """
        #[test]
        fn qmetal_dequantize() {
            let dev = MetalDevice::new(0).expect("this test needs a Metal device");
            let s = QMetalStorage::zeros(&dev);
            s.dequantize().unwrap();
            assert_eq!(s.device().id(), 0);
        }
        """
    files = {"src/quantized/metal.rs": metal, "src/models/quantized_llama.rs": model, "tests/metal.rs": test}
    sources = [SourceFile(path, extract(textwrap.dedent(code).encode())) for path, code in files.items()]
    touched = {
        "src/quantized/metal.rs": frozenset(range(11, 14)),
        "src/models/quantized_llama.rs": frozenset(range(1, 9)),
    }
    (claim,) = review(sources, RepoConfig(), touched, "Fixing quantized llama demo on metal.", "").claims
    assert claim.backed is False
    assert claim.missing == [
        "the title puts work on the GPU, but the diff adds or changes no GPU code: the claim cannot be verified"
    ]


def test_a_helper_named_for_a_backend_stands_for_that_backends_code_calling_it() -> None:
    # candle's "Add scalar support to metal binary kernels": "scalar" names the new
    # `Layout::is_scalar_like`, a host helper; the Metal work is `MetalStorage::binary`,
    # which calls it to pick the scalar kernel.
    files = {
        "src/layout.rs": """
            impl Layout {
                pub fn is_scalar_like(&self) -> bool {
                    self.stride.iter().all(|s| *s == 0)
                }
            }
            """,
        "src/metal_backend/mod.rs": """
            impl MetalStorage {
                pub fn binary(&self, op: &str, rhs: &Self, lhs_l: &Layout) -> Result<Self> {
                    let suffix = if lhs_l.is_scalar_like() { "_sc" } else { "" };
                    let pipeline = self.device.kernels.load_pipeline(&format!("{op}{suffix}"))?;
                    let encoder = self.device.command_encoder();
                    encoder.set_compute_pipeline_state(&pipeline);
                    encoder.dispatch_thread_groups(grid, group);
                    Ok(self.clone())
                }
            }
            """,
        "tests/metal.rs": """
            #[test]
            fn binary_scalar_metal() {
                let dev = MetalDevice::new(0).expect("this test needs a Metal device");
                let s = MetalStorage::zeros(&dev);
                s.binary("add", &s, &Layout::scalar()).unwrap();
            }
            """,
    }
    (claim,) = run_review(files, body="Add scalar support to metal binary kernels").claims
    assert [f.fn.qualname for f in claim.functions] == ["MetalStorage::binary"]
    assert claim.backed is True


def test_work_done_in_a_named_place_is_about_the_code_there() -> None:
    # burn's "Add shape validation and edge case guard in cubecl irfft": the subjects
    # name what was done, the place names the function it was done in.
    tested = {"src/lib.rs": KERNEL, "tests/gpu.rs": GPU_TEST}
    body = "* Add shape validation and edge case guard in cuda scale\n"
    claims = run_review(tested, body=body, title="Scale fixes (#12)").claims
    assert [(c.subject, c.backed, [f.fn.name for f in c.functions]) for c in claims] == [
        ("shape validation", True, ["gpu_scale"]),
        ("edge case guard", True, ["gpu_scale"]),
    ]


def test_an_enum_variant_named_as_a_type_builds_no_value_of_that_type() -> None:
    # candle's backprop matches `Op::Conv1D { .. }` for every op: a variant of `Op`, no
    # value of the CUDA backend's `struct Conv1D`, whose `f` runs only where one is built.
    walk = """
        pub fn walk(op: &Op) -> usize {
            match op {
                Op::Affine { arg } => *arg,
                _ => 0,
            }
        }
        """
    test = """
        #[test]
        fn avg_pool2d_gpu() {
            let dev = CudaDevice::new(0).expect("this test needs a CUDA device");
            CudaStorage::zeros(&dev).avg_pool2d(2);
            walk(&Op::Pool);
        }
        """
    files = {
        "src/utils.rs": _MAP1_TRAIT,
        "src/backend.rs": _MAP1_OPS,
        "src/backprop.rs": walk,
        "tests/gpu.rs": test,
    }
    (claim,) = run_review(files, body="Add a cuda kernel for affine.").claims
    assert claim.backed is False
    assert any("no GPU test reaches it — 4d" in m for m in claim.missing)
    # The same walk building the value does reach it.
    built = {**files, "src/backprop.rs": walk.replace("_ => 0,", "_ => Affine { arg: 1 }.arg,")}
    (claim,) = run_review(built, body="Add a cuda kernel for affine.").claims
    assert claim.backed is True


# An ONNX runtime whose every op is a WGSL shader (wonnx): the ops are chosen by name
# in one `compile` function, the shaders are templates a `lazy_static!` loads, and a
# session acquires the GPU itself, so its tests never name a device.
_SHADER_RUNTIME = {
    "rt/src/compiler.rs": """
        lazy_static! {
            pub static ref TEMPLATES: Tera = {
                let mut tera = Tera::default();
                tera.add_raw_template("activation.wgsl", include_str!("../templates/activation.wgsl")).unwrap();
                tera
            };
        }
        pub fn compile(op: &str, ctx: &Context) -> Result<String, CompileError> {
            match op {
                "Relu" | "HardSigmoid" => Ok(TEMPLATES.render("activation.wgsl", ctx)?),
                _ => Err(CompileError::Unimplemented(op.to_string())),
            }
        }
        """,
    "rt/src/resource.rs": """
        pub async fn request_device_queue() -> (wgpu::Device, wgpu::Queue) {
            let adapter = Instance::default().request_adapter(&Default::default()).await.expect("No GPU found");
            adapter.request_device(&Default::default(), None).await.expect("no device")
        }
        """,
    "rt/src/lib.rs": """
        impl Session {
            pub async fn from_model(model: Model) -> Result<Session, SessionError> {
                let (device, queue) = resource::request_device_queue().await;
                let shader = compiler::compile(&model.op, &model.context())?;
                Ok(Session { device, queue, shader })
            }
        }
        """,
}
_SHADER_RUNTIME_TEST = """
    #[test]
    fn test_hard_sigmoid() {
        let session = pollster::block_on(rt::Session::from_model(model("HardSigmoid"))).unwrap();
        assert_eq!(pollster::block_on(session.run(&[1.0])).unwrap(), vec![0.7]);
    }
    """


@pytest.mark.parametrize(
    ("title", "tested", "expected"),
    [
        ("feat: implement HardSigmoid operation", True, [("HardSigmoid", True)]),
        ("feat: implement HardSigmoid operation", False, [("HardSigmoid", False)]),
        ("Feature/hardsigmoid", True, [("hardsigmoid", True)]),
        ("Fix typo in the docs", True, []),  # upkeep
        ("feat: add Python bindings", True, []),  # names nothing the GPU code does
    ],
)
def test_an_op_title_without_a_backend_word_claims_the_ops_gpu_code(
    title: str, tested: bool, expected: list[tuple[str, bool]]
) -> None:
    files = {**_SHADER_RUNTIME, **({"rt/tests/hard_sigmoid.rs": _SHADER_RUNTIME_TEST} if tested else {})}
    found = run_review(files, body="", title=title)
    assert [(c.subject, c.backed) for c in found.claims] == expected


def test_a_test_that_reaches_the_gpu_acquisition_of_its_library_is_a_gpu_test() -> None:
    files = {**_SHADER_RUNTIME, "rt/tests/hard_sigmoid.rs": _SHADER_RUNTIME_TEST}
    sources = [SourceFile(path, extract(textwrap.dedent(code).encode())) for path, code in files.items()]
    ws = Workspace(sources, RepoConfig())
    (test,) = [f for f in ws.functions if f.fn.name == "test_hard_sigmoid"]
    assert is_gpu_test(test, ws)
    # The hostile reviewer says why it cannot pass without a GPU.
    answers = answer_questions(ws, next(f for f in ws.functions if f.fn.name == "compile"))
    assert answers.without_gpu.startswith("no: it reaches `request_device_queue` (rt/src/resource.rs:")
    # A CPU library's test reaches no acquisition: it stays a CPU test.
    cpu_library = b"impl Session { pub fn from_model(m: Model) -> Session { Session } }"
    cpu = [
        SourceFile("rt/src/lib.rs", extract(cpu_library)),
        SourceFile("rt/tests/t.rs", extract(textwrap.dedent(_SHADER_RUNTIME_TEST).encode())),
    ]
    ws = Workspace(cpu, RepoConfig())
    (test,) = [f for f in ws.functions if f.fn.name == "test_hard_sigmoid"]
    assert not is_gpu_test(test, ws)


def test_a_lazy_static_loading_kernel_files_is_a_kernel_source() -> None:
    facts = extract(textwrap.dedent(_SHADER_RUNTIME["rt/src/compiler.rs"]).encode())
    assert [(s.name, s.files) for s in facts.gpu_sources] == [("TEMPLATES", ("activation.wgsl",))]


def test_an_unsupported_arm_the_diff_does_not_add_is_no_gap() -> None:
    dispatcher = textwrap.dedent(
        """
        pub fn gpu_dispatch(op: &str, x: &CudaSlice<f32>, dev: &CudaDevice) -> Result<(), GpuError> {
            match op {
                "scale" => gpu_scale(x, dev),
                _ => Err(GpuError::Unsupported { op: op.to_string() }),
            }
        }
        """
    )
    sources = [SourceFile("src/lib.rs", extract((textwrap.dedent(KERNEL) + dispatcher).encode()))]
    scale_arm = textwrap.dedent(KERNEL).count("\n") + 4
    unsupported_arm = scale_arm + 1

    def gap_reported(lines: set[int]) -> bool:
        touched = {"src/lib.rs": frozenset(lines)}
        result = review(sources, RepoConfig(), touched, "Refactor the dispatcher", "")
        return any(f.rule == "missing-gap-report" for f in result.description)

    assert not gap_reported({scale_arm})  # the old catch-all arm is not this change's gap
    assert gap_reported({scale_arm, unsupported_arm})  # an arm the diff adds is


def test_a_test_whose_helper_takes_the_modules_gpu_device_is_a_gpu_test() -> None:
    # ratchet: the test module keeps the device in a thread-local; the tests call a
    # trial helper that takes it.
    module = """
        #[cfg(test)]
        mod tests {
            thread_local! {
                static GPU_DEVICE: Device = Device::request_device(DeviceRequest::GPU).unwrap();
            }
            fn run_trial(n: usize) { let device = GPU_DEVICE.with(|d| d.clone()); concat(n, &device); }
            #[test]
            fn test_concat() { run_trial(4) }
        }
        """
    facts = extract(textwrap.dedent(module).encode())
    assert facts.gpu_device_aliases == (("GPU_DEVICE", ("Device",)),)
    ws = Workspace([SourceFile("core/src/ops/concat.rs", facts)], RepoConfig())
    (test,) = [f for f in ws.functions if f.fn.name == "test_concat"]
    assert is_gpu_test(test, ws)
    on_cpu = module.replace("DeviceRequest::GPU", "DeviceRequest::CPU")
    ws = Workspace(
        [SourceFile("core/src/ops/concat.rs", extract(textwrap.dedent(on_cpu).encode()))], RepoConfig()
    )
    (test,) = [f for f in ws.functions if f.fn.name == "test_concat"]
    assert not is_gpu_test(test, ws)


def test_the_hostile_reviewer_names_the_test_the_diff_adds_first() -> None:
    old_test = _SHADER_RUNTIME_TEST.replace("test_hard_sigmoid", "test_relu")
    files = {
        **_SHADER_RUNTIME,
        "rt/src/a_old_tests.rs": old_test,
        "rt/tests/hard_sigmoid.rs": _SHADER_RUNTIME_TEST,
    }
    sources = [SourceFile(path, extract(textwrap.dedent(code).encode())) for path, code in files.items()]
    touched = {path: frozenset(range(1, 40)) for path in ("rt/src/compiler.rs", "rt/tests/hard_sigmoid.rs")}
    (answers,) = [
        a for a in review(sources, RepoConfig(), touched, "", "").answers if a.function.fn.name == "compile"
    ]
    assert (
        answers.gpu_test.startswith("`test_hard_sigmoid` (rt/tests/hard_sigmoid.rs:")
        and "1 more" in answers.gpu_test
    )


def test_a_proptest_is_a_test() -> None:
    # test_strategy's attribute: ratchet's op tests are `#[proptest(cases = 32)]`.
    facts = extract(
        b"#[proptest(cases = 32)]\nfn test_rope(prob: RoPEProblem) { run_rope_trial(prob).unwrap() }\n"
    )
    (fn,) = facts.functions
    assert gpu_code.is_test(fn)


WGPU_MATMUL = """
    pub fn matmul(lhs: &WgpuTensor, rhs: &WgpuTensor) -> WgpuTensor {
        let mut pass = lhs.encoder().begin_compute_pass(&Default::default());
        pass.dispatch_workgroups(16, 16, 1);
        lhs.empty_like()
    }
    pub fn basic_layout(lhs: &WgpuTensor) -> [usize; 2] { lhs.shape() }
    """
WGPU_MATMUL_TEST = """
    #[test]
    fn matmul_on_wgpu() {
        let device = WgpuDevice::new().expect("this test needs a GPU adapter");
        matmul(&device.ones(), &device.ones());
    }
    """


@pytest.mark.parametrize(
    ("title", "expected"),
    [
        # "basic" names nothing; "matmul" names the op.
        ("feat: add basic matmul for wgpu backend", [("basic matmul", True, ["matmul"])]),
        ("Add synchronize method to the wgpu device", [("synchronize method", False, [])]),
    ],
)
def test_a_subject_with_words_the_code_lacks_is_its_most_specific_word(
    title: str, expected: list[tuple[str, bool, list[str]]]
) -> None:
    files = {"burn-wgpu/src/kernel/matmul.rs": WGPU_MATMUL, "burn-wgpu/tests/matmul.rs": WGPU_MATMUL_TEST}
    claims = run_review(files, body="", title=title).claims
    assert [(c.subject, c.backed, [f.fn.name for f in c.functions]) for c in claims] == expected


def test_a_title_listing_kernels_of_host_code_claims_none_of_them() -> None:
    host = """
        pub fn fast_sigmoid(x: &[f32], out: &mut [f32]) {
            for (o, v) in out.iter_mut().zip(x) { *o = 1.0 / (1.0 + (-v).exp()); }
        }
        pub fn fast_tanh(x: &[f32], out: &mut [f32]) {
            for (o, v) in out.iter_mut().zip(x) { *o = v.tanh(); }
        }
        """
    title = "perf: fused single-pass sigmoid/tanh kernels"
    # Not `fast_sigmoid` and `fast_tanh` as GPU ops: the title as a whole is held to the
    # diff's GPU code, and there is none.
    (claim,) = run_review({"core/src/ops/elementwise.rs": host}, body="", title=title).claims
    assert claim.topic and claim.functions == [] and "no GPU code" in claim.missing[0]


def test_a_host_kernel_file_is_not_gpu_code() -> None:
    assert not gpu_code.in_gpu_path("src/tensor_ops/div/cpu_kernel.rs", ())
    assert not gpu_code.in_gpu_path("src/cpu/kernels.rs", ())
    assert gpu_code.in_gpu_path("src/tensor_ops/div/cuda_kernel.rs", ())
    assert gpu_code.in_gpu_path("ferrotorch-gpu/src/kernels.rs", ())


NORM_BACKWARD = """
    impl GradFn for GroupNormBackward {
        fn backward(&self, grad: &Tensor) -> Tensor { grad.to_device(self.device).mul(&self.weight) }
    }
    impl GradFn for RMSNormBackward {
        fn backward(&self, grad: &Tensor) -> Tensor { grad.to_device(self.device).div(&self.rms) }
    }
    impl GroupNorm {
        pub fn forward(&self, x: &Tensor) -> Tensor { x.sub(&x.mean()).div(&x.std()) }
    }
    """


def test_a_list_under_a_head_of_a_gpu_title_is_gpu_work() -> None:
    body = """
        Core (2 files):
        - Fix GroupNorm/RMSNorm backward missing device restore
        """
    title = "fix: GPU safety audit"
    claims = run_review({"nn/src/norm.rs": NORM_BACKWARD}, body=body, title=title).claims
    # The list says "backward": the backward passes, which put the gradient on the device,
    # are the ops claimed; they launch nothing. The host-only `GroupNorm::forward` is none.
    assert [(c.subject, [f.fn.qualname for f in c.functions], c.backed) for c in claims] == [
        ("GroupNorm", ["GroupNormBackward::backward"], False),
        ("RMSNorm", ["RMSNormBackward::backward"], False),
    ]
    # The same list under a title that is not about the GPU claims nothing, nor does an
    # item that only describes ("- GroupNorm/RMSNorm backward: ...").
    assert run_review({"nn/src/norm.rs": NORM_BACKWARD}, body=body, title="fix: audit").claims == []
    described = body.replace(
        "Fix GroupNorm/RMSNorm backward missing device restore", "GroupNorm/RMSNorm backward: scale"
    )
    assert [
        c.subject for c in run_review({"nn/src/norm.rs": NORM_BACKWARD}, body=described, title=title).claims
    ] == ["safety audit"]


def test_an_unverifiable_claim_needs_a_gap_report() -> None:
    found = run_review({"src/lib.rs": KERNEL}, body="Implemented softmax on the GPU.").description
    assert sorted(f.rule for f in found) == ["missing-gap-report", "unbacked-claim"]
    reported = "Implemented softmax on the GPU. It does not work yet: next step is the kernel (#12)."
    found = run_review({"src/lib.rs": KERNEL}, body=reported).description
    assert [f.rule for f in found] == ["unbacked-claim"]


# A wgpu library whose test helper hands the driver's failure to the test (web-rwkv's
# `create_context()?`): such a test fails on a machine with no GPU, as a GPU test should.
_WGPU_CONTEXT = """
pub struct Instance;
impl Instance {
    pub fn new() -> Self { Instance }
    pub async fn adapter(&self) -> Result<Adapter, ContextError> {
        self.inner.request_adapter(&RequestAdapterOptions::default()).await.ok_or(ContextError::NoAdapter)
    }
}
pub struct ContextBuilder { adapter: Adapter }
impl ContextBuilder {
    pub async fn connect(self) -> Result<Context, ContextError> {
        let (device, queue) = self.adapter.request_device(&Default::default(), None).await.map_err(|_| ContextError::NoDevice)?;
        Ok(Context { device, queue })
    }
}
"""
_WGPU_SOFTMAX = """
pub fn softmax(context: &Context, x: &TensorGpu) -> Result<(), TensorError> {
    let pipeline = context.device.create_compute_pipeline(&descriptor("softmax"));
    let mut pass = context.encoder().begin_compute_pass(&Default::default());
    pass.set_pipeline(&pipeline);
    pass.dispatch_workgroups(x.len() as u32 / 128, 1, 1);
    Ok(())
}
#[cfg(test)]
mod tests {
    use super::*;
    fn create_context() -> Result<Context, anyhow::Error> {
        let adapter = pollster::block_on(async {
            let instance = Instance::new();
            instance.adapter().await
        })?;
        Ok(pollster::block_on(ContextBuilder { adapter }.connect())?)
    }
    #[test]
    fn test_softmax() -> Result<(), anyhow::Error> {
        CREATE
        softmax(&context, &context.zeros(1024))?;
        Ok(())
    }
}
"""


@pytest.mark.parametrize(
    ("create", "backed"),
    [
        ("let context = create_context()?;", True),
        ('let context = create_context().expect("a GPU");', True),
        # Returning early without a GPU: the test passes on any machine (spec Step 2 #9).
        ("let context = match create_context() { Ok(c) => c, Err(_) => return Ok(()) };", False),
        ("let Ok(context) = create_context() else { return Ok(()) };", False),
    ],
)
def test_a_test_passing_on_the_drivers_failure_is_a_gpu_test(create: str, backed: bool) -> None:
    files = {
        "src/context.rs": _WGPU_CONTEXT,
        "src/ops.rs": _WGPU_SOFTMAX.replace("CREATE", create),
        # Another `create_context` of the crate: the test's plain call is its own module's.
        "examples/chat.rs": "fn create_context() -> Result<Context, Error> { Ok(Context::default()) }",
    }
    found = run_review(files, body="", title="Use a shader for softmax.")
    assert [(c.subject, c.backed) for c in found.claims] == [("softmax", backed)]
    if backed:  # the hostile reviewer says how the test fails without a GPU
        (answers,) = found.answers
        assert answers.without_gpu.startswith("no: it calls `create_context` (src/ops.rs:")


_WGPU_UNTESTED = {
    "src/context.rs": _WGPU_CONTEXT,
    "src/ops.rs": _WGPU_SOFTMAX.replace("CREATE", "let context = 1;"),
}
_WGPU_TESTED = {
    "src/context.rs": _WGPU_CONTEXT,
    "src/ops.rs": _WGPU_SOFTMAX.replace("CREATE", "let context = create_context()?;"),
}


@pytest.mark.parametrize(
    ("title", "expected"),
    [
        ("Add int8 matmul shader.", [("int8 matmul", False)]),  # names nothing the diff changes
        ("Add softmax shader (untested)", [("softmax", False)]),
        ("Add wgpu softmax shader + docs", [("softmax", False)]),  # docs are no GPU op
    ],
)
def test_a_shader_is_gpu_code_like_a_kernel(title: str, expected: list[tuple[str, bool]]) -> None:
    found = run_review(_WGPU_UNTESTED, body="", title=title)
    assert [(c.subject, c.backed) for c in found.claims] == expected


def test_a_claim_about_wasm_needs_a_test_that_runs_on_wasm() -> None:
    # A native GPU test never compiles the code a wasm build runs (cubecl's
    # `#[cfg(target_family = "wasm")]` device setup).
    title = "Fix the wgpu softmax shader on wasm"
    (claim,) = run_review(_WGPU_TESTED, body="", title=title).claims
    assert not claim.backed
    assert "no GPU test that reaches it runs on wasm" in claim.missing[0]
    on_wasm = _WGPU_TESTED["src/ops.rs"].replace("#[test]", "#[wasm_bindgen_test]")
    (claim,) = run_review({**_WGPU_TESTED, "src/ops.rs": on_wasm}, body="", title=title).claims
    assert claim.backed, claim.missing


def test_a_squash_merges_item_about_a_model_the_diff_leaves_alone_is_unverifiable() -> None:
    # "* Use flash-attn in gemma." lists a commit whose work is not in this diff; the
    # pull request's title names the tested shader the diff changes.
    body = "* Use flash-attn in gemma.\n\n* Fix the wgpu softmax shader."
    found = run_review(_WGPU_TESTED, body=body, title="Fix the wgpu softmax shader (#2274)")
    assert [(c.subject, c.backed) for c in found.claims] == [("softmax", True), ("flash-attn gemma", False)]
    assert "about gemma, whose code the diff does not change" in found.claims[1].missing[0]


_OP_DISPATCHER = {
    "src/compiler.rs": """
pub fn compile(op_type: &str, device: &wgpu::Device) -> wgpu::ComputePipeline {
    let source = match op_type {
        "Cos" => COS_WGSL,
        "Erf" => ERF_WGSL,
        _ => panic!("unknown op"),
    };
    device.create_compute_pipeline(&descriptor(source))
}
pub fn session(op_type: &str) -> Session {
    let adapter = pollster::block_on(wgpu::Instance::default().request_adapter(&Default::default()));
    let device = pollster::block_on(adapter.expect("a GPU adapter").request_device(&Default::default(), None));
    Session { pipeline: compile(op_type, &device.expect("a GPU device").0) }
}
""",
    "tests/ops.rs": """
#[test]
fn test_cos() {
    assert_eq!(wonnx::session("Cos").run(&[0.0]).unwrap(), vec![1.0]);
}
#[test]
fn test_erf() {
    for e in wonnx::session("Erf").run(&[0.0, 1.0]).unwrap() {
        assert_ne!(e, f32::NAN);
    }
}
""",
}


def test_an_op_a_dispatcher_runs_by_name_is_tested_only_by_a_test_that_asks_for_it() -> None:
    # `compile` is reached by every GPU test, but only `test_erf` asks it for "Erf",
    # and that test's one check cannot fail.
    (claim,) = run_review(_OP_DISPATCHER, body="", title="feat: implement Erf operator").claims
    assert (claim.subject, claim.backed) == ("Erf", False)
    assert 'no enabled GPU test asks it for "Erf"' in claim.missing[0]
    checked = {
        **_OP_DISPATCHER,
        "tests/ops.rs": _OP_DISPATCHER["tests/ops.rs"].replace(
            "assert_ne!(e, f32::NAN)", "assert!(e.abs() < 1.0)"
        ),
    }
    (claim,) = run_review(checked, body="", title="feat: implement Erf operator").claims
    assert claim.backed, claim.missing


_BACKWARD_PASS = {
    "src/cuda.rs": """
impl CudaStorage {
    pub fn mul(&self, rhs: &Self) -> Result<Self, GpuError> {
        let f = self.dev.get_func("binary", "mul_f32").ok_or(GpuError::MissingKernel)?;
        unsafe { f.launch(LaunchConfig::for_num_elems(4), (self, rhs)) }?;
        Ok(self.clone())
    }
    pub fn index_add(&self, ids: &Self) -> Result<Self, GpuError> {
        let f = self.dev.get_func("indexing", "ia_f32").ok_or(GpuError::MissingKernel)?;
        unsafe { f.launch(LaunchConfig::for_num_elems(4), (self, ids)) }?;
        Ok(self.clone())
    }
}
""",
    "src/backprop.rs": """
pub fn backward(op: &Op, grad: &CudaStorage) -> Result<CudaStorage, GpuError> {
    match op {
        Op::Mul(rhs) => grad.mul(rhs),
        Op::Sqr(x) => grad.mul(&x.mul(x)?),
        Op::IndexSelect(ids) => grad.index_add(ids),
    }
}
""",
    "tests/grad.rs": """
#[test]
fn mul_grad_on_cuda() {
    let x = CudaStorage::ones(&CudaDevice::new(0).expect("this test needs a CUDA device"));
    assert_eq!(backward(&Op::Mul(x.clone()), &x).unwrap().to_vec(), vec![1.0]);
}
""",
}


def test_a_test_runs_only_the_arms_of_a_dispatch_by_op_that_it_names() -> None:
    # `backward` reaches `index_add` in the arm of `Op::IndexSelect`, which the one GPU
    # test, a gradient of `Op::Mul`, never takes.
    (claim,) = run_review(_BACKWARD_PASS, body="Implemented index_add on the GPU.").claims
    assert (claim.subject, claim.backed) == ("index_add", False)
    assert (
        "only through arms of a match over ops (`Op::X =>`) whose op none of them names" in claim.missing[0]
    )
    (claim,) = run_review(_BACKWARD_PASS, body="Implemented mul on the GPU.").claims
    assert claim.backed, claim.missing
    index_select_test = """
#[test]
fn index_select_grad_on_cuda() {
    let x = CudaStorage::ones(&CudaDevice::new(0).expect("this test needs a CUDA device"));
    assert_eq!(backward(&Op::IndexSelect(x.clone()), &x).unwrap().to_vec(), vec![1.0]);
}
"""
    tested = {**_BACKWARD_PASS, "tests/grad.rs": _BACKWARD_PASS["tests/grad.rs"] + index_select_test}
    (claim,) = run_review(tested, body="Implemented index_add on the GPU.").claims
    assert claim.backed, claim.missing


_DTYPE_DISPATCH = {
    "src/cuda.rs": """
pub fn gpu_log_f32(x: &CudaSlice<f32>) -> Result<CudaSlice<f32>, GpuError> {
    let f = DEV.get_func("log", "log_f32").ok_or(GpuError::MissingKernel)?;
    unsafe { f.launch(LaunchConfig::for_num_elems(4), (x,)) }?;
    Ok(x.clone())
}
pub fn gpu_log_f64(x: &CudaSlice<f64>) -> Result<CudaSlice<f64>, GpuError> {
    let f = DEV.get_func("log", "log_f64").ok_or(GpuError::MissingKernel)?;
    unsafe { f.launch(LaunchConfig::for_num_elems(4), (x,)) }?;
    Ok(x.clone())
}
""",
    "src/ops.rs": """
pub fn log<T: Float>(x: &Tensor<T>) -> Result<Tensor<T>, GpuError> {
    if is_f64::<T>() {
        Ok(Tensor::wrap(gpu_log_f64(x.cuda_f64()?)?))
    } else {
        Ok(Tensor::wrap(gpu_log_f32(x.cuda_f32()?)?))
    }
}
""",
    "tests/log.rs": """
#[test]
fn log_on_cuda() {
    let dev = CudaDevice::new(0).expect("this test needs a CUDA device");
    let x = Tensor::<f32>::ones(4, &dev);
    assert_eq!(log(&x).unwrap().to_vec(), vec![0.0f32; 4]);
}
""",
}


_DTYPE_DISPATCH_F32_FIRST = """
pub fn log<T: Float>(x: &Tensor<T>) -> Result<Tensor<T>, GpuError> {
    if is_f32::<T>() {
        Ok(Tensor::wrap(gpu_log_f32(x.cuda_f32()?)?))
    } else {
        Ok(Tensor::wrap(gpu_log_f64(x.cuda_f64()?)?))
    }
}
"""


@pytest.mark.parametrize("dispatch", [_DTYPE_DISPATCH["src/ops.rs"], _DTYPE_DISPATCH_F32_FIRST])
def test_a_test_runs_only_the_branches_on_a_dtype_that_it_uses(dispatch: str) -> None:
    # `log` reaches `gpu_log_f64` under `if is_f64::<T>()` (or in the else of `if
    # is_f32::<T>()`); the one GPU test logs f32.
    files = {**_DTYPE_DISPATCH, "src/ops.rs": dispatch}
    (claim,) = run_review(files, body="Implemented gpu_log_f64 on the GPU.").claims
    assert (claim.subject, claim.backed) == ("gpu_log_f64", False)
    assert (
        "only through branches none of them takes: on a dtype none uses (`if is_f64::<T>()`)"
        in claim.missing[0]
    )
    (claim,) = run_review(files, body="Implemented gpu_log_f32 on the GPU.").claims
    assert claim.backed, claim.missing
    # A test that names no dtype may use any: it takes every branch.
    untyped = {**files, "tests/log.rs": files["tests/log.rs"].replace("<f32>", "").replace("f32", "")}
    (claim,) = run_review(untyped, body="Implemented gpu_log_f64 on the GPU.").claims
    assert claim.backed, claim.missing
    f64_test = files["tests/log.rs"].replace("f32", "f64").replace("log_on_cuda", "log_f64_on_cuda")
    tested = {**files, "tests/log.rs": files["tests/log.rs"] + f64_test}
    (claim,) = run_review(tested, body="Implemented gpu_log_f64 on the GPU.").claims
    assert claim.backed, claim.missing


_AUTOCAST_DISPATCH = {
    **_DTYPE_DISPATCH,
    "src/ops.rs": """
pub fn log<T: Float>(x: &Tensor<T>) -> Result<Tensor<T>, GpuError> {
    if autocast_guard("log") == Some(AutocastCategory::ReducedPrecision) {
        Ok(Tensor::wrap(gpu_log_f64(x.cuda_f64()?)?))
    } else {
        Ok(Tensor::wrap(gpu_log_f32(x.cuda_f32()?)?))
    }
}
""",
}


def test_a_test_runs_the_branch_of_an_opt_in_mode_only_when_it_asks_for_it() -> None:
    # `gpu_log_f64` runs under autocast, which the one GPU test never turns on.
    (claim,) = run_review(_AUTOCAST_DISPATCH, body="Implemented gpu_log_f64 on the GPU.").claims
    assert (claim.subject, claim.backed) == ("gpu_log_f64", False)
    assert "or an opt-in mode none names (`if autocast_guard(..)`)" in claim.missing[0]
    asking = _AUTOCAST_DISPATCH["tests/log.rs"].replace(
        "let x =", "let _mode = autocast(ReducedPrecision);\n    let x ="
    )
    (claim,) = run_review(
        {**_AUTOCAST_DISPATCH, "tests/log.rs": asking}, body="Implemented gpu_log_f64 on the GPU."
    ).claims
    assert claim.backed, claim.missing


_GATHER = """
impl MetalStorage {
    pub fn gather(&self, ids: &Self) -> Result<Self> {
        let name = match (ids.dtype, self.dtype) {
            (DType::U32, DType::F32) => "gather_u32_f32",
            (DType::U32, DType::I64) => "gather_u32_i64",
            (left, right) => bail!("Metal gather {left:?} {right:?} not implemented"),
        };
        let encoder = self.device.command_encoder();
        encoder.set_compute_pipeline_state(&self.device.pipeline(name));
        encoder.dispatch_thread_groups(self.grid(), self.group());
        Ok(self.output())
    }
}
"""
_GATHER_TEST = """
#[test]
fn gather_metal() {
    let device = Device::new_metal(0).unwrap();
    let ids = Tensor::new(&[0u32, 2], &device).unwrap();
    let t = Tensor::new(&[1f32, 2.0, 3.0], &device).unwrap();
    assert_eq!(t.storage().gather(&ids.storage()).unwrap().to_vec(), vec![1.0, 3.0]);
}
"""


def _claims_of_lines(files: dict[str, str], touched: dict[str, frozenset[int]], body: str) -> list[Claim]:
    sources = [SourceFile(path, extract(code.encode())) for path, code in files.items()]
    return review(sources, RepoConfig(), touched, "", body).claims


def test_the_arms_a_diff_adds_to_a_dispatch_are_tested_only_by_a_test_that_takes_one() -> None:
    # The diff adds the `(U32, I64)` arm; the one GPU test gathers f32 with u32 ids.
    files = {"src/metal_backend.rs": _GATHER, "tests/gather.rs": _GATHER_TEST}
    new_arm = {"src/metal_backend.rs": frozenset({6})}
    (claim,) = _claims_of_lines(files, new_arm, "Added `MetalStorage::gather` for i64 sources on Metal.")
    assert not claim.backed
    assert "take none of the arms the diff adds (`(DType::U32, DType::I64) =>`)" in claim.missing[0]
    i64_test = _GATHER_TEST.replace("gather_metal", "gather_i64_metal").replace("1f32", "1i64")
    files_with_i64 = {**files, "tests/gather_i64.rs": i64_test}
    (claim,) = _claims_of_lines(
        files_with_i64, new_arm, "Added `MetalStorage::gather` for i64 sources on Metal."
    )
    assert claim.backed, claim.missing


@pytest.mark.parametrize("path", ["Builtin::", "Builtin::<Self>::"])  # a turbofish names no case
def test_a_test_takes_an_arm_it_names_in_another_case(path: str) -> None:
    # The arm matches `Builtin::AbsolutePos`; the test's kernel reads `ABSOLUTE_POS`.
    builtin = _GATHER.replace("gather(&self, ids: &Self)", "builtin(&self, which: Builtin)").replace(
        "match (ids.dtype, self.dtype) {", "match which {"
    )
    builtin = builtin.replace("(DType::U32, DType::F32) =>", f"{path}UnitPos =>")
    builtin = builtin.replace("(DType::U32, DType::I64) =>", f"{path}AbsolutePos =>")
    test = _GATHER_TEST.replace("t.storage().gather(&ids.storage())", "t.storage().builtin(ABSOLUTE_POS)")
    files = {"src/metal_backend.rs": builtin, "tests/builtin.rs": test}
    (claim,) = _claims_of_lines(
        files, {"src/metal_backend.rs": frozenset({6})}, "Added `MetalStorage::builtin` on Metal."
    )
    assert claim.backed, claim.missing


_SWITCHED_MATMUL = """
impl MetalDevice {
    pub fn new() -> Self {
        let use_mlx_mm = match std::env::var("CANDLE_USE_MLX_MM").as_deref() {
            Ok("0") | Err(_) => false,
            Ok(_) => true,
        };
        Self { use_mlx_mm }
    }
}
impl MetalStorage {
    pub fn matmul(&self, rhs: &Self) -> Result<Self> {
        let encoder = self.device.command_encoder();
        if self.device.use_mlx_mm {
            encoder.set_compute_pipeline_state(&self.device.pipeline("mlx_gemm"));
        } else {
            encoder.set_compute_pipeline_state(&self.device.pipeline("gemm"));
        }
        encoder.dispatch_thread_groups(self.grid(), self.group());
        Ok(self.output())
    }
}
"""
_MATMUL_TEST = """
#[test]
fn matmul_metal() {
    let device = MetalDevice::new();
    let a = MetalStorage::zeros(&device);
    a.matmul(&a).unwrap();
}
"""


def test_work_a_diff_puts_behind_a_setting_of_the_environment_is_tested_only_by_a_test_that_sets_it() -> None:
    # candle's MLX matmul: the diff writes the `use_mlx_mm` branch, which runs only when
    # CANDLE_USE_MLX_MM is set; the one GPU test does not set it.
    files = {"src/metal_backend.rs": _SWITCHED_MATMUL, "tests/matmul.rs": _MATMUL_TEST}
    new_branch = {"src/metal_backend.rs": frozenset({15, 16})}
    (claim,) = _claims_of_lines(files, new_branch, "Added the MLX `MetalStorage::matmul` on Metal.")
    assert not claim.backed
    assert "runs only when `CANDLE_USE_MLX_MM` is set (`use_mlx_mm`)" in claim.missing[0]
    setting = _MATMUL_TEST.replace(
        "let device", 'std::env::set_var("CANDLE_USE_MLX_MM", "1");\n    let device'
    )
    (claim,) = _claims_of_lines(
        {**files, "tests/matmul.rs": setting}, new_branch, "Added the MLX `MetalStorage::matmul` on Metal."
    )
    assert claim.backed, claim.missing
    # A variable read in place, in the condition itself.
    in_place = _SWITCHED_MATMUL.replace("if self.device.use_mlx_mm {", 'if std::env::var("MLX_MM").is_ok() {')
    (claim,) = _claims_of_lines(
        {**files, "src/metal_backend.rs": in_place},
        new_branch,
        "Added the MLX `MetalStorage::matmul` on Metal.",
    )
    assert "runs only when `MLX_MM` is set, and no GPU test" in claim.missing[0]
    # A change outside the branch runs for every test that reaches the function.
    (claim,) = _claims_of_lines(
        files, {"src/metal_backend.rs": frozenset({19})}, "Added the MLX `MetalStorage::matmul` on Metal."
    )
    assert claim.backed, claim.missing


@pytest.mark.parametrize(
    "title",
    [
        "Migrate to BufferUsage",  # onto a new API
        "[shaders] More graceful error handling",
        "Add cuda error msg",
        "ack api changes in cuda",
        "Fix cuda warn",  # a compiler warning
        "Correct memory info for wgpu",  # a report about the GPU
    ],
)
def test_a_title_about_the_plumbing_of_gpu_code_claims_nothing(title: str) -> None:
    assert run_review(_WGPU_UNTESTED, body="", title=title).claims == []


@pytest.mark.parametrize(
    "sentence",
    [
        "docs(examples): add comments for wgpu backend compatibility",
        "Allow too_many_arguments on the wgpu kernel dispatchers (softmax_wgpu) where args map 1:1.",
    ],
)
def test_comments_and_lint_allowances_on_gpu_code_claim_nothing(sentence: str) -> None:
    files = {path: code.replace("fn softmax(", "fn softmax_wgpu(") for path, code in _WGPU_UNTESTED.items()}
    assert run_review(files, body=f"Some cleanup.\n\n{sentence}\n", title="Tidy up").claims == []


@pytest.mark.parametrize(
    "title",
    [
        "fix softmax/cuda feature",  # a cargo feature
        "fix: fix cuda-all image",  # a docker image
        "add wgpu files",
        "Make GPU work a span.",  # a tracing span
        "Replace closure in softmax shader.",  # an edit inside the kernel
        "Added empty backend to Metal / Vulkan",  # a backend that does nothing
        "fix metal test softmax usage",  # the tests of a backend
        "add softmax runtime in test-cuda",
        "Fix cargo softmax guest test (#3592)",  # a cargo subcommand's test
        "Hotfix for CUDA build issues (#1929)",
        "Avoid using cargo rerun-if-changed on directories when building kernels",
        "Gracefully skip Metal kernels when tools are unavailable",  # skipping is no GPU work
        "Fix for bigint v1compat to avoid exhausting kernel stack",  # an operating system's kernel
        "Fix: include CUDA when building softmax_sys",
        "Fix: actually pass arguments to libnvvm when specified in cuda builder",
        "Implement CUDA 12.9 architecture suffixes",
        "Make cuda 12080 optional",  # a toolkit's release, as a cargo feature spells it
        "Avoid compiling any OpenCL on macos.",  # a build setting
        "fixup gpu constraints",  # a type's bounds
        "fix(gpu): compile",  # a build fix
        "fix(gpu): reduce softmax test iterations under compute-sanitizer",  # the tests' settings
        "Port some compiletests from rust-gpu",
        "Initial work on the softmax shader",  # work begun, not done
        "WIP: softmax on wgpu",
        "feat: add softmax_if_available for graceful Metal fallback",  # about a fallback
        "Throw error when softmax on wgpu gets a dtype not supported in WGSL",  # error handling
        "Add support for building softmax_sys with CUDA",  # a build option
        "Another attempt at removing the wgpu hack.",  # a removal
        "fix: linking for softmax on arm64 and static linking for WebGPU",  # a build setting
        "feat: threadpool access in operator kernels",  # an ONNX custom operator's host kernel
        "feat: implement more kernel attribute types",
        "Fix build for softmax cuda graph",  # a build fix
        "Fix the build on Metal platform",
        "Prioritize swap-out instead of GPU context-cache release",  # the GPU is what it replaces
        "Enable workspace lints for `gpu`",
        "reduce gpu softmax tests amount",  # the tests' settings
        "Again more cuda testing.",
        "Migrate default test backend from NdArray to wgpu",  # what the tests run on
        "Fix flaky wgpu softmax tests with unique device IDs",  # a backend's tests of an op
        "Add `cfg_aliases` to `wgpu-core` and `wgpu-hal`",  # build configuration
        "feat(jit): CpuC softmax JIT execution with compile caching",  # a host target by its name
        "Add wgpu softmax benches",  # benchmarks
        "fix softmax_profile to compile with metal",  # a build fix
        "Add new CUDA default path for Ubuntu 24.04",  # where the toolkit is installed
        "Add vulkan in example",  # an example program's
        "Move the softmax tensor to device in the trocr example",
        "Only support the contiguous case for wgpu softmax.",  # a restriction
    ],
)
def test_a_title_about_builds_files_tests_or_edits_inside_gpu_code_claims_nothing(title: str) -> None:
    assert run_review(_WGPU_UNTESTED, body="", title=title).claims == []


def test_code_for_the_meta_device_is_no_gpu_work() -> None:
    # PyTorch's meta device has shapes and no data: a list of the helpers that carry it
    # through the ops names host code, even under a head that says "primitives".
    files = {
        "core/src/meta_propagate.rs": """
            pub fn unary_same_shape(input: &Tensor) -> Option<Tensor> {
                if input.is_meta() {
                    return Some(Tensor::meta(input.shape()));
                }
                None
            }
            """
    }
    body = "Add helper primitives that propagate the meta device through op implementations:\n\n- unary_same_shape(input)\n"
    assert (
        run_review(files, body=body, title="feat(core): meta device propagation through the ops").claims == []
    )


def test_declaring_a_drivers_functions_is_no_gpu_work() -> None:
    files = {
        "src/nccl/sys/mod.rs": "pub unsafe fn ncclAllToAll(send: *const f32, count: usize) -> i32 {\n    lib().ncclAllToAll(send, count)\n}\n"
    }
    body = "* nccl: sys bindings for ncclAllToAll\n* bump version"
    assert run_review(files, body=body, title="nccl: bump bindings to 2.28.3").claims == []


@pytest.mark.parametrize(
    "title",
    [
        "Replace the softmax loop with a wgpu shader",  # what replaces it is the claim
        "Add a softmax shader for the dummy-free path",  # "dummy" names no backend here
        "Fix softmax shader on wgpu",
        "softmax shader implementation + test",  # the test comes with the op
        "Fix softmax shader for larger inputs and add an additional test",
        "fix(gpu): fix softmax shader when the row is not a multiple of 4",  # the case fixed, negated
        "Handle the case where the softmax input is not contiguous in the wgpu backend",  # so here
        "Get the softmax example to run on wgpu.",  # an example that runs on the GPU
        "Add more softmax functions from torch::wgpu",  # a C++ namespace, no comparison with PyTorch
        "Fix softmax shader on wgpu & pypi readme",  # the readme is upkeep of its own
        "wgpu: softmax shader, tiling fix, regression tests",  # so are the tests it lists
        "Use SIMD-group reductions in the softmax shader on wgpu",  # the GPU's SIMD groups
    ],
)
def test_a_title_that_puts_an_op_on_the_gpu_still_claims_it(title: str) -> None:
    (claim,) = run_review(_WGPU_UNTESTED, body="", title=title).claims
    assert "softmax" in claim.subject and not claim.backed


# The same launcher for another op, in a file of its own, with no test.
_WGPU_LOGSUMEXP = _WGPU_SOFTMAX.split("#[cfg(test)]")[0].replace("softmax", "logsumexp")


@pytest.mark.parametrize("logsumexp_is_new", [True, False])
def test_a_title_over_several_launchers_needs_a_gpu_test_of_each_one_it_adds(logsumexp_is_new: bool) -> None:
    files = {**_WGPU_TESTED, "src/extra.rs": _WGPU_LOGSUMEXP}
    sources = [SourceFile(path, extract(textwrap.dedent(code).encode())) for path, code in files.items()]
    touched = {path: frozenset(range(1, code.count("\n") + 2)) for path, code in files.items()}
    if not logsumexp_is_new:  # the diff only changes its workgroup size
        touched["src/extra.rs"] = frozenset({6})
    found = review(sources, RepoConfig(), touched, "Add more wgpu ops", "")
    (claim,) = found.claims
    assert claim.backed is not logsumexp_is_new
    if logsumexp_is_new:
        assert claim.missing == ["`logsumexp` (src/extra.rs:2): no GPU test reaches it — 4d"]


@pytest.mark.parametrize(
    "body",
    [
        "Title shapes: an example that runs on the GPU is a claim now.",  # a kind of thing, described
        "Titles: 'Add the wgpu softmax shader' says which shader.",  # a quoted title
    ],
)
def test_a_statement_about_claims_is_no_claim(body: str) -> None:
    assert run_review(_WGPU_UNTESTED, body=body, title="Checks: title shapes").claims == []


def test_a_thing_which_runs_on_the_gpu_is_claimed() -> None:
    body = "Replaced the loop with softmax() which runs on the GPU."
    (claim,) = run_review(_WGPU_UNTESTED, body=body, title="Checks: title shapes").claims
    assert "softmax" in claim.subject and not claim.backed


def test_a_hyphenated_compound_keeps_its_little_words_in_a_title_topic() -> None:
    (claim,) = run_review(_WGPU_UNTESTED, body="", title="feat(wgpu): proof-of-work grinding").claims
    assert claim.subject == "proof-of-work grinding"


@pytest.mark.parametrize("title", ["Improve wgpu compiler", "Feat/wgpu/improved compiler (#88)"])
def test_a_title_about_a_backends_compiler_claims_it(title: str) -> None:
    # The compiler of a backend writes its kernels (cubecl's dialects); "fix(gpu):
    # compile" is a build fix, the compiler is GPU work.
    (claim,) = run_review(_WGPU_UNTESTED, body="", title=title).claims
    assert (claim.subject, claim.backed) == ("compiler", False)


def test_the_setting_a_fix_is_for_negates_nothing() -> None:
    (claim,) = run_review(_WGPU_UNTESTED, body="", title="Fix wgpu softmax with autotune disabled").claims
    assert "softmax" in claim.subject and not claim.backed


def test_a_listed_bugfix_is_a_commit_title() -> None:
    body = "* Add a test for conv2d.\n\n* Cosmetic changes.\n\n* Bugfix the softmax function on the wgpu backend."
    (claim,) = run_review(_WGPU_UNTESTED, body=body, title="Add a test for conv2d (#578)").claims
    assert "softmax" in claim.subject and not claim.backed


def test_a_title_that_adds_a_device_says_which() -> None:
    (claim,) = run_review(_WGPU_UNTESTED, body="", title="Add the wgpu device.").claims
    assert (claim.subject, claim.backed) == ("wgpu device", False)


@pytest.mark.parametrize(
    "line",
    [
        "Add path filtering to the metal job.",  # a CI job
        "Added cuda mod and poc",
        "Added cuda ptx compilation make rule",
        "Add error handling for CUDA's softmax implementation",
        "add cuda softmax fuzzer",
        "feat(math): add Metal GPU profiling benchmarks and profiler",
        "Add Metal GPU stubs",
        "Add Metal dependencies (optional)",
        "feat: add gpu memory tracking metrics",  # what is measured of the GPU
        "Add CUDA kernel launch counters",
    ],
)
def test_a_line_about_tooling_or_plumbing_of_gpu_code_claims_nothing(line: str) -> None:
    assert run_review(_WGPU_UNTESTED, body=f"* {line}", title="Housekeeping").claims == []
    if "error handling" not in line:  # a title's topic loses "handling" with the verbs
        assert run_review(_WGPU_UNTESTED, body="", title=line).claims == []


@pytest.mark.parametrize(
    ("line", "subject"),
    [
        ("Added the softmax module for wgpu", "softmax module"),  # a module named by its op
        ("Add Metal GPU acceleration for softmax", "softmax"),  # not "GPU acceleration"
        ("add Metal GPU kernel optimizations for softmax", "softmax"),
    ],
)
def test_a_line_that_puts_an_op_on_the_gpu_claims_the_op(line: str, subject: str) -> None:
    (claim,) = run_review(_WGPU_UNTESTED, body=f"* {line}", title="Housekeeping").claims
    assert (claim.subject, claim.backed) == (subject, False)


def test_a_crates_test_helpers_are_support_code_not_a_cpu_reference_left_for_the_gpu() -> None:
    helper = "pub fn naive_dft(input: &[u64]) -> Vec<u64> { input.iter().map(|x| x * 2).collect() }\n"
    for path, gap in (("src/fft/test_helpers.rs", False), ("src/fft/dft.rs", True)):
        found = run_review({**_WGPU_UNTESTED, path: helper}, body="", title="Housekeeping").description
        assert ("missing-gap-report" in {f.rule for f in found}) is gap, path


_PROPTEST_OF_SOFTMAX = """
#[cfg(test)]
mod property_tests {
    use super::*;
    proptest! {
        #![proptest_config(ProptestConfig::with_cases(8))]
        #[test]
        fn softmax_matches_the_host(len in 1usize..4096) {
            let context = pollster::block_on(ContextBuilder { adapter: pollster::block_on(Instance::new().adapter()).unwrap() }.connect()).unwrap();
            softmax(&context, &context.zeros(len)).unwrap();
        }
    }
}
"""


def test_the_tests_of_a_proptest_block_are_indexed_and_reach_the_gpu() -> None:
    facts = extract(_PROPTEST_OF_SOFTMAX.encode())
    (test,) = facts.functions
    assert (test.name, test.fn_line, test.attrs, test.modules) == (
        "softmax_matches_the_host",
        8,
        ("#[test]",),
        ("property_tests",),
    )
    assert facts.syntax_errors == []
    files = {"src/context.rs": _WGPU_CONTEXT, "src/ops.rs": _WGPU_SOFTMAX.split("#[cfg(test)]")[0]}
    (claim,) = run_review(files, body="", title="Add softmax shader").claims
    assert not claim.backed
    files["src/ops.rs"] += _PROPTEST_OF_SOFTMAX
    (claim,) = run_review(files, body="", title="Add softmax shader").claims
    assert claim.backed, claim.missing


def _evidence_of(sources: dict[str, str], name: str) -> str:
    ws = Workspace(
        [SourceFile(p, extract(textwrap.dedent(c).encode())) for p, c in sources.items()], RepoConfig()
    )
    (item,) = [f for f in ws.functions if f.fn.name == name]
    return item.evidence


_HASH_ROWS = """
    pub fn hash_rows(out: &DeviceBuffer<u8>, input: &DeviceBuffer<u8>, rows: usize) -> i32 {
        unsafe { sppark_poseidon_rows(out.as_device_ptr(), input.as_device_ptr(), rows) }
    }
    """


@pytest.mark.parametrize(
    ("path", "signature", "evidence"),
    [
        ("sys/src/lib.rs", "d_out: DevicePointer<u8>, d_in: DevicePointer<u8>, rows: usize", True),
        ("sys/src/cuda.rs", "d_out: *mut u8, d_in: *const u8, rows: usize", True),  # a CUDA module's
        ("sys/src/lib.rs", "d_out: *mut u8, d_in: *const u8, rows: usize", False),  # any C library's
    ],
)
def test_a_foreign_function_on_device_memory_or_in_a_gpu_module_is_backend_evidence(
    path: str, signature: str, evidence: bool
) -> None:
    binding = f'extern "C" {{\n    pub fn sppark_poseidon_rows({signature}) -> i32;\n}}\n'
    found = _evidence_of({path: binding, "src/hash.rs": _HASH_ROWS}, "hash_rows")
    assert bool(found) is evidence, found


@pytest.mark.parametrize(
    ("name", "evidence"),
    [
        ("cuda_poseidon_rows", True),  # a foreign function of the GPU module, named for its backend
        ("cuda_get_device_count", False),  # ... that only reads a property of the device
    ],
)
def test_a_foreign_function_of_gpu_code_named_for_its_backend_is_evidence_unless_an_accessor(
    name: str, evidence: bool
) -> None:
    binding = f'extern "C" {{\n    pub fn {name}(d_out: *mut u8, d_in: *const u8, rows: usize) -> i32;\n}}\n'
    caller = _HASH_ROWS.replace("sppark_poseidon_rows", name)
    found = _evidence_of({"cuda-backend/src/bindings.rs": binding, "src/hash.rs": caller}, "hash_rows")
    assert bool(found) is evidence, found


@pytest.mark.parametrize(
    ("name", "gpu"),
    [
        ("CudaSlice", True),
        ("QMetalStorage", True),
        ("GPUBuffer", True),
        ("wgpu", True),
        ("cudarc", True),
        ("mpsc", False),
        ("Ownership", False),
        ("Nonmetal", False),
    ],
)
def test_a_type_is_named_for_the_gpu_by_a_whole_part_of_its_name(name: str, gpu: bool) -> None:
    """`mpsc::channel()` is a standard channel, not Apple's MPS."""
    assert bool(gpu_code.GPU_TYPE_NAME.search(name)) is gpu


def test_the_files_of_a_module_declared_under_cfg_test_are_test_code() -> None:
    stub = "pub fn gpu_square(x: &[f32]) -> Vec<f32> {\n    todo!()\n}\n"
    sources = {
        "src/lib.rs": "#[cfg(test)]\nmod helpers;\nmod ops;\n",
        "src/helpers.rs": stub,  # beside lib.rs
        "src/helpers/inner.rs": stub,  # a module of the test module
        "src/ops.rs": "mod kernels {\n    #[cfg(test)]\n    mod checks;\n}\n",
        "src/ops/kernels/checks.rs": stub,  # in the folder of the file that declares it, inline modules too
        "src/ops/kernels.rs": stub,  # compiled for users
    }
    ws = Workspace([SourceFile(p, extract(c.encode())) for p, c in sources.items()], RepoConfig())
    support = {f.path: f.support_code for f in ws.functions}
    assert support == {
        "src/helpers.rs": True,
        "src/helpers/inner.rs": True,
        "src/ops/kernels/checks.rs": True,
        "src/ops/kernels.rs": False,
    }


def test_a_type_alias_stands_for_its_type_in_calls_and_in_the_values_a_test_builds() -> None:
    hal = """
        pub trait Hal { fn eltwise_add(&self, n: usize); }
        pub struct CudaHal<H> { hash: H }
        pub type CudaHalSha256 = CudaHal<Sha256>;
        impl<H> CudaHal<H> {
            pub fn new() -> Self { todo!() }
        }
        impl<H> Hal for CudaHal<H> {
            fn eltwise_add(&self, n: usize) {
                let f = self.module.get_function("eltwise_add").unwrap();
                unsafe { launch!(f<<<n as u32, 256, 0, self.stream>>>(n)) }.unwrap();
            }
        }
        pub struct CpuHal;
        impl Hal for CpuHal { fn eltwise_add(&self, n: usize) { let _ = n; } }
        pub fn check_add<H: Hal>(hal: H) { hal.eltwise_add(8); }
        #[cfg(test)]
        mod tests {
            #[test]
            fn eltwise_add() {
                super::check_add(super::CudaHalSha256::new());
            }
        }
        """
    ws = Workspace([SourceFile("zkp/src/hal/cuda.rs", extract(textwrap.dedent(hal).encode()))], RepoConfig())
    (test,) = [f for f in ws.functions if f.fn.name == "eltwise_add" and gpu_code.is_test(f.fn)]
    reached = {ws.functions[i].fn.qualname for i in ws.reached_from([test])}
    assert {"CudaHal::new", "CudaHal::eltwise_add"} <= reached, reached


def test_a_tuple_alias_builds_every_type_in_it_so_their_trait_methods_are_reached() -> None:
    # luminal's `type MetalCompiler<T> = (PrimitiveCompiler<T>, (SoftmaxCompiler<T>, ..))`:
    # compiling a graph with the tuple runs each pass, and the ops a pass inserts run.
    compilers = """
        pub trait Compiler { fn compile(&self, graph: &mut Graph); }
        pub trait Operator { fn process(&self); }
        pub struct PrimitiveCompiler<T>(T);
        pub struct SoftmaxCompiler<T>(T);
        pub struct MetalSoftmax;
        pub type MetalCompiler<T> = (PrimitiveCompiler<T>, (SoftmaxCompiler<T>,));
        impl<T> Compiler for PrimitiveCompiler<T> { fn compile(&self, graph: &mut Graph) {} }
        impl<T> Compiler for SoftmaxCompiler<T> {
            fn compile(&self, graph: &mut Graph) { graph.ops.push(Box::new(MetalSoftmax)); }
        }
        impl Operator for MetalSoftmax {
            fn process(&self) {
                let encoder = self.queue.new_command_buffer().new_compute_command_encoder();
                encoder.dispatch_thread_groups(self.grid, self.threads);
            }
        }
        pub struct Graph { ops: Vec<Box<dyn Operator>> }
        impl Graph {
            pub fn compile<C: Compiler>(&mut self, compiler: C) { compiler.compile(self); }
            pub fn execute(&self) { for op in &self.ops { op.process(); } }
        }
        """
    passes = [
        f"struct Pass{n}; impl Compiler for Pass{n} {{ fn compile(&self, graph: &mut Graph) {{}} }}"
        for n in range(8)
    ]
    test = """
        #[test]
        fn test_softmax() {
            let mut cx = Graph::new();
            cx.compile(MetalCompiler::<f16>::default());
            cx.execute();
        }
        """
    files = [
        SourceFile("src/compilers/metal/mod.rs", extract(textwrap.dedent(compilers).encode())),
        SourceFile("src/compilers/passes.rs", extract("\n".join(passes).encode())),
        SourceFile("src/compilers/metal/tests.rs", extract(textwrap.dedent(test).encode())),
    ]
    ws = Workspace(files, RepoConfig())
    (root,) = [f for f in ws.functions if f.fn.name == "test_softmax"]
    reached = {ws.functions[i].fn.qualname for i in ws.reached_from([root])}
    assert {"SoftmaxCompiler::compile", "MetalSoftmax::process"} <= reached, reached
    assert "Pass0::compile" not in reached, reached


def test_a_value_a_test_builds_is_dropped_so_its_drop_is_reached() -> None:
    hal = """
        pub struct CudaCircuitHal { stream: CudaStream }
        impl CudaCircuitHal {
            pub fn new() -> Self { CudaCircuitHal { stream: CudaStream::new() } }
        }
        impl Drop for CudaCircuitHal {
            fn drop(&mut self) {
                unsafe { cudaDeviceSetLimit(CUDA_LIMIT_STACK_SIZE, 0) };
            }
        }
        #[test]
        fn prove_keccak_on_cuda() {
            let hal = CudaCircuitHal::new();
            let _ = &hal;
        }
        """
    ws = Workspace(
        [SourceFile("keccak/src/hal/cuda.rs", extract(textwrap.dedent(hal).encode()))], RepoConfig()
    )
    (test,) = [f for f in ws.functions if gpu_code.is_test(f.fn)]
    reached = {ws.functions[i].fn.qualname for i in ws.reached_from([test])}
    assert "CudaCircuitHal::drop" in reached, reached


_FFI_SCALE = """
    extern "C" {
        fn scale_cuda(x: *mut f32, n: usize, stream: cudaStream_t) -> i32;
    }

    pub fn gpu_scale(x: &mut [f32], ctx: &DeviceContext) -> Result<(), IcicleError> {
        unsafe { scale_cuda(x.as_mut_ptr(), x.len(), ctx.stream) }.wrap()
    }
    """
# The test template of the core crate, written out by each field crate: the test's
# helper unwraps the GPU routine's error, so the written-out test fails without a GPU.
_SCALE_TEST_TEMPLATE = """
    pub fn check_scale() {
        let mut x = vec![1.0f32; 4];
        gpu_scale(&mut x, &DeviceContext::default()).unwrap();
    }

    #[macro_export]
    macro_rules! impl_scale_tests {
        ($field:ident) => {
            #[test]
            fn test_scale() {
                check_scale()
            }
        };
    }
    """
_FIELD_CRATE = """
    #[cfg(test)]
    mod tests {
        use scale_core::tests::*;
        impl_scale_tests!(ScalarField);
    }
    """


@pytest.mark.parametrize(
    ("helper_call", "backed"),
    [
        ("gpu_scale(&mut x, &DeviceContext::default()).unwrap();", True),
        # dealing with the failure itself: the test passes without a GPU, testing nothing
        ("if gpu_scale(&mut x, &DeviceContext::default()).is_err() { return; }", False),
        # compiled only with the GPU feature: the default build's test runs nothing on the GPU
        (
            '#[cfg(feature = "cuda")]\n        { gpu_scale(&mut x, &DeviceContext::default()).unwrap(); }',
            False,
        ),
    ],
)
def test_a_written_out_test_template_that_fails_without_a_gpu_is_a_gpu_test(
    helper_call: str, backed: bool
) -> None:
    template = _SCALE_TEST_TEMPLATE.replace(
        "gpu_scale(&mut x, &DeviceContext::default()).unwrap();", helper_call
    )
    files = {
        "scale-core/src/lib.rs": _FFI_SCALE,
        "scale-core/src/tests.rs": template,
        "scale-bn254/src/lib.rs": _FIELD_CRATE,
    }
    assert claims_of("Implemented scale on the GPU.", files) == [("scale", backed)]


def test_a_test_template_is_a_test_only_where_it_is_written_out() -> None:
    core = {"scale-core/src/lib.rs": _FFI_SCALE, "scale-core/src/tests.rs": _SCALE_TEST_TEMPLATE}
    sources = [SourceFile(path, extract(textwrap.dedent(code).encode())) for path, code in core.items()]
    assert [f for f in Workspace(sources, RepoConfig()).functions if gpu_code.is_test(f.fn)] == []
    field = SourceFile("scale-bn254/src/lib.rs", extract(textwrap.dedent(_FIELD_CRATE).encode()))
    (test,) = [f for f in Workspace([*sources, field], RepoConfig()).functions if gpu_code.is_test(f.fn)]
    assert (test.path, test.fn.name, test.fn.line, test.fn.modules) == (
        "scale-bn254/src/lib.rs",
        "test_scale",
        5,
        ("tests",),
    )


def test_the_hostile_reviewer_says_how_a_written_out_test_fails_without_a_gpu() -> None:
    files = {
        "scale-core/src/lib.rs": _FFI_SCALE,
        "scale-core/src/tests.rs": _SCALE_TEST_TEMPLATE,
        "scale-bn254/src/lib.rs": _FIELD_CRATE,
    }
    answers = next(
        a
        for a in run_review(files, body="Implemented scale on the GPU.").answers
        if a.function.fn.name == "gpu_scale"
    )
    assert answers.kernel_launch.startswith("`scale_cuda(` in `gpu_scale` (scale-core/src/lib.rs:7)")
    assert "test_scale" in answers.gpu_test
    assert "`check_scale`" in answers.without_gpu and "fails when there is no GPU" in answers.without_gpu


_ASYNC_COPY = """
pub struct CudaDevice { stream: Stream }
impl CudaDevice {
    pub fn copy_into_async(&self, src: Vec<f32>, dst: &mut CudaSlice<f32>) -> Result<(), DriverError> {
        unsafe { result::memcpy_htod_async(dst.ptr, &src, self.stream) }?;
        Ok(())
    }
}
"""
_ASYNC_COPY_TEST = """
#[test]
fn copies_into_a_device_slice() {
    let dev = CudaDevice::new(0).unwrap();
    let mut dst = dev.alloc_zeros::<f32>(3).unwrap();
    dev.copy_into_async(vec![1.0, 2.0, 3.0], &mut dst).unwrap();
}
"""


def test_a_claim_about_device_memory_is_backed_by_the_driver_copy_it_makes() -> None:
    files = {"src/device.rs": _ASYNC_COPY, "tests/copy.rs": _ASYNC_COPY_TEST}
    touched = {"src/device.rs": frozenset(range(1, 9))}
    body = "Added `CudaDevice::copy_into_async`: an async host-to-device copy on the GPU."
    (claim,) = _claims_of_lines(files, touched, body)
    assert claim.backed, claim.missing
    # Without the driver copy, the memory claim says what was looked for.
    no_copy = {**files, "src/device.rs": _ASYNC_COPY.replace("result::memcpy_htod_async", "record")}
    (claim,) = _claims_of_lines(no_copy, touched, body)
    assert not claim.backed
    assert "no device allocation, copy, synchronisation, kernel launch" in claim.missing[0]
    # A function that only copies, claimed as a GPU op, computes nothing: no backend evidence (4a).
    as_an_op = {name: code.replace("copy_into_async", "softmax_async") for name, code in files.items()}
    (claim,) = _claims_of_lines(as_an_op, touched, "Implemented `softmax_async` on the GPU.")
    assert not claim.backed
    assert "no backend evidence" in claim.missing[0]
    # "Zero-copy" says no copy is made: a view, whose work is not the driver's copy.
    (claim,) = _claims_of_lines(as_an_op, touched, "Implemented zero-copy `softmax_async` views on the GPU.")
    assert not claim.backed


_RESIZE_WITH_A_DEFERRED_BACKWARD = {
    "src/lib.rs": KERNEL.replace("gpu_scale", "gpu_resize")
    .replace('"scale"', '"resize"')
    .replace(
        "        Ok(())",
        "        record_grad(move |g: &CudaSlice<f32>| resize_backward(g));\n        Ok(())",
    )
    + """
    pub fn resize_backward(grad: &CudaSlice<f32>) -> Result<(), GpuError> {
        panic!("resize backward is not supported on the GPU yet")
    }
    """,
    "tests/gpu.rs": GPU_TEST.replace("gpu_scale", "gpu_resize"),
}


def test_a_forward_claim_does_not_answer_for_the_backward_stub_it_registers() -> None:
    # The stub is the backward's gap (a gap report's matter), not the forward kernel's.
    (forward,) = run_review(
        _RESIZE_WITH_A_DEFERRED_BACKWARD, body="", title="Implement resize on the GPU"
    ).claims
    assert forward.backed, forward.missing
    (backward,) = run_review(
        _RESIZE_WITH_A_DEFERRED_BACKWARD, body="", title="Implement resize backward on the GPU"
    ).claims
    assert any("deferred-kernel" in m for m in backward.missing)


@pytest.mark.parametrize(
    "title",
    [
        "Add some skeleton code for GPU support of layer_norm",  # the spec's underclaim, in other words
        "Skip the layer_norm tests on cuda",  # a test taken out: a gap, not GPU work
    ],
)
def test_a_skeleton_or_skipped_tests_are_not_a_claim(title: str) -> None:
    assert run_review({"src/norm.rs": FAKE_LAYER_NORM}, body="", title=title).claims == []


_BACKEND_WITH_A_HOST_SUM = {
    "src/backend.rs": """
    pub struct CudaBackendImpl { dev: Arc<CudaDevice> }
    impl CudaBackendImpl {
        pub fn add_f32(&self, a: &CudaSlice<f32>, b: &CudaSlice<f32>) -> CudaSlice<f32> {
            let f = self.dev.get_func("k", "add").unwrap();
            let out = self.dev.alloc_zeros::<f32>(a.len()).unwrap();
            unsafe { f.launch(LaunchConfig::for_num_elems(a.len() as u32), (a, b, &out)) }.unwrap();
            out
        }
        pub fn sum_f32(&self, a: &CudaSlice<f32>) -> CudaSlice<f32> {
            let host = self.dev.dtoh_sync_copy(a).unwrap();
            let total: f32 = host.iter().sum();
            self.dev.htod_copy(vec![total]).unwrap()
        }
    }
    """,
    "tests/gpu.rs": """
    #[test]
    fn backend_on_cuda() {
        let dev = CudaDevice::new(0).expect("this test needs a CUDA device");
        let backend = CudaBackendImpl { dev: dev.clone() };
        let x = dev.htod_copy(vec![1.0f32; 4]).unwrap();
        backend.add_f32(&x, &x);
        backend.sum_f32(&x);
    }
    """,
}


def test_a_claim_of_a_type_answers_for_the_host_detour_the_diff_writes_into_one_of_its_methods() -> None:
    # `sum_f32` launches nothing, so it is not among the methods that do the GPU work;
    # but the diff writes a readback-and-sum into it, the fake GPU function the claim hides.
    (claim,) = run_review(_BACKEND_WITH_A_HOST_SUM, body="", title="Add the CudaBackend").claims
    assert not claim.backed
    assert any("sum_f32" in m and "4b" in m for m in claim.missing), claim.missing


@pytest.mark.parametrize(
    "body",
    [
        "The AdamW step is composed from 4 GPU kernel calls (scale, add, mul, sqrt).",
        "Entire step composed from 8 GPU kernel calls (scale, add, mul, sqrt, div).",
    ],
)
def test_the_kernels_a_step_is_made_of_are_its_means_not_claims(body: str) -> None:
    assert claims_of(body, {"src/lib.rs": KERNEL}) == []


def test_a_test_template_written_out_by_another_template_is_a_test_where_the_outer_one_is() -> None:
    # cubecl's `testgen_random!()` in a runtime crate invokes `testgen_random_uniform!()`,
    # whose tests then run on that crate's device.
    outer = """
    #[macro_export]
    macro_rules! impl_all_tests {
        () => {
            use scale_core::*;
            scale_core::impl_scale_tests!(ScalarField);
        };
    }
    """
    files = {
        "scale-core/src/lib.rs": _FFI_SCALE,
        "scale-core/src/tests.rs": _SCALE_TEST_TEMPLATE,
        "scale-core/src/all.rs": outer,
        "scale-bn254/src/lib.rs": _FIELD_CRATE.replace("impl_scale_tests!(ScalarField)", "impl_all_tests!()"),
    }
    assert claims_of("Implemented scale on the GPU.", files) == [("scale", True)]
    # Written out in the field crate only, not in the outer template's own file.
    sources = [SourceFile(path, extract(textwrap.dedent(code).encode())) for path, code in files.items()]
    tests = [f for f in Workspace(sources, RepoConfig()).functions if gpu_code.is_test(f.fn)]
    assert [(t.path, t.fn.name) for t in tests] == [("scale-bn254/src/lib.rs", "test_scale")]


def test_a_summary_cut_to_githubs_limit_keeps_the_gap_report_finding() -> None:
    # A claim over hundreds of untested kernels makes the claims table outgrow the
    # limit; the finding that the description lacks a gap report must survive the cut.
    long_name = "with_a_name_long_enough_to_make_each_line_of_what_is_missing_" * 2
    kernels = "\n".join(KERNEL.replace("gpu_scale", f"gpu_scale_{i:03}_{long_name}") for i in range(400))
    found = run_review({"src/lib.rs": kernels}, body="Implemented scale on the GPU.")
    summary = render(found)["checks"][1]["summary"]
    assert "truncated" in summary
    assert "**missing-gap-report**" in summary


def test_a_question_claims_nothing() -> None:
    # candle's "Does this prevent candle-kernels test suite from being run ?"
    files = {"cuda/src/scale.rs": KERNEL, "tests/gpu.rs": GPU_TEST}
    assert run_review(files, body="", title="Does this fix the scale kernel on cuda ?").claims == []
    assert [c.backed for c in run_review(files, body="", title="Fix the scale kernel on cuda").claims] == [
        True
    ]


_HOST_LIBRARY_MIN = """
    pub fn vs_min(a: &[f32], b: &[f32], out: &mut [f32]) {
        for i in 0..a.len() { out[i] = a[i].min(b[i]); }
    }
    """


@pytest.mark.parametrize("host_library", ["src/accelerate.rs", "src/mkl.rs"])
def test_a_function_of_apples_accelerate_or_intels_mkl_is_the_hosts(host_library: str) -> None:
    # candle's "Cuda support for min/max": the changed `vs_min` of `accelerate.rs` is a
    # CPU library's, not the CUDA work claimed.
    files = {
        host_library: _HOST_LIBRARY_MIN,
        "src/cuda_backend.rs": KERNEL.replace("gpu_scale", "binary_impl"),
    }
    (claim,) = run_review(files, body="", title="Cuda support for min").claims
    assert not claim.functions and not claim.backed
    assert claim.missing[0].startswith("no function the diff adds or changes matches `min`")


def test_files_listed_under_a_kernel_head_are_places_not_kernels() -> None:
    # ferrotorch's "Kernels touched:" followed by the files of CPU kernels.
    body = """
        Promote the accumulator to f32.

        Kernels touched:

        - core/src/grad_fns/activation.rs
          softmax CPU path: row_max and exp in f32 for bf16 inputs.
        """
    host = "pub fn activation(x: &[f32]) -> Vec<f32> { x.to_vec() }\n"
    assert run_review({"core/src/grad_fns/activation.rs": host}, body=body).claims == []


def test_the_methods_a_type_is_said_to_have_are_no_claims_of_their_own() -> None:
    # ferrotorch's "CudaEventWrapper with record/sync/query/wait_on" under a CUDA head.
    code = """
        pub struct CudaEvent { raw: u64 }
        impl CudaEvent {
            pub fn record(&self, dev: &CudaDevice) -> Result<(), GpuError> { dev.synchronize() }
            pub fn query(&self, dev: &CudaDevice) -> Result<(), GpuError> { dev.synchronize() }
            pub fn elapsed(&self, dev: &CudaDevice) -> Result<(), GpuError> { dev.synchronize() }
        }
        """
    body = """
        T2.1 (#267): CUDA stream pool + events
        - CudaEvent with record/query/elapsed
        - StreamPool with 8 streams per device
        """
    assert run_review({"gpu/src/stream.rs": code}, body=body).claims == []


@pytest.mark.parametrize(
    "title",
    [
        "Fix cuda scale + remove useless check in distributed server",
        "feat(cuda): improve cuda scale kernel and docs",
    ],
)
def test_a_removal_or_upkeep_a_title_adds_does_not_negate_its_gpu_work(title: str) -> None:
    files = {"cuda/src/scale.rs": KERNEL, "tests/gpu.rs": GPU_TEST}
    assert [(c.subject, c.backed) for c in run_review(files, body="", title=title).claims] == [
        ("scale", True)
    ]


def test_a_title_claims_its_first_sentence() -> None:
    # The sentence after the first says how; it names no more of the claim.
    files = {"cuda/src/scale.rs": KERNEL, "tests/gpu.rs": GPU_TEST}
    title = "Fixes cuda scale determinism. Ensure we use the 2 atomic_uints buffer correctly"
    claims = run_review(files, body="", title=title).claims
    assert [(c.subject, c.backed) for c in claims] == [("scale determinism", True)]


def test_an_integer_type_a_count_overflows_is_no_dtype_a_test_must_use() -> None:
    files = {"cuda/src/scale.rs": KERNEL, "tests/gpu.rs": GPU_TEST}
    title = "Flush during cuda scale writes to prevent u32 overflow"
    claims = run_review(files, body="", title=title).claims
    assert [c.backed for c in claims] == [True], [c.missing for c in claims]


@pytest.mark.parametrize(
    "title",
    [
        "Polish a bit the cuda kernel loading.",
        "Specific cache dir for the cuda scale build artifacts.",
        "Add cuda recursion limit note",  # burn's "Fix/docs" squash: "* Add wgpu recursion limit note"
    ],
)
def test_polish_a_build_cache_or_a_note_is_upkeep(title: str) -> None:
    files = {"cuda/src/scale.rs": KERNEL.replace("gpu_scale", "gpu_scale_untested")}
    assert run_review(files, body="", title=title).claims == []
    assert run_review(files, body=f"* {title}\n* Increase recursion limit", title="Fix/docs").claims == []


def test_the_tests_a_template_writes_out_through_paste_are_tests_where_it_is_invoked() -> None:
    # cubecl's `testgen_shared_sum!([f32])`: `paste!` names a module per dtype.
    written_out = """
            #[test]
            fn test_scale() {
                check_scale()
            }
    """
    assert written_out.strip() in _SCALE_TEST_TEMPLATE
    pasted = "::paste::paste! { mod [<$field _tests>] { use super::*;" + written_out + "} }"
    template = _SCALE_TEST_TEMPLATE.replace(written_out.strip(), pasted)
    files = {
        "scale-core/src/lib.rs": _FFI_SCALE,
        "scale-core/src/tests.rs": template,
        "scale-bn254/src/lib.rs": _FIELD_CRATE,
    }
    assert claims_of("Implemented scale on the GPU.", files) == [("scale", True)]
    sources = [SourceFile(path, extract(textwrap.dedent(code).encode())) for path, code in files.items()]
    tests = [f for f in Workspace(sources, RepoConfig()).functions if gpu_code.is_test(f.fn)]
    assert [(t.path, t.fn.name) for t in tests] == [("scale-bn254/src/lib.rs", "test_scale")]


def test_an_errors_message_is_no_work_a_claim_is_about() -> None:
    message = """
    pub struct FullScaleKernel;
    impl std::fmt::Display for FullScaleKernel {
        fn fmt(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
            write!(f, "no scale kernel for this dtype")
        }
    }
    """
    files = {"cuda/src/scale.rs": KERNEL + message, "tests/gpu.rs": GPU_TEST}
    claims = run_review(files, body="", title="Feat/full cuda scale kernel").claims
    assert [(c.backed, [f.fn.qualname for f in c.functions]) for c in claims] == [(True, ["gpu_scale"])]


def test_a_placeholder_by_its_name_does_not_back_a_claim() -> None:
    # cubecl's first Flash Attention: what its tests launch is the `dummy` algorithm.
    files = {"cuda/src/dummy/scale.rs": KERNEL, "tests/gpu.rs": GPU_TEST}
    (claim,) = run_review(files, body="", title="Feat/full cuda scale kernel").claims
    assert not claim.backed
    assert "a placeholder by its name (`dummy`)" in claim.missing[0]
    # candle's `dummy_cuda_backend.rs` beside the real backend: the claim is the real one's.
    beside = {**files, "cuda/src/scale.rs": KERNEL}
    (claim,) = run_review(beside, body="", title="Feat/full cuda scale kernel").claims
    assert claim.backed, claim.missing


def test_a_code_generator_writing_device_intrinsics_is_gpu_work_its_tests_reach() -> None:
    # cubecl's dialects: `Display` impls write MSL or CUDA C, reached from the compiler
    # through `format!` of the instructions it builds (a struct variant's value).
    files = {
        "cg/src/warp.rs": """
            pub enum WarpInstruction {
                Ballot { input: String },
            }
            impl std::fmt::Display for WarpInstruction {
                fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                    match self {
                        WarpInstruction::Ballot { input } => write!(f, "uint64_t(simd_ballot({input}))"),
                    }
                }
            }
            """,
        "cg/src/compiler.rs": """
            pub fn compile_ballot(input: &str) -> String {
                let instruction = WarpInstruction::Ballot { input: input.to_string() };
                format!("kernel void k() {{ {instruction}; }}")
            }
            """,
        "tests/gpu.rs": """
            #[test]
            fn ballot_on_metal() {
                let dev = MetalDevice::system_default().expect("needs a Metal device");
                dev.new_library_with_source(&compile_ballot("x"), &Default::default()).unwrap();
            }
            """,
    }
    touched = {"cg/src/warp.rs": frozenset(range(1, 12))}
    sources = [SourceFile(path, extract(textwrap.dedent(code).encode())) for path, code in files.items()]
    claims = review(sources, RepoConfig(), touched, "[metal] Fix simd_ballot instruction", "").claims
    assert [(c.backed, [f.fn.qualname for f in c.functions]) for c in claims] == [
        (True, ["WarpInstruction::fmt"])
    ], [c.missing for c in claims]


def test_a_generator_writing_a_kernel_languages_syntax_writes_kernel_source() -> None:
    # cubecl's WGSL dialect: `IsNan::format_scalar` writes `bitcast<u32>(..)`, WGSL's own
    # syntax; it runs through the default method `Unary::format` that `Instruction`'s
    # `Display` calls.
    files = {
        "cg/src/unary.rs": """
            pub trait Unary {
                fn format(f: &mut std::fmt::Formatter<'_>, input: &str) -> std::fmt::Result {
                    write!(f, "out = ")?;
                    Self::format_scalar(f, input)
                }
                fn format_scalar(f: &mut std::fmt::Formatter<'_>, input: &str) -> std::fmt::Result;
            }
            pub struct IsNan;
            impl Unary for IsNan {
                fn format_scalar(f: &mut std::fmt::Formatter<'_>, input: &str) -> std::fmt::Result {
                    write!(f, "(bitcast<u32>({input}) & 0x7fffffffu) > 0x7f800000u")
                }
            }
            """,
        "cg/src/instruction.rs": """
            pub enum Instruction {
                IsNan { input: String },
            }
            impl std::fmt::Display for Instruction {
                fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                    match self {
                        Instruction::IsNan { input } => IsNan::format(f, input),
                    }
                }
            }
            """,
        "cg/src/compiler.rs": """
            pub fn compile_isnan(input: &str) -> String {
                let instruction = Instruction::IsNan { input: input.to_string() };
                format!("fn k() {{ {instruction}; }}")
            }
            """,
        "tests/gpu.rs": """
            #[test]
            fn isnan_on_wgpu() {
                let (device, _queue) = pollster::block_on(adapter().request_device(&Default::default(), None)).unwrap();
                device.create_shader_module(wgsl(compile_isnan("x")));
            }
            """,
    }
    touched = {"cg/src/unary.rs": frozenset(range(9, 15))}
    sources = [SourceFile(path, extract(textwrap.dedent(code).encode())) for path, code in files.items()]
    claims = review(sources, RepoConfig(), touched, "[wgpu] Add the IsNan op", "").claims
    assert [(c.backed, [f.fn.qualname for f in c.functions]) for c in claims] == [
        (True, ["IsNan::format_scalar"])
    ], [(c.subject, c.missing) for c in claims]


# cubecl's runtime tests: a macro writes out each test routine, which launches the kernel,
# under the name its first argument gives, and a template writes out the `#[test]`s that
# call them through a macro of its own (`add_test!`), whose argument names both.
_NAMED_ROUTINE = """
    macro_rules! test_scale_impl {
        ($test_name:ident, $n:expr) => {
            pub fn $test_name(dev: &CudaDevice) {
                let x = dev.htod_copy(vec![1.0f32; $n]).unwrap();
                let f = dev.get_func("k", "scale").unwrap();
                unsafe { f.launch(LaunchConfig::for_num_elems($n), (&x,)) }.unwrap();
            }
        };
    }

    test_scale_impl!(test_scale, 4);

    #[macro_export]
    macro_rules! testgen_scale {
        () => {
            mod scale {
                macro_rules! add_test {
                    ($test_name:ident) => {
                        #[test]
                        fn $test_name() {
                            let dev = CudaDevice::new(0).expect("this test needs a CUDA device");
                            scale_core::runtime_tests::$test_name(&dev);
                        }
                    };
                }

                add_test!(test_scale);
            }
        };
    }
    """


def test_a_routine_and_a_test_a_macro_names_by_its_argument_reach_the_kernel() -> None:
    files = {
        "scale-core/src/runtime_tests.rs": _NAMED_ROUTINE,
        "scale-cuda/src/lib.rs": "#[cfg(test)]\nmod tests { scale_core::testgen_scale!(); }\n",
    }
    sources = [SourceFile(path, extract(textwrap.dedent(code).encode())) for path, code in files.items()]
    ws = Workspace(sources, RepoConfig())
    tests = [f for f in ws.functions if gpu_code.is_test(f.fn)]
    assert [(t.path, t.fn.name) for t in tests] == [("scale-cuda/src/lib.rs", "test_scale")]
    assert all(is_gpu_test(t, ws) for t in tests)
    # The routine as written is named after its macro, and reached through the one it writes out.
    reached = {ws.functions[i].fn.qualname for i in ws.reached_from(tests)}
    assert {"test_scale", "test_scale_impl!"} <= reached, reached
    # A helper that launches nothing (candle's `extract_dims!(dims4, ..)`) is left as written.
    helper = "macro_rules! dims { ($name:ident) => { pub fn $name(x: &[usize]) -> usize { x.len() } }; }\ndims!(dims4);\n"
    assert [f.name for f in extract(helper.encode()).functions] == ["_name"]


def test_a_cube_kernels_expand_function_is_the_kernel() -> None:
    # burn's first cube kernel: `#[cube] fn kernel` is compiled through `kernel_expand(..)`.
    code = """
        #[cube]
        fn kernel<F: Float>(input: &Tensor<F>, output: &mut Tensor<F>) {
            output[ABSOLUTE_POS] = input[ABSOLUTE_POS] * F::new(2.0);
        }

        impl<E: FloatElement> ScaleShader<E> {
            fn expand(self, context: &mut CubeContext) {
                kernel_expand::<E::CubeElement>(context, self.input, self.output)
            }
        }
        """
    ws = Workspace([SourceFile("src/kernel/scale.rs", extract(textwrap.dedent(code).encode()))], RepoConfig())
    (expand,) = [f for f in ws.functions if f.fn.name == "expand"]
    assert {ws.functions[i].fn.qualname for i in ws.reached_from([expand])} == {
        "ScaleShader::expand",
        "kernel",
    }


# candle's CUDA conv2d without cuDNN: the diff makes it run the existing `Im2Col` kernel.
_IM2COL = """
pub struct Im2Col { k: usize }
impl Im2Col {
    pub fn cols(&self, x: &CudaSlice<f32>, dev: &CudaDevice) -> Result<(), GpuError> { gpu_scale(x, dev) }
}
#[cfg(not(feature = "cudnn"))]
pub fn conv2d(x: &CudaSlice<f32>, dev: &CudaDevice) -> Result<(), GpuError> {
    Im2Col { k: 3 }.cols(x, dev)
}
"""
_IM2COL_TEST = GPU_TEST.replace("gpu_scale(&x, &dev)", "conv2d(&x, &dev)")


def test_a_claim_naming_a_type_is_about_the_changed_code_that_builds_one() -> None:
    files = {"src/cuda_backend.rs": textwrap.dedent(KERNEL) + _IM2COL, "tests/conv.rs": _IM2COL_TEST}
    conv2d_lines = frozenset(range(12, 15))
    (claim,) = _claims_of_lines(
        files, {"src/cuda_backend.rs": conv2d_lines}, "Add Im2Col support on the gpu side."
    )
    assert [f.fn.qualname for f in claim.functions] == ["conv2d"]
    assert claim.backed, claim.missing


@pytest.mark.parametrize(
    ("cfg", "cpu_build"),
    [
        ('#[cfg(not(feature = "cuda"))]', True),
        ('#[cfg(not(feature = "cudnn"))]', False),  # CUDA without cuDNN
        ('#[cfg(all(feature = "cuda", not(feature = "nccl")))]', False),
        ('#[cfg(not(any(feature = "cudnn", feature = "metal")))]', True),
    ],
)
def test_an_item_built_without_a_gpu_library_is_no_cpu_build(cfg: str, cpu_build: bool) -> None:
    assert gpu_code.is_cpu_build((cfg,)) == cpu_build


def test_a_title_that_rejects_an_input_claims_no_gpu_work() -> None:
    # cubecl's "fix: reject unsupported kernel argument types instead of panicking"
    files = {"cuda/src/scale.rs": KERNEL.replace("gpu_scale", "gpu_scale_untested")}
    title = "fix: reject unsupported cuda kernel argument types instead of panicking"
    assert run_review(files, body="", title=title).claims == []
    assert run_review(files, body="", title="fix: reject-free cuda kernel arguments").claims != []


def test_a_claim_about_webgpu_needs_a_test_in_a_browser_unless_the_backend_is_named_so() -> None:
    # cubecl's "Fix for weird subgroups on WebGPU": the browser's API, which no native test runs.
    title = "Fix the softmax shader on WebGPU"
    (claim,) = run_review(_WGPU_TESTED, body="", title=title).claims
    assert not claim.backed
    assert "no GPU test that reaches it runs on wasm" in claim.missing[0]
    # dfdx's `Webgpu` device implements the ops natively: its name is no browser.
    device = "pub struct Webgpu;\nimpl Webgpu { fn a(&self) {} fn b(&self) {} fn c(&self) {} }\n"
    (claim,) = run_review({**_WGPU_TESTED, "src/device.rs": device}, body="", title=title).claims
    assert claim.backed, claim.missing


def test_a_claim_naming_a_folder_of_gpu_code_is_about_the_code_in_it() -> None:
    # burn's "Migrate wgsl index shaders to gpu representation": `kernel/index/select.rs`.
    files = {"src/kernel/index/select.rs": KERNEL, "tests/gpu.rs": GPU_TEST}
    body = "Migrate wgsl index shaders to gpu representation."
    assert claims_of(body, files) == [("wgsl index", True)]
    # candle's "full quantized matmul kernels for cuda": not all of `quantized/` is matmul.
    quantized = {"src/quantized/cuda.rs": KERNEL, "tests/gpu.rs": GPU_TEST}
    assert claims_of("Add the full quantized matmul kernels for cuda.", quantized) == [
        ("quantized matmul", False)
    ]


def test_a_title_of_fixes_under_a_backends_label_is_about_that_backend() -> None:
    # cubecl's "[metal] Some fixes": as "Metal fixes", about the diff's Metal code.
    files = {"cuda/src/scale.rs": KERNEL}
    for title in ("[cuda] Some fixes (#566)", "Cuda fixes"):
        (claim,) = run_review(files, body="", title=title).claims
        assert (claim.subject.lower(), claim.backed) == ("cuda backend", False)
    (claim,) = run_review({**files, "tests/gpu.rs": GPU_TEST}, body="", title="[cuda] Some fixes").claims
    assert claim.backed, claim.missing
