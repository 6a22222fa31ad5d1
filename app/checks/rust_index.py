"""Parse one Rust file with tree-sitter-rust and extract the facts the rules need.

The extraction is the expensive part of a scan, so it does as little Python work
per node as it can: a single tree-sitter query (run in C) finds the structural
nodes, and token-level observations (calls, kernel launches, readbacks) come
from regexes over each function's text with comments and string contents
blanked out. The result depends only on the file's bytes, which is what makes it
cacheable by content.
"""

from __future__ import annotations

import bisect
import re
from dataclasses import replace
from functools import cache
from typing import Any, NamedTuple

from tree_sitter import Language, Node, Parser, Query, QueryCursor

from app.checks.gpu_code import TEST_ATTR, is_test_gated
from app.checks.model import (
    Arm,
    Branch,
    Call,
    Comment,
    FileFacts,
    Function,
    GpuSource,
    ItemMacro,
    Literal,
    Macro,
    Region,
    Signal,
)

# Part of the facts cache key, with the source of this file and of the modules it
# imports: bump it when the facts change without an edit there (a new tree-sitter grammar).
EXTRACTOR_VERSION = "53"

_TEXT_CAP = 400  # longest condition / pattern / macro-argument text kept
# A type that is a GPU device, backend or runtime (`Cuda`, `Wgpu<f32>`, `WgpuRuntime`,
# `CudaDevice`), not one that merely belongs to one (`GpuError`, `CudaSlice`).
_GPU_DEVICE_TYPE = re.compile(
    r"\b(?:(?:Cuda|Wgpu|Webgpu|WebGpu|Metal|Vulkan|Rocm|Hip|Cubecl|CubeCl)(?:Device|Backend|Runtime)?"
    r"|Gpu(?:Device|Backend|Runtime))\b"
)
# Device memory, streams and handles in a foreign function's signature: the C++ side
# of `extern "C" { fn sppark_batch_NTT(d_inout: DevicePointer<u8>, ..); }` runs on the GPU.
_DEVICE_MEMORY_TYPE = re.compile(
    r"\b(?:DevicePointer|DevicePtr(?:Mut)?|DeviceSlice|DeviceBuffer|CUdeviceptr|CUstream|CUcontext"
    r"|CUfunction|CUmodule|cudaStream_t|cublasHandle_t|cudnnHandle_t|MTLBuffer|MTLCommandQueue"
    r"|cl_mem|cl_command_queue|hipStream_t|hipDeviceptr_t)\b"
)

_QUERY = """
(function_item) @fn
(match_expression
  value: (_) @match.value
  body: (match_block (match_arm pattern: (_) @arm.pattern value: (_) @arm.value) @arm))
(if_expression condition: (_) @if.cond consequence: (block) @if.then
  alternative: (else_clause (_) @if.else)) @if
(if_expression condition: (_) @if.cond consequence: (block) @if.then !alternative) @if
(let_declaration alternative: (block) @letelse.block) @letelse
(block (attribute_item) @gated.attr)
(call_expression
  function: (field_expression field: (field_identifier) @handler.name)
  arguments: (arguments (closure_expression body: (_) @handler.body)))
(macro_invocation macro: (_) @macro.name (token_tree) @macro.args) @macro
(line_comment) @comment
(block_comment) @comment
(string_literal) @string
(raw_string_literal) @string
(const_item name: (identifier) @const.name value: (_) @const.value)
(static_item name: (identifier) @const.name value: (_) @const.value)
(use_declaration) @use
(type_item name: (type_identifier) @alias.name type: (_) @alias.type)
(foreign_mod_item body: (declaration_list (function_signature_item name: (identifier) @ffi.name) @ffi))
(mod_item name: (identifier) @modfile.name !body) @modfile
(ERROR) @error
"""

_HANDLER_METHODS = {"unwrap_or_else", "or_else", "map_or_else", "unwrap_or", "map_err"}

# The patterns below open with the character class of their first character and check
# what precedes it in a lookbehind after it: a pattern that opens with a class lets the
# regex engine skip ahead to candidates, which makes extraction markedly faster.
# A turbofish's arguments may hold one level of parentheses: `run::<R, (F, f16)>(..)`.
_TURBOFISH = rb"(?:::\s*<(?:[^;{}()]|\([^;{}()]*\))*>\s*)?"
_CALL_RE = re.compile(rb"\b([a-z_]\w*+)\s*+" + _TURBOFISH + rb"\(")
# `dispatch_binary!(rt, kernels::run_add, ..)`, `.map(ops::relu)`: a path to a function
# handed on as a value is called where it is handed to.
_FN_PATH_RE = re.compile(
    rb"((?:[a-z_](?<![\w:][a-z_])\w*::)(?:[a-z_]\w*::)*)([a-z_]\w*)\b(?!\s*(?:[(!<]|::))"
)
# `Type { field: .. }` or `path::Type::<T> { .. }`: a struct literal builds a value of Type.
_STRUCT_LITERAL_RE = re.compile(rb"([A-Z](?<!\w[A-Z])\w*+)\s*+" + _TURBOFISH + rb"\{")
# `Op::Conv1D { arg, .. } =>` (a pattern or a value): a variant of the enum `Op`, no
# value of a type named `Conv1D` (candle's backprop matches every op's variant so).
_VARIANT_PATH = re.compile(rb"(?<![\w:])([A-Z]\w*)\s*::\s*\Z")
_LONGEST_VARIANT_PATH = 64
# What a pattern has around it: `let` / `if let` before, `=>`, `|`, `if` (a guard) or
# `=` (a `let`'s value) after.
_PATTERN_BEFORE = re.compile(rb"\blet\s+(?:mut\s+)?\Z|\|\s*\Z")
_PATTERN_AFTER = re.compile(rb"\s*(?:=>|\||if\b|=[^=>])")


def _builds_a_value(text: bytes, start: int, brace: int) -> bool:
    """The enum variant written from ``start``, its fields opening at ``brace``, is a
    value the body builds, not a pattern it matches on (`Op::Conv1D { arg, .. } =>`)."""
    if _PATTERN_BEFORE.search(text, max(0, start - 16), start):
        return False
    end = balanced_end(text, brace)
    return end >= 0 and _PATTERN_AFTER.match(text, end) is None


_CLOSING = {ord("{"): ord("}"), ord("("): ord(")"), ord("["): ord("]")}


def balanced_end(text: bytes, opening: int, limit: int | None = None) -> int:
    """The offset just past the bracket that closes the one at ``opening`` (before
    ``limit``), or -1."""
    close = _CLOSING[text[opening]]
    depth = 0
    for index in range(opening, len(text) if limit is None else limit):
        if text[index] == text[opening]:
            depth += 1
        elif text[index] == close:
            depth -= 1
            if depth == 0:
                return index + 1
    return -1


# `xs.apply_op3(a, b, &RotaryEmbThd)`: a unit struct handed on as a value is built there.
_UNIT_ARGUMENT_RE = re.compile(rb"[(,]\s*+&?\s*+([A-Z]\w*+)\s*+(?=[,)])")
# `GgmlFlashAttn.eval(..)`: a method called on a unit struct (CamelCase, not a CONSTANT).
_UNIT_RECEIVER_RE = re.compile(
    rb"([A-Z](?<![\w.:][A-Z])[A-Z0-9]*+[a-z][A-Za-z0-9]*+)\s*+\.\s*+[a-z_]\w*+\s*+\("
)
# `Conv2D(params).map(..)`: a tuple struct's constructor (CamelCase, not a path's
# variant, not a CONSTANT) builds a value of it.
_TUPLE_STRUCT_RE = re.compile(rb"(?<![\w.:])([A-Z][A-Za-z0-9]*?[a-z][A-Za-z0-9]*+)\s*+\(")
_GENERIC_ARGS = re.compile(rb"<[^<>]*>")
_DOUBLED_SEPARATOR = re.compile(rb"::(?:\s*::)+")
_QUALIFIER_BYTES = frozenset(b"abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_:")
_NOT_CALLS = frozenset(
    {
        "if",
        "while",
        "match",
        "for",
        "return",
        "in",
        "fn",
        "let",
        "loop",
        "move",
        "as",
        "unsafe",
        "else",
        "where",
        "impl",
        "mut",
        "ref",
        "Some",
        "Ok",
        "Err",
        "None",
        "Box",
        "dyn",
        "break",
        "continue",
        "await",
        "self",
        "Self",
        "crate",
        "super",
    }
)


