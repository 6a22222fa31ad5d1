"""Which tests are GPU tests, and which functions they reach."""

from __future__ import annotations

import re
import weakref
from collections.abc import Callable, Iterator
from collections.abc import Set as AbstractSet

from app.checks import gpu_code
from app.checks.model import Arm, Branch, Call, Function
from app.checks.prose import DTYPE_NAME
from app.checks.workspace import IndexedFunction, Workspace, crate_of, definition_keys

_CPU_TEST_NAME = re.compile(r"(?:^|_)(?:cpu|host)(?:_|$)", re.I)
_REACH: weakref.WeakKeyDictionary[Workspace, dict[int, IndexedFunction]] = weakref.WeakKeyDictionary()
_INSTANTIATED: weakref.WeakKeyDictionary[Workspace, frozenset[str]] = weakref.WeakKeyDictionary()
_ACQUIRING: weakref.WeakKeyDictionary[Workspace, set[int]] = weakref.WeakKeyDictionary()
_FAILING: weakref.WeakKeyDictionary[Workspace, set[int]] = weakref.WeakKeyDictionary()
_HELPER_NAMES: weakref.WeakKeyDictionary[Workspace, frozenset[str]] = weakref.WeakKeyDictionary()
_DEVICE_HELPER_NAMES: weakref.WeakKeyDictionary[Workspace, frozenset[str]] = weakref.WeakKeyDictionary()
_TEST_REACH: weakref.WeakKeyDictionary[Workspace, dict[tuple[int, str], set[int]]] = (
    weakref.WeakKeyDictionary()
)
_TESTS_SAID: weakref.WeakKeyDictionary[Workspace, list[tuple[IndexedFunction, str]]] = (
    weakref.WeakKeyDictionary()
)
# Tests whose own reach is computed to name the ones exercising an op: the nearest
# callers are checked first, so a few dozen find them without a walk per test of the
# workspace (burn instantiates thousands).
_MAX_TESTS_CHECKED = 24
# A failure that ends the test, or that a statement hands on (`create_context()?`).
_FAILS = re.compile(rb"\?|\.\s*(?:unwrap|expect)\s*\(")
_PANICS = re.compile(rb"\.\s*(?:expect|unwrap)\s*\(")
_ACQUIRE_DEPTH = 6  # calls between a test and the driver call it reaches
# A statement that deals with a failure there (`match create_context() { Err(_) =>
# return Ok(()), .. }`, `.unwrap_or(..)`) instead of handing it on.
_FAILURE_HANDLED_BEFORE = re.compile(rb"\bmatch\b|\bif\s+let\b|\bwhile\s+let\b")
_FAILURE_HANDLED_AFTER = re.compile(rb"\.\s*(?:ok|is_ok|is_err|unwrap_or\w*|or_else|map_or\w*)\s*\(")
_TEMPLATE_ATTR = re.compile(r"\btestgen\s*\(")  # `#[burn_tensor_testgen::testgen(add)]` on the module


def is_gpu_test(item: IndexedFunction, ws: Workspace) -> bool:
    """A ``#[test]`` that is about the GPU: by name, file, module, feature gate,
    because it builds a GPU device (itself, or through an alias of its crate such as
    dfdx's ``TestDevice``, which is ``Cuda`` under the test feature), or because it is
    a test template that a GPU crate instantiates (burn's ``#[testgen(add)] mod
    tests``, written out for wgpu by ``burn_tensor::testgen_all!()`` in ``burn-wgpu``)."""
    fn = item.fn
    if not gpu_code.is_test(fn):
        return False
    template = _TEMPLATE_ATTR.search(" ".join(fn.outer_attrs))
    if template and _crate_name(item.crate) in _gpu_instantiated_crates(ws):
        return True
    if gpu_code.GPU_NAME.search(fn.name):
        return True
    placed = bool(
        gpu_code.GPU_TEST_PATH.search(item.path)
        or any(gpu_code.GPU_NAME.search(m) for m in fn.modules)
        or gpu_code.has_gpu_cfg(fn.attrs + fn.outer_attrs)
    )
    # `training_cpu` in a GPU test file is the CPU twin of a GPU test unless it builds a
    # GPU device; any other test there is a GPU test (the device need not be looked for).
    cpu_twin = _CPU_TEST_NAME.search(fn.name)
    if placed and not cpu_twin:
        return True
    return (
        _builds_device(item, ws)
        or id(item) in _acquiring(ws)
        or id(item) in _failing_without_a_gpu(ws)
        or any(_builds_device(helper, ws) for helper in _test_helpers(item, ws, _device_helper_names(ws)))
    )


