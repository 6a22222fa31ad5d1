"""Unified diffs: which new-side lines of which files a change touches."""

from __future__ import annotations

import subprocess
from pathlib import Path

from unidiff.errors import UnidiffParseError
from unidiff.patch import PatchSet


class DiffError(ValueError):
    """The diff cannot be read or produced; the message says why."""


def touched_lines(diff_text: str, strip_prefix: str = "") -> dict[str, frozenset[int]]:
    """New-side line numbers each file's diff adds or changes. A deletion touches the
    lines on both sides of the gap it leaves. Deleted files are left out."""
    try:
        patch = PatchSet(diff_text)
    except UnidiffParseError as exc:
        raise DiffError(f"malformed diff: {exc}") from None
    if diff_text.strip() and not len(patch) and "diff --git" not in diff_text and "@@" in diff_text:
        raise DiffError("malformed diff: hunks without file headers")
    touched: dict[str, frozenset[int]] = {}
    for patched in patch:
        if patched.is_removed_file:
            continue
        path = patched.path
        if strip_prefix:
            if not path.startswith(strip_prefix):
                continue
            path = path[len(strip_prefix) :]
        lines: set[int] = set()
        for hunk in patched:
            previous = hunk.target_start - 1
            for line in hunk:
                if line.is_added or line.is_context:
                    previous = line.target_line_no or previous
                    if line.is_added:
                        lines.add(previous)
                elif line.is_removed:
                    lines.update((max(previous, 1), previous + 1))
        if lines:
            touched[path] = frozenset(lines)
    return touched


def git_diff(root: Path, base: str, head: str | None = None) -> tuple[str, str]:
    """The diff of ``base`` against ``head`` (default: the working tree), and the
    prefix of ``root`` inside its git repository."""

    def git(*args: str) -> str:
        try:
            done = subprocess.run(
                ["git", "-C", str(root), *args], capture_output=True, text=True, check=False
            )
        except FileNotFoundError:
            raise DiffError("git is not installed") from None
        if done.returncode != 0:
            raise DiffError(f"git {' '.join(args[:2])} failed: {done.stderr.strip()}")
        return done.stdout

    prefix = git("rev-parse", "--show-prefix").strip()
    spec = [f"{base}...{head}"] if head else [base]
    text = git("diff", "--no-color", "--no-ext-diff", "--unified=0", *spec, "--")
    return text, prefix
