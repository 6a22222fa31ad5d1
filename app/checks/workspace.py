"""The workspace index: every function of every file, who calls whom, and which
functions have backend evidence (spec 4a) themselves or through their callees.

Calls are resolved by name, the way a reviewer greps: ``x.foo()`` may reach any
method ``foo``, ``Type::foo()`` the methods of ``Type``, ``foo()`` the free
functions ``foo``. That over-approximates the real call graph, which errs on
the side of finding evidence (fewer false alarms) rather than missing it.
"""

from __future__ import annotations

import functools
import re
from collections import deque
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, replace

from app.checks import gpu_code
from app.checks.model import Call, FileFacts, Function, ItemMacro
from app.checks.rust_index import KERNEL_FILE_EXTENSIONS, balanced_end
from app.config import RepoConfig

# Names so generic that resolving them by name would connect everything to everything.
_GENERIC_METHODS = frozenset(
    """new clone len iter iter_mut into_iter map get get_mut push pop from into as_ref as_mut unwrap
    expect ok err collect to_string to_owned fmt default is_empty extend insert remove contains
    with_capacity and_then map_err or_else unwrap_or unwrap_or_else unwrap_or_default as_slice
    as_mut_slice as_ptr as_mut_ptr borrow borrow_mut lock write read eq ne cmp partial_cmp hash next
    drop deref deref_mut index index_mut call clear first last zip enumerate filter fold any all sum
    product max min chain rev take skip copied cloned is_some is_none is_ok is_err send recv join
    spawn try_into try_from parse to_vec format debug display build finish flush resize reserve
    truncate split sort sort_by keys values entry or_insert or_insert_with as_str trim replace
    starts_with ends_with lines chars bytes find position count step_by windows chunks concat sqrt
    abs exp ln powi powf floor ceil round min_by max_by""".split()
)
_ACCESSOR = re.compile(
    r"^(?:is|has|as|with|set|get|new|num|device|cuda|gpu|to|from|into|try_from|default|clone)(?:_|$)"
)
# The backend a foreign function's name starts with, before what it does.
_GPU_NAME_PREFIX = re.compile(r"^(?:cuda|gpu)_", re.I)
# Error, result and configuration types: naming one is no GPU work.
_PLAIN_TYPE = re.compile(r"(?:Error|Err|Result|Kind|Config|Options|Info|Id)$")
# Neither reachability (which test exercises what) nor evidence follows a method name
# defined more often than this: the call could be any of them.
_MAX_METHOD_FANOUT = 6
_TYPE_PARAMETER = re.compile(r"[A-Z]\d?")  # `B`, `K`, `E2`: a generic's name, not a type's
# A call on a type parameter reaches the trait impls of that name when there are at
# most this many: the backends of a framework, not `T::default()` of every type.
_MAX_GENERIC_FANOUT = 12
# `cuda_fwd`, `metal_fwd`, `wgpu_forward`: a trait method for one device's data.
_DEVICE_METHOD = re.compile(r"(?:^|_)(?:cuda|metal|wgpu|vulkan|gpu|hip|rocm|opencl)(?:_|$)")
_CONVERSION_TRAITS = frozenset({"Display", "Debug", "From", "TryFrom", "Into", "TryInto"})
_CONST_REF = re.compile(rb"\b[A-Z]\w{2,}\b")  # `FILL`, and `RepeatRaw` a macro defined from a kernel file
_GPU_SOURCE_FILE = re.compile(rf"\.(?:cuh|{KERNEL_FILE_EXTENSIONS})\b", re.I)  # headers are GPU code too


@dataclass(frozen=True, slots=True)
class SourceFile:
    path: str  # relative to the scanned root, with "/" separators
    facts: FileFacts


Key = tuple[str, ...]


# The crates that talk to a GPU driver: a call through one of their paths is GPU work.
_GPU_CRATE_PATH = re.compile(
    r"^(?:cudarc|cust|cuda_sys|cuda_driver_sys|cuda_runtime_sys|cudnn\w*|cublas\w*|cufft\w*|cusparse\w*"
    r"|cusolver\w*|nccl\w*|wgpu|metal|objc2_metal|cubecl\w*|hip\w*|ash|vulkano|ocl|opencl\w*)(?:::|$)"
)
_CUBE_LAUNCHERS = frozenset({"launch", "launch_unchecked"})


def call_key(call: Call, caller: Function) -> Key | None:
    """The name under which a call is resolved, or None for a name too generic to resolve."""
    if call.is_method:
        if caller.trait and not caller.impl_type and _on_self(call, caller):
            # `self.f(..)` in a trait's default method (candle's `Map1::map`): the
            # trait's own method, in every type that implements it.
            return ("t", caller.trait, call.name)
        return None if call.name in _GENERIC_METHODS else ("m", call.name)
    if call.qualifier:
        last = call.qualifier.rsplit("::", 1)[-1]
        if last in ("Self", "self"):
            if caller.impl_type:
                return ("t", caller.impl_type, call.name)
            # `Self::f(..)` in a trait's default method, as `self.f(..)`: the implementing type's.
            return ("t", caller.trait, call.name) if caller.trait else ("f", call.name)
        if _TYPE_PARAMETER.fullmatch(last):
            # `B::float_add(..)`: a trait method of whatever type B is
            return None if call.name in _GENERIC_METHODS else ("g", call.name)
        if last[:1].isupper():
            return ("t", last, call.name)
        if call.name in _CUBE_LAUNCHERS:
            # `#[cube(launch)] fn relu_kernel` generates `relu_kernel::launch`: a call of the kernel.
            return ("f", last)
    return ("f", call.name)


