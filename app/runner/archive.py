"""Build on a CPU runner, run on a GPU runner: the archive of test binaries.

``cargo test --no-run --message-format=json`` lists every test executable it built
(``compiler-artifact`` messages whose profile is a test). They go into a tar.gz with
``manifest.json``: the repository and commit they were built from, and per binary its
name, the crate directory it runs in (cargo runs tests there) and its SHA-256. The App
stores the archive with its checksum; the GPU runner checks the archive's checksum,
the commit, and every binary's checksum before anything runs.
"""

from __future__ import annotations

import hashlib
import io
import json
import os
import shlex
import tarfile
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import Any

MANIFEST = "manifest.json"


class ArchiveError(RuntimeError):
    """The archive cannot be trusted or used; the message says why."""


@dataclass(frozen=True)
class TestBinary:
    name: str  # the cargo target, e.g. "mycrate" or "integration"
    file: str  # path inside the archive
    crate_dir: str  # relative to the repository root
    sha256: str


def build_command(spec_build: str) -> list[str]:
    """The configured build command, asking cargo for JSON messages."""
    argv = shlex.split(spec_build)
    if not any(a.startswith("--message-format") for a in argv):
        extra = argv.index("--") if "--" in argv else len(argv)
        argv[extra:extra] = ["--message-format=json"]
    return argv


def built_test_binaries(cargo_json: str, source_root: Path) -> list[tuple[str, Path, str]]:
    """(target name, executable, crate directory) of every test binary cargo built."""
    found = []
    for line in cargo_json.splitlines():
        if not line.startswith("{"):
            continue
        message = json.loads(line)
        if message.get("reason") != "compiler-artifact" or not message.get("executable"):
            continue
        if not (message.get("profile") or {}).get("test"):
            continue
        crate = Path(message["manifest_path"]).parent
        try:
            crate_dir = str(crate.resolve().relative_to(source_root.resolve()))
        except ValueError:
            crate_dir = "."
        found.append((message["target"]["name"], Path(message["executable"]), crate_dir))
    return found


def sha256_of(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as data:
        for chunk in iter(lambda: data.read(1 << 20), b""):
            digest.update(chunk)
    return digest.hexdigest()


def pack(executables: list[tuple[str, Path, str]], repository: str, sha: str, out: Path) -> dict[str, Any]:
    binaries = []
    with tarfile.open(out, "w:gz") as archive:
        for i, (name, path, crate_dir) in enumerate(executables):
            inside = f"bin/{i}-{path.name}"
            archive.add(path, arcname=inside)
            binaries.append(TestBinary(name, inside, crate_dir, sha256_of(path)).__dict__)
        manifest = {"repository": repository, "sha": sha, "binaries": binaries}
        data = json.dumps(manifest, indent=2).encode()
        info = tarfile.TarInfo(MANIFEST)
        info.size = len(data)
        archive.addfile(info, io.BytesIO(data))
    return manifest


def unpack(
    archive_path: Path, expected_sha256: str, repository: str, sha: str, into: Path
) -> list[TestBinary]:
    """Check and extract an archive; returns its test binaries, ready to run."""
    if not expected_sha256 or sha256_of(archive_path) != expected_sha256:
        raise ArchiveError("the archive's SHA-256 differs from the one recorded when it was built")
    into.mkdir(parents=True, exist_ok=True)
    with tarfile.open(archive_path, "r:gz") as archive:
        for member in archive:
            parts = PurePosixPath(member.name).parts
            if not member.isfile() or member.name.startswith("/") or ".." in parts:
                raise ArchiveError(f"the archive holds an unsafe entry: {member.name!r}")
        archive.extractall(into, filter="data")
    manifest = json.loads((into / MANIFEST).read_text())
    if manifest.get("repository") != repository or manifest.get("sha") != sha:
        raise ArchiveError(
            f"the archive was built from {manifest.get('repository')}@{str(manifest.get('sha'))[:12]}, "
            f"not {repository}@{sha[:12]}"
        )
    binaries = [TestBinary(**b) for b in manifest["binaries"]]
    for binary in binaries:
        path = into / binary.file
        if sha256_of(path) != binary.sha256:
            raise ArchiveError(f"{binary.file}: its SHA-256 differs from the manifest's")
        os.chmod(path, 0o755)
    return binaries
