"""Run gpuproof over real Rust GPU code bases and sample findings for hand-checking.

Usage::

    python bench/corpus_scan.py [--gpuproof gpuproof] [--sample 30] [--seed 1]
        [--sample-out FILE] [--summary-out FILE] [--commit NAME=SHA ...]
        NAME=PATH [NAME=PATH ...]

For each tree it runs ``<gpuproof> check PATH --format json --no-cache`` (exit
0/1 = ok; any other exit, unparsable JSON or a Python traceback on stderr = a
crash, which is reported and, where possible, narrowed down to one file by
bisection), times it, counts .rs files and lines, and prints: files, lines, wall
seconds, exit code, findings by rule and severity, findings per 10k lines (all
and error-level), the most frequent finding shapes, and the tool's notes.

It then draws a seeded random sample of findings across all trees, stratified
so that each tree contributes in proportion to its number of findings (at least
5 from a tree that has 5), prints each with ±6 lines of source, and writes the
sample to a CSV with columns ``tree,commit,path,line,rule,function,verdict,reason``
(verdict and reason left empty, to be filled by hand).

Standard library only (Python 3.11).
"""

from __future__ import annotations

import argparse
import collections
import csv
import json
import os
import random
import re
import shlex
import shutil
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

CONTEXT = 6
MIN_PER_TREE = 5


@dataclass
class TreeResult:
    name: str
    path: Path
    commit: str
    rs_files: list[Path] = field(default_factory=list)
    lines: int = 0
    seconds: float = 0.0
    exit_code: int | None = None
    crashed: bool = False
    crash_detail: str = ""
    crash_file: str = ""
    findings: list[dict[str, Any]] = field(default_factory=list)
    notes: list[dict[str, Any]] = field(default_factory=list)
    stats: dict[str, Any] = field(default_factory=dict)
    stderr: str = ""


def count_lines(data: bytes) -> int:
    return data.count(b"\n") + (1 if data and not data.endswith(b"\n") else 0)


def rs_files(root: Path) -> list[Path]:
    out = []
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames[:] = sorted(d for d in dirnames if d not in {".git", "target"})
        for name in sorted(filenames):
            if name.endswith(".rs"):
                out.append(Path(dirpath) / name)
    return out


def detect_commit(path: Path) -> str:
    """The HEAD commit when PATH is itself the top of a git work tree, else ''."""
    try:
        top = subprocess.run(
            ["git", "-C", str(path), "rev-parse", "--show-toplevel"],
            capture_output=True,
            text=True,
            check=True,
        ).stdout.strip()
        if Path(top).resolve() != path.resolve():
            return ""
        return subprocess.run(
            ["git", "-C", str(path), "rev-parse", "HEAD"], capture_output=True, text=True, check=True
        ).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return ""


def is_crash(rc: int | None, stderr: str) -> bool:
    return rc not in (0, 1) or "Traceback (most recent call last)" in stderr


def run_gpuproof(cmd: list[str], timeout: float) -> tuple[int | None, str, str, float]:
    start = time.perf_counter()
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
        rc, out, err = proc.returncode, proc.stdout, proc.stderr
    except subprocess.TimeoutExpired as exc:
        rc = None
        out = exc.stdout.decode(errors="replace") if isinstance(exc.stdout, bytes) else (exc.stdout or "")
        err = f"timed out after {timeout:.0f}s\n" + (
            exc.stderr.decode(errors="replace") if isinstance(exc.stderr, bytes) else (exc.stderr or "")
        )
    return rc, out, err, time.perf_counter() - start


def bisect_crash(gpuproof: list[str], root: Path, files: list[Path], timeout: float) -> str:
    """Narrow a crash down to one file by checking halves of the file list."""

    def crashes(subset: list[Path]) -> bool:
        cmd = [*gpuproof, "check", "--root", str(root), "--format", "json", "--no-cache", *map(str, subset)]
        rc, _out, err, _ = run_gpuproof(cmd, timeout)
        return is_crash(rc, err)

    if not files or not crashes(files):
        return ""  # the crash needs the whole tree (or is not reproducible file-wise)
    current = files
    while len(current) > 1:
        half = len(current) // 2
        first, second = current[:half], current[half:]
        if crashes(first):
            current = first
        elif crashes(second):
            current = second
        else:
            return f"needs files from both halves of {len(current)} (first: {first[0]}, ...)"
    return str(current[0].relative_to(root))


