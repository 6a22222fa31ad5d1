#!/usr/bin/env python3
"""Function-level quality benchmark of ``gpuproof check`` on forecast-bio/ferrotorch.

The labels (``bench/quality/ferrotorch_labels.csv``) name functions in
ferrotorch's history as ``violating`` (with the best rule id from RULES.md) or
``compliant``.  For every distinct commit in the labels this script exports the
commit's Rust/TOML sources from a bare git mirror, runs
``<gpuproof> check <tree> --format json`` on it and matches the findings to the
labelled functions.

A labelled function is *flagged* when at least one finding of a code rule lies
in the same file, inside the function's span (its attributes and doc comments
included), and names the same function.  Findings whose ``function`` is empty
or differs only in its qualifier (``Type::``) are still matched by span and
reported as name mismatches so the naming can be fixed.  When the span of a
labelled function cannot be computed, the function name alone decides (if a
file has several functions of that name, the label whose line is nearest at or
before the finding wins).

Figures: precision / recall / F1 at function level, per-rule recall, the
"rule-exact" share (a matching finding carries the labelled rule), which rules
fire on compliant functions, wall time per commit, and a list of every false
positive and false negative.

Usage::

    python bench/quality_ferrotorch.py --git-dir /path/to/ferrotorch.git \
        [--labels bench/quality/ferrotorch_labels.csv] [--gpuproof gpuproof] \
        [--workdir /tmp/gpuproof-quality] [--json-out results.json]

Exit status: 0 when every run of the tool produced a report (whatever the
figures are); 2 when the tool crashed or rejected its input on some commit
(exit status other than 0/1, or output that is not the JSON report), or when
this script's own input is unusable.

Standard library only (Python 3.11).
"""

from __future__ import annotations

import argparse
import collections
import contextlib
import csv
import json
import os
import re
import shlex
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

from git_export import ExportError, export_sources, present_suffixes

CODE_RULES = (
    "fake-gpu-function",
    "deferred-kernel",
    "cfg-gated-stub",
    "reference-punt",
    "cpu-dispatch-arm",
    "autograd-cpu-detour",
    "host-readback-per-op",
    "gpu-code-without-test",
    "disabled-gpu-test",
    "shape-bypass",
    "silent-fallback",
    "eprintln-fallback",
    "fallback-without-warn",
    "stub-residue",
    "cpu-detour",
)

# Source kinds exported from each commit.  Rust and TOML are what the brief
# asks for; kernel sources are added when the commit has any (a pathspec that
# matches nothing makes `git archive` fail, so each glob is checked first).

REPO_ROOT = Path(__file__).resolve().parent.parent
DEFAULT_LABELS = REPO_ROOT / "bench" / "quality" / "ferrotorch_labels.csv"


class UsageError(Exception):
    """This script's own input is unusable (exit 2)."""


# --------------------------------------------------------------------------
# Labels
# --------------------------------------------------------------------------


@dataclass
class Label:
    commit: str
    path: str
    function: str
    line: int
    label: str
    rule: str
    note: str
    start: int = 0  # first line of the span (attributes / docs included)
    end: int = 0  # last line of the span; 0 when unknown
    findings: list = field(default_factory=list)  # matching findings
    name_mismatch: list = field(default_factory=list)  # matched by span only

    @property
    def flagged(self) -> bool:
        return bool(self.findings)

    @property
    def key(self) -> tuple:
        return (self.commit, self.path, self.function, self.line)


def read_labels(path: Path) -> list[Label]:
    if not path.is_file():
        raise UsageError(f"labels file not found: {path}")
    out: list[Label] = []
    seen: set[tuple] = set()
    with path.open(newline="", encoding="utf-8") as fh:
        reader = csv.DictReader(fh)
        need = {"commit", "path", "function", "line", "label", "rule", "note"}
        if not reader.fieldnames or not need <= set(reader.fieldnames):
            raise UsageError(f"{path}: header must contain {sorted(need)}")
        for n, row in enumerate(reader, start=2):
            try:
                lab = Label(
                    commit=row["commit"].strip(),
                    path=row["path"].strip(),
                    function=row["function"].strip(),
                    line=int(row["line"]),
                    label=row["label"].strip(),
                    rule=(row["rule"] or "").strip(),
                    note=(row["note"] or "").strip(),
                )
            except (TypeError, ValueError) as exc:
                raise UsageError(f"{path}:{n}: bad row: {exc}") from None
            if not re.fullmatch(r"[0-9a-f]{40}", lab.commit):
                raise UsageError(f"{path}:{n}: commit must be a full 40-hex SHA")
            if lab.label not in ("violating", "compliant"):
                raise UsageError(f"{path}:{n}: label must be violating or compliant")
            if lab.label == "violating" and lab.rule not in CODE_RULES:
                raise UsageError(f"{path}:{n}: unknown rule {lab.rule!r}")
            if lab.key in seen:
                raise UsageError(f"{path}:{n}: duplicate label {lab.key}")
            seen.add(lab.key)
            out.append(lab)
    if not out:
        raise UsageError(f"{path}: no labels")
    return out


