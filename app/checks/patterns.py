"""Shapes several rules look for, computed once per function.

The rules ask questions about a stretch of a function's body (a match arm, the
else of an ``if let``, an error-handler closure): does it run on the CPU, does
it launch GPU work, does it return a structured error, is it behind the opt-in
environment variable, does it warn through ``tracing``? The answers live here so
that each rule file stays a short statement of its policy.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from app.checks import gpu_code
from app.checks.model import Branch, Call, Macro
from app.checks.workspace import IndexedFunction, Workspace

_HOST_SIGNALS = frozenset({"readback", "device_cpu"})
_GPU_ATTEMPT = re.compile(
    r"gpu|cuda|kernel|ptx|launch|compile|cublas|cudnn|cufft|cusolver|wgpu|cubecl|metal|device"
    r"|module_cache|backend",
    re.I,
)
_AVAILABILITY = re.compile(r"available|is_ok\(\)|is_some\(\)|initialized|supported")
_HOST_RESULT = re.compile(
    r"^(?:\w*Result\s*<\s*)?(?:\w+::)*(?:Vec|f32|f64|f16|bf16|usize|isize|u\d+|i\d+|bool|String"
    r"|\[|\(|Option\s*<\s*(?:f|u|i))"
)
_DEVICE_TEST = re.compile(
    r"\.is_(?:cuda|gpu|cubecl|wgpu|metal|mps|xpu)\s*\(\s*\)|Device::(?:Cuda|Gpu|Wgpu|Metal|Mps|Xpu)"
    r"|is_on_gpu|on_gpu\(\)"
)
_CPU_DEVICE_TEST = re.compile(r"\.is_cpu\s*\(\s*\)|Device::Cpu\b")
_FALLBACK_GATE = re.compile(r"fallback_(?:enabled|allowed)|allow_(?:cpu|gpu)_fallback|gpu_fallback_enabled")


def returns_host_data(item: IndexedFunction) -> bool:
    """The function hands host data (a Vec, a scalar) or nothing to its caller: a
    readback there serves the caller or a check, it is not a detour."""
    ret = item.fn.ret.strip()
    return not ret or ret in ("()", "Result<()>") or _HOST_RESULT.match(ret) is not None


def span_text(item: IndexedFunction, start: int, end: int) -> str:
    return item.fn.text[start:end].decode("utf-8", "replace")


def cpu_work(ws: Workspace, item: IndexedFunction, start: int, end: int) -> str:
    """What in [start, end) runs the computation on the CPU ("" when nothing does)."""
    fn = item.fn
    for call in fn.calls:
        if start <= call.offset < end and _is_cpu_impl_call(ws, item, call):
            shown = f"{call.qualifier}::{call.name}" if call.qualifier else call.name
            return f"calls the CPU implementation `{shown}` at line {fn.line_of(call.offset)}"
    for signal in fn.signals:
        if start <= signal.offset < end and signal.kind in _HOST_SIGNALS:
            what = "moves data to the host" if signal.kind == "readback" else "targets the CPU"
            return f"{what} with `{signal.text.strip()}` at line {fn.line_of(signal.offset)}"
    for call in fn.calls:
        if start <= call.offset < end and not call.is_method:
            helper = _reading_helper(ws, item, call)
            if helper:
                return (
                    f"moves data to the host through `{call.name}` at line "
                    f"{fn.line_of(call.offset)} ({helper})"
                )
    return ""


def _reading_helper(ws: Workspace, item: IndexedFunction, call: Call) -> str:
    """A free helper of the caller's crate that reads device data back to the host
    (and launches nothing): calling it is a readback too."""
    targets = [t for t in ws.resolve(call, item) if t.crate == item.crate]
    if len(targets) != 1 or targets[0].evidence:
        return ""
    target = targets[0]
    for signal in target.fn.signals:
        if signal.kind == "readback":
            return f"`{signal.text.strip()}` at {target.path}:{target.fn.line_of(signal.offset)}"
    return ""


def _is_cpu_impl_call(ws: Workspace, item: IndexedFunction, call: Call) -> bool:
    name, qualifier = call.name, call.qualifier
    if name in ("is_cpu", "cpu_count", "num_cpus"):
        return False
    named_cpu = gpu_code.CPU_IMPL_NAME.search(name) is not None or any(
        seg in ("cpu", "host", "reference", "naive") for seg in qualifier.split("::")
    )
    # `fft_gpu` calling plain `fft`: the name without the backend word is the host
    # version, unless that function reaches a kernel itself.
    host_namesake = not named_cpu and name == without_backend_word(item.fn.name)
    if not (named_cpu or host_namesake) or gpu_code.TRANSFER_NAME.search(name):
        return False
    targets = ws.resolve(call, item)
    if host_namesake and not targets:
        return False  # a function of another crate: nothing says where it runs
    # A "fallback" that is itself a GPU kernel (vec4 -> scalar kernel) is not CPU work.
    return not any(target.evidence for target in targets)


_BACKEND_AFFIX = re.compile(
    r"^(?:gpu|cuda|metal|wgpu|vulkan|opencl|device)_|_(?:gpu|cuda|metal|wgpu|vulkan|opencl)$"
)


def without_backend_word(name: str) -> str:
    """``fft_gpu``/``gpu_fft`` -> ``fft``; a name without such a word comes back empty."""
    bare = _BACKEND_AFFIX.sub("", name, count=1)
    return bare if bare != name else ""


def gpu_work(ws: Workspace, item: IndexedFunction, start: int, end: int) -> str:
    """What in [start, end) launches GPU work ("" when nothing does)."""
    fn = item.fn
    for signal in fn.signals:
        if start <= signal.offset < end and signal.kind == "launch":
            return f"`{signal.text.strip()}` at line {fn.line_of(signal.offset)}"
    on_host_device = [(s.offset, s.offset + len(s.text)) for s in fn.signals if s.kind == "device_cpu"]
    for call in fn.calls:
        if not start <= call.offset < end or _is_cpu_impl_call(ws, item, call):
            continue
        if any(first <= call.offset < last for first, last in on_host_device):
            continue  # `CpuDevice.ones_impl(..)`: the host backend's namesake, whatever it resolves to
        evidence = ws.call_evidence(call, item)
        if evidence:
            return evidence
    return ""


def last_statement(item: IndexedFunction, start: int, end: int) -> bytes:
    """The last statement of the block [start, end) (braces included)."""
    body = item.fn.text[start:end].rstrip()
    if body.endswith(b"}"):
        body = body[:-1].rstrip()
    depth = 0
    i = len(body) - 1
    if body.endswith(b";"):
        i -= 1
    while i >= 0:
        ch = body[i]
        if ch == 0x7D and depth == 0 and body[i + 1 :].strip():  # '}' ending an earlier block
            break
        if ch in b")]}":
            depth += 1
        elif ch in b"([{":
            if depth == 0:
                break
            depth -= 1
        elif ch == 0x3B and depth == 0:  # ';' ends the previous statement
            break
        i -= 1
    return body[i + 1 :].lstrip()


def always_returns(item: IndexedFunction, start: int, end: int) -> bool:
    """Whether the block ends in a ``return`` (or an error), so the code after it runs
    only when the block's condition was false."""
    return last_statement(item, start, end).startswith(
        (b"return", b"Err(", b"panic!", b"unreachable!", b"bail!", b"continue")
    )


