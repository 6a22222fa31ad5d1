"""JUnit XML, as cargo-nextest writes it (``[profile.<name>.junit]``), into per-test
outcomes: one ``<testsuite>`` per test binary, one ``<testcase>`` per test, with
``<failure>``/``<error>`` or ``<skipped>`` children."""

from __future__ import annotations

import re
import xml.etree.ElementTree as ElementTree
from pathlib import Path

from app.runner.libtest import TestOutcome

_PANIC_AT = re.compile(r"panicked at (?P<file>[^\s:]+):(?P<line>\d+):\d+")


class JunitError(ValueError):
    """The file is not JUnit XML."""


def parse_junit(path: Path) -> list[tuple[str, TestOutcome]]:
    """(test suite, outcome) for every test case of the report."""
    try:
        root = ElementTree.parse(path).getroot()
    except (ElementTree.ParseError, OSError) as exc:
        raise JunitError(f"{path.name}: not readable JUnit XML ({exc})") from None
    suites = [root] if root.tag == "testsuite" else root.iter("testsuite")
    outcomes = []
    for suite in suites:
        for case in suite.iter("testcase"):
            outcomes.append((suite.get("name", ""), _outcome(case)))
    return outcomes


def _outcome(case: ElementTree.Element) -> TestOutcome:
    name = case.get("name", "")
    failure = case.find("failure")
    if failure is None:
        failure = case.find("error")
    if failure is not None:
        text = "\n".join(filter(None, [failure.get("message", ""), failure.text or ""]))
        for stream in ("system-out", "system-err"):
            text += "\n" + (case.findtext(stream) or "")
        where = _PANIC_AT.search(text)
        message = (failure.get("message") or (failure.text or "").strip() or "failed")[:2000]
        return TestOutcome(
            name,
            "failed",
            message,
            where.group("file") if where else "",
            int(where.group("line")) if where else 0,
        )
    if case.find("skipped") is not None:
        return TestOutcome(name, "ignored")
    return TestOutcome(name, "passed")