def fails_without_a_gpu(test: IndexedFunction, ws: Workspace) -> str:
    """How a GPU test fails on a machine with no GPU ("" when the code does not say)."""
    for item in (test, *_test_helpers(test, ws)):
        if _builds_device(item, ws) and _FAILS.search(item.fn.text):
            return "it builds a GPU device and fails when there is none"
    if id(test) in _acquiring(ws):
        for index in sorted(ws.reached_from([test])):
            acquirer = ws.functions[index]
            if _panics_without_a_gpu(acquirer):
                where = f"`{acquirer.fn.qualname}` ({acquirer.path}:{acquirer.fn.fn_line})"
                return f"it reaches {where}, which acquires a GPU and panics when there is none"
    failing = _failing_without_a_gpu(ws)
    if id(test) in failing:
        for call in test.fn.calls:
            callee = _the_one_reached(call, ws.resolve(call, test), test)
            if callee is not None and id(callee) in failing:
                where = f"`{callee.fn.qualname}` ({callee.path}:{callee.fn.fn_line})"
                return (
                    f"it calls {where}, which fails when there is no GPU "
                    "(it acquires one or calls GPU code and passes the error on)"
                )
    return ""


def _builds_device(item: IndexedFunction, ws: Workspace) -> bool:
    return any(s.kind == "gpu_device" for s in item.fn.signals) or bool(ws.gpu_types_named(item))


def _test_helpers(
    test: IndexedFunction, ws: Workspace, names: frozenset[str] | None = None
) -> Iterator[IndexedFunction]:
    """The test code of its crate a test calls: `run_concat_trial(prob)`, which takes
    the device from the module's `GPU_DEVICE`; only those of ``names`` when given."""
    helper_names = _helper_names(ws) if names is None else names
    for call in test.fn.calls:
        if call.name not in helper_names:
            continue  # resolving every call of every test would dominate a scan's time
        for target in ws.resolve(call, test):
            if target.support_code and target.crate == test.crate and not gpu_code.is_test(target.fn):
                yield target


def test_code(test: IndexedFunction, ws: Workspace) -> tuple[IndexedFunction, ...]:
    """The test and the test code of its crate it calls: what it runs on the device."""
    return (test, *_test_helpers(test, ws))


def code_said(item: IndexedFunction) -> str:
    """A function's code with its string literals: what it names."""
    return " ".join((item.fn.text.decode("latin-1"), *(lit.text for lit in item.fn.literals)))


def test_said(test: IndexedFunction, ws: Workspace) -> str:
    """What a test and its helpers (`test_code`) name."""
    return " ".join(code_said(code) for code in test_code(test, ws))


def _helper_names(ws: Workspace) -> frozenset[str]:
    """The names of the workspace's test code that is not a test itself: the only
    names a test helper can have."""
    found = _HELPER_NAMES.get(ws)
    if found is None:
        found = frozenset(f.fn.name for f in ws.functions if f.support_code and not gpu_code.is_test(f.fn))
        _HELPER_NAMES[ws] = found
    return found


def _device_helper_names(ws: Workspace) -> frozenset[str]:
    """The names of the test helpers that build a GPU device: the only calls of a test
    worth resolving to learn whether it builds one through a helper."""
    found = _DEVICE_HELPER_NAMES.get(ws)
    if found is None:
        found = frozenset(
            f.fn.name
            for f in ws.functions
            if f.support_code and not gpu_code.is_test(f.fn) and _builds_device(f, ws)
        )
        _DEVICE_HELPER_NAMES[ws] = found
    return found


