"""What counts as GPU code, and the name-level vocabulary the rules share.

A function is *GPU code* (DESIGN.md) by its name, its location, its signature,
its ``#[cfg(feature = "cuda")]``, its impl block, or by being a GPU test. The
reasons are kept apart because they are not equally strong: a ``gpu_*`` name is
a claim, a file in ``*-gpu/`` only a context (that crate also holds host-side
helpers such as shape arithmetic).
"""

from __future__ import annotations

import fnmatch
import re

from app.checks.model import Function

# `OpenCL` but not `OpenClip` (a CLIP model): the word ends where a lowercase letter would go on.
_GPU_WORDS = (
    r"gpu|cuda|cudarc|cudnn|cublas|cublaslt|cubecl|wgpu|ptx|metal|mps|xpu|rocm|hip|vulkan|nccl"
    r"|(?-i:[Oo]pen(?:cl|CL)(?![a-z]))"
)
# In a function name, `ptx` is usually host code handling kernel text (generate_ptx),
# and a `*_launch` suffix names SIMD routines in CPU backends too.
_GPU_NAME_WORDS = r"gpu|cuda|cudnn|cublas|cublaslt|cubecl|wgpu|metal|mps|xpu|rocm|hip|vulkan|nccl|opencl"
GPU_NAME = re.compile(rf"(?:^|_)(?:{_GPU_NAME_WORDS})(?:_|$|\d)|^launch_", re.I)
# A type or module named for the GPU (`CudaSlice`, `QMetalStorage`, `GPUBuffer`, `wgpu`):
# the word starts the name or one of its camel-case or `_` parts and ends one, so
# `mpsc`, `Ownership` and `Nonmetal` name nothing of the GPU.
_NAME_PART_START = r"(?:(?<![A-Za-z])|(?<=[a-z0-9])(?=[A-Z])|(?<=[A-Z])(?=[A-Z][a-z]))"
GPU_TYPE_NAME = re.compile(rf"{_NAME_PART_START}(?i:{_GPU_WORDS})(?![a-z])")
# A path segment (or a `-`/`_`-separated part of one) that names a GPU backend.
_BACKEND_PATH_WORDS = r"gpu|cuda|wgpu|metal|mps|xpu|rocm|vulkan|cudnn|cublas|opencl"
# The GPU backends, by family, as files, names and prose spell them: `ferrotorch-mps/`
# is Metal's, `init_cuda_backend` CUDA's. A library of one ("via cuBLAS") is the means
# of the work, not the backend a claim names.
_BACKEND_FAMILIES = {
    "cuda": "cuda",
    "metal": "metal", "mps": "metal", "mtl": "metal", "msl": "metal",
    "wgpu": "wgpu", "webgpu": "wgpu", "vulkan": "wgpu", "spirv": "wgpu",
    "rocm": "rocm", "hip": "rocm", "opencl": "opencl", "ocl": "opencl",
}  # fmt: skip
_BACKEND_FAMILY_WORD = re.compile(rf"(?<![a-z])({'|'.join(_BACKEND_FAMILIES)})(?![a-z])", re.I)


def backends_named(text: str) -> frozenset[str]:
    """The backend families a text names (`cuda`, `metal`, `wgpu`, `rocm`, `opencl`)."""
    return frozenset(_BACKEND_FAMILIES[m.group(1).lower()] for m in _BACKEND_FAMILY_WORD.finditer(text))