# --------------------------------------------------------------------------
# Rust function spans (a small lexer: comments, strings, raw strings, chars)
# --------------------------------------------------------------------------

_RAW_STR = re.compile(r'b?r(#*)"')


def _skip_token(src: str, i: int) -> int | None:
    """If a comment/string/char literal starts at ``i``, return the index just
    past it; otherwise None."""
    c = src[i]
    nxt = src[i + 1] if i + 1 < len(src) else ""
    if c == "/" and nxt == "/":
        j = src.find("\n", i)
        return len(src) if j < 0 else j
    if c == "/" and nxt == "*":
        depth, j = 1, i + 2
        while j < len(src) and depth:
            if src.startswith("/*", j):
                depth, j = depth + 1, j + 2
            elif src.startswith("*/", j):
                depth, j = depth - 1, j + 2
            else:
                j += 1
        return j
    if c in "rb":
        # raw (byte) string r"..", r#".."#, br#".."#; must not be inside an identifier
        if i > 0 and (src[i - 1].isalnum() or src[i - 1] == "_"):
            return None
        m = _RAW_STR.match(src, i)
        if m:
            close = '"' + m.group(1)
            j = src.find(close, m.end())
            return len(src) if j < 0 else j + len(close)
        if c == "b" and nxt == '"':
            return _skip_token(src, i + 1)
        if c == "b" and nxt == "'":
            return _skip_token(src, i + 1)
        return None
    if c == '"':
        j = i + 1
        while j < len(src):
            if src[j] == "\\":
                j += 2
                continue
            if src[j] == '"':
                return j + 1
            j += 1
        return j
    if c == "'":
        # char literal ('x', '\n', '\u{1F600}', '\'') versus lifetime ('a)
        if nxt == "\\":
            j = src.find("'", i + 2 + (1 if src[i + 2 : i + 3] == "'" else 0))
            return len(src) if j < 0 else j + 1
        if i + 2 < len(src) and src[i + 2] == "'":
            return i + 3
        return None  # a lifetime or label
    return None


def function_span(src: str, fn_line: int) -> tuple[int, int] | None:
    """(start, end) 1-based lines of the item whose ``fn`` is on ``fn_line``.

    ``start`` extends upwards over attributes and doc comments; ``end`` is the
    line of the body's closing brace (or of the ``;`` for a bodyless fn)."""
    lines = src.split("\n")
    if not 1 <= fn_line <= len(lines):
        return None
    offsets = [0]
    for ln in lines:
        offsets.append(offsets[-1] + len(ln) + 1)
    text = lines[fn_line - 1]
    m = re.search(r"\bfn\b", text)
    if not m:
        return None
    i = offsets[fn_line - 1] + m.end()
    depth_paren = 0
    body_start = None
    while i < len(src):
        skip = _skip_token(src, i)
        if skip is not None:
            i = skip
            continue
        ch = src[i]
        if ch in "([":
            depth_paren += 1
        elif ch in ")]":
            depth_paren -= 1
        elif ch == ";" and depth_paren == 0:
            return _with_attrs(lines, fn_line), _line_of(offsets, i)
        elif ch == "{" and depth_paren == 0:
            body_start = i
            break
        i += 1
    if body_start is None:
        return None
    depth, i = 0, body_start
    while i < len(src):
        skip = _skip_token(src, i)
        if skip is not None:
            i = skip
            continue
        ch = src[i]
        if ch == "{":
            depth += 1
        elif ch == "}":
            depth -= 1
            if depth == 0:
                return _with_attrs(lines, fn_line), _line_of(offsets, i)
        i += 1
    return None