def _acquiring(ws: Workspace) -> set[int]:
    """``id()`` of the functions that acquire a GPU from the driver (`request_adapter`,
    `CudaContext::new`) and panic without one, or call one by its path: wonnx's `Session::from_model`
    asks wgpu for an adapter and panics without one, so a test that opens a session runs
    on a GPU without naming a device. Method calls resolved by name alone do not count:
    they would make a GPU test of every test that touches a tensor."""
    found = _ACQUIRING.get(ws)
    if found is not None:
        return found
    seeds = [f for f in ws.functions if not f.support_code and _panics_without_a_gpu(f)]
    found = {id(f) for f in seeds}
    for seed in seeds:
        found.update(
            id(caller)
            for caller in ws.callers_of(seed, within=_ACQUIRE_DEPTH, by_path=True)
            if not gpu_code.is_cpu_build(caller.fn.attrs + caller.fn.outer_attrs)
        )
    _ACQUIRING[ws] = found
    return found


def _panics_without_a_gpu(item: IndexedFunction) -> bool:
    """The function acquires a GPU and panics when there is none (`request_adapter(..)
    .await.expect("No GPU found")`): its callers cannot run without one. One that hands
    the failure back (`CudaContext::new(0)?`) lets them fall back or skip."""
    text = item.fn.text
    for signal in item.fn.signals:
        if signal.kind == "gpu_acquire":
            end = text.find(b";", signal.offset)
            if _PANICS.search(text, signal.offset, len(text) if end < 0 else end):
                return True
    return False


def _failing_without_a_gpu(ws: Workspace) -> set[int]:
    """``id()`` of the functions that acquire a GPU, or call GPU code outside the
    workspace (icicle's `ntt_cuda` through FFI), and hand the failure back
    (`instance.request_adapter(..).await.ok_or(..)`, `ntt_cuda(..).wrap()`), and of those
    that call one and pass its failure on (web-rwkv's test helper `create_context()?`,
    icicle's `ntt(..).unwrap()` in `check_ntt`) or call one that panics with it: a test
    among them fails on a machine with no GPU, as a GPU test should. One that deals
    with the failure itself (falls back, or returns early: a disabled test, spec Step 2
    #9) breaks the chain. Only calls that resolve to the one function count: a name
    that several crates define (`rand`) says nothing of which one a test reaches."""
    found = _FAILING.get(ws)
    if found is not None:
        return found
    frontier = [
        f
        for f in ws.functions
        if any(s.kind == "gpu_acquire" for s in f.fn.signals) or _passes_on_an_external_gpu_failure(f, ws)
    ]
    found = {id(f) for f in frontier}
    panicking: set[int] = set()  # those whose failure is a panic: every caller fails with it
    for _ in range(_ACQUIRE_DEPTH):
        next_frontier: list[IndexedFunction] = []
        for current in frontier:
            for caller, panics in _callers_failing_with(ws, current, id(current) in panicking):
                if id(caller) not in found:
                    found.add(id(caller))
                    next_frontier.append(caller)
                    if panics:
                        panicking.add(id(caller))
        frontier = next_frontier
    _FAILING[ws] = found
    return found


def _passes_on_an_external_gpu_failure(item: IndexedFunction, ws: Workspace) -> bool:
    fn = item.fn
    if gpu_code.is_test(fn):
        return False
    return any(
        ws.is_external_gpu_routine(call, fn)
        and _passes_on_failure(fn.text, call.offset, fn.ret)
        and not _in_gpu_gated_code(fn, call.offset)
        for call in fn.calls
    )


def _in_gpu_gated_code(fn: Function, offset: int) -> bool:
    """The offset is in a statement compiled only with a GPU feature
    (`#[cfg(feature = "cuda")] { .. }`): a build without the feature does not run it,
    so a test of that build passes without a GPU."""
    return any(
        region.kind == "cfg" and region.start <= offset < region.end and gpu_code.has_gpu_cfg((region.head,))
        for region in fn.regions
    )


def _callers_failing_with(
    ws: Workspace, callee: IndexedFunction, callee_panics: bool
) -> Iterator[tuple[IndexedFunction, bool]]:
    """The callers that fail when the callee does, each with whether it then panics:
    it calls a callee that panics, or it unwraps the callee's error."""
    if gpu_code.is_test(callee.fn):
        return
    for key in definition_keys(callee.fn):
        for index in ws.callers.get(key, ()):
            caller = ws.functions[index]
            if gpu_code.is_cpu_build(caller.fn.attrs + caller.fn.outer_attrs):
                continue  # compiled only without the GPU feature: it never reaches the GPU code
            for call in caller.fn.calls:
                if call.name != callee.fn.name:
                    continue
                text = caller.fn.text
                if not (callee_panics or _passes_on_failure(text, call.offset, caller.fn.ret)):
                    continue
                if _in_gpu_gated_code(caller.fn, call.offset):
                    continue
                if _the_one_reached(call, ws.resolve(call, caller), caller) is callee:
                    end = text.find(b";", call.offset)
                    unwrapped = _PANICS.search(text, call.offset, len(text) if end < 0 else end)
                    yield caller, callee_panics or unwrapped is not None
                    break