# Token-level observations. Python's regex engine is slow on a large alternation,
# so an Aho-Corasick automaton finds the keywords in one pass and a small regex,
# anchored at the keyword, confirms each hit. ``before`` says what must precede
# the keyword: "word" a non-identifier character, "dot" a method-call dot.
class _SignalSpec(NamedTuple):
    keyword: str
    kind: str
    pattern: re.Pattern[str]
    before: str


def _spec(keyword: str, kind: str, pattern: str, before: str = "word") -> _SignalSpec:
    return _SignalSpec(keyword, kind, re.compile(pattern), before)


_SIGNAL_SPECS = (
    # Device-to-host copies: the data leaves the GPU.
    _spec("cpu", "readback", r"cpu\s*\(\s*\)", "dot"),
    _spec("to_cpu", "readback", r"to_cpu(?:_vec\w*)?\s*\(", "any"),
    _spec("dtoh", "readback", r"dtoh\w*", "any"),
    _spec("memcpy_dto", "readback", r"memcpy_dto[hv]\w*"),
    _spec("copy_to_host", "readback", r"copy_to_host\w*"),
    _spec("to_host", "readback", r"to_host\s*\(", "any"),
    _spec("read_one", "readback", r"read_one\s*\("),
    _spec("Device", "readback", r"Device\s*::\s*Cpu\b(?=\s*\))", "to-call"),
    _spec("map_async", "readback", r"map_async\b"),
    _spec("to_vec", "readback", r"to_vec[123]\s*(?:::\s*<[^>]*>)?\s*\(", "dot"),
    _spec("to_scalar", "readback", r"to_scalar\s*(?:::\s*<[^>]*>)?\s*\(", "dot"),
    _spec("to_data", "readback", r"to_data\s*\(", "dot"),
    _spec("into_data", "readback", r"into_data\s*\(", "dot"),
    _spec("data_vec", "readback", r"data_vec\s*\(", "dot"),
    _spec("download", "readback", r"download\w*\s*\("),
    _spec("read_buffer", "readback", r"read_buffer\w*\s*\("),
    _spec("read", "readback", r"read\s*\([^()]*\)\s*\.\s*enq\s*\(", "dot"),  # ocl: `buf.read(&mut v).enq()`
    # Work launched on the GPU, or GPU libraries and kernel sources.
    _spec(
        "cudarc",
        "launch",
        r"cudarc\s*::\s*(?:cublas|cublaslt|cudnn|cufft|cusolver|cusparse|curand|nccl|nvrtc)\b",
    ),
    _spec(
        "launch",
        "launch",
        r"launch(?:_builder|_on_stream|_async|_cooperative|_unchecked|_kernel\w*)?\s*(?:::\s*<|\(|\b)",
        "any",
    ),
    _spec("LaunchConfig", "launch", r"LaunchConfig\b"),
    _spec("LaunchAsync", "launch", r"LaunchAsync\b"),
    _spec("cuLaunchKernel", "launch", r"cuLaunchKernel\w*"),
    *(
        _spec(lib, "launch", lib + r"\w*\s*(?:::|\()")
        for lib in ("cublas", "cudnn", "cufft", "cusolver", "cusparse", "curand", "nccl")
    ),
    _spec("gemm", "launch", r"gemm(?:_strided_batched|_batched|_ex)?\s*\(", "any"),
    _spec("gemv", "launch", r"gemv\s*\(", "any"),
    _spec("cubecl", "launch", r"cubecl\s*::\s*\w"),
    _spec("CubeCount", "launch", r"CubeCount\b"),
    _spec("CubeDim", "launch", r"CubeDim\b"),
    _spec("wgpu", "launch", r"wgpu\s*::\s*\w"),
    _spec("dispatch_workgroups", "launch", r"dispatch_workgroups\w*"),
    _spec("begin_compute_pass", "launch", r"begin_compute_pass\b"),
    _spec("create_compute_pipeline", "launch", r"create_compute_pipeline\b"),
    _spec("dispatch_thread", "launch", r"dispatch_thread(?:_group)?s\b"),
    _spec("set_compute_pipeline_state", "launch", r"set_compute_pipeline_state\b"),
    # objc2-metal spells Metal's selectors in camelCase.
    _spec("dispatchThread", "launch", r"dispatchThread(?:group)?s(?:_threadsPerThreadgroup)?\b", "any"),
    _spec("setComputePipelineState", "launch", r"setComputePipelineState\b", "any"),
    # Vulkan (vulkano's command buffer builder, ash and the C API) and OpenCL.
    _spec("bind_pipeline_compute", "launch", r"bind_pipeline_compute\b"),
    _spec("ComputePipeline", "launch", r"ComputePipeline\s*::\s*(?:new|with_pipeline_layout)\b"),
    _spec("cmd_dispatch", "launch", r"cmd_dispatch\w*\s*\("),
    _spec("vkCmdDispatch", "launch", r"vkCmdDispatch\w*"),
    _spec("enqueue_kernel", "launch", r"enqueue_(?:nd_range_)?kernel\w*\s*\(|clEnqueueNDRangeKernel\b"),
    _spec("enqueue_nd_range", "launch", r"enqueue_nd_range\s*\("),
    # ocl's program-and-queue and kernel builders; rust-gpu-tools' and opencl3's kernels.
    _spec("ProQue", "launch", r"ProQue\s*::\s*builder\b"),
    _spec("kernel_builder", "launch", r"kernel_builder\s*\("),
    _spec("Kernel", "launch", r"Kernel\s*::\s*builder\b"),
    _spec("create_kernel", "launch", r"create_kernel\s*\("),
    _spec("load_ptx", "launch", r"load_ptx\b"),
    _spec("compile_ptx", "launch", r"compile_ptx\w*"),
    _spec("Ptx", "launch", r"Ptx\s*::"),
    _spec("nvrtc", "launch", r"nvrtc\w*"),
    _spec("get_or_compile", "launch", r"get_or_compile\w*"),
    _spec("load_module", "launch", r"load_module\b"),
    _spec("get_or_load_func", "launch", r"get_or_load_func\w*"),
    _spec("load_function", "launch", r"load_function\b"),
    _spec("get_func", "launch", r"get_func\s*\("),
    # Host-to-device copies and device allocations.
    _spec("cpu_to_gpu", "upload", r"cpu_to_gpu\w*\s*\("),
    _spec("htod", "upload", r"htod\w*", "any"),
    _spec("to_gpu", "upload", r"to_gpu\s*\(", "any"),
    _spec("to", "upload", r"to\s*\(\s*&?\*?\s*(?:\w+\.)?\w*device\w*(?:\(\))?\s*\)", "dot"),
    _spec("to_device", "upload", r"to_device\s*\(", "any"),
    _spec("cuda", "upload", r"cuda\s*\(", "dot"),
    _spec("upload", "upload", r"upload\w*\s*\("),
    _spec("create_buffer_init", "upload", r"create_buffer_init\b"),
    _spec("write_buffer", "upload", r"write_buffer\b"),
    _spec("create_from_slice", "upload", r"create_from_slice\s*\("),  # CubeCL's ComputeClient
    _spec("write", "upload", r"write\s*\([^()]*\)\s*\.\s*enq\s*\(", "dot"),  # ocl: `buf.write(&v).enq()`
    _spec("Buffer", "device_memory", r"Buffer\s*::\s*(?:<[^>]*>\s*::\s*)?builder\b"),  # ocl
    _spec("create_buffer", "device_memory", r"create_buffer\w*\s*\("),  # wgpu, rust-gpu-tools
    _spec("alloc_zeros", "device_memory", r"alloc_zeros\b"),
    _spec("CudaSlice", "device_memory", r"CudaSlice\b"),
    _spec("synchronize", "sync", r"synchronize\s*\(", "any"),
    # Host-side computation and control flow.
    _spec("for", "host_loop", r"for\b[^{};]{1,120}?\bin\b"),
    _spec("iter", "host_loop", r"iter(?:_mut)?\s*\(\s*\)", "dot"),
    _spec("par_iter", "host_loop", r"par_iter\w*", "dot"),
    _spec("chunks", "host_loop", r"chunks\w*\s*\(", "dot"),
    _spec("to_vec", "to_vec", r"to_vec\s*\(\s*\)", "dot"),
    _spec("env", "env", r"env\s*::\s*var(?:_os)?\s*\("),
    _spec("Device", "device_cpu", r"Device\s*::\s*Cpu\b"),
    # A call on the host backend's unit device: `CpuDevice.ones_impl(..)`.
    _spec("Cpu", "device_cpu", r"\bCpu(?:Device|Backend)\s*(?:\.|::)\s*\w+\s*\("),
    _spec(
        "Device", "gpu_device", r"Device\s*::\s*(?:Cuda|Gpu|Wgpu|Metal|Vulkan|Rocm|Xpu|Mps|Cubecl|CubeCl)\b"
    ),
    # A device request naming the GPU: `Device::request_device(DeviceRequest::GPU)`, `DeviceKind::Cuda`.
    _spec("Device", "gpu_device", r"Device\w+\s*::\s*(?:GPU|Gpu|CUDA|Cuda|Metal|Wgpu|WebGpu|Vulkan)\b"),
    _spec("cuda", "gpu_device", r"cuda\s*\(", "dot"),
    _spec("CudaDevice", "gpu_device", r"CudaDevice\s*::\s*new\b"),
    _spec("GpuDevice", "gpu_device", r"GpuDevice\s*::\s*new\b"),
    _spec("CudaContext", "gpu_device", r"CudaContext\s*::\s*new\b"),
    _spec("cuda_if_available", "gpu_device", r"cuda_if_available\b"),
    _spec("new_cuda", "gpu_device", r"new_cuda\b"),
    _spec("is_cuda", "gpu_device", r"is_cuda\s*\(", "dot"),
    _spec("is_gpu", "gpu_device", r"is_gpu\s*\(", "dot"),
    _spec("device_ordinal", "gpu_device", r"device_ordinal\s*\(", "dot"),
    _spec("WgpuDevice", "gpu_device", r"WgpuDevice\b"),
    _spec("CudaRuntime", "gpu_device", r"CudaRuntime\b"),
    # Acquiring a GPU from the driver: a library function doing so runs on a GPU or fails.
    _spec("request_adapter", "gpu_acquire", r"request_adapter\b"),
    _spec("request_device", "gpu_acquire", r"request_device\s*\(", "dot"),  # wgpu's adapter
    _spec("initialize_adapter", "gpu_acquire", r"initialize_adapter_from_env\w*"),
    _spec("CudaContext", "gpu_acquire", r"CudaContext\s*::\s*new\b"),
    _spec("CudaDevice", "gpu_acquire", r"CudaDevice\s*::\s*new\b"),
    _spec("system_default", "gpu_acquire", r"Device\s*::\s*system_default\b"),
    _spec("MTLCreateSystemDefaultDevice", "gpu_acquire", r"MTLCreateSystemDefaultDevice\b"),
    _spec("Err", "return_err", r"Err\s*\("),
    _spec("return", "return", r"return\b"),
    _spec("continue", "return", r"continue\b"),
)


