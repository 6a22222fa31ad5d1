#!/usr/bin/env python3
"""Side-by-side speed and memory benchmark: gpuproof against ast-grep and semgrep.

The issue's targets, on the ferrotorch tree (~430k lines of Rust), in one run:

* cold full scan (empty cache) within 1.5x the wall time of ast-grep running
  equivalent structural rules (bench/peers/ast-grep/);
* at least 10x faster than semgrep with equivalent rules
  (bench/peers/semgrep/rules.yml);
* warm re-scan (cache keyed by file content, in ``GPUPROOF_CACHE_DIR``)
  within 0.3x of ast-grep;
* peak memory of the whole process tree under 500 MB;
* both cores used (CPU utilisation = (user+sys) / wall > 1.3).

Set-up (the peers live outside the repository; PyPI is enough, they run
offline)::

    python3 -m venv /tmp/peers
    /tmp/peers/bin/pip install ast-grep-cli semgrep
    # a ferrotorch tree (the .rs and .toml files are all that is needed)
    git clone https://github.com/forecast-bio/ferrotorch /tmp/ft

Run::

    python bench/speed.py /tmp/ft \\
        --gpuproof .venv/bin/gpuproof \\
        --ast-grep /tmp/peers/bin/ast-grep --semgrep /tmp/peers/bin/semgrep
    python bench/speed.py /tmp/ft --markdown     # table for docs/benchmarks.md
    python bench/speed.py /tmp/ft --skip-semgrep # semgrep takes minutes

Tools not given are looked up on PATH, then next to this Python interpreter,
in the repository's .venv/bin and in /tmp/peers/bin. Each gpuproof cold run
gets a new empty GPUPROOF_CACHE_DIR; the warm run reuses it. The tools run
interleaved (run by run) so that drift in machine load hits all alike; run it
on an otherwise idle machine (the report prints the load average). semgrep is
run once, with flags that make it scan the same files as the others (no 1 MB
cut-off, no per-rule timeout, not its default ignores that drop tests/).

Only the standard library is used; the memory figure
is the maximum over samples (every ~20 ms, from /proc) of the summed RSS of
the tool's process and all its descendants, and never less than the largest
single-process peak the kernel reports (ru_maxrss), so short-lived helpers
are not missed. CPU time is user+sys of the whole tree (wait4 rusage).
Linux only (/proc).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import platform
import shlex
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
AST_GREP_CONFIG = HERE / "peers" / "ast-grep" / "sgconfig.yml"
SEMGREP_RULES = HERE / "peers" / "semgrep" / "rules.yml"

TARGET_COLD_VS_AST_GREP = 1.5  # gpuproof cold / ast-grep <= 1.5
TARGET_SEMGREP_VS_COLD = 10.0  # semgrep / gpuproof cold >= 10
TARGET_WARM_VS_AST_GREP = 0.3  # gpuproof warm / ast-grep <= 0.3
TARGET_PEAK_MB = 500.0  # gpuproof peak RSS (whole tree) < 500 MB
TARGET_UTILISATION = 1.3  # gpuproof cold (user+sys)/wall > 1.3

SAMPLE_INTERVAL_S = 0.02
PAGE_SIZE = os.sysconf("SC_PAGE_SIZE")
SKIP_DIRS = {".git", "target", "node_modules", ".venv"}


# ---------------------------------------------------------------------------
# process-tree measurement
# ---------------------------------------------------------------------------


def _children(pid: int) -> list[int]:
    """Direct children of pid, via /proc/<pid>/task/*/children."""
    kids: list[int] = []
    try:
        tasks = os.listdir(f"/proc/{pid}/task")
    except OSError:
        return kids
    for tid in tasks:
        try:
            with open(f"/proc/{pid}/task/{tid}/children", "rb") as fh:
                kids.extend(int(x) for x in fh.read().split())
        except (OSError, ValueError):
            pass
    return kids


def _children_by_scan(root: int) -> list[int]:
    """Fallback when /proc/*/children is unavailable: scan every /proc/<pid>/stat."""
    parent: dict[int, int] = {}
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/stat", "rb") as fh:
                data = fh.read()
            # the command name may contain spaces and parentheses: split after the last ')'
            ppid = int(data[data.rindex(b")") + 2 :].split()[1])
            parent[int(name)] = ppid
        except (OSError, ValueError, IndexError):
            pass
    tree, frontier = [], [root]
    while frontier:
        p = frontier.pop()
        kids = [c for c, pp in parent.items() if pp == p]
        tree.extend(kids)
        frontier.extend(kids)
    return tree


_HAVE_CHILDREN_FILE = os.path.exists(f"/proc/{os.getpid()}/task/{os.getpid()}/children")


def _tree(root: int) -> list[int]:
    if not _HAVE_CHILDREN_FILE:
        return [root, *_children_by_scan(root)]
    out, frontier = [], [root]
    while frontier:
        p = frontier.pop()
        out.append(p)
        frontier.extend(_children(p))
    return out


def _rss_and_threads(pid: int) -> tuple[int, int]:
    rss = threads = 0
    try:
        with open(f"/proc/{pid}/statm", "rb") as fh:
            rss = int(fh.read().split()[1]) * PAGE_SIZE
        threads = len(os.listdir(f"/proc/{pid}/task"))
    except (OSError, ValueError, IndexError):
        pass
    return rss, threads


class _Sampler(threading.Thread):
    def __init__(self, pid: int) -> None:
        super().__init__(daemon=True)
        self.pid = pid
        self.peak_rss = 0
        self.peak_threads = 0
        self.peak_procs = 0
        self.samples = 0
        self._halt = threading.Event()

    def run(self) -> None:
        while not self._halt.is_set():
            pids = _tree(self.pid)
            total = threads = 0
            for p in pids:
                r, t = _rss_and_threads(p)
                total += r
                threads += t
            self.peak_rss = max(self.peak_rss, total)
            self.peak_threads = max(self.peak_threads, threads)
            self.peak_procs = max(self.peak_procs, len(pids))
            self.samples += 1
            self._halt.wait(SAMPLE_INTERVAL_S)

    def stop(self) -> None:
        self._halt.set()
        self.join()


@dataclass
class Run:
    wall: float
    cpu: float
    peak_mb: float
    threads: int
    procs: int
    rc: int
    stdout: bytes
    stderr: bytes


def _kill_group(proc: subprocess.Popen[bytes]) -> None:
    for sig in (signal.SIGTERM, signal.SIGKILL):
        try:
            os.killpg(proc.pid, sig)
        except ProcessLookupError:
            return
        try:
            proc.wait(timeout=3)
            return
        except subprocess.TimeoutExpired:
            continue


def measure(cmd: list[str], env: dict[str, str] | None = None, cwd: Path | None = None) -> Run:
    """Run cmd, return wall/cpu/peak-memory of its whole process tree."""
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        start = time.perf_counter()
        # own session, so that an interrupted benchmark can take the whole tree down
        proc = subprocess.Popen(
            cmd, stdout=out, stderr=err, env=env, cwd=cwd, stdin=subprocess.DEVNULL, start_new_session=True
        )
        sampler = _Sampler(proc.pid)
        sampler.start()
        try:
            # wait4 gives the rusage of the child and of every descendant it reaped
            _, status, ru = os.wait4(proc.pid, 0)
        except BaseException:
            _kill_group(proc)
            raise
        finally:
            wall = time.perf_counter() - start
            sampler.stop()
        proc.returncode = os.waitstatus_to_exitcode(status)
        out.seek(0)
        err.seek(0)
        stdout, stderr = out.read(), err.read()
    # ru_maxrss is in KiB on Linux: the largest single process of the tree
    peak = max(sampler.peak_rss, ru.ru_maxrss * 1024)
    return Run(
        wall=wall,
        cpu=ru.ru_utime + ru.ru_stime,
        peak_mb=peak / 1e6,
        threads=sampler.peak_threads,
        procs=sampler.peak_procs,
        rc=proc.returncode,
        stdout=stdout,
        stderr=stderr,
    )


# ---------------------------------------------------------------------------
# tools
# ---------------------------------------------------------------------------


def find_tool(name: str, given: str | None) -> str | None:
    cand = given or name
    if os.sep in cand:
        return cand if os.access(cand, os.X_OK) else None
    found = shutil.which(cand)
    if found:
        return found
    for d in (Path(sys.executable).parent, REPO / ".venv" / "bin", Path("/tmp/peers/bin")):
        p = d / cand
        if os.access(p, os.X_OK):
            return str(p)
    return None


def tool_version(exe: str, name: str) -> str:
    for args in (["--version"], ["version"]):
        try:
            # semgrep --version hangs offline unless its version check is off
            env = dict(os.environ, SEMGREP_ENABLE_VERSION_CHECK="0", SEMGREP_SEND_METRICS="off")
            cp = subprocess.run(
                [exe, *args], capture_output=True, text=True, timeout=60, env=env, stdin=subprocess.DEVNULL
            )
        except (OSError, subprocess.TimeoutExpired):
            continue
        text = (cp.stdout or cp.stderr).strip().splitlines()
        if cp.returncode == 0 and text:
            v = text[0].strip()
            return v if name.lower() in v.lower() else f"{name} {v}"
    return f"{name} (version unknown)"


def count_findings(tool: str, stdout: bytes) -> tuple[int | None, dict[str, int]]:
    """Number of findings and per-rule counts from a tool's JSON output."""
    per_rule: dict[str, int] = {}
    try:
        if tool == "ast-grep":  # --json=stream: one object per line
            n = 0
            for line in stdout.splitlines():
                if line.strip():
                    rid = json.loads(line).get("ruleId", "?")
                    per_rule[rid] = per_rule.get(rid, 0) + 1
                    n += 1
            return n, per_rule
        doc = json.loads(stdout or b"null")
        if tool == "semgrep":
            results = doc.get("results", [])
            for r in results:
                rid = str(r.get("check_id", "?")).rsplit(".", 1)[-1]
                per_rule[rid] = per_rule.get(rid, 0) + 1
            return len(results), per_rule
        findings = doc.get("findings", []) if isinstance(doc, dict) else doc
        for f in findings:
            rid = f.get("rule", "?")
            per_rule[rid] = per_rule.get(rid, 0) + 1
        return len(findings), per_rule
    except (ValueError, AttributeError, TypeError):
        return None, per_rule