def ends_in_error(item: IndexedFunction, start: int, end: int) -> bool:
    return last_statement(item, start, end).startswith((b"return Err", b"Err(", b"bail!", b"panic!"))


def returns_error(item: IndexedFunction, start: int, end: int) -> bool:
    return any(s.kind == "return_err" and start <= s.offset < end for s in item.fn.signals)


def has_return(item: IndexedFunction, start: int, end: int) -> bool:
    return any(s.kind == "return" and start <= s.offset < end for s in item.fn.signals)


def opt_in_helper(ws: Workspace, item: IndexedFunction, offset: int) -> IndexedFunction | None:
    """A call before ``offset`` to a helper that reads the fallback environment variable
    (``check_gpu_fallback_opt_in(..)?``): the code after it runs only when opted in."""
    for call in item.fn.calls:
        if call.offset >= offset or "fallback" not in call.name:
            continue
        for target in ws.resolve(call, item):
            if any(s.kind == "env" for s in target.fn.signals):
                return target
    return None


def env_gate(item: IndexedFunction, start: int, end: int) -> Branch | None:
    """The opt-in gate (an ``if`` on an environment variable or a fallback-enabled
    helper) whose then-block holds [start, end), or which sits inside it."""
    for branch in item.fn.branches:
        is_gate = "env::var" in branch.condition or _FALLBACK_GATE.search(branch.condition)
        if not is_gate:
            continue
        inside = branch.then_start <= start and end <= branch.then_end
        encloses = start <= branch.start < end
        if inside or encloses:
            return branch
    return None