def _calls(text: bytes) -> list[Call]:
    calls: list[Call] = []
    for m in _CALL_RE.finditer(text):
        name = m.group(1).decode()
        if name in _NOT_CALLS:
            continue
        start = m.start(1)
        back = start - 1
        while back >= 0 and text[back] in b" \t\r\n":
            back -= 1
        qualifier = ""
        if back >= 1 and text[back - 1 : back + 1] == b"::":
            qualifier = _qualifier_before(text, back - 1)
        calls.append(Call(name, qualifier, back >= 0 and text[back] == 0x2E, start))
    for m in _FN_PATH_RE.finditer(text):
        calls.append(Call(m.group(2).decode(), m.group(1)[:-2].decode(), False, m.start(2)))
    calls.sort(key=lambda call: call.offset)
    return calls


def _qualifier_before(text: bytes, end: int) -> str:
    """The path before the ``::`` at ``end``, generic arguments dropped:
    ``SparseTensor::<f32>::from_dense`` is qualified by ``SparseTensor``."""
    first = end
    while first > 0:
        if text[first - 1] in _QUALIFIER_BYTES:
            first -= 1
        elif text[first - 1] == 0x3E:  # `>` closing a turbofish: skip to its `<`
            opening = _opening_angle(text, first - 1)
            if opening < 0:
                break
            first = opening
        else:
            break
    path = text[first:end].replace(b"->", b"")  # a `fn(..) -> T` argument's arrow is no bracket
    if path.startswith(b"<"):
        path = _trait_of_qualified_path(path)
    while b"<" in path:
        shorter = _GENERIC_ARGS.sub(b"", path)  # innermost generic arguments first
        if shorter == path:
            break
        path = shorter
    return _DOUBLED_SEPARATOR.sub(b"::", path).decode().strip(": ")


def _trait_of_qualified_path(path: bytes) -> bytes:
    """``NTT<F>`` of ``<<F as FieldImpl>::Config as NTT<F>>``: a call by the
    fully-qualified syntax is a call of the trait's method."""
    depth = 0
    split = -1
    for i in range(1, len(path) - 1):
        if path[i] == 0x3C:
            depth += 1
        elif path[i] == 0x3E:
            depth -= 1
        elif depth == 0 and path.startswith(b" as ", i):
            split = i + 4
    return path[split:-1].strip() if split > 0 and path.endswith(b">") else path


def _opening_angle(text: bytes, closing: int) -> int:
    """Where the ``<`` matching the ``>`` at ``closing`` is, -1 when nowhere near."""
    depth = 0
    for i in range(closing, max(closing - 200, -1), -1):
        if text[i] == 0x3E and (i == 0 or text[i - 1] != 0x2D):  # a `>`, not the arrow `->`
            depth += 1
        elif text[i] == 0x3C:
            depth -= 1
            if depth == 0:
                return i
        elif text[i] in b";{}":
            return -1
    return -1


def _constructed_types(text: bytes, calls: list[Call], impl_type: str) -> tuple[str, ...]:
    """Types whose values the body may build: struct literals, tuple structs
    (`Conv2D(params)`), unit structs handed on or called, and ``Type::f(..)`` calls
    (constructors, and over-approximating, any associated function)."""
    found: set[str] = set()
    for literal in _STRUCT_LITERAL_RE.finditer(text):
        variant = _VARIANT_PATH.search(text, max(0, literal.start() - _LONGEST_VARIANT_PATH), literal.start())
        if variant is None:
            found.add(literal.group(1).decode())
        elif _builds_a_value(text, variant.start(), literal.end() - 1):
            found.add(variant.group(1).decode())  # `WarpInstruction::ReduceSum { .. }` is a `WarpInstruction`
    for unit_value in (_UNIT_ARGUMENT_RE, _UNIT_RECEIVER_RE, _TUPLE_STRUCT_RE):
        found.update(m.group(1).decode() for m in unit_value.finditer(text))
    found.update(c.qualifier.rsplit("::", 1)[-1] for c in calls if c.qualifier)
    if "Self" in found:
        found.add(impl_type)
    return tuple(sorted(t for t in found if t[:1].isupper() and t != "Self"))


@cache
def _automaton() -> Any:
    import ahocorasick

    automaton = ahocorasick.Automaton()
    by_keyword: dict[str, list[_SignalSpec]] = {}
    for spec in _SIGNAL_SPECS:
        by_keyword.setdefault(spec.keyword, []).append(spec)
    for keyword, specs in by_keyword.items():
        automaton.add_word(keyword, (len(keyword), tuple(specs)))
    automaton.make_automaton()
    return automaton