def _line_of(offsets: list[int], pos: int) -> int:
    lo, hi = 0, len(offsets) - 1
    while lo < hi:
        mid = (lo + hi + 1) // 2
        if offsets[mid] <= pos:
            lo = mid
        else:
            hi = mid - 1
    return lo + 1


def _with_attrs(lines: list[str], fn_line: int) -> int:
    """Walk up from the fn line over attributes (also multi-line) and comments."""
    start = fn_line
    j = fn_line - 2  # 0-based index of the line above
    while j >= 0:
        s = lines[j].strip()
        if s.startswith(("#[", "#![", "///", "//", "/*", "*")):
            start, j = j + 1, j - 1
            continue
        if s.endswith(("]", ")]", "))]", ",", "(")) and s:
            # tail of a multi-line attribute: look for its `#[` within 12 lines
            k = j
            while k >= 0 and j - k < 12 and not lines[k].strip().startswith("#["):
                k -= 1
            if k >= 0 and lines[k].strip().startswith("#["):
                start, j = k + 1, k - 1
                continue
        break
    return start


# --------------------------------------------------------------------------
# Export + run
# --------------------------------------------------------------------------


def git(git_dir: Path, *args: str, binary: bool = False):
    proc = subprocess.run(
        ["git", f"--git-dir={git_dir}", *args],
        capture_output=True,
        text=not binary,
    )
    if proc.returncode != 0:
        err = proc.stderr if isinstance(proc.stderr, str) else proc.stderr.decode("utf-8", "replace")
        raise UsageError(f"git {' '.join(args[:2])} failed: {err.strip()[:400]}")
    return proc.stdout


def export_tree(git_dir: Path, commit: str, workdir: Path) -> tuple[Path, bool]:
    """Export the commit's Rust/TOML (+ kernel) sources; cached in ``workdir``."""
    trees = workdir / "trees"
    dest = trees / commit
    done = trees / f"{commit}.done"
    if dest.is_dir() and done.exists():
        return dest, True
    trees.mkdir(parents=True, exist_ok=True)
    present = present_suffixes(git_dir, commit)
    if ".rs" not in present:
        raise UsageError(f"commit {commit} has no Rust files")
    tmp = Path(tempfile.mkdtemp(prefix=f".{commit[:12]}-", dir=trees))
    try:
        export_sources(git_dir, commit, tmp, present)
        if dest.exists():
            shutil.rmtree(dest)
        tmp.rename(dest)
        done.write_text("ok\n")
    finally:
        if tmp.exists():
            shutil.rmtree(tmp, ignore_errors=True)
    return dest, False


@dataclass
class RunResult:
    commit: str
    export_cached: bool = False
    export_s: float = 0.0
    check_s: float = 0.0
    rc: int | None = None
    findings: list = field(default_factory=list)
    error: str = ""


def run_gpuproof(cmd: list[str], tree: Path, timeout: float) -> tuple[int | None, list, str, float]:
    t0 = time.monotonic()
    try:
        proc = subprocess.run(
            [*cmd, "check", str(tree), "--format", "json"],
            capture_output=True,
            text=True,
            timeout=timeout,
        )
    except FileNotFoundError:
        return None, [], f"gpuproof command not found: {cmd[0]}", time.monotonic() - t0
    except subprocess.TimeoutExpired:
        return None, [], f"timed out after {timeout:.0f}s", time.monotonic() - t0
    elapsed = time.monotonic() - t0
    tail = (proc.stderr or "").strip()[-600:]
    if proc.returncode not in (0, 1):
        return (
            proc.returncode,
            [],
            f"exit {proc.returncode}: {tail or (proc.stdout or '').strip()[-600:]}",
            elapsed,
        )
    try:
        doc = json.loads(proc.stdout)
        findings = doc["findings"]
        if not isinstance(findings, list):
            raise TypeError("findings is not a list")
    except (ValueError, KeyError, TypeError) as exc:
        return (
            proc.returncode,
            [],
            f"exit {proc.returncode} without a JSON report ({exc}): {tail}",
            elapsed,
        )
    return proc.returncode, findings, "", elapsed


def norm_path(p: str, tree: Path) -> str:
    p = (p or "").replace("\\", "/")
    if os.path.isabs(p):
        with contextlib.suppress(ValueError):
            p = os.path.relpath(p, tree)
    while p.startswith("./"):
        p = p[2:]
    return p


# --------------------------------------------------------------------------
# Matching + scoring
# --------------------------------------------------------------------------


