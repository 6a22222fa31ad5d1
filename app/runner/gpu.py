"""The GPU host: what nvidia-smi says about its GPUs, and building the tracer with the
host's own CUDA toolkit."""

from __future__ import annotations

import os
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

TRACER_SOURCE = Path(__file__).with_name("gpuproof_tracer.c")


class GpuHostError(RuntimeError):
    """The host lacks what GPU jobs need; the message says what."""


@dataclass(frozen=True)
class Gpu:
    index: int
    name: str
    driver: str
    memory_mib: int
    compute_capability: str
    uuid: str = ""  # what CUDA_VISIBLE_DEVICES names: indices shift under an outer mask, UUIDs do not

    def to_json(self) -> dict[str, object]:
        return {
            "index": self.index,
            "name": self.name,
            "driver": self.driver,
            "memory_mib": self.memory_mib,
            "compute_capability": self.compute_capability,
            "uuid": self.uuid,
        }


def gpus() -> list[Gpu]:
    smi = shutil.which("nvidia-smi")
    if smi is None:
        raise GpuHostError("nvidia-smi not found: no NVIDIA driver on this host")
    done = subprocess.run(
        [
            smi,
            "--query-gpu=index,name,driver_version,memory.total,compute_cap,uuid",
            "--format=csv,noheader,nounits",
        ],
        capture_output=True,
        text=True,
        check=False,
        timeout=30,
    )
    if done.returncode != 0:
        raise GpuHostError(f"nvidia-smi failed: {done.stderr.strip() or done.stdout.strip()}")
    found = []
    for line in done.stdout.strip().splitlines():
        index, name, driver, memory, capability, uuid = (part.strip() for part in line.split(","))
        found.append(Gpu(int(index), name, driver, int(float(memory)), capability, uuid))
    return found


def build_tracer(out_dir: Path, cuda_home: str | None = None) -> Path:
    """Compile the CUPTI tracer with this host's toolkit (once per host)."""
    home = Path(cuda_home or os.environ.get("CUDA_HOME") or "/usr/local/cuda")
    include = next(
        (p for p in (home / "extras/CUPTI/include", home / "include") if (p / "cupti.h").exists()), None
    )
    lib = next(
        (
            p
            for p in (home / "extras/CUPTI/lib64", home / "lib64", home / "targets/x86_64-linux/lib")
            if any(p.glob("libcupti.so*"))
        ),
        None,
    )
    if include is None or lib is None:
        raise GpuHostError(f"CUPTI not found under {home} (looked for cupti.h and libcupti.so)")
    compiler = shutil.which("nvcc") or str(home / "bin/nvcc")
    out_dir.mkdir(parents=True, exist_ok=True)
    target = out_dir / "libgpuproof_tracer.so"
    command = [
        compiler,
        "-shared",
        "-Xcompiler",
        "-fPIC",
        "-o",
        str(target),
        str(TRACER_SOURCE),
        f"-I{include}",
        f"-L{lib}",
        "-lcupti",
        f"-Xlinker=-rpath={lib}",
    ]
    done = subprocess.run(command, capture_output=True, text=True, check=False, timeout=300)
    if done.returncode != 0:
        raise GpuHostError(f"building the tracer failed: {done.stderr.strip()[-2000:]}")
    return target