# Names too common to resolve by name (`io::Write::write`, `RwLock::read`) that the
# workspace's own types also implement (cubecl's `ComputeServer::read`, reached from
# `self.channel.read(..)`): the walk resolves them by the values the reached code holds.
_HELD_VALUE_METHODS = frozenset({"read", "write", "flush", "send", "recv", "fmt"})


def _held_value_keys(call: Call) -> list[Key]:
    return [("m", call.name)] if call.is_method and call.name in _HELD_VALUE_METHODS else []


# `write!(f, "{instruction}")`: formatting a value runs its `Display::fmt`, which is
# where code generators (cubecl's dialects, writing CUDA C and MSL) do their work.
_FORMATTING_MACROS = frozenset({"write", "writeln", "format", "format_args"})


def _formatting_calls(fn: Function) -> list[Call]:
    return [
        Call("fmt", "", True, macro.offset)
        for macro in fn.macros
        if macro.name in _FORMATTING_MACROS and "{" in macro.args
    ]


def _dispatches_on_self(key: Key, caller: Function) -> bool:
    """`self.f(..)` in a trait's default method: it runs the `f` of whichever
    implementing type the value is, one of those the reached code builds."""
    return key[0] == "t" and key[1] == caller.trait and not caller.impl_type


_SELF_RECEIVER = re.compile(rb"(?<![\w.])self\s*\.\s*$")


def _on_self(call: Call, caller: Function) -> bool:
    """The call is `self.name(..)`."""
    return bool(_SELF_RECEIVER.search(caller.text, max(0, call.offset - 16), call.offset))


def _written_out(
    invocations: Iterable[ItemMacro], templates: dict[str, list[Function]]
) -> Iterator[Function]:
    """The tests that a file's item-level macro invocations write out from test
    templates (icicle's `impl_ntt_tests!(ScalarField)` in a curve crate's `mod tests`),
    placed at the invocation, in its modules and under its attributes: where the tests
    are expanded decides the device they run on."""
    for invocation in invocations:
        for test in templates.get(invocation.name, ()):
            yield replace(
                test,
                line=invocation.line,
                fn_line=invocation.line,
                end_line=invocation.line,
                body_line=invocation.line,
                modules=invocation.modules,
                outer_attrs=invocation.outer_attrs,
            )


def _with_nested_templates(
    templates: dict[str, list[Function]], calls: list[tuple[str, str]]
) -> dict[str, list[Function]]:
    """Each template's tests with those of the templates it invokes, transitively:
    `testgen_random!()` in a runtime crate writes out `testgen_random_uniform!`'s tests
    there, on that crate's device."""
    invoked: dict[str, list[str]] = {}
    for template, macro in calls:
        invoked.setdefault(template, []).append(macro)

    def tests_of(name: str, seen: set[str]) -> list[Function]:
        if name in seen:
            return []  # a template that invokes itself, directly or not
        seen.add(name)
        nested = (test for macro in invoked.get(name, ()) for test in tests_of(macro, seen))
        return [*templates.get(name, ()), *nested]

    return {name: tests_of(name, set()) for name in {*templates, *invoked}}


def _test_module_files(files: Iterable[SourceFile]) -> Callable[[str], bool]:
    """Whether a file holds a module declared under `#[cfg(test)]` elsewhere
    (`#[cfg(test)] mod tests_signed;` in `radix/mod.rs` makes `radix/tests_signed.rs`
    and everything under `radix/tests_signed/` test code), by Rust's rules for where a
    module's file is: beside `mod.rs`, `lib.rs` and `main.rs`, in a folder named after
    any other file."""
    roots: list[str] = []
    for source in files:
        folder, _, name = source.path.rpartition("/")
        stem = name.removesuffix(".rs")
        base = folder if stem in ("mod", "lib", "main") else f"{folder}/{stem}" if folder else stem
        for module in source.facts.test_modules:
            roots.append(f"{base}/{module}" if base else module)
    if not roots:
        return lambda path: False
    prefixes = tuple(f"{root}/" for root in roots)
    whole_files = frozenset(f"{root}.rs" for root in roots)
    return lambda path: path in whole_files or path.startswith(prefixes)


def definition_keys(fn: Function) -> Iterator[Key]:
    if fn.impl_type or fn.trait:
        yield ("m", fn.name)
        yield ("t", fn.impl_type or fn.trait, fn.name)
        if fn.trait:
            yield ("t", fn.trait, fn.name)
        if fn.trait and not fn.impl_type:
            yield ("d", fn.trait, fn.name)  # a default method: what a type that does not override it runs
    else:
        yield ("f", fn.name)
        if any(map(gpu_code.KERNEL_ATTR.search, fn.attrs)):
            # `#[cube] fn kernel` also defines `kernel_expand`, which other kernels and
            # a compiled shader's `expand` call (cubecl before its `kernel::expand` form).
            yield ("f", f"{fn.name}_expand")