def last_segment(name: str) -> str:
    return (name or "").rsplit("::", 1)[-1].strip()


def attach_findings(labels: list[Label], findings: list, tree: Path) -> int:
    """Attach code-rule findings to the labels of one commit; returns how many
    code findings landed in a labelled file but matched no label."""
    by_path: dict[str, list[Label]] = collections.defaultdict(list)
    for lab in labels:
        by_path[lab.path].append(lab)
    stray = 0
    for f in findings:
        if not isinstance(f, dict) or f.get("rule") not in CODE_RULES:
            continue
        path = norm_path(str(f.get("path", "")), tree)
        cands = by_path.get(path)
        if not cands:
            continue
        try:
            line = int(f.get("line") or 0)
        except (TypeError, ValueError):
            line = 0
        fname = str(f.get("function") or "").strip()
        hit = None
        # 1. span containment (exact name, or same last segment, or no name)
        for lab in cands:
            if lab.end and lab.start <= line <= lab.end:
                if fname == lab.function:
                    hit = (lab, False)
                    break
                if not fname or last_segment(fname) == last_segment(lab.function):
                    hit = hit or (lab, True)
        # 2. name only, for labels whose span is unknown
        if hit is None and fname:
            named = [lab for lab in cands if lab.function == fname and not lab.end]
            if named:
                before = [lab for lab in named if lab.line <= line] or named
                hit = (max(before, key=lambda lab: lab.line) if line else before[0], False)
        if hit is None:
            stray += 1
            continue
        lab, mismatch = hit
        lab.findings.append(f)
        if mismatch:
            lab.name_mismatch.append(fname or "<empty>")
    return stray


def pct(n: int, d: int) -> str:
    return f"{100.0 * n / d:5.1f}%" if d else "  n/a"


def score(labels: list[Label]) -> dict:
    tp = [lab for lab in labels if lab.label == "violating" and lab.flagged]
    fn = [lab for lab in labels if lab.label == "violating" and not lab.flagged]
    fp = [lab for lab in labels if lab.label == "compliant" and lab.flagged]
    tn = [lab for lab in labels if lab.label == "compliant" and not lab.flagged]
    precision = len(tp) / (len(tp) + len(fp)) if tp or fp else 0.0
    recall = len(tp) / (len(tp) + len(fn)) if tp or fn else 0.0
    f1 = 2 * precision * recall / (precision + recall) if precision + recall else 0.0
    exact = [lab for lab in tp if any(f.get("rule") == lab.rule for f in lab.findings)]
    per_rule = {}
    for rule in CODE_RULES:
        rows = [lab for lab in labels if lab.label == "violating" and lab.rule == rule]
        if rows:
            flagged = [lab for lab in rows if lab.flagged]
            per_rule[rule] = {
                "labelled": len(rows),
                "flagged": len(flagged),
                "rule_exact": sum(1 for lab in flagged if any(f.get("rule") == rule for f in lab.findings)),
            }
    fp_rules = collections.Counter(f.get("rule") for lab in fp for f in lab.findings)
    tp_rules = collections.Counter(f.get("rule") for lab in tp for f in lab.findings)
    return {
        "tp": tp,
        "fp": fp,
        "fn": fn,
        "tn": tn,
        "precision": precision,
        "recall": recall,
        "f1": f1,
        "rule_exact": exact,
        "per_rule": per_rule,
        "fp_rules": fp_rules,
        "tp_rules": tp_rules,
    }


def short_msg(f: dict) -> str:
    msg = " ".join(str(f.get("message", "")).split())
    return msg[:110] + ("…" if len(msg) > 110 else "")


