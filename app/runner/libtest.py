"""Rust's libtest output, per test: ``test name ... ok | FAILED | ignored`` lines and
the ``---- name stdout ----`` sections that say where a failing test panicked."""

from __future__ import annotations

import re
from dataclasses import dataclass

_RESULT = re.compile(r"^test (?P<name>\S+) \.\.\. (?P<status>ok|FAILED|ignored)(?:,.*)?$", re.M)
_SECTION = re.compile(r"^---- (?P<name>\S+) stdout ----$", re.M)
_PANIC = re.compile(r"panicked at (?P<file>[^\s:]+):(?P<line>\d+):\d+:\n(?P<message>.*)")


@dataclass(frozen=True)
class TestOutcome:
    name: str
    status: str  # "passed", "failed", "ignored"
    message: str = ""
    file: str = ""
    line: int = 0


def parse_libtest(output: str) -> list[TestOutcome]:
    failures: dict[str, tuple[str, str, int]] = {}
    sections = list(_SECTION.finditer(output))
    for i, section in enumerate(sections):
        end = sections[i + 1].start() if i + 1 < len(sections) else len(output)
        body = output[section.end() : end]
        panic = _PANIC.search(body)
        if panic:
            failures[section.group("name")] = (
                panic.group("message").strip(),
                panic.group("file"),
                int(panic.group("line")),
            )
        else:
            failures[section.group("name")] = (body.strip()[:500], "", 0)
    outcomes = []
    for found in _RESULT.finditer(output):
        name, status = found.group("name"), found.group("status")
        message, file, line = failures.get(name, ("", "", 0))
        label = {"ok": "passed", "FAILED": "failed", "ignored": "ignored"}[status]
        outcomes.append(TestOutcome(name, label, message if label == "failed" else "", file, line))
    return outcomes