def semgrep_errors(stdout: bytes) -> tuple[str, int | None]:
    """('<n> errors (kinds)', files scanned) from semgrep's JSON output."""
    try:
        doc = json.loads(stdout)
    except ValueError:
        return "unreadable output", None
    kinds: dict[str, int] = {}
    for e in doc.get("errors", []):
        t = e.get("type")
        t = t if isinstance(t, str) else (t[0] if isinstance(t, list) and t else str(t))
        kinds[t] = kinds.get(t, 0) + 1
    text = f"{sum(kinds.values())} errors"
    if kinds:
        text += " (" + ", ".join(f"{k}: {v}" for k, v in sorted(kinds.items())) + ")"
    return text, len(doc.get("paths", {}).get("scanned", []))


# ---------------------------------------------------------------------------
# tree statistics
# ---------------------------------------------------------------------------


def tree_stats(root: Path) -> tuple[int, int, int]:
    """(.rs files, lines, bytes); reading every file also warms the page cache
    so that no tool pays for the first read of the tree."""
    files = lines = size = 0
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames[:] = [d for d in dirnames if d not in SKIP_DIRS and not d.startswith(".")]
        for fn in filenames:
            if fn.endswith(".rs"):
                data = Path(dirpath, fn).read_bytes()
                files += 1
                lines += data.count(b"\n") + (1 if data and not data.endswith(b"\n") else 0)
                size += len(data)
    return files, lines, size