def _the_one_reached(
    call: Call, targets: list[IndexedFunction], caller: IndexedFunction
) -> IndexedFunction | None:
    """The function a call reaches when that is known: its only target, or for a plain
    `create_context()` the one of the caller's own file (Rust's scope: the helper of
    its module; `ops::layer_norm(..)` names another)."""
    if len(targets) > 1 and not call.is_method and not call.qualifier:
        targets = [target for target in targets if target.path == caller.path]
    return targets[0] if len(targets) == 1 else None


def _passes_on_failure(text: bytes, offset: int, returns: str) -> bool:
    """The statement of the call at ``offset`` hands its failure on: `?`, `unwrap`,
    `expect` after it, or the call is the function's value and the function returns a
    `Result`."""
    start = text.rfind(b";", 0, offset) + 1
    end = text.find(b";", offset)
    if _FAILURE_HANDLED_BEFORE.search(text, start, offset):
        return False
    if end < 0:
        return "Result" in returns and not _FAILURE_HANDLED_AFTER.search(text, offset)
    return bool(_FAILS.search(text, offset, end)) and not _FAILURE_HANDLED_AFTER.search(text, offset, end)


def _crate_name(crate: str) -> str:
    """`burn_jit` for the member directory `crates/burn-jit`."""
    return crate.rsplit("/", 1)[-1].replace("-", "_")


def _gpu_instantiated_crates(ws: Workspace) -> frozenset[str]:
    """Crates whose test templates run on a GPU: those a file in a GPU path
    instantiates, and those the files of such a crate instantiate in turn."""
    found = _INSTANTIATED.get(ws)
    if found is not None:
        return found
    by_crate: dict[str, set[str]] = {}
    seeds: set[str] = set()
    for file in ws.files:
        names = file.facts.instantiated_test_crates
        if not names:
            continue
        by_crate.setdefault(_crate_name(crate_of(file.path)), set()).update(names)
        if gpu_code.in_gpu_path(file.path, ws.config.gpu_paths):
            seeds.update(names)
    crates = set()
    frontier = list(seeds)
    while frontier:
        name = frontier.pop()
        if name not in crates:
            crates.add(name)
            frontier.extend(by_crate.get(name, ()))
    found = frozenset(crates)
    _INSTANTIATED[ws] = found
    return found


def gpu_test_reach(ws: Workspace) -> AbstractSet[int]:
    """``id()`` of every function some enabled GPU test reaches through calls."""
    return _reach_origins(ws).keys()


def _reach_origins(ws: Workspace) -> dict[int, IndexedFunction]:
    """Every function some enabled GPU test reaches (by ``id()``), with the test it was
    first reached from."""
    reach = _REACH.get(ws)
    if reach is None:
        # Imported here: the rule itself asks is_gpu_test.
        from app.checks.rules.disabled_gpu_test import check as disabled

        # A disabled test (ignored, or returning early without a GPU) reaches nothing on the GPU.
        roots = [f for f in ws.functions if is_gpu_test(f, ws) and not any(disabled(ws, f))]
        by_backend: dict[frozenset[str], list[IndexedFunction]] = {}
        for root in roots:
            by_backend.setdefault(_test_backends(root, ws), []).append(root)
        reach = {}
        for backends, tests in by_backend.items():
            origins: dict[int, int] = {}
            for i in ws.reached_from(tests, origins, skip=_not_run_on(backends)):
                reach.setdefault(id(ws.functions[i]), ws.functions[origins[i]])
        _REACH[ws] = reach
    return reach