@dataclass(slots=True)
class IndexedFunction:
    """One function with its place in the workspace and what the index knows of it."""

    fn: Function
    file: SourceFile
    claim: str  # why it presents itself as GPU code, "" when it does not
    gpu_location: bool
    support_code: bool  # tests, benches, examples, build scripts, tools
    cpu_build: bool
    moves_data: bool  # its job is moving or showing data (gpu_to_cpu, to_vec, Display)
    direct_evidence: str  # what in its own body is backend evidence, "" when nothing
    kernel_sources: frozenset[str]  # the GPU kernel source constants it names (`LOG_F64_PTX`)
    evidence: str = ""  # own or through callees: "launches via `x`", "" when none
    evidence_crate: str = ""  # the crate of the function whose own body holds the evidence

    @property
    def path(self) -> str:
        return self.file.path

    @property
    def crate(self) -> str:
        return crate_of(self.file.path)

    @property
    def module(self) -> str:
        """The Rust module path inside the crate: ``ops::matmul`` for
        ``src/ops/matmul.rs`` (``lib.rs``, ``main.rs`` and ``mod.rs`` name their
        directory), then any inline ``mod`` blocks."""
        rest = self.file.path[len(self.crate) :].lstrip("/").split("/")
        if rest and rest[0] in ("src", "tests", "benches", "examples"):
            rest = rest[1:]
        if rest:
            rest[-1] = rest[-1].removesuffix(".rs")
            if rest[-1] in ("lib", "main", "mod"):
                rest.pop()
        return "::".join([*rest, *self.fn.modules])

    @property
    def is_gpu_code(self) -> bool:
        return bool(self.claim or self.gpu_location)


