"""Scan a local checkout: find the Rust files, extract their facts (in parallel, and
through a cache keyed by file content), and run the analysis.

This is the filesystem edge around the pure core in ``app.checks``. The cache
lives in ``$GPUPROOF_CACHE_DIR`` (default ``~/.cache/gpuproof``): one entry per
distinct file content, plus the last result per scanned root, keyed by every
input that can change it, so an unchanged tree is answered without parsing.
"""

from __future__ import annotations

import gc
import hashlib
import os
import pickle
import tempfile
from collections.abc import Iterator, Mapping
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass
from functools import cache
from multiprocessing import get_context
from pathlib import Path

from app.checks.engine import Analysis, Touched, analyze
from app.checks.model import FileFacts, Note
from app.checks.rust_index import EXTRACTOR_VERSION, extract
from app.checks.workspace import SourceFile
from app.config import RepoConfig

_SKIP_DIRS = {"target", "node_modules", "__pycache__"}
_PARALLEL_MIN_BYTES = 2_000_000  # below this, starting worker processes costs more than it saves


class ScanError(Exception):
    """The scan cannot start (a missing path, say); the message says why."""


@dataclass
class ScanResult:
    analysis: Analysis
    files: int
    lines: int
    cached_files: int  # files whose facts came from the cache
    from_result_cache: bool


def cache_root() -> Path:
    configured = os.environ.get("GPUPROOF_CACHE_DIR")
    if configured:
        return Path(configured)
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "gpuproof"


def find_rust_files(root: Path, targets: list[Path], exclude: tuple[str, ...]) -> list[str]:
    """Paths (relative to root, "/"-separated) of the .rs files under the targets."""
    found: set[str] = set()
    for target in targets or [root]:
        if not target.exists():
            raise ScanError(f"{target}: no such file or directory")
        if target.is_file():
            if target.suffix == ".rs":
                found.add(_relative(root, target))
            continue
        for dirpath, dirnames, filenames in os.walk(target):
            dirnames[:] = sorted(d for d in dirnames if d not in _SKIP_DIRS and not d.startswith("."))
            for name in filenames:
                if name.endswith(".rs"):
                    found.add(_relative(root, Path(dirpath) / name))
    if exclude:
        from fnmatch import fnmatch

        found = {p for p in found if not any(fnmatch(p, pattern) for pattern in exclude)}
    return sorted(found)


def _relative(root: Path, path: Path) -> str:
    # Not resolve(): a symlinked file keeps its own name.
    relative = os.path.relpath(os.path.abspath(path), os.path.abspath(root))
    return Path(relative).as_posix()


def _digest(data: bytes) -> str:
    return hashlib.blake2b(data, digest_size=16).hexdigest()


@cache
def _facts_version() -> str:
    """The facts cache's key: the declared extractor version and the extractor's own
    source, so an edit to the extraction serves no stale facts even when nobody bumped
    the version."""
    checks = Path(__file__).parent / "checks"
    h = hashlib.blake2b(EXTRACTOR_VERSION.encode(), digest_size=8)
    for name in ("rust_index.py", "model.py", "gpu_code.py"):  # the extractor and what it imports
        h.update((checks / name).read_bytes())
    return f"{EXTRACTOR_VERSION}-{h.hexdigest()}"


@cache
def _code_version() -> str:
    """Changes whenever gpuproof's own analysis code does, so stale results are never reused."""
    package = Path(__file__).parent
    h = hashlib.blake2b(EXTRACTOR_VERSION.encode(), digest_size=16)
    for path in sorted(package.rglob("*.py")):
        h.update(path.read_bytes())
    return h.hexdigest()


def _extract_batch(batch: list[tuple[str, bytes]], cache_dir: str | None) -> list[tuple[str, bytes]]:
    """Worker side: extract, store each result in the cache, return them pickled."""
    gc.disable()  # extraction allocates many small objects; the cyclic GC only slows it
    out = []
    for key, data in batch:
        blob = pickle.dumps(extract(data), protocol=pickle.HIGHEST_PROTOCOL)
        if cache_dir:
            _write_atomic(Path(cache_dir) / key[:2] / f"{key}.pickle", blob)
        out.append((key, blob))
    return out


def _write_atomic(path: Path, blob: bytes) -> None:
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".tmp-")
        with os.fdopen(fd, "wb") as handle:
            handle.write(blob)
        os.replace(tmp, path)
    except OSError:
        pass  # a cache that cannot be written only makes the next scan slower


def _read_cached(path: Path) -> FileFacts | None:
    try:
        facts = pickle.loads(path.read_bytes())
    except (OSError, pickle.UnpicklingError, EOFError, AttributeError, TypeError):
        return None
    return facts if isinstance(facts, FileFacts) else None


def _batches(items: list[tuple[str, bytes]], count: int) -> Iterator[list[tuple[str, bytes]]]:
    """Split into batches of similar total size, several per worker for balance."""
    items = sorted(items, key=lambda kv: len(kv[1]), reverse=True)
    buckets: list[list[tuple[str, bytes]]] = [[] for _ in range(count)]
    sizes = [0] * count
    for item in items:
        i = sizes.index(min(sizes))
        buckets[i].append(item)
        sizes[i] += len(item[1])
    yield from (b for b in buckets if b)