# A kernel's file is GPU code unless it says it is the host's (dfdx's `div/cpu_kernel.rs`).
GPU_PATH = re.compile(
    rf"(?:^|[/_-])(?:{_BACKEND_PATH_WORDS}|cubecl|(?<!cpu[_/])(?<!host[_/])kernels?)(?:$|[/_.-])", re.I
)
# Where a test runs on a GPU by its file alone: a backend's directory, crate or kernel
# file (`burn-cubecl/`, `tests/cubecl/`, `webgpu_kernel.rs`). Not cubecl's own crates
# (`cubecl-common/`, whose arena and autotune-cache tests run on no device) nor any
# `kernels/` or `*_kernel.rs`: dfdx's `cpu_kernel.rs` sits beside its `cuda_kernel.rs`.
GPU_TEST_PATH = re.compile(
    rf"(?:^|[/_-])(?:{_BACKEND_PATH_WORDS}|webgpu)(?:$|[/_.-])|(?:^|[/_-])cubecl(?:/|\.rs$)", re.I
)
GPU_SIGNATURE = re.compile(
    r"\b(?:Cuda(?!Error|Result)\w*|Gpu(?!Error|Result)\w*|Device(?:Buffer|Ptr|Slice|Repr)\w*|wgpu::\w+|ComputeClient|CubeTensor"
    r"|CubeRuntime|TensorHandle\w*|Metal\w*|cudarc::\w+|CublasHandle|CudnnHandle)\b"
)
GPU_FEATURE = re.compile(
    r'feature\s*=\s*"(?:cuda|gpu|wgpu|cubecl|metal|cudnn|nccl|rocm|vulkan|opencl)[\w-]*"'
)
# The op's CPU implementation, by name: ``add_cpu``, ``cpu_add``, ``roll_cpu_inner``,
# ``matmul_reference``, ``naive_matmul``, ``host_softmax``, ``cpu_fallback_binary``.
# The marker sits at either end of the name (or before impl/inner): in the middle it
# is usually a noun (``storage_from_cpu_storage``, ``select_reference_layout``).
CPU_IMPL_NAME = re.compile(
    r"^(?:cpu|host|reference|naive)_|_(?:cpu|host|reference|naive)$"
    r"|_(?:cpu|host)_(?:impl|inner|kernel|path|version|fallback|loop)\b|(?:^|_)cpu_?fallback|_fallback$",
    re.I,
)
# Functions whose whole purpose is moving, showing or checking data: reading back is
# their job, not a detour.
TRANSFER_NAME = re.compile(
    r"(?:gpu|cuda|device|dev)_?to_?(?:cpu|host|vec)|(?:cpu|host)_?to_?(?:gpu|cuda|device)"
    r"|^to_(?:cpu|host|vec\d?|gpu|cuda|device|scalar)(?:_|$)|^(?:cpu|host|item|scalar|into_vec|to)$"
    r"|(?:^|_)from_(?:vec|slice|host|cpu|array|data)(?:_|$)|readback|download|upload|copy_to|copy_from"
    r"|(?:^|_)item(?:_|$)|^fmt$|display|debug|dump|print|save|serialize|export|to_string|checksum"
    r"|^read_|^write_|snapshot|summary|_to_host|_to_cpu|^as_host|^host_|htod|dtoh|memcpy|^clone_"
    r"|^(?:check|validate|verify|assert|compare|test)_|^try_from$|^from$|^into$|^try_into$"
    r"|state_dict|checkpoint|to_bytes|from_bytes"
    r"|(?:^|_)(?:set|cast|move|place)_(?:\w+_)?device$",  # placement: `set_nm_device`, `cast_nm_device`
    re.I,
)
# Build scripts, developer tools and the helpers a crate keeps for its tests
# (`fft/test_helpers.rs`, `test_utils/`, gated by `#[cfg(test)]` or not) are not the
# product either.
_TOOL_PATH = re.compile(
    r"(?:^|/)(?:build\.rs$|xtask/|tools?/|scripts?/|bindings?[-_]?gen\w*/|\w*bindgen\w*/"
    r"|test_?(?:helpers?|utils?|support)(?:\.rs$|/)"
    r"|[\w-]+[-_](?:macros?|derive)/src/)"  # a procedural macro crate runs inside the compiler
)
TEST_ATTR = re.compile(
    r"#\[\s*(?:\w+::)*(?:test|proptest|wasm_bindgen_test)(?:_case)?\b|#\[\s*rstest\b|#\[\s*cfg_attr\([^)]*\btest\b"
)
BACKWARD_NAME = re.compile(r"^(?:backward|backward_\w+|\w+_backward|grad_fn|vjp|apply_grad)$")
GPU_DEVICE_PATTERN = re.compile(
    r"\b(?:Cuda|Gpu|Wgpu|Metal|Mps|Xpu|Rocm|Vulkan|Cubecl|CubeCl|Hip|OpenCL|Opencl)\b"
)
CPU_DEVICE_PATTERN = re.compile(r"\bCpu\b")
KERNEL_ATTR = re.compile(r"#\[\s*(?:cubecl::)?cube\b|#\[\s*kernel\b|#\[\s*(?:cuda_std::)?kernel\b")