_WORD_CHARS = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_")


def _preceded(text: str, pos: int, before: str) -> bool:
    if before == "any":
        return True
    if before == "word":
        return pos == 0 or text[pos - 1] not in _WORD_CHARS
    if pos > 0 and text[pos - 1] in _WORD_CHARS:
        return False
    back = pos - 1
    while back >= 0 and text[back] in " \t\r\n":
        back -= 1
    if before == "dot":
        return back >= 0 and text[back] == "."
    # "to-call": Device::Cpu as the argument of .to( / to_device(
    head = text[max(0, back - 12) : back + 1]
    return head.endswith("(") and ("to" in head)


def _signals(text: str) -> list[Signal]:
    found: list[Signal] = []
    for end, (length, specs) in _automaton().iter(text):
        pos = end - length + 1
        for spec in specs:
            if not _preceded(text, pos, spec.before):
                continue
            m = spec.pattern.match(text, pos)
            if m:
                # Show the whole identifier (`gpu_to_cpu(`, not `to_cpu(`).
                start = pos
                while start > 0 and text[start - 1] in _WORD_CHARS:
                    start -= 1
                found.append(Signal(spec.kind, text[start : m.end()], pos))
    return found


_GPU_SOURCE_RE = re.compile(
    rb"\.visible\s+\.entry|\.entry\s+\w|__global__|@compute|@workgroup_size|\.version\s+\d|"
    rb"\.target\s+sm_|\.(?:ptx|cu|cuh|wgsl|spv|cubin|fatbin|metal)\b",
    re.IGNORECASE,
)
# Kernel files by extension (headers are not kernels of their own), as a constant
# includes them: `include_str!(concat!(env!("OUT_DIR"), "/fill.ptx"))`, `include_str!("reduce.metal")`.
KERNEL_FILE_EXTENSIONS = "ptx|cu|metal|wgsl|spv|cubin|fatbin|hlsl|glsl"
_KERNEL_FILE_RE = re.compile(rf"[\w-]+\.(?:{KERNEL_FILE_EXTENSIONS})\b".encode(), re.I)
_KERNEL_ITEM_ARGS = re.compile(
    rf"^\(\s*([A-Za-z_]\w*)\s*,[^;]*?\.(?:{KERNEL_FILE_EXTENSIONS})\b".encode(), re.I | re.S
)
_DEVICE_STATIC = re.compile(r"\bstatic\s+(?:ref\s+)?([A-Za-z_]\w*)\s*:\s*(?:\w+::)*([A-Z]\w*)[^=;]*=")
_LAZY_STATIC_NAME = re.compile(rb"\bstatic\s+ref\s+([A-Za-z_]\w*)\s*:")
# `burn_tensor::testgen_all!()`: the test templates of a crate written out here.
_TESTGEN_CALL_RE = re.compile(rb"\b([a-z_][a-z0-9_]*)::testgen_\w*\s*!")
_ALLOW_RE = re.compile(r"gpuproof:\s*allow\(\s*([a-z0-9-]+)\s*\)\s*(?:--\s*(.*\S))?")


@cache
def _language() -> Language:
    import tree_sitter_rust

    return Language(tree_sitter_rust.language())


@cache
def _query() -> Query:
    return Query(_language(), _QUERY)


def _text(node: Node | None, cap: int = _TEXT_CAP) -> str:
    if node is None:
        return ""
    raw = node.text or b""
    return raw[:cap].decode("utf-8", "replace")


_BLANKED = bytes(0x0A if b == 0x0A else 0x20 for b in range(256))  # newlines kept, all else a space


def _blank(source: bytes, spans: list[tuple[int, int]]) -> bytes:
    """Replace every byte of the spans, newlines kept, with a space."""
    if not spans:
        return source
    spans.sort()
    out: list[bytes] = []
    pos = 0
    for start, end in spans:
        if end <= pos:
            continue
        start = max(start, pos)
        out.append(source[pos:start])
        out.append(source[start:end].translate(_BLANKED))
        pos = end
    out.append(source[pos:])
    return b"".join(out)


class _Scope:
    """Where a function or a macro sits: impl block, trait, inline modules, their
    attributes, and whether inside a function's body."""

    __slots__ = ("impl_type", "in_a_function", "modules", "outer_attrs", "trait")

    def __init__(self, node: Node, file_attrs: tuple[str, ...]) -> None:
        self.impl_type = ""
        self.trait = ""
        modules: list[str] = []
        attrs: list[str] = []
        # A function declared in another's body is a free function of that block, not a
        # method of the impl around it (candle's `fn inner<T>(..)` in each `cuda_fwd`).
        in_a_body = False
        parent = node.parent
        while parent is not None:
            kind = parent.type
            if kind == "function_item":
                in_a_body = True
            elif kind == "impl_item":
                if not self.impl_type and not in_a_body:
                    self.impl_type = _type_name(parent.child_by_field_name("type"))
                    self.trait = _type_name(parent.child_by_field_name("trait"))
                attrs.extend(_attributes(parent)[0])
            elif kind == "trait_item":
                if not self.trait and not in_a_body:
                    self.trait = _text(parent.child_by_field_name("name"))
                attrs.extend(_attributes(parent)[0])
            elif kind == "mod_item":
                modules.append(_text(parent.child_by_field_name("name")))
                attrs.extend(_attributes(parent)[0])
            elif kind == "source_file":
                attrs.extend(file_attrs)
            parent = parent.parent
        self.modules = tuple(reversed(modules))
        self.outer_attrs = tuple(attrs)
        self.in_a_function = in_a_body  # a statement of a body (a template test's `assert!`)


def _gated_statement(attr: Node) -> list[tuple[str, str, Node]]:
    """A `#[cfg(..)]` inside a body and the statement it gates (past the other
    attributes on it): `#[cfg(feature = "cuda")] { .. }`."""
    text = _text(attr, 200)
    statement = attr.next_named_sibling
    while statement is not None and statement.type == "attribute_item":
        statement = statement.next_named_sibling
    return [("cfg", text, statement)] if statement is not None and "cfg" in text else []


def _file_attributes(root: Node) -> tuple[str, ...]:
    """`#![cfg(feature = "gpu")]` at the top of a file gates all of it."""
    return tuple(_text(c) for c in root.named_children if c.type == "inner_attribute_item")


def _type_name(node: Node | None) -> str:
    """``Foo`` for ``Foo<T>``, ``a::Foo`` and ``&Foo``."""
    text = _text(node, 200)
    text = text.split("<", 1)[0].strip().lstrip("&").strip()
    return text.rsplit("::", 1)[-1].strip()


def _attributes(node: Node) -> tuple[list[str], list[str], int]:
    """Attributes and comments directly above an item, and the item's first line."""
    attrs: list[str] = []
    comments: list[str] = []
    first_row = node.start_point.row
    sibling = node.prev_named_sibling
    while sibling is not None and sibling.type in ("attribute_item", "line_comment", "block_comment"):
        if sibling.end_point.row < first_row - 1:
            break  # a blank line separates it from the item
        if sibling.type == "attribute_item":
            attrs.append(_text(sibling))
        else:
            comments.append(_text(sibling))
        first_row = sibling.start_point.row
        sibling = sibling.prev_named_sibling
    attrs.reverse()
    comments.reverse()
    return attrs, comments, first_row + 1


# `define_portable_binary!(portable_div, run_div);` at item level: a macro that
# generates a function named by its first argument from the functions it names next.
# `test_device!(rope, rope_cpu, rope_gpu, rope_metal);`: a test macro whose first
# argument is a function of the file generates the tests the others name, each
# calling it.
_GENERATOR_ARGS = re.compile(rb"^\(\s*([a-z_][a-z0-9_]*)\s*((?:,\s*[A-Za-z_][\w:]*\s*)+),?\s*\)$")
_ARG_NAME = re.compile(rb"[A-Za-z_][\w:]*")


