"""The data the analysis passes around: facts extracted from Rust files, and findings.

Facts are plain slotted records so that they pickle quickly (they cross process
boundaries during a parallel scan and are stored in the content-keyed cache).
Offsets inside a :class:`Function` are relative to ``Function.text``, the
function's source with comments and string contents blanked out, so that a
regex never matches inside a comment or a string literal.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import StrEnum
from typing import NamedTuple


class Severity(StrEnum):
    ERROR = "error"
    WARNING = "warning"
    NOTE = "note"


class Call(NamedTuple):
    """A call site: ``foo(..)``, ``a::b::foo(..)`` or ``x.foo(..)``."""

    name: str
    qualifier: str  # "a::b" for a::b::foo, "" otherwise
    is_method: bool
    offset: int


class Macro(NamedTuple):
    name: str  # last path segment: "warn" for tracing::warn!
    qualifier: str  # "tracing" for tracing::warn!
    args: str  # original source of the token tree (strings kept), capped
    offset: int
    end: int


class Arm(NamedTuple):
    """A ``match`` arm: ``pattern => body`` with the matched expression."""

    scrutinee: str
    pattern: str
    start: int  # the arm's first byte
    body_start: int
    end: int


class Branch(NamedTuple):
    """An ``if`` (``if let`` included): condition, then-block, optional else."""

    condition: str
    start: int
    then_start: int
    then_end: int
    else_start: int  # -1 without else
    else_end: int


class Region(NamedTuple):
    """Code that runs in a special case: a ``let .. else`` block, an error handler
    closure (``unwrap_or_else(|_| ..)``), a statement under a ``#[cfg(..)]``."""

    kind: str  # "let-else" | "handler" | "cfg"
    head: str  # the let statement, the handler method name, the cfg attribute
    start: int
    end: int


class Comment(NamedTuple):
    text: str
    offset: int


class Literal(NamedTuple):
    text: str  # the string's contents, capped
    offset: int


class Signal(NamedTuple):
    """A token-level observation in the body, e.g. a kernel launch or a readback."""

    kind: str
    text: str
    offset: int


@dataclass(slots=True)
class Function:
    name: str
    impl_type: str  # "" for a free function
    trait: str  # "" unless inside ``impl Trait for Type`` or a trait default method
    modules: tuple[str, ...]  # inline ``mod`` blocks enclosing the item, outermost first
    attrs: tuple[str, ...]  # the item's own attributes, e.g. "#[cfg(feature = \"cuda\")]"
    outer_attrs: tuple[str, ...]  # attributes of the enclosing impl / mod blocks
    params: str
    ret: str
    line: int  # first line of the item (its first attribute included)
    fn_line: int  # line of the ``fn`` keyword
    end_line: int
    body_line: int  # line where ``text`` starts
    text: bytes  # body with comments and string contents blanked
    doc: tuple[str, ...]  # comments directly above the item
    calls: list[Call] = field(default_factory=list)
    macros: list[Macro] = field(default_factory=list)
    arms: list[Arm] = field(default_factory=list)
    branches: list[Branch] = field(default_factory=list)
    regions: list[Region] = field(default_factory=list)
    comments: list[Comment] = field(default_factory=list)
    literals: list[Literal] = field(default_factory=list)
    signals: list[Signal] = field(default_factory=list)
    constructs: tuple[str, ...] = ()  # types the body builds a value of (`T { .. }`, `T::new(..)`)

    @property
    def qualname(self) -> str:
        return f"{self.impl_type}::{self.name}" if self.impl_type else self.name

    def line_of(self, offset: int) -> int:
        """1-based source line of an offset into ``text``."""
        return self.body_line + self.text.count(b"\n", 0, max(offset, 0))


@dataclass(slots=True)
class GpuSource:
    """A const/static whose value is GPU code (PTX, WGSL, CUDA C) or includes it."""

    name: str
    line: int
    end_line: int
    files: tuple[str, ...] = ()  # kernel files it includes, by name ("fill.ptx" for `/fill.ptx`)


@dataclass(slots=True)
class FileFacts:
    """Everything the rules need from one file, independent of its path."""

    functions: list[Function]
    gpu_sources: list[GpuSource]
    uses: tuple[str, ...]  # text of ``use`` declarations (for ``use tracing::warn``)
    syntax_errors: list[int]  # lines with parse errors
    suppressions: list[tuple[int, str, str]]  # (line, rule, reason)
    # Crates whose test templates the file instantiates (`burn_jit::testgen_all!()`),
    # in macro bodies too: `burn_jit`'s `testgen_all!` instantiates `burn_tensor`'s.
    instantiated_test_crates: tuple[str, ...] = ()
    # Module-level type aliases of GPU device types (`type TestDevice = Cuda;`, under a
    # test feature's cfg): (alias, the type names it stands for). A test that names one
    # runs on that device.
    gpu_device_aliases: tuple[tuple[str, tuple[str, ...]], ...] = ()
    # Every module-level type alias: (alias, a type it stands for); a tuple alias has an
    # entry for each type in the tuple.
    type_aliases: tuple[tuple[str, str], ...] = ()
    # The types a trait impl binds its associated types to (`type Server = CudaServer;`
    # in `impl Runtime for CudaRuntime`): (the implementing type, a type bound).
    associated_types: tuple[tuple[str, str], ...] = ()
    # Functions of `extern "C"` blocks: (name, whether its signature takes or gives
    # device memory, a stream or a GPU handle).
    ffi_functions: tuple[tuple[str, bool], ...] = ()
    # The tests a `macro_rules!` macro writes out where it is invoked: (macro, test).
    test_templates: tuple[tuple[str, Function], ...] = ()
    # Macro invocations at item level, where a test template may be written out.
    item_macros: tuple[ItemMacro, ...] = ()
    # The macros a `macro_rules!` template invokes at item level in its own body
    # (cubecl's `testgen_random!` writes out `testgen_random_uniform!`): (template, macro).
    template_calls: tuple[tuple[str, str], ...] = ()
    # Modules declared under `#[cfg(test)]` whose code is in files of their own
    # (`#[cfg(test)] mod tests_signed;`), by their path below this file's module
    # ("tests_signed", "inner/tests").
    test_modules: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class ItemMacro:
    """`impl_ntt_tests!(ScalarField);` in a `#[cfg(test)] mod tests`: where and in what
    scope an item-level macro is invoked."""

    name: str
    line: int
    modules: tuple[str, ...]
    outer_attrs: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class Finding:
    rule: str
    severity: Severity
    path: str
    line: int
    end_line: int
    function: str
    message: str
    fingerprint: str = ""

    def to_json(self) -> dict[str, object]:
        return {
            "rule": self.rule,
            "severity": str(self.severity),
            "path": self.path,
            "line": self.line,
            "end_line": self.end_line,
            "function": self.function,
            "message": self.message,
            "fingerprint": self.fingerprint,
        }


@dataclass(frozen=True, slots=True)
class Note:
    """Something about the input the user should know: it is not a finding."""

    path: str
    message: str

    def to_json(self) -> dict[str, str]:
        return {"path": self.path, "message": self.message}