def _test_backends(test: IndexedFunction, ws: Workspace) -> frozenset[str]:
    """The backends a GPU test runs on, by its file and name, the devices it builds, the
    functions it and its helpers call (`init_cuda_backend()`) and their messages
    (`.expect("CUDA device 0")`); empty when they name none: the test may run on any."""
    said = [test.path, test.fn.qualname, *test.fn.modules]  # cubecl-wgpu's `mod tests_msl` runs on Metal
    for item in (test, *_test_helpers(test, ws)):
        said += (s.text for s in item.fn.signals if s.kind in ("gpu_device", "gpu_acquire"))
        said += (f"{c.qualifier} {c.name}" for c in item.fn.calls)
        said += (lit.text for lit in item.fn.literals)  # `.expect("CUDA device 0")`
    return gpu_code.backends_named(" ".join(said))


def _not_run_on(backends: frozenset[str]) -> Callable[[IndexedFunction], bool] | None:
    """Functions that tests running on ``backends`` do not run: those whose file belongs
    to another backend (`ferrotorch-mps/src/backend.rs` for a test that builds a
    `CudaDevice`), which the walk reaches only through a trait method every backend
    implements, and those that return at once on these backends."""
    if not backends:
        return None
    return lambda item: (
        (bool(placed := gpu_code.backends_named(item.path)) and placed.isdisjoint(backends))
        or not _backends_returned_on(item.fn).isdisjoint(backends)
    )


# `device.is_cuda()`, `dev.is_metal()`: one part of the condition of an early return.
_BACKEND_PROBE = re.compile(r"[\w.&*()]+\.\s*is_(?:cuda|metal|mps|wgpu|vulkan|rocm|hip)\s*\(\s*\)")
# The then-block of a return that does nothing: `{ return Ok(()); }`, `{ return; }`.
_RETURNS_NOTHING = re.compile(rb"\{\s*return(?:\s+Ok\s*\(\s*\(\s*\)\s*\))?\s*;?\s*\}")


def _backends_returned_on(fn: Function) -> frozenset[str]:
    """The backends on which a function returns at once, doing nothing: its first
    statement is `if device.is_cuda() || device.is_metal() { return Ok(()); }` (candle's
    quantized tests, written before their CUDA kernels, skip CUDA so)."""
    for branch in fn.branches:
        if fn.text[: branch.start].strip(b" \t\r\n{"):
            continue  # not the first statement
        parts = [part.strip() for part in branch.condition.split("||")]
        probes = [_BACKEND_PROBE.fullmatch(part) for part in parts]
        if (
            branch.else_start < 0
            and all(probes)
            and _RETURNS_NOTHING.fullmatch(fn.text[branch.then_start : branch.then_end])
        ):
            return gpu_code.backends_named(" ".join(parts))
    return frozenset()


def tests_reaching(
    ws: Workspace, op: IndexedFunction, first: frozenset[int] = frozenset()
) -> tuple[list[IndexedFunction], bool]:
    """The GPU tests whose calls reach ``op`` by the same resolution ``gpu_test_reach``
    uses (a test calling ``ops::softmax`` on CUDA does not exercise every
    ``cuda_fwd``), and whether more candidates were left unchecked. The candidates are
    its callers, those whose ``id()`` is in ``first`` before all, then nearest first,
    each confirmed by its own reach; when none is, the test the GPU tests' common
    reach came to it from."""
    callers = sorted((c for c in ws.callers_of(op) if is_gpu_test(c, ws)), key=lambda t: id(t) not in first)
    candidates = callers[:_MAX_TESTS_CHECKED]
    index = ws.index_of(op)
    found = [test for test in candidates if index in _own_reach(ws, test)]
    origin = _reach_origins(ws).get(id(op))
    if not found and origin is not None:
        # Reached only through generic or dynamic dispatch, which the callers do not show:
        # the test the claims' reach found it from.
        return [origin], False
    return found, len(callers) > len(candidates)


# What a dtype's arm matches on besides `DType::F32`, `i64`: no op a test would name.
_OTHER_DTYPE_KEYS = frozenset({"bool", "usize", "isize", "dtype"})
# The ops an arm matches on: a variant of an enum of ops (`Op::IndexSelect`, `BinaryOp::Add`,
# `FloatOperationIr::Exp`) or an op's name (`"Erf"`).
_OP_KEY = re.compile(r'"([A-Za-z][^"\\]{1,39})"|\b(?:\w*Op|\w*Operation\w*|Op\w*)\s*::\s*([A-Za-z]\w*)')
# A match over this many ops dispatches by op.
_DISPATCH_ARMS = 3