def _generated_functions(
    node: Node, name_node: Node, args: Node, blank: bytes, defined: set[str], file_attrs: tuple[str, ...]
) -> list[Function]:
    """The functions an item-level macro of one of those two shapes defines: without
    them, everything behind such macros would be unreachable to the call graph (tests
    call `portable_div`, which no `fn` defines; `fn rope` is called only by the
    tests `test_device!` writes)."""
    text = blank[args.start_byte : args.end_byte]
    found = _GENERATOR_ARGS.match(text)
    if found is None:
        return []
    item = node.parent if node.parent is not None and node.parent.type == "expression_statement" else node
    attrs, doc, first_line = _attributes(item)
    scope = _Scope(item, file_attrs)

    def generated(name: str, extra_attrs: tuple[str, ...]) -> Function:
        return Function(
            name=name,
            impl_type=scope.impl_type,
            trait=scope.trait,
            modules=scope.modules,
            attrs=(*attrs, *extra_attrs),
            outer_attrs=scope.outer_attrs,
            params="",
            ret="",
            line=first_line,
            fn_line=node.start_point.row + 1,
            end_line=node.end_point.row + 1,
            body_line=args.start_point.row + 1,
            text=text,
            doc=tuple(doc),
        )

    first = found.group(1).decode()
    others = [(m.group().decode(), found.start(2) + m.start()) for m in _ARG_NAME.finditer(found.group(2))]
    if first not in defined:
        generator = generated(first, ())
        for name, offset in others:
            qualifier, _, callee = name.rpartition("::")
            generator.calls.append(Call(callee, qualifier, False, offset))
        return [generator]
    if "test" not in _text(name_node, 200).lower():
        return []  # a macro of unknown meaning over an existing function: nothing to add
    tests = []
    for name, _ in others:
        if "::" in name or name in defined:
            continue
        test = generated(name, ("#[test]",))
        test.calls.append(Call(first, "", False, found.start(1)))
        tests.append(test)
    return tests


def _kernel_source_item(node: Node, args: Node) -> list[GpuSource]:
    """`kernel_wgsl!(RepeatRaw, "../template/repeat.wgsl");` at item level: a macro
    that defines the item its first argument names from a kernel file; and a
    `lazy_static!` whose static loads kernel files (wonnx's shader `TEMPLATES`)."""
    text = args.text or b""
    found = _KERNEL_ITEM_ARGS.match(text) or (_KERNEL_FILE_RE.search(text) and _LAZY_STATIC_NAME.search(text))
    if not found:
        return []
    files = tuple(dict.fromkeys(m.group().decode() for m in _KERNEL_FILE_RE.finditer(text)))
    return [GpuSource(found.group(1).decode(), node.start_point.row + 1, node.end_point.row + 1, files)]


def _is_associated_type(name: Node) -> bool:
    """`type Device = Cuda;` in an impl or trait: no name other code can use."""
    scope = name.parent.parent if name.parent is not None else None
    owner = scope.parent if scope is not None and scope.type == "declaration_list" else None
    return owner is not None and owner.type in ("impl_item", "trait_item")


# The associated types of std traits name what a method returns (`Deref::Target`,
# `Add::Output`, `Iterator::Item`): a value of them exists only once the method runs.
_RESULT_TYPES = frozenset({"Target", "Output", "Item", "IntoIter", "Error", "Err", "Owned", "Future"})


def _associated_types(name: Node, target: Node) -> list[tuple[str, str]]:
    """`type Server = CudaServer;` or `type Compiler = CppCompiler<CudaDialect>;` in
    `impl Runtime for CudaRuntime`: (the implementing type, each type the binding
    names). Generic code over the trait (`R::Server`, `R::Compiler`) runs these types'
    methods when it runs with the implementing type, without building a value of them."""
    if not _is_associated_type(name) or _text(name) in _RESULT_TYPES:
        return []
    impl = name.parent.parent.parent if name.parent is not None and name.parent.parent is not None else None
    if impl is None or impl.type != "impl_item" or impl.child_by_field_name("trait") is None:
        return []
    implementing = _type_name(impl.child_by_field_name("type"))
    bound = dict.fromkeys(_TUPLE_ELEMENT.findall(_text(target)))
    return [(implementing, head) for head in bound if head not in ("Self", implementing)]


def _gpu_device_alias(name: Node, target: Node) -> tuple[str, tuple[str, ...]] | None:
    """`type TestDevice = crate::tensor::Cuda;` at module level: (the alias, the types
    it names) when it names a GPU device, backend or runtime type."""
    text = _text(target)
    if _is_associated_type(name) or not _GPU_DEVICE_TYPE.search(text):
        return None
    return _text(name), tuple(re.findall(r"\b[A-Z]\w*", text))


def _type_alias(name: Node, target: Node) -> list[tuple[str, str]]:
    """`pub type CudaHalSha256 = CudaHal<CudaHashSha256>;` at module level: (the alias,
    the type it stands for), so that `CudaHalSha256::new()` builds a `CudaHal`. A tuple
    alias (`type MetalCompiler<T> = (SoftmaxCompiler<T>, (CopyCompiler<T>, ..));`, a
    pipeline of passes) stands for each type in it: building the tuple builds them all."""
    alias = _text(name)
    written = _text(target)
    if _is_associated_type(name):
        return []
    if written.startswith("("):
        while (bare := _GENERIC_ARGUMENTS.sub("", written)) != written:
            written = bare  # `PrimitiveCompiler<T>` is a `PrimitiveCompiler`, not a `T`
        return [(alias, head) for head in _TUPLE_ELEMENT.findall(written) if head != alias]
    head = re.match(r"(?:\w+::)*([A-Z]\w*)", written)
    if head is None or head.group(1) == alias:
        return []
    return [(alias, head.group(1))]


_GENERIC_ARGUMENTS = re.compile(r"<[^<>]*>")
_TUPLE_ELEMENT = re.compile(r"(?<![\w:])(?:\w+::)*([A-Z]\w+)")  # a type's name, not a one-letter parameter


def _device_static(args: Node) -> tuple[str, tuple[str, ...]] | None:
    """`thread_local! { static GPU_DEVICE: Device = Device::request_device(DeviceRequest::GPU)
    .unwrap(); }`: a static holding a GPU device, named like an alias of one (the
    static, the type it holds)."""
    text = (args.text or b"").decode("utf-8", "replace")
    found = _DEVICE_STATIC.search(text)
    if not found or not any(s.kind == "gpu_device" for s in _signals(text[found.end() :])):
        return None
    return found.group(1), (found.group(2),)


# `macro_rules! impl_kernels { ($T:ty) => { impl Kernel<$T> for Cuda { fn forward(..) {..} } } }`:
# the functions a macro's expansion defines are where the kernels of many backends live,
# and tree-sitter leaves a macro body as bare tokens. Such a body is spliced in place of
# its definition (offsets kept) so that it parses as the items it expands to.
_MACRO_DEFINITION_QUERY = "(macro_definition) @definition"
_MACRO_BODY_QUERY = """
(token_repetition) @repetition
(metavariable) @variable
"fn" @fn
"""


@cache
def _macro_queries() -> tuple[Query, Query]:
    return Query(_language(), _MACRO_DEFINITION_QUERY), Query(_language(), _MACRO_BODY_QUERY)


# `cubecl_random::testgen_random_uniform!();` in a template's body: a template that
# writes out another's tests.
_TEST_TEMPLATE_CALL = re.compile(rb"\b\w*test\w*\s*!\s*[({\[]")