_KEEP = re.compile(
    r"^(todo!|unimplemented!|panic!|unreachable!|#\[ignore|TODO|FIXME|XXX|HACK|dtoh|htod|"
    r"memcpy_dtoh|read_one|to_vec|cpu\(|to_cpu|Device::(?:Cpu|Cuda|Metal|Wgpu|Vulkan)\b)"
)


def shape_of(finding: dict[str, Any]) -> str:
    """A coarse "shape" of a finding: its rule plus its message with names blanked out."""
    msg = finding.get("message", "")

    def blank(m: re.Match[str]) -> str:
        inner = m.group(1)
        keep = _KEEP.match(inner)
        if keep:
            word = keep.group(1)
            return f"`{word}…`" if word.endswith(("!", "(")) else f"`{word}`"
        return "`…`"

    msg = re.sub(r"`([^`]*)`", blank, msg)
    msg = re.split(r"(?<=[:.])\s+(?=[A-Z])", msg, maxsplit=1)[0]
    msg = re.sub(r"\s*\(no kernel launch[^)]*\)", "", msg)
    msg = re.sub(r"\bline \d+", "line N", msg)
    msg = re.sub(r"\bat [\w./-]+:\d+", "at FILE:N", msg)
    return f"{finding['rule']}: {msg}"


def allocate(counts: dict[str, int], n: int) -> dict[str, int]:
    """Per-tree sample sizes: proportional to counts, at least min(5, count), summing to n."""
    total = sum(counts.values())
    if total <= n:
        return dict(counts)
    floor = {k: min(MIN_PER_TREE, c) for k, c in counts.items()}
    fixed: dict[str, int] = {}
    while True:
        free = {k: c for k, c in counts.items() if k not in fixed}
        budget = n - sum(fixed.values())
        free_total = sum(free.values())
        share = {k: budget * c / free_total for k, c in free.items()} if free_total else {}
        low = [k for k, s in share.items() if s < floor[k]]
        if not low:
            break
        for k in low:
            fixed[k] = floor[k]
    quota = {k: int(s) for k, s in share.items()}
    rest = budget - sum(quota.values())
    for k in sorted(share, key=lambda k: (-(share[k] - int(share[k])), k))[:rest]:
        quota[k] += 1
    quota.update(fixed)
    return {k: min(quota[k], counts[k]) for k in counts}


def context(root: Path, rel: str, line: int) -> str:
    try:
        text = (root / rel).read_text(encoding="utf-8", errors="replace").splitlines()
    except OSError as exc:
        return f"    (cannot read {rel}: {exc})"
    lo, hi = max(1, line - CONTEXT), min(len(text), line + CONTEXT)
    return "\n".join(f"{'>' if i == line else ' '}{i:6d} | {text[i - 1]}" for i in range(lo, hi + 1))


def tool_version(gpuproof: list[str]) -> str:
    try:
        proc = subprocess.run([*gpuproof, "--version"], capture_output=True, text=True, timeout=60)
        return proc.stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return "?"


def repo_commit(here: Path) -> str:
    try:
        sha = subprocess.run(
            ["git", "-C", str(here), "log", "-1", "--format=%h"], capture_output=True, text=True, check=True
        ).stdout.strip()
        dirty = subprocess.run(
            ["git", "-C", str(here), "status", "--porcelain", "--untracked-files=no"],
            capture_output=True,
            text=True,
            check=True,
        ).stdout.strip()
        return sha + (" (+ uncommitted changes)" if dirty else "")
    except (OSError, subprocess.CalledProcessError):
        return "?"


