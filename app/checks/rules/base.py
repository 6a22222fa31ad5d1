"""What a rule is: an id, a default severity, the spec section it enforces, and one
check function whose docstring is the rule's documentation (the way ruff documents
its lints). ``gpuproof explain``, ``docs/rules.md`` and the example tests are all
generated from these."""

from __future__ import annotations

import inspect
import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import NamedTuple

from app.checks.model import Severity
from app.checks.workspace import IndexedFunction, Workspace


class Hit(NamedTuple):
    line: int
    message: str


Check = Callable[[Workspace, IndexedFunction], Iterable[Hit]]

_SECTIONS = ("What it does", "Why is this bad?", "Example", "Use instead")
_FENCE = re.compile(r"```rust\n(.*?)```", re.S)


@dataclass(frozen=True)
class Rule:
    id: str
    severity: Severity
    spec: str  # the section of spec/rust-gpu-discipline.md it enforces
    summary: str
    check: Check | None  # None for rules the engine applies itself (suppressions)
    needs_diff: bool = False  # only meaningful for the functions a diff touches
    doc: str = ""  # for rules without a check function; otherwise its docstring

    @property
    def docs(self) -> str:
        return inspect.cleandoc(self.doc) if self.doc else inspect.getdoc(self.check) or ""

    def section(self, title: str) -> str:
        text = self.docs
        start = text.find(f"## {title}")
        if start < 0:
            return ""
        start = text.index("\n", start) + 1
        end = text.find("\n## ", start)
        return text[start : end if end >= 0 else None].strip()

    def example(self) -> str:
        """The Rust code of the "Example" section: it must trigger the rule."""
        found = _FENCE.search(self.section("Example"))
        return found.group(1) if found else ""

    def fixed_example(self) -> str:
        """The Rust code of the "Use instead" section: it must not trigger the rule."""
        found = _FENCE.search(self.section("Use instead"))
        return found.group(1) if found else ""

    def missing_sections(self) -> list[str]:
        return [s for s in _SECTIONS if f"## {s}" not in self.docs]


def function_name(item: IndexedFunction) -> str:
    return f"`{item.fn.qualname}`"


def error_type(ws: Workspace) -> str:
    return ws.config.error_types[0]