def scan(
    root: Path,
    targets: list[Path],
    config: RepoConfig,
    touched: Touched | None = None,
    baseline: Mapping[str, int] | None = None,
    use_cache: bool = True,
) -> ScanResult:
    gc_was_enabled = gc.isenabled()
    gc.disable()
    try:
        return _scan(root, targets, config, touched, baseline, use_cache)
    finally:
        if gc_was_enabled:
            gc.enable()


def _scan(
    root: Path,
    targets: list[Path],
    config: RepoConfig,
    touched: Touched | None,
    baseline: Mapping[str, int] | None,
    use_cache: bool,
) -> ScanResult:
    if not root.is_dir():
        raise ScanError(f"{root}: not a directory")
    contents, notes = read_files(root, find_rust_files(root, targets, config.exclude))
    lines = sum(
        data.count(b"\n") + (1 if data and not data.endswith(b"\n") else 0) for data in contents.values()
    )
    cache_dir = cache_root() if use_cache else None
    result_path = result_key = None
    if cache_dir is not None:
        keys = sorted((rel, _digest(data)) for rel, data in contents.items())
        touched_key = sorted((p, sorted(v)) for p, v in touched.items()) if touched is not None else None
        basis = repr((_code_version(), config, keys, touched_key, sorted((baseline or {}).items())))
        result_key = hashlib.blake2b(basis.encode(), digest_size=16).hexdigest()
        root_key = hashlib.blake2b(str(root.resolve()).encode(), digest_size=8).hexdigest()
        result_path = cache_dir / "results" / f"{root_key}.pickle"
        cached = _read_result(result_path, result_key)
        if cached is not None:
            cached.notes[:0] = notes
            return ScanResult(cached, len(contents), lines, len(contents), True)

    sources, cached_files = load_sources(contents, use_cache)
    analysis = analyze(sources, config, touched, baseline)
    analysis.notes[:0] = notes
    if result_path is not None and result_key is not None:
        _write_atomic(result_path, pickle.dumps((result_key, analysis), protocol=pickle.HIGHEST_PROTOCOL))
    return ScanResult(analysis, len(contents), lines, cached_files, False)


def read_files(root: Path, paths: list[str]) -> tuple[dict[str, bytes], list[Note]]:
    """The bytes of each file, and a note for each one that cannot be used as is."""
    notes: list[Note] = []
    contents: dict[str, bytes] = {}
    for rel in paths:
        try:
            data = (root / rel).read_bytes()
        except OSError as exc:
            notes.append(Note(rel, f"cannot be read ({exc.strerror or exc}); skipped"))
            continue
        notes.extend(utf8_notes(rel, data))
        contents[rel] = data
    return contents, notes


def utf8_notes(rel: str, data: bytes) -> list[Note]:
    try:
        data.decode("utf-8")
    except UnicodeDecodeError as exc:
        return [
            Note(rel, f"not valid UTF-8 (byte {exc.start}); analysed with the invalid bytes left as they are")
        ]
    return []


def load_sources(contents: Mapping[str, bytes], use_cache: bool = True) -> tuple[list[SourceFile], int]:
    """The facts of every file, from the cache where its content was seen before and
    extracted (in parallel for large inputs) otherwise; and how many came cached."""
    gc_was_enabled = gc.isenabled()
    gc.disable()
    try:
        keys = {rel: _digest(data) for rel, data in contents.items()}
        cache_dir = cache_root() if use_cache else None
        facts_dir = cache_dir / f"facts-{_facts_version()}" if cache_dir is not None else None
        facts: dict[str, FileFacts] = {}
        missing: dict[str, bytes] = {}
        for rel, key in keys.items():
            hit = _read_cached(facts_dir / key[:2] / f"{key}.pickle") if facts_dir else None
            if hit is not None:
                facts[key] = hit
            else:
                missing[key] = contents[rel]
        cached_files = sum(1 for key in keys.values() if key not in missing)
        facts.update(_extract_all(missing, facts_dir))
        return [SourceFile(rel, facts[keys[rel]]) for rel in contents], cached_files
    finally:
        if gc_was_enabled:
            gc.enable()


def _read_result(path: Path, key: str) -> Analysis | None:
    try:
        stored_key, analysis = pickle.loads(path.read_bytes())
    except (OSError, pickle.UnpicklingError, EOFError, AttributeError, TypeError, ValueError):
        return None
    return analysis if stored_key == key and isinstance(analysis, Analysis) else None


def _extract_all(missing: dict[str, bytes], facts_dir: Path | None) -> dict[str, FileFacts]:
    if not missing:
        return {}
    total = sum(len(d) for d in missing.values())
    workers = min(os.cpu_count() or 1, len(missing))
    cache_dir = str(facts_dir) if facts_dir else None
    if workers < 2 or total < _PARALLEL_MIN_BYTES:
        return {key: pickle.loads(blob) for key, blob in _extract_batch(list(missing.items()), cache_dir)}
    out: dict[str, FileFacts] = {}
    with ProcessPoolExecutor(max_workers=workers, mp_context=get_context("fork")) as pool:
        futures = [
            pool.submit(_extract_batch, batch, cache_dir)
            for batch in _batches(list(missing.items()), workers * 2)
        ]
        for future in futures:
            for key, blob in future.result():
                out[key] = pickle.loads(blob)
    return out
