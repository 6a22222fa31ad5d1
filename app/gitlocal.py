"""The local git checkout: diffs, trees at a revision, commit messages. The edge that
lets ``check --base`` and ``review`` work without GitHub."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path


class GitError(Exception):
    """A git command failed; the message carries git's own explanation."""


def _git(root: Path, *args: str, binary: bool = False, stdin: bytes | None = None) -> bytes:
    try:
        done = subprocess.run(["git", "-C", str(root), *args], input=stdin, capture_output=True, check=False)
    except FileNotFoundError:
        raise GitError("git is not installed") from None
    if done.returncode != 0:
        reason = done.stderr.decode("utf-8", "replace").strip().splitlines()
        raise GitError(f"git {' '.join(args[:2])} failed: {reason[-1] if reason else done.returncode}")
    return done.stdout


def _text(root: Path, *args: str) -> str:
    return _git(root, *args).decode("utf-8", "replace")


def toplevel(path: Path) -> Path:
    return Path(_text(path, "rev-parse", "--show-toplevel").strip())


def resolve(root: Path, rev: str) -> str:
    return _text(root, "rev-parse", "--verify", "--quiet", f"{rev}^{{commit}}").strip()


def prefix(root: Path) -> str:
    """Where ``root`` sits inside its repository ("" at the top)."""
    return _text(root, "rev-parse", "--show-prefix").strip()


def diff(root: Path, base: str, head: str | None = None) -> str:
    """``base...head`` (what a pull request shows), or ``base`` against the working
    tree when there is no head."""
    spec = [f"{base}...{head}"] if head else [base]
    return _text(root, "diff", "--no-color", "--no-ext-diff", "--unified=0", *spec, "--")


def files_at(root: Path, rev: str, suffix: str) -> dict[str, bytes]:
    """Every file of the tree at ``rev`` whose name ends with ``suffix``, read from git
    (no checkout needed)."""
    listing = _git(root, "ls-tree", "-r", "-z", "--full-tree", rev).split(b"\0")
    entries = []
    for line in listing:
        if not line:
            continue
        meta, _, name = line.partition(b"\t")
        _mode, kind, sha = meta.decode().split(" ")
        if kind == "blob" and name.decode("utf-8", "replace").endswith(suffix):
            entries.append((name.decode("utf-8", "replace"), sha))
    if not entries:
        return {}
    out = _git(root, "cat-file", "--batch", stdin="".join(f"{sha}\n" for _, sha in entries).encode())
    files: dict[str, bytes] = {}
    pos = 0
    for path, _sha in entries:
        header_end = out.index(b"\n", pos)
        size = int(out[pos:header_end].split(b" ")[2])
        files[path] = out[header_end + 1 : header_end + 1 + size]
        pos = header_end + 1 + size + 1
    return files


def show(root: Path, rev: str, path: str) -> str | None:
    """A file's text at a revision, or None when it does not exist there."""
    try:
        return _text(root, "show", f"{rev}:{path}")
    except GitError:
        return None


def messages(root: Path, base: str, head: str) -> list[str]:
    """Commit messages of ``base..head``, newest first."""
    raw = _text(root, "log", "--format=%B%x00", f"{base}..{head}")
    return [m.strip() for m in raw.split("\0") if m.strip()]


def github_url(root: Path) -> str | None:
    """``https://github.com/owner/repo`` when the ``origin`` remote is on GitHub."""
    try:
        url = _text(root, "remote", "get-url", "origin").strip()
    except GitError:
        return None
    found = re.match(r"(?:https://|git@|ssh://git@)github\.com[:/]([\w.-]+/[\w.-]+?)(?:\.git)?/?$", url)
    return f"https://github.com/{found.group(1)}" if found else None