class Workspace:
    """Functions of all files, resolved calls, transitive backend evidence."""

    def __init__(self, files: Iterable[SourceFile], config: RepoConfig) -> None:
        self.config = config
        self.files = list(files)
        gpu_consts = frozenset(s.name.encode() for f in self.files for s in f.facts.gpu_sources)
        self.functions: list[IndexedFunction] = []
        templates: dict[str, list[Function]] = {}
        for source in self.files:
            for macro, test in source.facts.test_templates:
                templates.setdefault(macro, []).append(test)
        templates = _with_nested_templates(templates, [c for f in self.files for c in f.facts.template_calls])
        in_a_test_module = _test_module_files(self.files)
        for source in self.files:
            gpu_location = gpu_code.in_gpu_path(source.path, config.gpu_paths)
            test_module = in_a_test_module(source.path)
            for fn in (*source.facts.functions, *_written_out(source.facts.item_macros, templates)):
                all_attrs = fn.attrs + fn.outer_attrs
                kernel_consts = _kernel_sources(fn, gpu_consts)
                self.functions.append(
                    IndexedFunction(
                        fn=fn,
                        file=source,
                        claim=gpu_code.gpu_claim_reason(fn),
                        gpu_location=gpu_location,
                        support_code=test_module or gpu_code.is_support_code(fn, source.path),
                        cpu_build=gpu_code.is_cpu_build(all_attrs),
                        moves_data=bool(gpu_code.TRANSFER_NAME.search(fn.name))
                        or fn.trait in _CONVERSION_TRAITS,
                        direct_evidence=_direct_evidence(fn, kernel_consts),
                        kernel_sources=kernel_consts,
                    )
                )
        self._index: dict[int, int] = {id(item): index for index, item in enumerate(self.functions)}
        self.definitions: dict[Key, list[int]] = {}
        self.by_path: dict[str, list[IndexedFunction]] = {}
        for index, item in enumerate(self.functions):
            self.by_path.setdefault(item.path, []).append(item)
            if gpu_code.is_test(item.fn):
                continue  # nothing calls a `#[test]`: `ops::softmax(..)` is not the test `softmax`
            for key in definition_keys(item.fn):
                self.definitions.setdefault(key, []).append(index)
        # Foreign functions whose other side is GPU code: they take device memory, or a
        # GPU module (`risc0-sys/src/cuda.rs`) declares them. Calling one launches work.
        self._gpu_ffi: set[str] = {
            name
            for source in self.files
            for name, takes_device_memory in source.facts.ffi_functions
            if takes_device_memory or gpu_code.in_gpu_path(source.path, config.gpu_paths)
        }
        for item in self.functions:
            if not item.direct_evidence:
                item.direct_evidence = self._external_gpu_call(item.fn)
        self.callers: dict[Key, list[int]] = {}  # call key -> indexes of the functions making it
        # Per crate: the aliases of GPU device types its files declare, and what they name.
        self._gpu_aliases: dict[str, dict[str, tuple[str, ...]]] = {}
        self._named_types: dict[int, tuple[str, ...]] = {}  # id() of a function -> gpu_types_named
        for source in self.files:
            for alias, types in source.facts.gpu_device_aliases:
                self._gpu_aliases.setdefault(crate_of(source.path), {})[alias] = types
        # `type CudaHalSha256 = CudaHal<..>;`: calls on and values of the alias are the type's
        # (each type's, for a tuple alias).
        self._type_aliases: dict[str, list[str]] = {}
        # The same, by crate: cubecl's every runtime crate has its own `TestRuntime`.
        self._crate_aliases: dict[tuple[str, str], list[str]] = {}
        for source in self.files:
            for alias, target in source.facts.type_aliases:
                self._type_aliases.setdefault(alias, []).append(target)
                self._crate_aliases.setdefault((crate_of(source.path), alias), []).append(target)
        # `type Server = CudaServer;` in `impl Runtime for CudaRuntime`: the types in play
        # wherever the implementing type is.
        self._associated: dict[str, list[str]] = {}
        for source in self.files:
            crate = crate_of(source.path)
            for implementing, bound in source.facts.associated_types:
                # `type Channel = Channel;`: the alias of the impl's crate, when it is one.
                self._associated.setdefault(implementing, []).extend(
                    self._crate_aliases.get((crate, bound), [bound])
                )
        self._by_type: dict[str, list[int]] | None = None  # impl type -> indexes of its methods
        # Trait -> the names of its default methods (`Map1::map`): a type implementing the
        # trait has them without defining them.
        self._default_methods: dict[str, set[str]] = {}
        self._traits: dict[str, set[str]] = {}  # type -> the traits it implements
        for item in self.functions:
            if item.fn.trait and not item.fn.impl_type:
                self._default_methods.setdefault(item.fn.trait, set()).add(item.fn.name)
        self._picked: dict[tuple[Key, str], list[int]] = {}  # (call key, caller's file) -> targets
        self._local_types: dict[tuple[int, int], str] = {}  # (id() of a caller, call offset) -> _local_type
        self._lets: dict[int, dict[str, list[tuple[int, str]]]] = {}  # id() of a function -> _let_types
        # id() of a function -> the locals its `let`s bind to functions (`_LET_FUNCTION`)
        self._function_lets: dict[int, dict[str, re.Match[bytes]]] = {}
        self._propagate_evidence()

    def index_of(self, item: IndexedFunction) -> int:
        """The position of one of the workspace's functions in ``functions``."""
        return self._index[id(item)]

    def enclosing(self, path: str, line: int) -> IndexedFunction | None:
        """The innermost function of the file that spans the line."""
        best = None
        for item in self.by_path.get(path, ()):
            if item.fn.line <= line <= item.fn.end_line and (best is None or item.fn.line >= best.fn.line):
                best = item
        return best

    def _external_gpu_call(self, fn: Function) -> str:
        """A call to a GPU routine defined outside the workspace (a GPU crate's API) is
        evidence too: its body cannot be read here."""
        for call in fn.calls:
            if self.is_external_gpu_routine(call, fn):
                return f"calls the external GPU routine `{_display(call)}` at line {fn.line_of(call.offset)}"
        return ""

    def is_external_gpu_routine(self, call: Call, caller: Function) -> bool:
        """The call reaches GPU code outside the workspace: a GPU crate's API, a foreign
        function of GPU code, a routine named for the GPU that nothing here defines."""
        if call.is_method:
            return False
        key = call_key(call, caller)  # the dict lookup first: most calls resolve
        if key is None or key in self.definitions:
            return False
        if gpu_code.TRANSFER_NAME.search(call.name):
            return False
        if call.name in self._gpu_ffi:  # `cuda_add_lwe_vector_64(..)`, not `cuda_get_device_count()`
            return not _ACCESSOR.match(_GPU_NAME_PREFIX.sub("", call.name))
        if _ACCESSOR.match(call.name):
            return False
        if _GPU_CRATE_PATH.match(call.qualifier):
            return True  # `cudarc::driver::result::mem_get_info()`: the driver API itself
        owner = call.qualifier.rsplit("::", 1)[-1]
        gpu_owner = gpu_code.GPU_TYPE_NAME.search(owner) and not _PLAIN_TYPE.search(owner)
        return bool(gpu_code.GPU_NAME.search(call.name) or gpu_owner)

    def call_keys(self, call: Call, caller: IndexedFunction) -> list[Key]:
        """The names a call is resolved under: its ``call_key``, and for a method the
        default methods of the traits of the types the caller builds a value of
        (``Pool2D { .. }.map(..)`` is ``Map1::map`` when ``Pool2D`` implements ``Map1``:
        a name as common as ``map`` resolves no other way)."""
        call = self._function_bound(call, caller)
        key = call_key(call, caller.fn)
        if key is not None and key[0] == "m":
            bound = self._local_type(call, caller)
            if bound:
                key = ("t", bound, call.name)
        keys = [key] if key is not None else []
        if key is not None and key[0] == "t" and key not in self.definitions and key[1] in self._type_aliases:
            keys = [("t", target, key[2]) for target in self._alias_targets(key[1], caller)]
        if call.is_method and self._default_methods:
            for type_name in caller.fn.constructs:
                for trait in self._traits_of(type_name):
                    if call.name in self._default_methods.get(trait, ()):
                        keys.append(("t", trait, call.name))
        if key is not None and key[0] == "t" and key not in self.definitions:
            # `IsNan::format(..)`: the default method of a trait of the type's.
            keys.extend(("d", trait, key[2]) for trait in self._inherited_from(key[1], key[2]))
        return keys

    def _inherited_from(self, type_name: str, method: str) -> list[str]:
        """The traits of a type whose default method ``method`` it does not override."""
        if not self._default_methods:
            return []
        return [t for t in self._traits_of(type_name) if method in self._default_methods.get(t, ())]

    def _types_called_on(self, item: IndexedFunction) -> list[str]:
        """The types whose inherited default methods the function calls by path
        (`IsNan::format(..)`): that method's `Self::f(..)` runs the type's own `f`."""
        return [
            type_name
            for call in item.fn.calls
            if not call.is_method
            and (type_name := call.qualifier.rsplit("::", 1)[-1])[:1].isupper()
            and type_name != "Self"
            and ("t", type_name, call.name) not in self.definitions
            and self._inherited_from(type_name, call.name)
        ]

    def _alias_targets(self, alias: str, caller: IndexedFunction) -> list[str]:
        """The types an alias a call names stands for: the caller's crate's alias when it
        has one of types the workspace defines (cubecl's every runtime crate has its own
        `TestRuntime`); every crate's otherwise (burn's test templates name a
        `TestTensor` that each crate writing them out defines)."""
        own = self._crate_aliases.get((caller.crate, alias), [])
        if own and all(self.methods_of(target) for target in own):
            return own
        return self._type_aliases[alias]

    def _function_bound(self, call: Call, caller: IndexedFunction) -> Call:
        """A call of a local that a ``let`` binds to a function's path (cubecl's
        `let test = runtime_tests::saturating::test_add::<TestRuntime>; test(client);`)
        as a call of that function; other calls as they are."""
        if call.is_method or call.qualifier:
            return call
        bound = self._function_lets.get(id(caller))
        if bound is None:
            bound = self._function_lets[id(caller)] = {
                let.group(1).decode(): let for let in _LET_FUNCTION.finditer(caller.fn.text)
            }
        let = bound.get(call.name)
        if let is None or let.start() > call.offset:
            return call
        qualifier, _, name = re.sub(rb"\s", b"", let.group(2)).decode().rpartition("::")
        return call._replace(name=name, qualifier=qualifier)

    def _local_type(self, call: Call, caller: IndexedFunction) -> str:
        """The type of the local a method is called on, when its ``let`` says it
        (``let lin = Linear::new(..);`` then ``lin.forward(..)``): the call runs that
        type's method, not every ``forward`` of the workspace. "" when the binding does
        not say, or when the type may hand the call on (a ``Deref`` of its own)."""
        cache_key = (id(caller), call.offset)
        found = self._local_types.get(cache_key)
        if found is None:
            lets = self._lets.get(id(caller))
            if lets is None:
                lets = self._lets[id(caller)] = _let_types(caller.fn.text)
            found = _bound_type(lets, caller.fn.text, call.offset)
            methods = [
                self.functions[i].fn.name
                for name in (found, *self._type_aliases.get(found, ()))
                if name
                for i in self.methods_of(name)
            ]
            if not methods or (call.name not in methods and "deref" in methods):
                found = ""  # a type of another crate, or one that derefs to another: the name decides
            self._local_types[cache_key] = found
        return found

    def _traits_of(self, type_name: str) -> set[str]:
        traits = self._traits.get(type_name)
        if traits is None:
            traits = {self.functions[i].fn.trait for i in self.methods_of(type_name)} - {""}
            self._traits[type_name] = traits
        return traits

    def resolve(self, call: Call, caller: IndexedFunction) -> list[IndexedFunction]:
        targets = [
            self.functions[i] for key in self.call_keys(call, caller) for i in self._targets(key, caller)
        ]
        return _in_named_modules(targets, call.qualifier)

    def _targets(self, key: Key, caller: IndexedFunction) -> list[int]:
        """Definitions a call may reach. A plain ``foo()`` reaches a ``foo`` of the
        caller's own crate when there is one (that is what is in scope). ``T::m()`` of a
        type several files define (each model of candle has its own ``RmsNorm``) reaches
        the one of the caller's file, else the one its ``use`` declarations import."""
        found = self.definitions.get(key, [])
        if len(found) < 2 or key[0] not in ("f", "t") or _dispatches_on_self(key, caller.fn):
            return found  # `self.f(..)` in a trait's default method: any implementing type's `f`
        if key[0] == "f":
            same = [i for i in found if self.functions[i].crate == caller.crate]
            return same or found
        cache_key = (key, caller.path)
        picked = self._picked.get(cache_key)
        if picked is None:
            picked = self._pick_type(key[1], caller, found)
            self._picked[cache_key] = picked
        return picked

    def _call_site(self, key: Key, caller: IndexedFunction) -> str:
        """What of the caller's place decides the targets of a call (see ``_targets``)."""
        if len(self.definitions.get(key, ())) < 2:
            return ""
        return {"f": caller.crate, "t": caller.path}.get(key[0], "")

    def _pick_type(self, type_name: str, caller: IndexedFunction, found: list[int]) -> list[int]:
        if len({self.functions[i].path for i in found}) < 2:
            return found
        own = [i for i in found if self.functions[i].path == caller.path]
        if own:
            return own
        modules = _imported_from(type_name, caller.file.facts.uses)
        imported = [
            i for i in found if any(f"/{m}/" in _module_path(self.functions[i].path) for m in modules)
        ]
        return imported or found

    def call_evidence(self, call: Call, caller: IndexedFunction) -> str:
        """Backend evidence reached through one call ("" when none). Moving data is
        not computing: a call to a transfer routine is no evidence."""
        if gpu_code.TRANSFER_NAME.search(call.name):
            return ""
        for target in self.resolve(call, caller):
            if target.evidence:
                return f"calls `{call.name}` ({target.path}:{target.fn.fn_line})"
        if self.is_external_gpu_routine(call, caller.fn):
            return f"calls the external GPU routine `{_display(call)}`"
        return ""

    def _propagate_evidence(self) -> None:
        """Evidence flows from callee to caller until nothing changes (a BFS over
        call keys, linear in the number of distinct calls)."""
        callers = self.callers
        queue: deque[int] = deque()
        for index, item in enumerate(self.functions):
            if item.direct_evidence:
                item.evidence = item.direct_evidence
                item.evidence_crate = item.crate
                queue.append(index)
            for key in {key for call in item.fn.calls for key in self.call_keys(call, item)}:
                callers.setdefault(key, []).append(index)
        while queue:
            index = queue.popleft()
            item = self.functions[index]
            if item.moves_data:
                continue  # moving data is not computing: no evidence flows from here
            for key in definition_keys(item.fn):
                if key[0] == "m" and len(self.definitions.get(key, ())) > _MAX_METHOD_FANOUT:
                    continue  # `.shape()` of seven types: which one a caller reaches is unknown
                for caller_index in callers.get(key, ()):
                    caller = self.functions[caller_index]
                    if caller.evidence:
                        continue
                    if key[0] in ("f", "t") and index not in self._targets(key, caller):
                        continue  # the name in scope at the caller is another definition
                    caller.evidence = f"calls `{item.fn.qualname}` ({item.path}:{item.fn.fn_line})"
                    caller.evidence_crate = item.evidence_crate
                    queue.append(caller_index)

    def callers_of(
        self, item: IndexedFunction, within: int = 6, by_path: bool = False
    ) -> Iterator[IndexedFunction]:
        """Functions that reach ``item`` through at most ``within`` calls (nearest first);
        ``by_path``: through calls by path only (`foo()`, `Type::foo()`), not method
        calls resolved by name."""
        seen: set[int] = set()
        frontier = [item]
        for _ in range(within):
            next_frontier: list[IndexedFunction] = []
            for current in frontier:
                if gpu_code.is_test(current.fn):
                    continue  # nothing calls a `#[test]`
                for key in definition_keys(current.fn):
                    if by_path and key[0] == "m":
                        continue
                    for index in self.callers.get(key, ()):
                        caller = self.functions[index]
                        if index in seen or (
                            key[0] in ("f", "t") and self.index_of(current) not in self._targets(key, caller)
                        ):
                            continue  # the name in scope at the caller is another definition
                        seen.add(index)
                        next_frontier.append(caller)
                        yield caller
            frontier = next_frontier

    def reached_from(
        self,
        roots: Iterable[IndexedFunction],
        origins: dict[int, int] | None = None,
        skip: Callable[[IndexedFunction], bool] | None = None,
        follows: Callable[[IndexedFunction, Call], bool] | None = None,
    ) -> set[int]:
        """Indexes of the functions reachable by calls from the roots. A method name
        defined too often to resolve by name (``grad_fn.backward()``, dynamic dispatch)
        reaches the methods of that name on the types the reached code builds values
        of: the trait objects it can be holding (rapid type analysis); so does a trait
        method that several types implement, or all its impls when the reached code
        builds none of those types. ``origins``, when given, is filled with the index of
        the root each function was first reached from; ``skip`` names functions the walk
        does not enter, ``follows`` the calls it follows (all when not given)."""
        reached: set[int] = set()
        queue = deque(self.index_of(r) for r in roots)
        if origins is not None:
            origins.update((i, i) for i in queue)

        def push(found: Iterable[int], caller: int | None = None) -> None:
            for target in found:
                if skip is not None and skip(self.functions[target]):
                    continue
                queue.append(target)
                if origins is not None:
                    origins.setdefault(target, origins[index if caller is None else caller])

        visited_keys: set[tuple[Key, str]] = set()
        built: set[int] = set()  # the methods of the types the reached code builds values of
        # Calls resolved by the value's type: a method name called too widely to resolve
        # by name (`("m", name)`), `self.f(..)` in a trait's default method (`("t", trait, f)`).
        dispatched: set[Key] = set()
        # Trait methods of several types, resolved by the type built: the calling function, the impls.
        unsure: dict[Key, tuple[int, list[int]]] = {}
        while queue:
            index = queue.popleft()
            if index in reached:
                continue
            reached.add(index)
            item = self.functions[index]
            fn = item.fn
            for type_name in self._types_in_play(item):
                for method in self._methods_built(type_name, item):
                    if method not in built:
                        built.add(method)
                        built_fn = self.functions[method].fn
                        # A value built is dropped: its `Drop::drop` runs without a call.
                        dropped = built_fn.trait == "Drop" and built_fn.name == "drop"
                        if (
                            dropped
                            or self._picked_by_a_dependency(built_fn)
                            or not dispatched.isdisjoint(definition_keys(built_fn))
                        ):
                            push((method,))
            calls = [*fn.calls, *_formatting_calls(fn)]
            calls = calls if follows is None else [call for call in calls if follows(item, call)]
            keys = (key for call in calls for key in self.call_keys(call, item) or _held_value_keys(call))
            for key in keys:
                # Which of several definitions a call reaches depends on where it is made
                # (`kernel::cross` in burn-cubecl is not burn-candle's `cross`).
                visited = (key, self._call_site(key, item))
                if visited in visited_keys:
                    continue
                visited_keys.add(visited)
                targets = self._targets(key, item)
                if key[0] == "g" or (key[0] == "t" and not targets and not self.methods_of(key[1])):
                    # Generic code reaches the trait impls of every type it may be
                    # instantiated with; so does a call on a type the workspace gives
                    # no method of (`TestBackend::int_random`: an alias of a backend).
                    named = self.definitions.get(("m", key[-1]), ())
                    impls = [i for i in named if self.functions[i].fn.trait]
                    if len(impls) <= _MAX_GENERIC_FANOUT:
                        push(impls)
                    continue
                on_self = _dispatches_on_self(key, fn)
                too_many = key[0] == "m" and (
                    len(targets) > _MAX_METHOD_FANOUT or key[1] in _HELD_VALUE_METHODS
                )
                several_impls = key[0] == "m" and not too_many and self._impls_of_several_types(targets)
                if too_many or on_self or several_impls:
                    dispatched.add(key)
                    if several_impls:
                        unsure.setdefault(key, (index, targets))
                    # A default method runs for the built types that do not override it.
                    push(i for i in targets if i in built or (on_self and not self.functions[i].fn.impl_type))
                    continue
                push(targets)
            if not queue:
                # A trait method none of whose types the reached code builds (the value
                # comes from a registry it does not show): every impl may run.
                for caller, targets in unsure.values():
                    if reached.isdisjoint(targets):
                        push(targets, caller)
                unsure.clear()
        return reached

    def _types_in_play(self, item: IndexedFunction) -> list[str]:
        """The types whose methods a function's code may run by dispatch: those it builds
        values of, the GPU device types it names through an alias, and the types the
        trait impls of these and of its own type bind associated types to (cubecl's test
        runs on `TestRuntime`, whose `type Server = CudaServer;` is what generic
        `ComputeClient<R::Server>` code writes to)."""
        found = dict.fromkeys(
            (*item.fn.constructs, *self.gpu_types_named(item), *self._types_called_on(item))
        )
        frontier = [*found, *([item.fn.impl_type] if item.fn.impl_type else [])]
        while frontier:
            for bound in self._associated.get(frontier.pop(), ()):
                if bound not in found:
                    found[bound] = None
                    frontier.append(bound)
        return list(found)

    def _picked_by_a_dependency(self, method: Function) -> bool:
        """A device's method of a trait the workspace only implements (mistral.rs's
        `impl CustomOp1 for Sort { fn metal_fwd .. }`, the trait candle's): the value
        is built to be handed to the dependency, which calls the method of the device
        the data is on. A trait the workspace gives no default method of counts as a
        dependency's; a test of another backend does not walk into the method."""
        return (
            bool(method.trait)
            and method.trait not in self._default_methods
            and _DEVICE_METHOD.search(method.name) is not None
        )

    def _impls_of_several_types(self, targets: list[int]) -> bool:
        """Trait impls of two or more types: `backend.add_f32(..)` runs the one of the
        value's type, which only the types the caller builds can tell."""
        types = {self.functions[i].fn.impl_type for i in targets if self.functions[i].fn.trait}
        return len(types) >= 2

    def _methods_built(self, type_name: str, builder: IndexedFunction) -> list[int]:
        """The methods of the type a function builds a value of: those of its own file
        when the file has some (candle's CPU and CUDA backends each have an `IndexAdd`)."""
        methods = self.methods_of(type_name)
        if not methods:
            methods = [i for target in self._type_aliases.get(type_name, ()) for i in self.methods_of(target)]
        return [i for i in methods if self.functions[i].path == builder.path] or methods

    def gpu_types_named(self, item: IndexedFunction) -> tuple[str, ...]:
        """The GPU device types a function names through an alias of its crate
        (`let dev: TestDevice = Default::default();` with `type TestDevice = Cuda;` in
        the crate's test module under a cfg): what it runs its work on."""
        aliases = self._gpu_aliases.get(item.crate)
        if not aliases:
            return ()
        found = self._named_types.get(id(item))
        if found is None:
            named = set(_TYPE_NAME.findall(item.fn.text))
            found = tuple(t for alias, types in aliases.items() if alias.encode() in named for t in types)
            self._named_types[id(item)] = found
        return found

    def methods_of(self, type_name: str) -> list[int]:
        if self._by_type is None:
            self._by_type = {}
            for index, item in enumerate(self.functions):
                if item.fn.impl_type:
                    self._by_type.setdefault(item.fn.impl_type, []).append(index)
        return self._by_type.get(type_name, [])