def _is_a_dtype(word: str) -> bool:
    return bool(DTYPE_NAME.fullmatch(word)) or word.lower() in _OTHER_DTYPE_KEYS


def _op_arms(fn: Function) -> list[tuple[Arm, frozenset[str]]]:
    """The arms of the function's dispatches by op (matches of three arms or more that
    name an op: `Op::IndexSelect(..) =>`), each with the ops it names spelled the way
    `_spelled` spells a test's code. A dtype or a backend names no op: the backend a
    test runs on is chosen by its device, not by its words."""
    by_match: dict[str, list[tuple[Arm, frozenset[str]]]] = {}
    for arm in fn.arms:
        keys = frozenset(
            _spelled(key)
            for found in _OP_KEY.finditer(arm.pattern)
            for key in found.groups()
            if key and not _is_a_dtype(key) and not gpu_code.backends_named(key)
        )
        by_match.setdefault(arm.scrutinee, []).append((arm, keys))
    return [
        (arm, keys)
        for arms in by_match.values()
        if len({keys for _, keys in arms if keys}) >= _DISPATCH_ARMS
        for arm, keys in arms
        if keys
    ]


# Words of a function's name that say how or where it runs, or on which kind of tensor
# (burn's `int_cumprod`, `float_exp`), not which op it is.
_NOT_THE_OP = frozenset(
    "backward forward fwd bwd f gpu cuda metal wgpu kernel launch impl op ops storage backend device "
    "run call eval apply int float bool".split()
)


def _op_name(op: IndexedFunction) -> str:
    """The op a function runs, spelled as `_spelled` does: `roll` of `gpu_roll_f32` and of
    `RollBackward::backward`, `indexadd` of `IndexAdd::f`; "" when its names say none."""
    for name in (op.fn.name, op.fn.impl_type):
        # Digits stay in their word (`conv2d`), unlike `prose.words`, so a dtype is one word.
        kept = [
            w
            for w in re.findall(r"[A-Z]+(?![a-z])|[A-Z]?[a-z0-9]+|\d+", name or "")
            if w.lower() not in _NOT_THE_OP
        ]
        kept = [w for w in kept if not _is_a_dtype(w) and not w.isdigit()]
        if kept and len("".join(kept)) >= 3:
            return _spelled("".join(kept))
    return ""


def _gpu_tests_said(ws: Workspace) -> list[tuple[IndexedFunction, str]]:
    """The workspace's GPU tests, each with its name and code spelled as `_spelled` does
    (`conv2d_gpu` of candle's `test_device!(conv2d, conv2d_cpu, conv2d_gpu)`)."""
    found = _TESTS_SAID.get(ws)
    if found is None:
        found = _TESTS_SAID[ws] = [
            (f, _spelled(f.fn.qualname + f.fn.text.decode("latin-1")))
            for f in ws.functions
            if is_gpu_test(f, ws)
        ]
    return found


def _spelled(text: str) -> str:
    """`index_select`, `IndexSelect` and `indexselect` alike."""
    return re.sub(r"[^a-z0-9]", "", text.lower())


def _own_reach(ws: Workspace, test: IndexedFunction, taking: str = "") -> set[int]:
    """What one test's calls reach (`gpu_test_reach` walks all tests at once). ``taking``
    "arms": only the arms of dispatches by op that the test names; "branches": those arms
    and only the branches it takes (`_untaken`); "": every call."""
    reach_of = _TEST_REACH.setdefault(ws, {})
    key = (id(test), taking)
    reached = reach_of.get(key)
    if reached is None:
        reached = reach_of[key] = ws.reached_from(
            [test],
            skip=_not_run_on(_test_backends(test, ws)),
            follows=_taken_by(test, ws, taking == "branches") if taking else None,
        )
    return reached