def print_report(labels: list[Label], runs: list[RunResult], sc: dict, stray: int, out=sys.stdout) -> None:
    w = lambda s="": print(s, file=out)  # noqa: E731
    n_v = sum(1 for lab in labels if lab.label == "violating")
    n_c = len(labels) - n_v
    w("== gpuproof function-level quality on forecast-bio/ferrotorch ==")
    w(f"labels: {len(labels)} ({n_v} violating, {n_c} compliant) over {len(runs)} commits")
    w()
    w("-- per commit --")
    w(f"{'commit':12} {'rc':>3} {'export':>8} {'check':>8} {'findings':>8} {'labels':>6}  note")
    per_commit = collections.Counter(lab.commit for lab in labels)
    for r in runs:
        export = "cached" if r.export_cached else f"{r.export_s:7.2f}s"
        rc = "-" if r.rc is None else str(r.rc)
        code = sum(1 for f in r.findings if isinstance(f, dict) and f.get("rule") in CODE_RULES)
        err = " ".join(r.error.split())
        err = err[:160] + ("…" if len(err) > 160 else "")
        n_lab = per_commit[r.commit]
        w(f"{r.commit[:12]:12} {rc:>3} {export:>8} {r.check_s:7.2f}s {code:>8} {n_lab:>6}  {err}")
    total = sum(r.check_s for r in runs)
    w(f"total check wall time: {total:.2f}s")
    w()
    tp, fp, fn, tn = (len(sc[k]) for k in ("tp", "fp", "fn", "tn"))
    w("-- function level --")
    w(f"TP {tp}  FP {fp}  FN {fn}  TN {tn}")
    w(f"precision {pct(tp, tp + fp)}   recall {pct(tp, tp + fn)}   F1 {100 * sc['f1']:5.1f}%")
    n_exact = len(sc["rule_exact"])
    w(
        f"rule-exact (a matching finding has the labelled rule): {n_exact}/{tp} of TPs, "
        f"{pct(n_exact, tp + fn)} of all violating"
    )
    mism = [lab for lab in labels if lab.name_mismatch]
    if mism:
        w(
            f"note: {len(mism)} labelled functions matched only by span; finding names differ "
            f"(e.g. {mism[0].function!r} vs {mism[0].name_mismatch[0]!r})"
        )
    if stray:
        w(f"note: {stray} code findings in labelled files fell outside every labelled function")
    w()
    w("-- recall per labelled rule --")
    w(f"{'rule':24} {'labelled':>8} {'flagged':>8} {'recall':>7} {'exact':>6}")
    for rule, d in sc["per_rule"].items():
        rec = pct(d["flagged"], d["labelled"])
        w(f"{rule:24} {d['labelled']:>8} {d['flagged']:>8} {rec:>7} {d['rule_exact']:>6}")
    w()
    if sc["tp_rules"]:
        w("rules firing on true positives: " + ", ".join(f"{k} {v}" for k, v in sc["tp_rules"].most_common()))
    if sc["fp_rules"]:
        w(
            "rules firing on false positives: "
            + ", ".join(f"{k} {v}" for k, v in sc["fp_rules"].most_common())
        )
    w()
    w(f"-- false positives ({fp}) --")
    for lab in sorted(sc["fp"], key=lambda x: (x.commit, x.path, x.line)):
        w(f"{lab.commit[:12]} {lab.path}:{lab.line} {lab.function}")
        w(f"    label: compliant — {lab.note}")
        for f in lab.findings[:4]:
            w(f"    got: {f.get('rule')} @{f.get('line')}: {short_msg(f)}")
        if len(lab.findings) > 4:
            w(f"    … {len(lab.findings) - 4} more findings")
    w()
    w(f"-- false negatives ({fn}) --")
    for lab in sorted(sc["fn"], key=lambda x: (x.commit, x.path, x.line)):
        span = f"{lab.start}-{lab.end}" if lab.end else "span?"
        w(f"{lab.commit[:12]} {lab.path}:{lab.line} ({span}) {lab.function}")
        w(f"    want: {lab.rule} — {lab.note}")
    wrong = [lab for lab in sc["tp"] if lab not in sc["rule_exact"]]
    if wrong:
        w()
        w(f"-- flagged with another rule ({len(wrong)}) --")
        for lab in sorted(wrong, key=lambda x: (x.commit, x.path, x.line)):
            got = sorted({str(f.get("rule")) for f in lab.findings})
            where = f"{lab.commit[:12]} {lab.path}:{lab.line} {lab.function}"
            w(f"{where}: want {lab.rule}, got {', '.join(got)}")


