"""Unified diffs: which new-side lines of which files a change touches."""

from __future__ import annotations

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