def dir_size(path: Path) -> int:
    total = 0
    for dirpath, _, filenames in os.walk(path):
        for fn in filenames:
            with contextlib.suppress(OSError):
                total += os.path.getsize(os.path.join(dirpath, fn))
    return total


# ---------------------------------------------------------------------------
# results
# ---------------------------------------------------------------------------


@dataclass
class Result:
    name: str
    command: str
    runs: list[Run] = field(default_factory=list)
    findings: int | None = None
    per_rule: dict[str, int] = field(default_factory=dict)
    note: str = ""
    skipped: str = ""

    @property
    def ok(self) -> bool:
        return bool(self.runs) and not self.skipped and not self.failed

    @property
    def failed(self) -> bool:
        return any(r.rc not in (0, 1) for r in self.runs)

    @property
    def wall(self) -> float:
        return statistics.median(r.wall for r in self.runs)

    @property
    def cpu(self) -> float:
        return statistics.median(r.cpu for r in self.runs)

    @property
    def util(self) -> float:
        return self.cpu / self.wall if self.wall > 0 else 0.0

    @property
    def peak_mb(self) -> float:
        return max(r.peak_mb for r in self.runs)

    @property
    def threads(self) -> int:
        return max(r.threads for r in self.runs)

    @property
    def rc(self) -> str:
        codes = sorted({r.rc for r in self.runs})
        return ",".join(str(c) for c in codes)


