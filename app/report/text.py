"""Readable terminal output: findings grouped by file, each with its offending line."""

from __future__ import annotations

import textwrap
from collections.abc import Callable
from itertools import groupby

from app.checks.model import Severity
from app.scan import ScanResult

_LINE_CAP = 160


def render_text(result: ScanResult, read_line: Callable[[str, int], str], seconds: float) -> str:
    analysis = result.analysis
    out: list[str] = []
    for path, group in groupby(analysis.findings, key=lambda f: f.path):
        out.append(path)
        for f in group:
            out.append(f"  {f.line}: {f.severity} [{f.rule}] in {f.function or '(module)'}")
            out.extend(textwrap.wrap(f.message, 96, initial_indent="      ", subsequent_indent="      "))
            code = read_line(f.path, f.line).rstrip()
            if code:
                shown = code if len(code) <= _LINE_CAP else code[:_LINE_CAP] + " …"
                out.append(f"    {f.line:>5} | {shown.strip()}")
        out.append("")
    for note in analysis.notes:
        out.append(f"note: {note.path}: {note.message}")
    errors = sum(1 for f in analysis.findings if f.severity == Severity.ERROR)
    others = len(analysis.findings) - errors
    files = len({f.path for f in analysis.findings})
    extra = []
    if analysis.suppressed:
        extra.append(f"{analysis.suppressed} suppressed")
    if analysis.baselined:
        extra.append(f"{analysis.baselined} in the baseline")
    tail = f"; {', '.join(extra)}" if extra else ""
    cache = ", cached" if result.from_result_cache else ""
    out.append(
        f"gpuproof: {errors} error(s), {others} warning(s) in {files} file(s){tail} — "
        f"{result.files} files, {result.lines} lines, {analysis.functions} functions "
        f"scanned in {seconds:.2f}s{cache}"
    )
    return "\n".join(out)