_TYPE_NAME = re.compile(rb"\b[A-Z]\w*")
# `let test = runtime_tests::saturating::test_add::<TestRuntime, i32>;`: a local bound to
# a function's path (its generic arguments dropped).
_LET_FUNCTION = re.compile(
    rb"\blet\s+(?:mut\s+)?([a-z_]\w*)\s*=\s*((?:\w+\s*::\s*)*[a-z_]\w*)\s*(?:::\s*<[^;=]*>)?\s*;"
)
# The receiver of a method call when it is a plain local: `lin` in `lin.forward(`.
_RECEIVER = re.compile(rb"(?<![\w.:)\]?])([a-z_]\w*)\s*\.\s*$")
_LONGEST_RECEIVER = 80  # bytes before a call that its receiver is looked for in
# A `let` of a plain local, with the type its annotation names.
_LET = re.compile(rb"\blet\s+(?:mut\s+)?([a-z_]\w*)\s*(?::\s*&?\s*(?:mut\s+)?([A-Z]\w*)\b[^=;]*)?=\s*")
# A value built by a constructor of its type (`Linear::new(..)`, `Linear::from_weights(..)?`,
# `Linear { .. }`), as the whole of what a `let` binds.
_CONSTRUCTOR = re.compile(rb"(?P<built>[A-Z]\w*)\s*(?:::\s*(?:new|with|from|try_new|default)\w*\s*\(|\{)")
_AFTER_CONSTRUCTOR = re.compile(rb"\s*(?:\?|\.unwrap\(\)|\.expect\([^;]*?\))?\s*;")