def run_tool(
    res: Result, cmd: list[str], tool: str, env: dict[str, str] | None = None, cwd: Path | None = None
) -> Run:
    r = measure(cmd, env=env, cwd=cwd)
    res.runs.append(r)
    n, per_rule = count_findings(tool, r.stdout)
    if len(res.runs) == 1:
        res.findings, res.per_rule = n, per_rule
    elif n != res.findings:
        res.note = (res.note + f" findings differ between runs ({res.findings} vs {n});").strip()
    if r.rc not in (0, 1):  # 0: clean, 1: findings; anything else is a failed scan
        tail = r.stderr.decode(errors="replace").strip().splitlines()[-5:]
        res.note = (res.note + f" exit {r.rc}: " + " | ".join(tail)).strip()
    return r


def fmt(v: float | None, spec: str = ".2f") -> str:
    return "-" if v is None else format(v, spec)


def render(results: list[Result], markdown: bool) -> str:
    head = [
        "tool",
        "wall s (median)",
        "runs",
        "cpu s (user+sys)",
        "cpu util",
        "peak MB",
        "threads (max)",
        "exit",
        "findings",
    ]
    rows = []
    for r in results:
        if r.skipped or not r.runs:
            rows.append([r.name, "skipped", "", "", "", "", "", "", r.skipped])
            continue
        if r.failed:
            rows.append([r.name, "FAILED", str(len(r.runs)), "", "", "", "", r.rc, "see notes"])
            continue
        rows.append(
            [
                r.name,
                fmt(r.wall, ".3f"),
                str(len(r.runs)),
                fmt(r.cpu),
                fmt(r.util),
                fmt(r.peak_mb, ".0f"),
                str(r.threads),
                r.rc,
                "?" if r.findings is None else str(r.findings),
            ]
        )
    return _table(head, rows, markdown)