def opted_in(ws: Workspace, item: IndexedFunction, start: int, end: int) -> bool:
    """Whether [start, end) runs only when the user opted in to the CPU fallback."""
    return env_gate(item, start, end) is not None or opt_in_helper(ws, item, start) is not None


def gate_variable(item: IndexedFunction, gate: Branch) -> str:
    m = re.search(r'"([A-Za-z_][A-Za-z0-9_]*)"', gate.condition)
    return m.group(1) if m else ""


def macros_in(item: IndexedFunction, start: int, end: int, names: set[str]) -> list[Macro]:
    return [m for m in item.fn.macros if start <= m.offset < end and m.name in names]


def is_tracing_warn(item: IndexedFunction, macro: Macro) -> bool:
    if macro.name != "warn":
        return False
    if macro.qualifier:
        return macro.qualifier.endswith("tracing")
    return any(("tracing" in u and "warn" in u) or "tracing::*" in u for u in item.file.facts.uses)


def cpu_only(item: IndexedFunction, offset: int) -> bool:
    """Whether the offset sits where only CPU data can arrive: the CPU arm of a device
    match, the else of an ``is_cuda()`` test, or after a GPU branch that returned."""
    fn = item.fn
    for arm in fn.arms:
        if (
            arm.body_start <= offset < arm.end
            and gpu_code.CPU_DEVICE_PATTERN.search(arm.pattern)
            and not gpu_code.GPU_DEVICE_PATTERN.search(arm.pattern)
        ):
            return True
    for branch in fn.branches:
        cond = branch.condition.strip()
        negated = cond.startswith("!")
        device_test = _DEVICE_TEST.search(cond) is not None
        cpu_test = _CPU_DEVICE_TEST.search(cond) is not None and "!=" not in cond
        if branch.then_start <= offset < branch.then_end and (
            (device_test and negated) or (cpu_test and not negated)
        ):
            return True
        if branch.else_start <= offset < branch.else_end and device_test and not negated and "&&" not in cond:
            return True
        if (
            offset >= branch.then_end
            and device_test
            and not negated
            and "&&" not in cond
            and branch.else_start < 0
            and always_returns(item, branch.then_start, branch.then_end)
            and offset < block_end(item, branch.start)
        ):
            return True
    return False


def block_end(item: IndexedFunction, offset: int) -> int:
    """End of the innermost block (then/else of an ``if``, a match arm) holding the
    offset; the end of the function when none does."""
    end = len(item.fn.text)
    for branch in item.fn.branches:
        for start, stop in ((branch.then_start, branch.then_end), (branch.else_start, branch.else_end)):
            if start <= offset < stop:
                end = min(end, stop)
    for arm in item.fn.arms:
        if arm.body_start <= offset < arm.end:
            end = min(end, arm.end)
    return end