def write_json(path: Path, labels: list[Label], runs: list[RunResult], sc: dict) -> None:
    def lab_dict(lab: Label) -> dict:
        return {
            "commit": lab.commit,
            "path": lab.path,
            "function": lab.function,
            "line": lab.line,
            "span": [lab.start, lab.end] if lab.end else None,
            "label": lab.label,
            "rule": lab.rule,
            "note": lab.note,
            "flagged_rules": sorted({str(f.get("rule")) for f in lab.findings}),
        }

    doc = {
        "summary": {
            "tp": len(sc["tp"]),
            "fp": len(sc["fp"]),
            "fn": len(sc["fn"]),
            "tn": len(sc["tn"]),
            "precision": sc["precision"],
            "recall": sc["recall"],
            "f1": sc["f1"],
            "rule_exact": len(sc["rule_exact"]),
        },
        "per_rule": sc["per_rule"],
        "runs": [
            {
                "commit": r.commit,
                "rc": r.rc,
                "check_s": round(r.check_s, 3),
                "error": r.error,
                "findings": len(r.findings),
            }
            for r in runs
        ],
        "labels": [lab_dict(lab) for lab in labels],
    }
    path.write_text(json.dumps(doc, indent=2) + "\n", encoding="utf-8")


# --------------------------------------------------------------------------
# Main
# --------------------------------------------------------------------------


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--git-dir", required=True, type=Path, help="bare git mirror of forecast-bio/ferrotorch")
    ap.add_argument("--labels", type=Path, default=DEFAULT_LABELS)
    ap.add_argument(
        "--gpuproof",
        default="gpuproof",
        help="command to run (shell-split), e.g. 'python -m app.cli'",
    )
    ap.add_argument(
        "--workdir",
        type=Path,
        default=Path(tempfile.gettempdir()) / "gpuproof-quality-ferrotorch",
        help="cache for exported trees (reused across runs)",
    )
    ap.add_argument("--timeout", type=float, default=900.0, help="seconds allowed per gpuproof run")
    ap.add_argument(
        "--commit", action="append", default=[], help="only commits with this prefix (repeatable)"
    )
    ap.add_argument("--json-out", type=Path, help="also write per-label results as JSON")
    args = ap.parse_args(argv)

    try:
        labels = read_labels(args.labels)
        if not (args.git_dir / "objects").exists() and not (args.git_dir / ".git").exists():
            raise UsageError(f"not a git directory: {args.git_dir}")
        if args.commit:
            labels = [lab for lab in labels if any(lab.commit.startswith(p) for p in args.commit)]
            if not labels:
                raise UsageError("no labels for the requested commits")
        cmd = shlex.split(args.gpuproof)
        if not cmd:
            raise UsageError("empty --gpuproof command")
        args.workdir.mkdir(parents=True, exist_ok=True)

        commits = list(dict.fromkeys(lab.commit for lab in labels))
        runs: list[RunResult] = []
        stray_total = 0
        crashed = False
        for i, commit in enumerate(commits, 1):
            r = RunResult(commit)
            t0 = time.monotonic()
            tree, r.export_cached = export_tree(args.git_dir, commit, args.workdir)
            r.export_s = time.monotonic() - t0
            mine = [lab for lab in labels if lab.commit == commit]
            for lab in mine:
                src_path = tree / lab.path
                if not src_path.is_file():
                    raise UsageError(f"{commit[:12]}: labelled file missing from export: {lab.path}")
                src = src_path.read_text(encoding="utf-8", errors="replace")
                src_lines = src.split("\n")
                bare = re.escape(last_segment(lab.function))
                if not (
                    1 <= lab.line <= len(src_lines)
                    and re.search(rf"\bfn\s+{bare}\b", src_lines[lab.line - 1])
                ):
                    raise UsageError(
                        f"{commit[:12]} {lab.path}:{lab.line}: no `fn {lab.function}` on that line"
                    )
                span = function_span(src, lab.line)
                if span:
                    lab.start, lab.end = span
            print(f"[{i}/{len(commits)}] {commit[:12]}: gpuproof check …", file=sys.stderr, flush=True)
            r.rc, r.findings, r.error, r.check_s = run_gpuproof(cmd, tree, args.timeout)
            if r.error:
                crashed = True
                print(f"    ERROR {r.error}", file=sys.stderr)
            else:
                stray_total += attach_findings(mine, r.findings, tree)
            runs.append(r)
    except (UsageError, ExportError) as exc:
        print(f"quality_ferrotorch: {exc}", file=sys.stderr)
        return 2

    sc = score(labels)
    print_report(labels, runs, sc, stray_total)
    if args.json_out:
        write_json(args.json_out, labels, runs, sc)
    if crashed:
        print(
            "\nquality_ferrotorch: gpuproof failed on at least one commit (see ERROR lines); "
            "labels of those commits count as unflagged.",
            file=sys.stderr,
        )
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