def _spliced_macro_bodies(source: bytes, root: Node) -> tuple[bytes, list[tuple[int, int]]] | None:
    """The source with each `macro_rules!` definition whose expansion defines a `fn` or
    invokes a test template replaced by its expansion's tokens: the wrapper and the
    matchers blanked, `$x` written `_x`, a `$( .. )*` repetition written once. Every
    byte keeps its offset and line. Also the line spans replaced, whose parse errors
    are the splice's, not the file's. None when there is no such definition."""
    definitions, body_parts = _macro_queries()
    spans: list[tuple[int, int]] = []
    rows: list[tuple[int, int]] = []
    dollars: list[int] = []
    pasted: list[tuple[int, int]] = []  # `[<$float _ty>]`: a name `paste!` builds
    for _, caps in QueryCursor(definitions).matches(root):
        definition = caps["definition"][0]
        parts = QueryCursor(body_parts).matches(definition)
        if not any("fn" in part for _, part in parts) and not _TEST_TEMPLATE_CALL.search(
            definition.text or b""
        ):
            continue
        rows.append((definition.start_point.row + 1, definition.end_point.row + 1))
        pos = definition.start_byte
        for rule in definition.named_children:
            body = rule.child_by_field_name("right") if rule.type == "macro_rule" else None
            if body is not None:
                spans.append((pos, body.start_byte + 1))  # the wrapper, the matcher, the opening delimiter
                pos = body.end_byte - 1
        spans.append((pos, definition.end_byte))
        pasted.extend(_unpasted(source, definition.start_byte, definition.end_byte, spans))
        for _, part in parts:
            if "variable" in part:
                dollars.append(part["variable"][0].start_byte)
            elif "repetition" in part:
                repetition = part["repetition"][0]
                delimiters = [c for c in repetition.children if c.type in ("(", ")")]
                if len(delimiters) >= 2:
                    spans.append((repetition.start_byte, delimiters[0].end_byte))
                    spans.append((delimiters[-1].start_byte, repetition.end_byte))
    if not rows:
        return None
    spliced = bytearray(_blank(source, spans))
    for offset in dollars:
        if spliced[offset : offset + 1] == b"$":  # a `$x` of a matcher is blanked already
            spliced[offset] = ord("_")
    for start, end in pasted:
        spliced[start:end] = re.sub(rb"\W", b"_", spliced[start:end])  # `[<_float _ty>]`: `___float__ty__`
    return bytes(spliced), rows


# `::paste::paste! {` in a template's body: its tokens are the items it writes out
# (cubecl's `mod [<$float _ty>] { #[test] fn vector() { .. } }`), once the names it
# pastes together are one identifier.
_PASTE_OPENING = re.compile(rb"(?:::\s*)?(?:paste\s*::\s*)?paste\s*!\s*[{(\[]")
_PASTED_NAME = re.compile(rb"\[<[^<>\[\]]*>\]")


def _unpasted(source: bytes, start: int, end: int, spans: list[tuple[int, int]]) -> list[tuple[int, int]]:
    """Blank (into ``spans``) the wrapper of each `paste!` invocation between ``start``
    and ``end``; return the spans of the names it pastes, to be written as one."""
    for opening in _PASTE_OPENING.finditer(source, start, end):
        delimiter = opening.end() - 1
        closed = balanced_end(source, delimiter, end)
        if closed >= 0:
            spans += [(opening.start(), delimiter + 1), (closed - 1, closed)]
    return [(name.start(), name.end()) for name in _PASTED_NAME.finditer(source, start, end)]


# `proptest! { #[test] fn name(x in strategy) { .. } }`: property tests, the usual way a
# crate tests its kernels against a reference on random inputs. Tree-sitter leaves the
# block as bare tokens, so the wrapper, inner `#![proptest_config(..)]` attributes and
# the `x in strategy` parameters are blanked: what is left parses as `#[test]` functions.
_PROPTEST_QUERY = "(macro_invocation macro: (_) @name (token_tree) @block) @invocation"


@cache
def _proptest_query() -> Query:
    return Query(_language(), _PROPTEST_QUERY)


def _spliced_proptest_blocks(source: bytes, root: Node) -> tuple[bytes, list[tuple[int, int]]] | None:
    """The source with each item-level `proptest! { .. }` block opened into the test
    functions it defines (offsets and lines kept), and the line spans opened; None when
    there is no such block."""
    spans: list[tuple[int, int]] = []
    rows: list[tuple[int, int]] = []
    for _, caps in QueryCursor(_proptest_query()).matches(root):
        invocation, block = caps["invocation"][0], caps["block"][0]
        if invocation.parent is None or invocation.parent.type not in ("source_file", "declaration_list"):
            continue  # inside a function the block's calls are that function's already
        is_proptest = _text(caps["name"][0]).rsplit("::", 1)[-1] == "proptest"
        if not is_proptest or not (block.text or b"").startswith(b"{"):
            continue
        rows.append((invocation.start_point.row + 1, invocation.end_point.row + 1))
        spans.append((invocation.start_byte, block.start_byte + 1))
        spans.append((block.end_byte - 1, invocation.end_byte))
        tokens = block.children
        for i, token in enumerate(tokens):
            if token.type == "#" and i + 2 < len(tokens) and tokens[i + 1].type == "!":
                spans.append((token.start_byte, tokens[i + 2].end_byte))  # `#![proptest_config(..)]`
            elif token.type == "fn" and i + 2 < len(tokens) and tokens[i + 2].type == "token_tree":
                params = tokens[i + 2]
                spans.append((params.start_byte + 1, params.end_byte - 1))
    if not rows:
        return None
    return _blank(source, spans), rows


_MACRO_RULES_NAME = re.compile(rb"macro_rules!\s*([A-Za-z_]\w*)")


# `dispatch!(..)`, `crate::dispatch!(..)`: an invocation of a macro the crate defines.
_OWN_CRATE = frozenset({"", "crate", "$crate", "self"})


def _expansion_calls(root: Node, blank: bytes) -> dict[str, list[Call]]:
    """The calls each `macro_rules!` macro of the file writes out where it is invoked
    (`dispatch_matmul!(rt, ..)` expanding to `kernels::run_matmul(c, ..)` in every
    backend's arm), by the macro's name; a `$launcher(..)` metavariable is no call (the
    path handed in is one where the macro is invoked). Macros that define functions
    or tests were spliced into items already and are not found here."""
    found: dict[str, list[Call]] = {}
    for _, caps in QueryCursor(_macro_queries()[0]).matches(root):
        definition = caps["definition"][0]
        name = definition.child_by_field_name("name")
        if name is None:
            continue
        calls = found.setdefault(_text(name), [])
        for rule in definition.named_children:
            body = rule.child_by_field_name("right") if rule.type == "macro_rule" else None
            if body is not None:
                text = blank[body.start_byte : body.end_byte]
                calls.extend(c for c in _calls(text) if text[max(c.offset - 1, 0) : c.offset] != b"$")
    return found


class _TemplateSpan(NamedTuple):
    name: str
    first: int
    last: int
    offset: int  # of its `macro_rules!`


def _template_spans(template_rows: list[tuple[int, int]], source: bytes) -> list[_TemplateSpan]:
    """Each spliced `macro_rules!` definition: its name, rows and offset."""
    line_starts = [0, *(m.end() for m in re.finditer(rb"\n", source))]
    spans = []
    for first, last in template_rows:
        named = _MACRO_RULES_NAME.search(source, line_starts[first - 1])
        if named:
            spans.append(_TemplateSpan(named.group(1).decode(), first, last, named.start()))
    return spans


def _template_at(row: int, spans: list[_TemplateSpan]) -> _TemplateSpan | None:
    """The innermost `macro_rules!` definition whose expansion the row is in (a template
    may define a macro of its own), None when none."""
    holding = [span for span in spans if span.first <= row <= span.last]
    return max(holding, key=lambda span: span.first, default=None)


def _template_of(row: int, spans: list[_TemplateSpan]) -> str:
    span = _template_at(row, spans)
    return span.name if span else ""


def _local_macro(macro: str, row: int, spans: list[_TemplateSpan]) -> _TemplateSpan | None:
    """The definition of ``macro`` inside the template around ``row`` (cubecl's
    `testgen_binary!` defines the `add_test!` it invokes), None when it is not defined
    there."""
    outer = _template_at(row, spans)
    return next(
        (
            span
            for span in spans
            if outer and span.name == macro and outer.first < span.first and span.last <= outer.last
        ),
        None,
    )