def _host_result(item: IndexedFunction, start: int, end: int) -> str:
    """A failure handler that computes the result itself in a host loop
    (`Err(_) => return Ok(input.iter().map(f).collect())`)."""
    fn = item.fn
    loops = [s for s in fn.signals if s.kind == "host_loop" and start <= s.offset < end]
    if loops and not returns_error(item, start, end):
        return f"computes the result on the host (line {fn.line_of(loops[0].offset)})"
    return ""


@dataclass(frozen=True, slots=True)
class FallbackSite:
    """A place where the code continues on the CPU after the GPU path failed or
    was unavailable."""

    kind: str  # how the failure is caught, in words
    start: int
    end: int
    line: int
    cpu: str  # what runs on the CPU
    gate: Branch | None  # the opt-in environment gate, if any
    helper: IndexedFunction | None  # or the opt-in helper called before it


def fallback_sites(ws: Workspace, item: IndexedFunction) -> list[FallbackSite]:
    fn = item.fn
    if item.support_code or item.cpu_build:
        return []
    sites: list[FallbackSite] = []
    gpu_fn = item.is_gpu_code

    def consider(kind: str, start: int, end: int, guard: str, head: int) -> None:
        if not (gpu_fn or _GPU_ATTEMPT.search(guard)):
            return
        cpu = cpu_work(ws, item, start, end)
        if not cpu and kind.startswith("the `Err") and _GPU_ATTEMPT.search(guard):
            cpu = _host_result(item, start, end)
        if not cpu or cpu_only(item, start):
            return
        if cpu.startswith("moves data to the host") and (item.moves_data or returns_host_data(item)):
            return  # `to_host`, `gpu_to_cpu`: reading back is what it is for
        gate = env_gate(item, start, end)
        helper = opt_in_helper(ws, item, start) if gate is None else None
        if gate is None and returns_error(item, start, end) and not has_return(item, start, end):
            # Err(..) tail expression: the arm reports the failure.
            return
        sites.append(FallbackSite(kind, start, end, fn.line_of(head), cpu, gate, helper))

    for arm in fn.arms:
        pattern = arm.pattern.strip()
        failure = pattern.startswith("Err") or pattern == "None"
        if pattern == "_":
            failure = any(
                a.scrutinee == arm.scrutinee and a.pattern.lstrip().startswith(("Ok", "Some"))
                for a in fn.arms
            )
        if failure:
            consider(
                f"the `{pattern}` arm of `match {arm.scrutinee[:60]}`",
                arm.body_start,
                arm.end,
                arm.scrutinee,
                arm.start,
            )
    for branch in fn.branches:
        cond = branch.condition.strip()
        if cond.startswith(("let Ok", "let Some")):
            if branch.else_start >= 0:
                consider(
                    f"the `else` of `if {cond[:60]}`",
                    branch.else_start,
                    branch.else_end,
                    cond,
                    branch.else_start,
                )
            elif has_return(item, branch.then_start, branch.then_end):
                consider(
                    f"the code after `if {cond[:60]} {{ return .. }}`",
                    branch.then_end,
                    block_end(item, branch.start),
                    cond,
                    branch.then_end,
                )
        elif gpu_fn and _AVAILABILITY.search(cond) and branch.else_start >= 0 and not cond.startswith("!"):
            # Only in GPU code: elsewhere this is the caller's capability check the spec allows.
            consider(
                f"the `else` of `if {cond[:60]}`", branch.else_start, branch.else_end, cond, branch.else_start
            )
    for region in fn.regions:
        if region.kind == "handler" and region.head in ("unwrap_or_else", "or_else", "map_or_else"):
            consider(
                f"the `.{region.head}(..)` handler",
                region.start,
                region.end,
                "gpu" if gpu_fn else span_text(item, max(0, region.start - 120), region.start),
                region.start,
            )
    return sites
