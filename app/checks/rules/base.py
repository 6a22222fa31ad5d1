"""What a rule is: an id, a default severity, the spec section it enforces, and one
check function whose docstring is the rule's documentation (the way ruff documents
its lints). ``gpuproof explain``, ``docs/rules.md`` and the example tests are all
generated from these."""

from __future__ import annotations

import inspect
import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING, NamedTuple

from app.checks.model import Severity
from app.checks.workspace import IndexedFunction, Workspace

if TYPE_CHECKING:
    from app.checks.description import DescriptionContext


class Hit(NamedTuple):
    line: int
    message: str


Check = Callable[[Workspace, IndexedFunction], Iterable[Hit]]
# A description rule reads the PR text; its hits' lines are lines of the description.
DescriptionCheck = Callable[["DescriptionContext"], Iterable[Hit]]

_SECTIONS = ("What it does", "Why is this bad?", "Example", "Use instead")
_RUST_FENCE = re.compile(r"```rust\n(.*?)```", re.S)
_TEXT_FENCE = re.compile(r"```text\n(.*?)```", re.S)


@dataclass(frozen=True)
class Rule:
    id: str
    severity: Severity
    spec: str  # the section of spec/rust-gpu-discipline.md it enforces
    summary: str
    check: Check | None  # None for rules the engine applies itself, or description rules
    needs_diff: bool = False  # only meaningful for the functions a diff touches
    doc: str = ""  # for rules without a check function; otherwise its docstring
    check_description: DescriptionCheck | None = None
    runtime: bool = False  # judged by the GPU runner from what a test process launched

    @property
    def is_description_rule(self) -> bool:
        return self.check_description is not None

    @property
    def docs(self) -> str:
        if self.doc:
            return inspect.cleandoc(self.doc)
        return inspect.getdoc(self.check or self.check_description) or ""

    def section(self, title: str) -> str:
        text = self.docs
        start = text.find(f"## {title}")
        if start < 0:
            return ""
        start = text.index("\n", start) + 1
        end = text.find("\n## ", start)
        return text[start : end if end >= 0 else None].strip()

    def example(self, fence: str = "rust") -> str:
        """The code (or, with fence="text", the PR description) of the "Example"
        section: it must trigger the rule."""
        found = (_TEXT_FENCE if fence == "text" else _RUST_FENCE).search(self.section("Example"))
        return found.group(1) if found else ""

    def fixed_example(self, fence: str = "rust") -> str:
        """The code or description of the "Use instead" section: it must not trigger
        the rule."""
        found = (_TEXT_FENCE if fence == "text" else _RUST_FENCE).search(self.section("Use instead"))
        return found.group(1) if found else ""

    def missing_sections(self) -> list[str]:
        return [s for s in _SECTIONS if f"## {s}" not in self.docs]


def function_name(item: IndexedFunction) -> str:
    return f"`{item.fn.qualname}`"


def error_type(ws: Workspace) -> str:
    return ws.config.error_types[0]