def resolve_gpuproof(arg: str) -> list[str]:
    parts = shlex.split(arg)
    if parts and shutil.which(parts[0]) is None and parts[0] == "gpuproof":
        local = Path(__file__).resolve().parent.parent / ".venv" / "bin" / "gpuproof"
        if local.exists():
            parts[0] = str(local)
    return parts


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("trees", nargs="+", metavar="NAME=PATH")
    ap.add_argument("--gpuproof", default="gpuproof", help="the gpuproof command (default: gpuproof)")
    ap.add_argument("--sample", type=int, default=30, help="findings to sample (default 30)")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--sample-out", type=Path, help="write the sample here as CSV")
    ap.add_argument(
        "--summary-out", type=Path, help="also write the printed summary (without the sample) here"
    )
    ap.add_argument(
        "--commit",
        action="append",
        default=[],
        metavar="NAME=SHA",
        help="the commit a tree was exported from (default: git HEAD if PATH is a work tree)",
    )
    ap.add_argument("--timeout", type=float, default=1800, help="seconds per gpuproof run")
    ap.add_argument("--no-bisect", action="store_true", help="do not narrow a crash down to a file")
    args = ap.parse_args(argv)

    gpuproof = resolve_gpuproof(args.gpuproof)
    commits = dict(c.split("=", 1) for c in args.commit)
    out_lines: list[str] = []

    def emit(s: str = "") -> None:
        print(s)
        out_lines.append(s)

    trees: list[TreeResult] = []
    for spec in args.trees:
        if "=" not in spec:
            ap.error(f"expected NAME=PATH, got {spec!r}")
        name, raw = spec.split("=", 1)
        path = Path(raw)
        if not path.is_dir():
            ap.error(f"{name}: {path} is not a directory")
        trees.append(TreeResult(name, path, commits.get(name) or detect_commit(path) or "?"))

    emit("# gpuproof corpus scan")
    words = [sys.argv[0], *(argv if argv is not None else sys.argv[1:])]
    emit(f"command: python {' '.join(shlex.quote(a) for a in words)}")
    emit(
        f"gpuproof: {' '.join(gpuproof)}  version: {tool_version(gpuproof)}  repo commit: "
        f"{repo_commit(Path(__file__).resolve().parent)}"
    )
    emit(f"date: {time.strftime('%Y-%m-%d %H:%M:%S %Z')}")
    emit()

    for t in trees:
        t.rs_files = rs_files(t.path)
        t.lines = sum(count_lines(p.read_bytes()) for p in t.rs_files)
        cmd = [*gpuproof, "check", str(t.path), "--format", "json", "--no-cache"]
        rc, out, err, secs = run_gpuproof(cmd, args.timeout)
        t.exit_code, t.seconds, t.stderr = rc, secs, err
        t.crashed = is_crash(rc, err)
        if not t.crashed:
            try:
                report = json.loads(out)
                t.findings = report.get("findings", [])
                t.notes = report.get("notes", [])
                t.stats = report.get("stats", {})
            except json.JSONDecodeError as exc:
                t.crashed = True
                t.crash_detail = f"output is not JSON: {exc}"
        if t.crashed:
            t.crash_detail = (t.crash_detail + "\n" + err).strip()
            if not args.no_bisect:
                t.crash_file = bisect_crash(gpuproof, t.path, t.rs_files, args.timeout)

    # ---- summary table
    emit("## Per tree")
    head = (
        f"{'tree':<10} {'commit':<12} {'files':>6} {'lines':>8} {'secs':>6} {'exit':>4} "
        f"{'findings':>8} {'errors':>6} {'per10k':>7} {'err/10k':>7}"
    )
    emit(head)
    emit("-" * len(head))
    for t in trees:
        n = len(t.findings)
        ne = sum(1 for f in t.findings if f.get("severity") == "error")
        per = 1e4 * n / t.lines if t.lines else 0.0
        pere = 1e4 * ne / t.lines if t.lines else 0.0
        emit(
            f"{t.name:<10} {t.commit[:12]:<12} {len(t.rs_files):>6} {t.lines:>8} {t.seconds:>6.2f} "
            f"{t.exit_code!s:>4} {n:>8} {ne:>6} {per:>7.2f} {pere:>7.2f}" + ("   CRASH" if t.crashed else "")
        )
    all_f = sum(len(t.findings) for t in trees)
    all_e = sum(1 for t in trees for f in t.findings if f.get("severity") == "error")
    all_l = sum(t.lines for t in trees)
    emit(
        f"{'total':<10} {'':<12} {sum(len(t.rs_files) for t in trees):>6} {all_l:>8} "
        f"{sum(t.seconds for t in trees):>6.2f} {'':>4} {all_f:>8} {all_e:>6} "
        f"{1e4 * all_f / all_l if all_l else 0:>7.2f} {1e4 * all_e / all_l if all_l else 0:>7.2f}"
    )
    emit()

    for t in trees:
        emit(f"## {t.name}  ({t.path}, commit {t.commit})")
        if t.stats:
            mism = (
                ""
                if t.stats.get("lines") == t.lines and t.stats.get("files") == len(t.rs_files)
                else f"  (gpuproof counted {t.stats.get('files')} files / {t.stats.get('lines')} lines)"
            )
            emit(f"gpuproof stats: {json.dumps(t.stats)}{mism}")
        if t.crashed:
            where = f", narrowed to file: {t.crash_file}" if t.crash_file else ""
            emit(f"CRASH (exit {t.exit_code}){where}")
            emit("\n".join("    " + ln for ln in t.crash_detail.splitlines()[-40:]))
        elif t.stderr.strip():
            emit("stderr: " + t.stderr.strip()[-2000:])
        by = collections.Counter((f["rule"], f.get("severity", "?")) for f in t.findings)
        emit("findings by rule/severity:")
        for (rule, sev), c in sorted(by.items(), key=lambda kv: (-kv[1], kv[0])):
            emit(f"    {c:5d}  {rule:<24} {sev}")
        if not by:
            emit("    (none)")
        shapes = collections.Counter(shape_of(f) for f in t.findings)
        emit("most frequent shapes:")
        for s, c in shapes.most_common(5):
            emit(f"    {c:5d}  {s[:200]}")
        emit(f"notes ({len(t.notes)}):")
        for note in t.notes:
            emit(f"    {note.get('path', '?')}: {note.get('message', note)}")
        emit()

    # ---- sample
    summary_end = len(out_lines)
    rng = random.Random(args.seed)
    counts = {t.name: len(t.findings) for t in trees}
    quota = allocate(counts, args.sample)
    emit(
        f"## Sample (seed {args.seed}, {sum(quota.values())} findings; per tree: "
        + ", ".join(f"{k}={v}" for k, v in quota.items())
        + ")"
    )
    sample: list[tuple[TreeResult, dict[str, Any]]] = []
    for t in trees:
        ordered = sorted(t.findings, key=lambda f: (f["path"], f["line"], f["rule"], f.get("function", "")))
        picked = rng.sample(ordered, quota[t.name])
        picked.sort(key=lambda f: (f["path"], f["line"], f["rule"]))
        sample.extend((t, f) for f in picked)
    for i, (t, f) in enumerate(sample, 1):
        emit()
        emit(
            f"[{i}] {t.name}:{f['path']}:{f['line']}  {f['rule']} ({f.get('severity')})"
            f"  fn {f.get('function')}"
        )
        emit(f"    {f.get('message')}")
        emit(context(t.path, f["path"], int(f["line"])))

    if args.sample_out:
        args.sample_out.parent.mkdir(parents=True, exist_ok=True)
        with args.sample_out.open("w", newline="", encoding="utf-8") as fh:
            w = csv.writer(fh)
            w.writerow(["tree", "commit", "path", "line", "rule", "function", "verdict", "reason"])
            for t, f in sample:
                w.writerow([t.name, t.commit, f["path"], f["line"], f["rule"], f.get("function", ""), "", ""])
        emit()
        emit(f"sample written to {args.sample_out}")

    if args.summary_out:
        args.summary_out.parent.mkdir(parents=True, exist_ok=True)
        args.summary_out.write_text("\n".join(out_lines[:summary_end]) + "\n", encoding="utf-8")

    return 2 if any(t.crashed for t in trees) else 0


if __name__ == "__main__":
    sys.exit(main())
