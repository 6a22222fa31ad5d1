"""The source files of one commit of a bare git mirror, written into a directory:
what the quality benchmarks analyse (Rust, Cargo manifests and kernel sources)."""

from __future__ import annotations

import subprocess
from pathlib import Path

EXPORT_SUFFIXES = (".rs", ".toml", ".ptx", ".cu", ".cuh", ".wgsl", ".metal")


class ExportError(Exception):
    """git or tar failed: the message says which and why."""


def present_suffixes(git_dir: Path, commit: str) -> set[str]:
    command = ["git", f"--git-dir={git_dir}", "ls-tree", "-r", "--name-only", commit]
    listing = subprocess.run(command, capture_output=True, text=True)
    if listing.returncode != 0:
        raise ExportError(f"git ls-tree {commit} failed: {listing.stderr.strip()[:400]}")
    names = listing.stdout.splitlines()
    return {suffix for suffix in EXPORT_SUFFIXES if any(n.endswith(suffix) for n in names)}


def export_sources(git_dir: Path, commit: str, dest: Path, suffixes: set[str]) -> None:
    """Write the commit's files with these suffixes under ``dest``."""
    specs = [f":(glob)**/*{suffix}" for suffix in EXPORT_SUFFIXES if suffix in suffixes]
    if not specs:
        return
    archive = subprocess.run(
        ["git", f"--git-dir={git_dir}", "archive", "--format=tar", commit, "--", *specs], capture_output=True
    )
    if archive.returncode != 0:
        detail = archive.stderr.decode("utf-8", "replace").strip()[:400]
        raise ExportError(f"git archive {commit} failed: {detail}")
    untar = subprocess.run(["tar", "-x", "-C", str(dest)], input=archive.stdout, capture_output=True)
    if untar.returncode != 0:
        raise ExportError(f"tar failed for {commit}: {untar.stderr.decode('utf-8', 'replace')[:400]}")