def has_gpu_cfg(attrs: tuple[str, ...]) -> bool:
    """``#[cfg(feature = "cuda")]`` and the like (``#[cfg(all(feature = "opencl",
    not(target_os = "macos")))]`` too), but not ``#[cfg(not(feature = "cuda"))]``."""
    return any("cfg" in attr and GPU_FEATURE.search(_cfg_parts(attr)[0]) for attr in attrs)


# A GPU library's feature: with it off the code still runs on the GPU, without that
# library (candle's `#[cfg(not(feature = "cudnn"))]` conv2d is its own CUDA kernels').
_GPU_LIBRARY_FEATURE = re.compile(r'^feature\s*=\s*"(?:cudnn|nccl)[\w-]*"$')


def is_cpu_build(attrs: tuple[str, ...]) -> bool:
    """An item compiled only when a GPU backend's feature is off: the "no CUDA" side."""
    return any(
        "cfg" in attr
        and any(not _GPU_LIBRARY_FEATURE.match(m.group()) for m in GPU_FEATURE.finditer(_cfg_parts(attr)[1]))
        for attr in attrs
    )


_NEGATION = re.compile(r"\bnot\s*\(")


def _cfg_parts(attr: str) -> tuple[str, str]:
    """The text of a ``cfg`` attribute outside its ``not(..)`` groups, and inside them."""
    outside: list[str] = []
    inside: list[str] = []
    pos = 0
    while (negation := _NEGATION.search(attr, pos)) is not None:
        outside.append(attr[pos : negation.start()])
        depth, end = 1, negation.end()
        while end < len(attr) and depth:
            depth += {"(": 1, ")": -1}.get(attr[end], 0)
            end += 1
        inside.append(attr[negation.end() : end])
        pos = end
    outside.append(attr[pos:])
    return "".join(outside), " ".join(inside)


def is_test(fn: Function) -> bool:
    return any(TEST_ATTR.search(a) for a in fn.attrs)


def is_support_code(fn: Function, path: str) -> bool:
    """Tests, benches, examples, ``#[cfg(test)]`` modules, build scripts (and the
    modules they keep in ``build/``), procedural macros and developer tools: code that
    supports the product but is not what users call."""
    if is_test(fn) or _TOOL_PATH.search(path):
        return True
    parts = path.split("/")
    if any(p in ("tests", "benches", "examples") for p in parts[:-1]):
        return True
    if "build" in parts[:-1] and "src" not in parts[: parts.index("build")]:
        return True  # `crates/x/build/gemm.rs`: the modules of a build script, beside `src/`
    return is_test_gated(fn.outer_attrs) or "tests" in fn.modules


# A test that runs in a wasm build: `#[wasm_bindgen_test]`, or one compiled only for wasm.
_WASM_TEST_ATTR = re.compile(r"wasm_bindgen_test|target_(?:family|arch)\s*=\s*\"wasm")


def runs_on_wasm(fn: Function) -> bool:
    return any(_WASM_TEST_ATTR.search(a) for a in (*fn.attrs, *fn.outer_attrs))


def is_test_gated(attrs: tuple[str, ...]) -> bool:
    """Under ``#[cfg(test)]``: compiled for the crate's tests only."""
    return any("cfg(test)" in attr.replace(" ", "") for attr in attrs)


def in_gpu_path(path: str, gpu_paths: tuple[str, ...]) -> bool:
    if any(fnmatch.fnmatch(path, pattern) for pattern in gpu_paths):
        return True
    return GPU_PATH.search(path) is not None


def gpu_claim_reason(fn: Function) -> str:
    """Why the function presents itself as GPU code ("" when it does not)."""
    if CPU_IMPL_NAME.search(fn.name) and not GPU_NAME.search(fn.name):
        return ""  # honestly named as the CPU implementation
    if GPU_NAME.search(fn.name):
        return f"its name `{fn.name}`"
    if has_gpu_cfg(fn.attrs):
        return "its `#[cfg(feature = ...)]` GPU gate"
    if fn.impl_type and GPU_TYPE_NAME.search(fn.impl_type):
        return f"its impl type `{fn.impl_type}`"
    if fn.trait and GPU_TYPE_NAME.search(fn.trait):
        return f"its trait `{fn.trait}`"
    if GPU_SIGNATURE.search(fn.params) or GPU_SIGNATURE.search(fn.ret):
        return "its GPU buffer types in the signature"
    return ""