def _table(head: list[str], rows: list[list[str]], markdown: bool) -> str:
    if markdown:
        lines = ["| " + " | ".join(head) + " |", "|" + "|".join("---" for _ in head) + "|"]
        lines += ["| " + " | ".join(row) + " |" for row in rows]
        return "\n".join(lines)
    widths = [max(len(h), *(len(row[i]) for row in rows)) for i, h in enumerate(head)]
    lines = [
        "  ".join(h.ljust(w) for h, w in zip(head, widths, strict=True)),
        "  ".join("-" * w for w in widths),
    ]
    lines += ["  ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)) for row in rows]
    return "\n".join(lines)


def verdicts(cold: Result, warm: Result, ag: Result, sg: Result) -> list[list[str]]:
    """[check, value, target, PASS/FAIL/n/a] for each target of the issue."""

    def ratio(a: Result, b: Result) -> float | None:
        return a.wall / b.wall if a.ok and b.ok and b.wall > 0 else None

    gp_runs = [r for r in (cold, warm) if r.ok]
    peak = max(r.peak_mb for r in gp_runs) if gp_runs else None
    checks: list[tuple[str, float | None, str, float]] = [
        ("gpuproof cold / ast-grep (wall)", ratio(cold, ag), "<=", TARGET_COLD_VS_AST_GREP),
        ("semgrep / gpuproof cold (wall)", ratio(sg, cold), ">=", TARGET_SEMGREP_VS_COLD),
        ("gpuproof warm / ast-grep (wall)", ratio(warm, ag), "<=", TARGET_WARM_VS_AST_GREP),
        ("gpuproof peak memory (MB, whole tree)", peak, "<", TARGET_PEAK_MB),
        ("gpuproof cold cpu utilisation (cores)", cold.util if cold.ok else None, ">", TARGET_UTILISATION),
    ]
    ops = {"<=": float.__le__, ">=": float.__ge__, "<": float.__lt__, ">": float.__gt__}
    out = []
    for name, value, op, target in checks:
        if value is None:
            out.append([name, "-", f"{op} {target:g}", "n/a"])
        else:
            verdict = "PASS" if ops[op](float(value), float(target)) else "FAIL"
            out.append([name, f"{value:.2f}", f"{op} {target:g}", verdict])
    return out


def cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown"


# ---------------------------------------------------------------------------
# main
# ---------------------------------------------------------------------------


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("tree", type=Path, help="Rust source tree to scan (e.g. a ferrotorch checkout)")
    ap.add_argument("--gpuproof", default=None, help="gpuproof executable (default: PATH, .venv/bin)")
    ap.add_argument("--ast-grep", dest="ast_grep", default=None, help="ast-grep executable")
    ap.add_argument("--semgrep", default=None, help="semgrep executable")
    ap.add_argument("--runs", type=int, default=3, help="timed runs per tool (semgrep: always 1)")
    ap.add_argument("--skip-semgrep", action="store_true", help="do not run semgrep (it takes minutes)")
    ap.add_argument("--markdown", action="store_true", help="print the tables as markdown")
    ap.add_argument("--per-rule", action="store_true", help="also print findings per rule id for every tool")
    ap.add_argument("--save", type=Path, help="write the raw numbers as JSON to this file")
    args = ap.parse_args(argv)
    # a SIGTERM (or SIGHUP) unwinds like Ctrl-C, so the tool being measured is killed too
    for sig in (signal.SIGTERM, signal.SIGHUP):
        signal.signal(sig, signal.default_int_handler)

    tree = args.tree.resolve()
    if not tree.is_dir():
        print(f"speed.py: {args.tree} is not a directory", file=sys.stderr)
        return 2
    if args.runs < 1:
        print("speed.py: --runs must be >= 1", file=sys.stderr)
        return 2

    files, lines, size = tree_stats(tree)
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()

    gp = find_tool("gpuproof", args.gpuproof)
    ag = find_tool("ast-grep", args.ast_grep)
    sg = None if args.skip_semgrep else find_tool("semgrep", args.semgrep)

    versions = {
        "gpuproof": tool_version(gp, "gpuproof") if gp else "not found",
        "ast-grep": tool_version(ag, "ast-grep") if ag else "not found",
        "semgrep": ("skipped" if args.skip_semgrep else tool_version(sg, "semgrep") if sg else "not found"),
    }

    cache_root = Path(tempfile.mkdtemp(prefix="gpuproof-bench-"))
    gp_cmd = [gp or "gpuproof", "check", str(tree), "--format", "json"]
    ag_cmd = [ag or "ast-grep", "scan", "-c", str(AST_GREP_CONFIG), str(tree), "--json=stream"]
    sg_cmd = [
        sg or "semgrep", "scan", "--config", str(SEMGREP_RULES), "--json", "--metrics=off",
        "--disable-version-check", "-j", "2",
        # the same files as the others: no 1 MB size cut-off, no per-rule
        # timeout, and not semgrep's built-in default ignores (which drop
        # tests/ directories when the tree has no .semgrepignore)
        "--max-target-bytes", "0", "--timeout", "0", "--x-ignore-semgrepignore-files",
        str(tree),
    ]  # fmt: skip
    cold = Result("gpuproof cold", "GPUPROOF_CACHE_DIR=<new empty dir> " + shlex.join(gp_cmd))
    warm = Result("gpuproof warm", "GPUPROOF_CACHE_DIR=<dir filled by the cold run> " + shlex.join(gp_cmd))
    agr = Result("ast-grep", shlex.join(ag_cmd))
    sgr = Result("semgrep", shlex.join(sg_cmd))
    for res, exe, name in ((cold, gp, "gpuproof"), (warm, gp, "gpuproof"), (agr, ag, "ast-grep")):
        if not exe:
            res.skipped = f"{name} not found"
    if args.skip_semgrep:
        sgr.skipped = "--skip-semgrep"
    elif not sg:
        sgr.skipped = "semgrep not found"

    base_env = dict(os.environ)
    base_env.update(SEMGREP_SEND_METRICS="off", SEMGREP_ENABLE_VERSION_CHECK="0", NO_COLOR="1")
    cache_mb = 0.0
    log = sys.stderr
    print(f"scanning {tree}: {files} .rs files, {lines} lines; {cores} cores", file=log)
    load_before = os.getloadavg()[0]
    try:
        # interleave the tools run by run so that drift in machine load hits all alike
        for i in range(args.runs):
            if gp:
                cache = cache_root / f"run{i}"
                cache.mkdir()
                env = dict(base_env, GPUPROOF_CACHE_DIR=str(cache))
                r = run_tool(cold, gp_cmd, "gpuproof", env=env, cwd=REPO)
                print(f"  run {i + 1}: gpuproof cold {r.wall:.3f}s", file=log)
                cache_mb = dir_size(cache) / 1e6
                r = run_tool(warm, gp_cmd, "gpuproof", env=env, cwd=REPO)
                print(f"  run {i + 1}: gpuproof warm {r.wall:.3f}s", file=log)
            if ag:
                r = run_tool(agr, ag_cmd, "ast-grep", env=base_env, cwd=REPO)
                print(f"  run {i + 1}: ast-grep {r.wall:.3f}s", file=log)
        if sg and not args.skip_semgrep:
            print("  semgrep (one run, slow) ...", file=log)
            r = run_tool(sgr, sg_cmd, "semgrep", env=base_env, cwd=REPO)
            errs, scanned = semgrep_errors(r.stdout)
            sgr.note = (sgr.note + f" {scanned} files scanned, {errs}").strip()
            print(f"  semgrep {r.wall:.1f}s", file=log)
    finally:
        shutil.rmtree(cache_root, ignore_errors=True)

    load_after = os.getloadavg()[0]
    if cold.ok and warm.ok and cold.findings != warm.findings:
        warm.note = (warm.note + f" warm findings {warm.findings} != cold {cold.findings}").strip()
    if cold.ok:
        cold.note = (cold.note + f" cache written: {cache_mb:.1f} MB").strip()
    if agr.ok:
        agr.note = f"{agr.note} -j 0 (ast-grep's own thread heuristic; {agr.threads} threads seen)".strip()

    results = [cold, warm, agr, sgr]
    md = args.markdown
    out: list[str] = []
    h = "### " if md else ""
    out.append(f"{h}gpuproof speed benchmark")
    out.append("")
    out.append(f"tree: {tree} — {files} .rs files, {lines:,} lines, {size / 1e6:.1f} MB")
    system = f"{platform.system()} {platform.release()}"
    out.append(f"machine: {cpu_model()}, {cores} cores, Python {platform.python_version()}, {system}")
    out.append(f"date: {time.strftime('%Y-%m-%d %H:%M:%S %Z')}")
    busy = " — machine busy, timings unreliable" if max(load_before, load_after) > 0.5 * (cores or 1) else ""
    out.append(f"load average (1 min) before/after: {load_before:.2f} / {load_after:.2f}{busy}")
    out.append("")
    out.append(render(results, md))
    out.append("")
    out.append(f"{h}targets" if md else "targets")
    out.append("")
    out.append(_table(["check", "value", "target", "verdict"], verdicts(cold, warm, agr, sgr), md))
    out.append("")
    out.append(f"{h}commands and versions" if md else "commands and versions")
    out.append("")
    bullet = "- " if md else "  "
    tick = "`" if md else ""
    for res in results:
        out.append(f"{bullet}{res.name}: {tick}{res.command}{tick}")
    for k, v in versions.items():
        out.append(f"{bullet}{k}: {v}")
    notes = [f"{r.name}: {r.note}" for r in results if r.note]
    if notes:
        out.append("")
        out.append(f"{h}notes" if md else "notes:")
        out += [f"{bullet}{n}" for n in notes]
    if args.per_rule:
        rules = sorted({k for r in results for k in r.per_rule})
        rows = [
            [rid, *(str(r.per_rule.get(rid, 0)) if r.ok else "-" for r in (cold, agr, sgr))] for rid in rules
        ]
        out.append("")
        out.append(f"{h}findings per rule" if md else "findings per rule:")
        out.append("")
        out.append(_table(["rule", "gpuproof", "ast-grep", "semgrep"], rows, md))
    print("\n".join(out))

    if args.save:
        data = {
            "tree": str(tree), "files": files, "lines": lines, "bytes": size, "cores": cores,
            "versions": versions,
            "results": {
                r.name: {
                    "command": r.command, "skipped": r.skipped, "note": r.note, "findings": r.findings,
                    "per_rule": r.per_rule,
                    "runs": [
                        {
                            "wall": x.wall, "cpu": x.cpu, "peak_mb": x.peak_mb,
                            "threads": x.threads, "procs": x.procs, "rc": x.rc,
                        }
                        for x in r.runs
                    ],
                }
                for r in results
            },
            "checks": verdicts(cold, warm, agr, sgr),
        }  # fmt: skip
        args.save.write_text(json.dumps(data, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