def _let_types(text: bytes) -> dict[str, list[tuple[int, str]]]:
    """Each local a function's ``let``s bind: (offset, the type the ``let`` says it has,
    or "" when it does not say), in order."""
    found: dict[str, list[tuple[int, str]]] = {}
    for let in _LET.finditer(text):
        type_name = let.group(2) or b""
        built = None if type_name else _CONSTRUCTOR.match(text, let.end())
        if built is not None:
            end = balanced_end(text, built.end() - 1)
            if end >= 0 and _AFTER_CONSTRUCTOR.match(text, end):
                type_name = built.group("built")
        found.setdefault(let.group(1).decode(), []).append((let.start(), type_name.decode()))
    return found


def _bound_type(lets: dict[str, list[tuple[int, str]]], text: bytes, offset: int) -> str:
    """The type the last ``let`` of the receiver of the call at ``offset`` gives it, or ""."""
    receiver = _RECEIVER.search(text, max(0, offset - _LONGEST_RECEIVER), offset)
    if receiver is None:
        return ""
    bound = [type_name for start, type_name in lets.get(receiver.group(1).decode(), ()) if start < offset]
    return bound[-1] if bound else ""


def _imported_from(type_name: str, uses: tuple[str, ...]) -> list[str]:
    """The modules (or crates) the ``use`` declarations that name ``type_name`` import it
    from: ``with_tracing`` of ``use crate::models::with_tracing::{linear, RmsNorm};``."""
    modules: list[str] = []
    for use in uses:
        at = re.search(rf"\b{re.escape(type_name)}\b", use)
        if at:
            path = [
                m for m in re.findall(r"(\w+)\s*::", use[: at.start()]) if m not in ("crate", "self", "super")
            ]
            modules.extend(path[-1:])
    return modules


