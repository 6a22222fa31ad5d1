from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING

from app.checks.model import Severity
from app.checks.rules.base import Hit, Rule

if TYPE_CHECKING:
    from app.checks.description import DescriptionContext


def check(ctx: DescriptionContext) -> Iterator[Hit]:
    """## What it does
    Extracts every GPU claim of the description ("Implemented X on GPU",
    "GPU-accelerated X", "ported X to CUDA", "added GPU support for X", "X now runs
    on the GPU"), resolves X to the functions the diff adds or changes (LayerNorm
    to `gpu_layer_norm`, "the f64 reductions" to `gpu_sum_f64`, "einops" to the
    changed functions of `einops.rs`), and calls the claim backed only when those
    functions have backend evidence (4a: a kernel launch, a GPU library call or a
    kernel source; for a claim about device memory, copies or synchronisation, the
    driver call that does it), no CPU detour or fallback (4b, Step 3),
    no stub residue (4c) and a GPU test that reaches them (4d). A claim that names
    nothing the diff changes is reported as unverifiable. Each op of a list is a
    claim of its own ("GPU kernels for div, exp, log"), and so is a changed GPU
    function the description names as done work (`gpu_softmax`, `SigmoidBackward`,
    a kernel source such as `LOG_F64_PTX`). A description that claims nothing in so
    many words is a terse one: a title that names a GPU backend or a kernel ("[Metal]
    Concurrent dispatching", "WGPU: matmul vec4", "rope kernel") is its claim, about
    the functions it names in that backend or, when it names none, the diff's GPU code
    of that backend ("added cuda support", "Fixing metal backend." name only the
    backend); when the diff changes no GPU code, the title is unverifiable. A short
    list item that reads as a commit title and puts its work on the GPU ("* Fix home
    folder for metal" in a squash merge's list of commits) is a claim the same way,
    unless it names plumbing first ("Add error handling for .."). What a
    title says the work replaces ("reuse cuda devices instead of instantiating
    contexts") is not part of its claim.
    Other titles ("feat: implement HardSigmoid operation", "Feature/silu") are a claim
    only where the diff's GPU code names the op, as a function or as the string it
    dispatches on (`"HardSigmoid" =>`). Upkeep titles (refactors, renames, docs,
    bumps, a backend's tests ("GPU pool tests"), benches, CI, docker images, debug
    output, build fixes and toolkit paths, work in an example program ("Add vulkan in
    example"), and such parts of a title after a comma or "&"), titles that disable
    something or restrict it ("Only support the contiguous case for cublas matmul"),
    code for PyTorch's meta device, SIMD or a host target (`InductorTarget::CpuC`), and
    subjects that are the plumbing around GPU code ("the cuda panic", "compute cap from
    env", "the Metal workspace setting", "add cuda structure") claim nothing. A
    negation in a parenthetical aside ("(native, no round-trip)") does not negate the
    sentence's claim. A list of a type's variants or methods or a record's fields is no
    list of ops. A
    function the description names is claimed only when it presents itself as GPU code
    or does GPU work: a host helper of a GPU crate (an allocator's `round_len`,
    `pool_take`) or an accessor (`CudaBuffer::alloc_len`) is not, nor is an op a
    sentence lists when its only GPU word is "kernel" (a CPU backend's kernels).
    A test counts for 4d when it reaches the function by the same call resolution
    (nothing calls a `#[test]`, so a CPU test named `softmax` does not carry a GPU
    test's call of `ops::softmax` into the CUDA kernel) and runs on a GPU: it builds a
    GPU device, is gated to a GPU feature, is named for one, or sits in a backend's
    directory or crate (`cuda/`, `burn-cubecl/`; not cubecl's own `cubecl-common/`).
    A subject no changed function names whole stands for the GPU code its most specific
    word names ("basic matmul" is `matmul`). The fallbacks and stubs held against a
    claim are those on the lines the diff writes: a fallback a changed function already
    had is the code check's finding, not the new work's, and a claim of a forward op
    does not answer for the stub of a backward it reaches ("lanczos3 backward is not
    supported": the gap report's matter). A helper of a GPU op that
    launches nothing itself and moves no data (a guard, a launch plan) has its op's
    evidence: a method of a GPU type another of whose methods in the file launches, or
    a function a GPU launcher calls. A test reaches the impl of a trait method only for
    the types the code it reaches builds (`backend.add_f32(..)` after `BackendA::new()`
    does not run `BackendB`'s; every impl when it builds none of them), and never an
    impl placed in another backend than the one it names (its file, name, devices,
    calls and messages); a tuple type alias (`type MetalCompiler<T> = (SoftmaxCompiler<T>,
    ..)`) builds each type in it. A function that runs many ops by the string it matches on
    (`"Erf" =>` in wonnx's `compile`) is tested for the claimed op only by a GPU test
    that asks for it by that name, and the arms a diff adds to a dispatch it does not
    add whole (`(DType::U32, DType::I64) =>` in a Metal gather) only by a GPU test that
    names all that one of them matches on (`i64` and `u32`). Likewise a test runs only
    the arms of a dispatch by op (a match of three arms or more naming ops, such as a
    backward pass's `Op::IndexSelect(..) =>`) whose op it names: a gradient test of
    `Op::Mul` reaches `index_add` through `backward()` but does not run it; and a test
    that uses f32 runs neither the then-block of `if is_f64::<T>()` nor the else of `if
    is_f32::<T>()` (a test naming no float dtype may use any), nor the then-block of an
    opt-in mode it does not name (`if autocast_guard("bmm") == ..`). A claim
    that names dtypes as words ("where-cond on cuda for u8 and u32", not `add_f32`) is
    tested only by a GPU test that uses one of them. A tuple struct's constructor
    (`Conv2D(params).map(..)`) builds a value of it, and a function declared in
    another's body (`fn inner<T>(..)` in a `cuda_fwd`) is a free function called by its
    name. A function that launches nothing itself but hands an op's value to a
    dispatcher (candle's `rope_thd` passing `&RotaryEmbThd` to `apply_op3_no_bwd`) has
    the launch the walk of 4d reaches from it. A claim is not about the host twin of its
    op (`im2col_cpu`), and "move sync rule to gpu" of a diff under a `gpu/` folder moves
    code between crates.

    ## Why is this bad?
    Spec Step 5: "Never use 'implemented', 'added GPU support', 'GPU-accelerated',
    'ported to CUDA' unless the verification in Step 4 passed." A false claim costs
    the next person a session of re-doing work they thought was complete.

    ## Example
    ```text
    Implemented LayerNorm on GPU.
    ```

    ```rust
    pub fn gpu_layer_norm(x: &CudaBuffer<f32>, dev: &GpuDevice) -> GpuResult<CudaBuffer<f32>> {
        let host = gpu_to_cpu(x, dev)?;
        let mean = host.iter().sum::<f32>() / host.len() as f32;
        cpu_to_gpu(&host.iter().map(|v| v - mean).collect::<Vec<f32>>(), dev)
    }
    ```

    ## Use instead
    ```text
    Wrote a CPU reference + scaffolding for the GPU path of LayerNorm.
    What works: the CPU reference. What does not: the kernel. Next step: write the PTX kernel.
    ```

    ```rust
    pub fn gpu_layer_norm(x: &CudaBuffer<f32>, dev: &GpuDevice) -> GpuResult<CudaBuffer<f32>> {
        let host = gpu_to_cpu(x, dev)?;
        let mean = host.iter().sum::<f32>() / host.len() as f32;
        cpu_to_gpu(&host.iter().map(|v| v - mean).collect::<Vec<f32>>(), dev)
    }
    ```
    """
    for claim in ctx.claims:
        if claim.backed:
            continue
        if not claim.functions:
            yield Hit(
                claim.line,
                f'unverifiable GPU claim "{claim.text}": {claim.missing[0]}. Name '
                f"the function, or state what was actually done (spec Step 5).",
            )
            continue
        names = ", ".join(f"`{f.fn.qualname}`" for f in claim.functions)
        yield Hit(
            claim.line,
            f'unbacked GPU claim "{claim.text}" ({names}): '
            + "; ".join(claim.missing)
            + '. Fix the code, or use an underclaim such as "Wrote a CPU reference + scaffolding '
            'for the GPU path" (spec Step 5).',
        )


RULE = Rule(
    id="unbacked-claim",
    severity=Severity.ERROR,
    spec="Step 4a-4d, Step 5",
    summary="a GPU claim in the description that the changed code does not back",
    check=None,
    check_description=check,
)
