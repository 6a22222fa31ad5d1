"""Unified diffs: which new-side lines of which files a change touches, and which of
them it only moves."""

from __future__ import annotations

from unidiff.errors import UnidiffParseError
from unidiff.patch import Hunk, PatchSet


class DiffError(ValueError):
    """The diff cannot be read or produced; the message says why."""


# A block of at least this many non-blank lines that the diff removes in one place and
# adds in another is moved, not written (what `git diff --color-moved` shows): fewer
# could be a coincidence ("}", "Ok(())").
MOVED_BLOCK_LINES = 3


def touched_lines(diff_text: str, strip_prefix: str = "") -> dict[str, frozenset[int]]:
    """New-side line numbers each file's diff adds or changes. A deletion touches the
    lines on both sides of the gap it leaves. Deleted files are left out."""
    patch = _parse(diff_text)
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


def moved_lines(diff_text: str) -> dict[str, frozenset[int]]:
    """New-side line numbers of the lines the diff only moves: runs of at least
    ``MOVED_BLOCK_LINES`` added lines whose text (indentation aside) the diff removes,
    in the same order, somewhere else (a function moved within a file or to another)."""
    removed: set[tuple[str, ...]] = set()
    added: list[tuple[str, list[tuple[int, str]]]] = []
    for patched in _parse(diff_text):
        for hunk in patched:
            for run in _runs(hunk, "-"):
                removed.update(_windows([text for _, text in run]))
            added.extend((patched.path, run) for run in _runs(hunk, "+"))
    moved: dict[str, set[int]] = {}
    for path, run in added:
        texts = [text for _, text in run]
        for start, window in enumerate(_windows(texts)):
            if window in removed:
                moved.setdefault(path, set()).update(n for n, _ in run[start : start + MOVED_BLOCK_LINES])
    return {path: frozenset(lines) for path, lines in moved.items()}


def _parse(diff_text: str) -> PatchSet:
    try:
        patch = PatchSet(diff_text)
    except UnidiffParseError as exc:
        raise DiffError(f"malformed diff: {exc}") from None
    if diff_text.strip() and not len(patch) and "diff --git" not in diff_text and "@@" in diff_text:
        raise DiffError("malformed diff: hunks without file headers")
    return patch


def _runs(hunk: Hunk, sign: str) -> list[list[tuple[int, str]]]:
    """The hunk's runs of consecutive removed ("-") or added ("+") lines, as (line
    number on that side, text without indentation), blank lines left out."""
    runs: list[list[tuple[int, str]]] = [[]]
    for line in hunk:
        if line.line_type != sign:
            if runs[-1]:
                runs.append([])
            continue
        text = line.value.strip()
        number = line.target_line_no if sign == "+" else line.source_line_no
        if text and number is not None:
            runs[-1].append((number, text))
    return [run for run in runs if run]


def _windows(texts: list[str]) -> list[tuple[str, ...]]:
    return [tuple(texts[i : i + MOVED_BLOCK_LINES]) for i in range(len(texts) - MOVED_BLOCK_LINES + 1)]