def _in_named_modules(targets: list[IndexedFunction], qualifier: str) -> list[IndexedFunction]:
    """Of the definitions a call may reach, those in the files its module path names
    most of: ``crate::fft::cpu::ops::fft`` is the ``fft`` of ``fft/cpu/ops.rs``, not the
    ``fft`` of ``fft/gpu/metal/ops.rs``. Modules declared inline name no file; then all stay."""
    modules = [m for m in qualifier.split("::") if m[:1].islower() and m not in ("crate", "self", "super")]
    if len(targets) < 2 or not modules:
        return targets
    named = [sum(f"/{m}/" in _module_path(t.path) for m in modules) for t in targets]
    best = max(named)
    return [t for t, n in zip(targets, named, strict=True) if n == best] if best else targets


def _module_path(path: str) -> str:
    """A file's path as module names: ``candle_nn/src/layer_norm.rs`` for
    ``candle-nn/src/layer_norm.rs``, so that a module or crate name is a part of it."""
    return "/" + path.replace("-", "_").removesuffix(".rs") + "/"


@functools.lru_cache(maxsize=1 << 16)  # asked of every call a rule resolves
def crate_of(path: str) -> str:
    """The workspace member a file belongs to: the directory above its ``src/``,
    ``tests/``, ``benches/`` or ``examples/``."""
    parts = path.split("/")
    for i, part in enumerate(parts[:-1]):
        if part in ("src", "tests", "benches", "examples"):
            return "/".join(parts[:i])
    return parts[0] if len(parts) > 1 else ""