# `macro_rules! test_powi_impl { ($test_name:ident, ..) => { pub fn $test_name<R: Runtime>(..) {..} } }`
# invoked as `test_powi_impl!(test_powi, F, [..]);`: the function the invocation names.
_NAMED_BY_FIRST_ARGUMENT = re.compile(rb"macro_rules!\s*\w+\s*[{(\[]\s*\(\s*\$(\w+)\s*:\s*ident\b")
_FIRST_ARGUMENT = re.compile(rb"^\(\s*([A-Za-z_]\w*)\s*[,)]")


def _named_by_first_argument(fn: Function, span: _TemplateSpan, source: bytes) -> bool:
    """Whether the template defines ``fn`` under the name its first argument gives."""
    named = _NAMED_BY_FIRST_ARGUMENT.match(source, span.offset)
    return named is not None and fn.name == "_" + named.group(1).decode()


def _named_templates(
    functions: list[Function], spans: list[_TemplateSpan], source: bytes
) -> dict[str, list[Function]]:
    """By macro name, the functions a `macro_rules!` expansion defines under the name
    its first argument gives (`fn $test_name`) and that launch a kernel: cubecl's test
    routines. Other such helpers (candle's `extract_dims!(dims4, ..)`) are left to the
    name as written: their instances would only widen the walk."""
    found: dict[str, list[Function]] = {}
    for fn in functions:
        span = _template_at(fn.line, spans) if fn.name.startswith("_") else None
        if span and _launches(fn) and _named_by_first_argument(fn, span, source):
            # Named after its macro (`test_powi_impl!`): what its invocations call.
            fn.name = f"{span.name}!"
            found.setdefault(span.name, []).append(fn)
    return found


def _launches(fn: Function) -> bool:
    return any(signal.kind == "launch" for signal in fn.signals)


def _local_tests(
    template: str,
    local: _TemplateSpan,
    args: Node,
    test_templates: list[tuple[str, Function]],
    spans: list[_TemplateSpan],
    source: bytes,
) -> list[tuple[str, Function]]:
    """The tests `add_test!(test_powi)` writes out in ``template``'s expansion, of the
    `add_test!` it defines (``local``): each of its test functions, the one its first
    argument names under that name."""
    named = _FIRST_ARGUMENT.match(args.text or b"")
    found = []
    for name, test in test_templates:
        if name != local.name or _template_at(test.line, spans) != local:
            continue
        if _named_by_first_argument(test, local, source):
            if named is None:
                continue
            test = _renamed(test, named.group(1).decode())
        found.append((template, test))
    return found


def _of_a_local(template: str, test: Function, nested: set[_TemplateSpan]) -> bool:
    """Whether the test is one of a macro that another template defines, as written."""
    return any(span.name == template and span.first <= test.line <= span.last for span in nested)


def _renamed(fn: Function, name: str) -> Function:
    """A copy of a template's function under the name an invocation gives it; calls of
    the metavariable's name (`binary::$test_name::<R>(client)`) call that name."""
    calls = [call._replace(name=name) if call.name == fn.name else call for call in fn.calls]
    return replace(fn, name=name, calls=calls)


def _instances(templates: list[Function], node: Node, args: Node, modules: tuple[str, ...]) -> list[Function]:
    """The functions an item-level invocation of such a macro defines: each makes the
    template's calls, so that a test calling `binary::test_powi` reaches the kernel the
    template launches, and calls the template, which is reached when one of them is.
    Placed at the invocation, with no body of their own: the template's code is checked
    where it is written."""
    named = _FIRST_ARGUMENT.match(args.text or b"")
    if named is None:
        return []
    row, end = node.start_point.row + 1, node.end_point.row + 1
    return [
        replace(
            template,
            name=named.group(1).decode(),
            modules=modules,
            line=row,
            fn_line=row,
            end_line=end,
            body_line=row,
            text=b"",
            doc=(),
            calls=[Call(template.name, "", False, 0), *(call._replace(offset=0) for call in template.calls)],
            macros=[],
            arms=[],
            branches=[],
            regions=[],
            comments=[],
            literals=[],
            signals=[],
        )
        for template in templates
    ]


def _within(row: int, spans: list[tuple[int, int]]) -> bool:
    return any(first <= row <= last for first, last in spans)


def _instantiated_test_crates(blank: bytes) -> tuple[str, ...]:
    if b"::testgen_" not in blank:
        return ()
    return tuple(sorted({m.group(1).decode() for m in _TESTGEN_CALL_RE.finditer(blank)}))


