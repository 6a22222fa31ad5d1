"""The source files of one commit of a bare git mirror, written into a directory:
what the quality benchmarks analyse (Rust, Cargo manifests and kernel sources)."""

from __future__ import annotations

import subprocess
import sys
from functools import cache
from pathlib import Path

EXPORT_SUFFIXES = (".rs", ".toml", ".ptx", ".cu", ".cuh", ".wgsl", ".metal")


class ExportError(Exception):
    """git or tar failed: the message says which and why."""


def present_suffixes(git_dir: Path, commit: str) -> set[str]:
    names = _blobs(git_dir, commit)
    return {suffix for suffix in EXPORT_SUFFIXES if any(n.endswith(suffix) for n in names)}


def export_sources(git_dir: Path, commit: str, dest: Path, suffixes: set[str]) -> None:
    """Write the commit's files with these suffixes under ``dest``. A mirror may lack
    its largest blobs (a compiled `.ptx` of megabytes): those files are left out, and
    said so on stderr."""
    wanted = tuple(suffix for suffix in EXPORT_SUFFIXES if suffix in suffixes)
    if not wanted:
        return
    absent = absent_blobs(git_dir, commit, wanted)
    if absent:
        print(
            f"note: {commit[:12]}: the mirror lacks {len(absent)} file(s), left out: {', '.join(absent[:5])}",
            file=sys.stderr,
        )
    specs = [f":(glob)**/*{suffix}" for suffix in wanted] + [f":(exclude,literal){path}" for path in absent]
    archive = subprocess.run(
        ["git", f"--git-dir={git_dir}", "archive", "--format=tar", commit, "--", *specs], capture_output=True
    )
    if archive.returncode != 0:
        detail = archive.stderr.decode("utf-8", "replace").strip()[:400]
        raise ExportError(f"git archive {commit} failed: {detail}")
    untar = subprocess.run(["tar", "-x", "-C", str(dest)], input=archive.stdout, capture_output=True)
    if untar.returncode != 0:
        raise ExportError(f"tar failed for {commit}: {untar.stderr.decode('utf-8', 'replace')[:400]}")


def absent_blobs(git_dir: Path, commit: str, suffixes: tuple[str, ...]) -> list[str]:
    """The paths with these suffixes whose blobs the object store does not hold."""
    blobs = {path: sha for path, sha in _blobs(git_dir, commit).items() if path.endswith(suffixes)}
    check = subprocess.run(
        ["git", f"--git-dir={git_dir}", "cat-file", "--batch-check"],
        input="\n".join(blobs.values()).encode(),
        capture_output=True,
    )
    missing = {line.split(" ")[0] for line in check.stdout.decode().splitlines() if line.endswith(" missing")}
    return [path for path, sha in blobs.items() if sha in missing]


@cache
def _blobs(git_dir: Path, commit: str) -> dict[str, str]:
    """The commit's files: path -> blob id (one listing serves both questions asked of it)."""
    listing = subprocess.run(
        ["git", f"--git-dir={git_dir}", "ls-tree", "-r", "-z", commit], capture_output=True
    )
    if listing.returncode != 0:
        raise ExportError(f"git ls-tree {commit} failed: {listing.stderr.decode('utf-8', 'replace')[:400]}")
    blobs: dict[str, str] = {}
    for entry in listing.stdout.decode("utf-8", "replace").split("\0"):
        meta, _, path = entry.partition("\t")
        if meta.split(" ")[1:2] == ["blob"]:
            blobs[path] = meta.split(" ")[2]
    return blobs
