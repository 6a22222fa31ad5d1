"""Run the rules over a workspace: the one function the CLI, the worker and the
tests all call. Pure: source facts, config, diff and baseline in; findings out."""

from __future__ import annotations

import hashlib
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from app.checks.model import Finding, Function, Note, Severity
from app.checks.rules import BY_ID, RULES, SUPPRESSION_RULE
from app.checks.workspace import IndexedFunction, SourceFile, Workspace
from app.config import RepoConfig

# Rules that report code running on the host where the GPU was promised (4b, Step 3).
# When one of them flags a function its readbacks are explained: cpu-detour is the
# catch-all for readbacks nothing more specific covers.
HOST_DETOUR_RULES = frozenset(
    {
        "fake-gpu-function",
        "cfg-gated-stub",
        "reference-punt",
        "cpu-dispatch-arm",
        "autograd-cpu-detour",
        "host-readback-per-op",
        "shape-bypass",
        "silent-fallback",
        "eprintln-fallback",
        "fallback-without-warn",
    }
)

# new-side line numbers each path's diff touches (deletions count for the line after)
Touched = Mapping[str, frozenset[int]]


@dataclass
class Analysis:
    findings: list[Finding]
    notes: list[Note] = field(default_factory=list)
    suppressed: int = 0
    baselined: int = 0
    functions: int = 0


def analyze(
    files: Iterable[SourceFile],
    config: RepoConfig,
    touched: Touched | None = None,
    baseline: Mapping[str, int] | None = None,
) -> Analysis:
    return analyze_workspace(Workspace(files, config), touched, baseline)


def analyze_workspace(
    ws: Workspace, touched: Touched | None = None, baseline: Mapping[str, int] | None = None
) -> Analysis:
    """Findings of the code rules; with ``touched``, only in the functions it touches."""
    config = ws.config
    findings: list[Finding] = []
    severities = {rule.id: config.severity_for(rule.id, rule.severity) for rule in RULES}
    for item in ws.functions:
        if touched is not None and not touches(touched, item):
            continue
        findings.extend(_check_function(ws, item, severities, diff_mode=touched is not None))

    notes: list[Note] = []
    findings, suppressed = _apply_suppressions(ws, findings, notes, touched)
    for source in ws.files:
        if source.facts.syntax_errors:
            lines = ", ".join(map(str, source.facts.syntax_errors[:10]))
            notes.append(
                Note(
                    source.path,
                    f"syntax errors at line(s) {lines}; the rest of "
                    f"the file was analysed, findings there may be incomplete",
                )
            )
    findings = _fingerprinted(ws, findings)
    baselined = 0
    if baseline:
        budget = dict(baseline)
        kept = []
        for finding in findings:
            if budget.get(finding.fingerprint, 0) > 0:
                budget[finding.fingerprint] -= 1
                baselined += 1
            else:
                kept.append(finding)
        findings = kept
    findings.sort(key=lambda f: (f.path, f.line, f.rule))
    return Analysis(findings, notes, suppressed, baselined, len(ws.functions))


def touches(touched: Touched, item: IndexedFunction) -> bool:
    lines = touched.get(item.path)
    if not lines:
        return False
    return any(item.fn.line <= line <= item.fn.end_line for line in lines)


def _check_function(
    ws: Workspace, item: IndexedFunction, severities: Mapping[str, Severity | None], diff_mode: bool
) -> list[Finding]:
    found: list[Finding] = []
    taken: set[int] = set()
    fired: set[str] = set()
    for rule in RULES:
        if rule.check is None or (rule.needs_diff and not diff_mode):
            continue
        if rule.id == "cpu-detour" and fired & HOST_DETOUR_RULES:
            continue
        severity = severities[rule.id]
        if severity is None:
            continue
        for hit in rule.check(ws, item):
            if hit.line in taken:
                continue
            taken.add(hit.line)
            fired.add(rule.id)
            found.append(
                Finding(rule.id, severity, item.path, hit.line, hit.line, item.fn.qualname, hit.message)
            )
    return found


def _apply_suppressions(
    ws: Workspace, findings: list[Finding], notes: list[Note], touched: Touched | None
) -> tuple[list[Finding], int]:
    """Drop findings covered by ``// gpuproof: allow(rule) -- reason`` on the line or
    just above it, or above the function; report suppressions that give no reason."""
    by_path = {f.path: f.facts.suppressions for f in ws.files if f.facts.suppressions}
    kept: list[Finding] = []
    suppressed = 0
    unjustified: dict[tuple[str, int], Finding] = {}
    severity = ws.config.severity_for(SUPPRESSION_RULE.id, SUPPRESSION_RULE.severity)
    for path, entries in by_path.items():
        for line, rule_id, reason in entries:
            if rule_id not in BY_ID and rule_id != "all":
                notes.append(Note(path, f"line {line}: `gpuproof: allow({rule_id})` names no known rule"))
            if reason or severity is None:
                continue
            if touched is not None and line not in touched.get(path, frozenset()):
                continue
            owner = ws.enclosing(path, line + 1)
            unjustified[(path, line)] = Finding(
                SUPPRESSION_RULE.id,
                severity,
                path,
                line,
                line,
                owner.fn.qualname if owner else "",
                f"`gpuproof: allow({rule_id})` gives no reason, so it is ignored: add "
                f"`-- <why this is legitimate here>`.",
            )
    for finding in findings:
        entries = by_path.get(finding.path, [])
        owner = ws.enclosing(finding.path, finding.line)
        covering = [
            (line, reason)
            for line, rule_id, reason in entries
            if rule_id in (finding.rule, "all")
            and (
                finding.line - 1 <= line <= finding.line
                or (owner is not None and owner.fn.line - len(owner.fn.doc) - 1 <= line <= owner.fn.fn_line)
            )
        ]
        if any(reason for _, reason in covering):
            suppressed += 1
        else:
            kept.append(finding)
    kept.extend(unjustified.values())
    return kept, suppressed


def _line_text(fn: Function | None, line: int) -> str:
    if fn is None or line < fn.body_line:
        return f"fn {fn.name}" if fn else ""
    lines = fn.text.split(b"\n")
    index = line - fn.body_line
    text = lines[index] if 0 <= index < len(lines) else b""
    return re.sub(r"\s+", " ", text.decode("utf-8", "replace")).strip()


def _fingerprinted(ws: Workspace, findings: list[Finding]) -> list[Finding]:
    """Give each finding a fingerprint that survives line moves: rule, path, function
    and the normalised text of the line, plus an index among identical ones."""
    seen: dict[str, int] = {}
    out = []
    for finding in sorted(findings, key=lambda f: (f.path, f.line, f.rule)):
        owner = ws.enclosing(finding.path, finding.line)
        text = _line_text(owner.fn if owner else None, finding.line)
        basis = "|".join((finding.rule, finding.path, finding.function, text))
        digest = hashlib.sha256(basis.encode()).hexdigest()[:16]
        count = seen.get(digest, 0)
        seen[digest] = count + 1
        fingerprint = digest if count == 0 else f"{digest}-{count}"
        out.append(
            Finding(
                finding.rule,
                finding.severity,
                finding.path,
                finding.line,
                finding.end_line,
                finding.function,
                finding.message,
                fingerprint,
            )
        )
    return out