def untaken_dispatch(ws: Workspace, op: IndexedFunction) -> str:
    """Why no enabled GPU test that reaches the function runs it: "arms" when each
    reaches it only through arms of dispatches by op that it does not name
    (`.index_select(..)` then `.backward()` takes the `Op::IndexSelect(..) =>` arm of the
    backward pass, whose gradient is an `index_add`; the other arms run for other
    tests), "branches" when only through branches it does not take (`_untaken`); ""
    when one runs it."""
    from app.checks.rules.disabled_gpu_test import check as disabled

    op_name = _op_name(op)
    named = [t for t, said in _gpu_tests_said(ws) if op_name and op_name in said][:_MAX_TESTS_CHECKED]
    nearest, _ = tests_reaching(ws, op)
    origin = _reach_origins(ws).get(id(op))  # an enabled test, where the nearest are not
    index = ws.index_of(op)
    reaching: dict[int, IndexedFunction] = {}
    for test in [*named, *nearest, *([origin] if origin else [])]:
        if id(test) not in reaching and not any(disabled(ws, test)) and index in _own_reach(ws, test):
            reaching[id(test)] = test
    # No one test reaches it, only the walk of them all (the types one builds resolving
    # another's calls): the arms it takes are not known.
    if not reaching or any(index in _own_reach(ws, t, "branches") for t in reaching.values()):
        return ""
    return "branches" if any(index in _own_reach(ws, t, "arms") for t in reaching.values()) else "arms"


def _taken_by(
    test: IndexedFunction, ws: Workspace, branches: bool
) -> Callable[[IndexedFunction, Call], bool]:
    """Whether a call runs for the test: it is in no arm of a dispatch by op, or in one
    naming an op the test's code or its helpers' names; with ``branches``, also in no
    branch the test does not take (`_untaken`)."""
    code = test_said(test, ws)
    said = _spelled(code)
    dtypes_used = _dtypes_in(code)
    arms_of: dict[int, list[tuple[Arm, frozenset[str]]]] = {}

    def follows(item: IndexedFunction, call: Call) -> bool:
        arms = arms_of.get(id(item))
        if arms is None:
            arms = arms_of[id(item)] = _op_arms(item.fn)
        return all(
            any(key in said for key in keys) for arm, keys in arms if arm.body_start <= call.offset < arm.end
        ) and not (branches and any(_untaken(b, call.offset, said, dtypes_used) for b in item.fn.branches))

    return follows


def _untaken(branch: Branch, offset: int, said: str, dtypes_used: frozenset[str]) -> bool:
    """The code at ``offset`` is in a branch that a test saying ``said`` and using the
    float dtypes ``dtypes_used`` does not take: the then-block of an opt-in mode it does
    not name (`if autocast_guard("bmm") == ..`) or of a condition on dtypes asking for
    none it uses (`if is_f64::<T>()`), the else-block of a plain test for dtypes
    (`if is_f32::<T>()`) asking for all it uses. A test that names no float dtype may
    use any: it takes every branch on dtypes."""
    in_then = branch.then_start <= offset < branch.then_end
    mode = _OPT_IN_MODE.search(branch.condition)
    if in_then and mode is not None and _spelled(mode.group()) not in said:
        return True
    asked = _dtypes_in(branch.condition)
    if not asked or not dtypes_used:
        return False
    if in_then:
        return not asked & dtypes_used
    in_else = branch.else_start <= offset < branch.else_end
    return in_else and bool(_DTYPE_TEST.fullmatch(branch.condition)) and dtypes_used <= asked


# A mode a program runs in only when asked to (autocast, CUDA graph capture).
_OPT_IN_MODE = re.compile(r"autocast|mixed_precision|is_capturing", re.I)
# A float dtype anywhere in code: `is_f64::<T>()`, `TypeId::of::<f16>()`, `DType::BF16`,
# `1.0f32`. Integer types are left out: a test names them for its indices and shapes.
_DTYPE_IN_CODE = re.compile(r"(?<![A-Za-z])(?:bf16|f16|f32|f64)(?![0-9])", re.I)
# A condition that only tests the dtype: `is_f32::<T>()`, `is_f32::<T>() || is_f64::<T>()`.
_IS_DTYPE = r"[\s()]*is_(?:bf16|f16|f32|f64)::<\w+>\(\)[\s()]*"
_DTYPE_TEST = re.compile(rf"{_IS_DTYPE}(?:\|\|{_IS_DTYPE})*")


def _dtypes_in(code: str) -> frozenset[str]:
    return frozenset(d.lower() for d in _DTYPE_IN_CODE.findall(code))