def extract(source: bytes) -> FileFacts:
    """All facts of one Rust file. Never raises on bad Rust: tree-sitter recovers."""
    parser = Parser(_language())
    tree = parser.parse(source)
    # The rows of `macro_rules!` expansions (test templates) and of opened `proptest!`
    # blocks: their parse errors are the splice's, not the file's.
    template_rows: list[tuple[int, int]] = []
    proptest_rows: list[tuple[int, int]] = []
    as_written = source  # the splices below blank the names of `macro_rules!` macros
    for marker, splice, rows in (
        (b"macro_rules!", _spliced_macro_bodies, template_rows),
        (b"proptest!", _spliced_proptest_blocks, proptest_rows),
    ):
        spliced_source = splice(source, tree.root_node) if marker in source else None
        while spliced_source is not None:
            source, spliced_rows = spliced_source
            rows.extend(spliced_rows)
            tree = parser.parse(source)
            # A `macro_rules!` in a template's body (cubecl's `add_test!` in
            # `testgen_binary!`) is a definition once that body is spliced.
            spliced_source = splice(source, tree.root_node) if marker == b"macro_rules!" else None
    macro_spans = _template_spans(template_rows, as_written)

    matches = QueryCursor(_query()).matches(tree.root_node)

    fn_nodes: list[Node] = []
    arms: list[tuple[Node, Node, Node, Node]] = []
    ifs: list[tuple[Node, Node, Node, Node | None]] = []
    regions: list[tuple[str, str, Node]] = []  # (kind, head, the code that runs in that case)
    macros: list[tuple[Node, Node, Node]] = []
    comments: list[Node] = []
    strings: list[Node] = []
    consts: list[tuple[Node, Node]] = []
    uses: list[str] = []
    gpu_aliases: list[tuple[str, tuple[str, ...]]] = []
    type_aliases: list[tuple[str, str]] = []
    associated_types: list[tuple[str, str]] = []
    ffi_functions: list[tuple[str, bool]] = []
    module_files: list[Node] = []  # `mod name;`: a module whose code is in a file of its own
    error_rows: list[int] = []

    for _, caps in matches:
        if "fn" in caps:
            fn_nodes.append(caps["fn"][0])
        elif "arm" in caps:
            arms.append(
                (caps["arm"][0], caps["match.value"][0], caps["arm.pattern"][0], caps["arm.value"][0])
            )
        elif "if" in caps:
            else_nodes = caps.get("if.else")
            ifs.append(
                (caps["if"][0], caps["if.cond"][0], caps["if.then"][0], else_nodes[0] if else_nodes else None)
            )
        elif "letelse" in caps:
            regions.append(("let-else", _text(caps["letelse"][0], 200), caps["letelse.block"][0]))
        elif "gated.attr" in caps:
            regions.extend(_gated_statement(caps["gated.attr"][0]))
        elif "handler.name" in caps:
            name = _text(caps["handler.name"][0])
            if name in _HANDLER_METHODS:
                regions.append(("handler", name, caps["handler.body"][0]))
        elif "macro" in caps:
            macros.append((caps["macro"][0], caps["macro.name"][0], caps["macro.args"][0]))
        elif "comment" in caps:
            comments.append(caps["comment"][0])
        elif "string" in caps:
            strings.append(caps["string"][0])
        elif "const.name" in caps:
            consts.append((caps["const.name"][0], caps["const.value"][0]))
        elif "use" in caps:
            uses.append(_text(caps["use"][0], 300))
        elif "alias.name" in caps:
            alias = _gpu_device_alias(caps["alias.name"][0], caps["alias.type"][0])
            if alias:
                gpu_aliases.append(alias)
            type_aliases.extend(_type_alias(caps["alias.name"][0], caps["alias.type"][0]))
            associated_types.extend(_associated_types(caps["alias.name"][0], caps["alias.type"][0]))
        elif "ffi" in caps:
            signature = _text(caps["ffi"][0])
            ffi_functions.append(
                (_text(caps["ffi.name"][0]), _DEVICE_MEMORY_TYPE.search(signature) is not None)
            )
        elif "modfile" in caps:
            module_files.append(caps["modfile"][0])
        elif "error" in caps:
            row = caps["error"][0].start_point.row + 1
            if not _within(row, template_rows + proptest_rows):
                error_rows.append(row)

    # Comment and string contents are blanked so no regex ever matches inside them.
    spans = [(n.start_byte, n.end_byte) for n in comments]
    spans.extend((n.start_byte + 1, n.end_byte - 1) for n in strings)
    blank = _blank(source, spans)

    gpu_sources = [
        GpuSource(
            _text(name),
            name.start_point.row + 1,
            value.end_point.row + 1,
            tuple(m.group().decode() for m in _KERNEL_FILE_RE.finditer(value.text or b"")),
        )
        for name, value in consts
        if _GPU_SOURCE_RE.search(value.text or b"")
    ]

    file_attrs = _file_attributes(tree.root_node)
    test_modules: list[str] = []
    for node in module_files:
        scope = _Scope(node, file_attrs)
        if is_test_gated((*_attributes(node)[0], *scope.outer_attrs)):
            test_modules.append("/".join((*scope.modules, _text(node.child_by_field_name("name")))))
    functions: list[Function] = []
    test_templates: list[tuple[str, Function]] = []
    starts: list[int] = []
    ends: list[int] = []
    fn_nodes.sort(key=lambda n: n.start_byte)
    for node in fn_nodes:
        body = node.child_by_field_name("body")
        if body is None:
            continue
        attrs, doc, first_line = _attributes(node)
        scope = _Scope(node, file_attrs)
        ret = node.child_by_field_name("return_type")
        function = Function(
            name=_text(node.child_by_field_name("name")),
            impl_type=scope.impl_type,
            trait=scope.trait,
            modules=scope.modules,
            attrs=tuple(attrs),
            outer_attrs=scope.outer_attrs,
            params=_text(node.child_by_field_name("parameters")),
            ret=_text(ret),
            line=first_line,
            fn_line=node.start_point.row + 1,
            end_line=node.end_point.row + 1,
            body_line=body.start_point.row + 1,
            text=blank[body.start_byte : body.end_byte],
            doc=tuple(doc),
        )
        if _within(first_line, template_rows) and any(map(TEST_ATTR.search, attrs)):
            # A test template: it is a test of where the macro is invoked, on that crate's device.
            template = _template_of(first_line, macro_spans)
            if template:
                test_templates.append((template, function))
            continue
        functions.append(function)
        starts.append(body.start_byte)
        ends.append(body.end_byte)

    def owner(offset: int) -> int:
        """Index of the innermost function whose body holds the offset, or -1."""
        i = bisect.bisect_right(starts, offset) - 1
        while i >= 0:
            if offset < ends[i]:
                return i
            i -= 1
        return -1

    for fn in (*functions, *(test for _, test in test_templates)):
        fn.calls = _calls(fn.text)
        fn.constructs = _constructed_types(fn.text, fn.calls, fn.impl_type)
        fn.signals = _signals(fn.text.decode("latin-1"))

    for arm, value, pattern, arm_value in arms:
        fi = owner(arm.start_byte)
        if fi >= 0:
            base = starts[fi]
            functions[fi].arms.append(
                Arm(
                    _text(value),
                    _text(pattern),
                    arm.start_byte - base,
                    arm_value.start_byte - base,
                    arm.end_byte - base,
                )
            )
    for node, cond, then, els in ifs:
        fi = owner(node.start_byte)
        if fi >= 0:
            base = starts[fi]
            functions[fi].branches.append(
                Branch(
                    _text(cond),
                    node.start_byte - base,
                    then.start_byte - base,
                    then.end_byte - base,
                    els.start_byte - base if els is not None else -1,
                    els.end_byte - base if els is not None else -1,
                )
            )
    for kind, head, code in regions:
        fi = owner(code.start_byte)
        if fi >= 0:
            base = starts[fi]
            functions[fi].regions.append(Region(kind, head, code.start_byte - base, code.end_byte - base))
    for node, name_node, args in macros:
        fi = owner(node.start_byte)
        if fi >= 0:
            base = starts[fi]
            full = _text(name_node, 200)
            qualifier, _, name = full.rpartition("::")
            functions[fi].macros.append(
                Macro(name, qualifier, _text(args), node.start_byte - base, node.end_byte - base)
            )
    expansions = _expansion_calls(tree.root_node, blank) if b"macro_rules!" in as_written else {}
    for fn in functions:
        invoked = [m for m in fn.macros if m.qualifier in _OWN_CRATE and expansions.get(m.name)]
        # A function a template writes out (`fn $name`) is indexed as written, its
        # metavariables unbound: what a macro it invokes expands to is not known there.
        if invoked and not _within(fn.line, template_rows):
            fn.calls.extend(c._replace(offset=m.offset) for m in invoked for c in expansions[m.name])
            fn.calls.sort(key=lambda call: call.offset)
    defined = {fn.name for fn in functions}
    named_templates = _named_templates(functions, macro_spans, as_written) if macro_spans else {}
    item_macros: list[ItemMacro] = []
    template_calls: list[tuple[str, str]] = []
    for node, name_node, args in macros:
        if owner(node.start_byte) < 0:
            scope = _Scope(node, file_attrs)
            macro_name = _text(name_node, 200).rpartition("::")[2]
            row = node.start_point.row + 1
            # In a template's body a macro is written out where the template is invoked,
            # not here: a test template it invokes is a test there only.
            template = _template_of(row, macro_spans)
            local = _local_macro(macro_name, row, macro_spans) if template else None
            if not template:
                item_macros.append(ItemMacro(macro_name, row, scope.modules, scope.outer_attrs))
            elif local:
                test_templates.extend(
                    _local_tests(template, local, args, test_templates, macro_spans, as_written)
                )
            elif not scope.in_a_function:
                template_calls.append((template, macro_name))
            functions.extend(_generated_functions(node, name_node, args, blank, defined, file_attrs))
            if not template and macro_name in named_templates:
                functions.extend(_instances(named_templates[macro_name], node, args, scope.modules))
            gpu_sources.extend(_kernel_source_item(node, args))
            device_static = _device_static(args)
            if device_static:
                gpu_aliases.append(device_static)
    # A macro a template defines is written out only by that template, where it invokes it.
    nested = {
        inner
        for inner in macro_spans
        if any(o.first < inner.first <= inner.last <= o.last for o in macro_spans)
    }
    test_templates = [(name, test) for name, test in test_templates if not _of_a_local(name, test, nested)]
    for s in strings:
        fi = owner(s.start_byte)
        if fi >= 0:
            functions[fi].literals.append(Literal(_text(s, 300), s.start_byte - starts[fi]))

    suppressions: list[tuple[int, str, str]] = []
    for c in comments:
        text = _text(c, 1000)
        line = c.start_point.row + 1
        allow = _ALLOW_RE.search(text)
        if allow:
            suppressions.append((line, allow.group(1), (allow.group(2) or "").strip()))
        fi = owner(c.start_byte)
        if fi >= 0:
            functions[fi].comments.append(Comment(text, c.start_byte - starts[fi]))

    return FileFacts(
        functions=functions,
        gpu_sources=gpu_sources,
        uses=tuple(uses),
        syntax_errors=sorted(set(error_rows)),
        suppressions=suppressions,
        instantiated_test_crates=_instantiated_test_crates(blank),
        gpu_device_aliases=tuple(gpu_aliases),
        type_aliases=tuple(type_aliases),
        associated_types=tuple(associated_types),
        ffi_functions=tuple(ffi_functions),
        test_templates=tuple(test_templates),
        item_macros=tuple(item_macros),
        template_calls=tuple(template_calls),
        test_modules=tuple(test_modules),
    )