def _display(call: Call) -> str:
    return f"{call.qualifier}::{call.name}" if call.qualifier else call.name


def _kernel_sources(fn: Function, gpu_consts: frozenset[bytes]) -> frozenset[str]:
    """The GPU kernel source constants the function names."""
    if not gpu_consts:
        return frozenset()
    return frozenset(name.decode() for name in gpu_consts.intersection(_CONST_REF.findall(fn.text)))


# A device intrinsic or a kernel language's own syntax in a string: the function writes
# kernel source (cubecl's dialects write CUDA C, MSL and WGSL: `write!(f,
# "simd_ballot({input})")`, `"nvcuda::wmma::.."`, `"bitcast<{uint}>(x)"`, inline PTX
# `elect.sync`).
_DEVICE_INTRINSIC = re.compile(
    r"\b(?:__shfl\w*|__syncthreads|__syncwarp|__ballot\w*|__activemask|__global__|__shared__"
    r"|__device__|__forceinline__|__launch_bounds__|nvcuda::|threadIdx|blockIdx|blockDim|gridDim"
    r"|atomic(?:Add|Sub|Exch|CAS|Max|Min|And|Or|Xor|Inc|Dec)\b|simd_(?:ballot|shuffle\w*|sum|prefix\w*|broadcast\w*|all|any|max|min|product)"
    r"|threadgroup_barrier|thread_position_in_grid|subgroup[A-Z]\w*|workgroupBarrier|bitcast<"
    r"|var<(?:storage|workgroup|uniform)|elect\.sync|activemask\.b32|cp\.async|mma\.sync)"
    r"|@(?:compute|workgroup_size)\b|\[\[kernel\]\]"
)


def _direct_evidence(fn: Function, kernel_consts: frozenset[str]) -> str:
    """What in the function's own body is backend evidence; ``kernel_consts``, the
    kernel source constants it names, are evidence too."""
    for signal in fn.signals:
        if signal.kind == "launch":
            return f"`{signal.text.strip()}` at line {fn.line_of(signal.offset)}"
    if any(gpu_code.KERNEL_ATTR.search(a) for a in fn.attrs):
        return "it is a GPU kernel (`#[cube]`/`#[kernel]`)"
    for macro in fn.macros:
        if _GPU_SOURCE_FILE.search(macro.args):  # `include_str!("x.ptx")`, `include_wgsl!("x.wgsl")`
            return f"`{macro.name}!{macro.args}` at line {fn.line_of(macro.offset)}"
    for literal in fn.literals:
        intrinsic = _DEVICE_INTRINSIC.search(literal.text)
        if intrinsic:
            return f"writes GPU kernel source (`{intrinsic.group()}`) at line {fn.line_of(literal.offset)}"
    if kernel_consts:
        for m in _CONST_REF.finditer(fn.text):
            name = m.group().decode()
            if name in kernel_consts:
                return f"GPU kernel source `{name}` at line {fn.line_of(m.start())}"
    return ""
