"""The ``gpu_tests`` section of ``.github/gpuproof.yml``: the GPU test jobs a
repository declares, and when each one runs.

```yaml
gpu_tests:
  - name: cuda                       # shown in the check run "gpuproof / gpu-tests (cuda)"
    labels: [cuda, sm_90]            # a runner must carry every label; sm_XY also asks
                                     # for compute capability >= X.Y
    requires: {memory_gb: 40, driver: "550"}   # optional: checked against nvidia-smi
    build: cargo test --no-run --features cuda  # built once on a CPU runner (label cpu);
                                                # the GPU runner only runs the binaries
    # or, to build and run on the GPU host (it then needs a Rust toolchain):
    # commands: ["cargo nextest run --features cuda --profile ci"]
    # junit: target/nextest/ci/junit.xml
    gpu_test_pattern: "gpu|cuda"     # which tests must launch a kernel (default: by name)
    timeout_minutes: 30
    env: {RUST_LOG: info}
    when: [trusted-push, command, "label:run-gpu-tests", default-branch]
```

``when`` (default ``[trusted-push, command]``): ``trusted-push`` runs on every push
to a pull request from this repository by an author with write permission;
``command`` on ``/gpuproof gpu-test``; ``label:NAME`` when someone with write
permission adds that label; ``default-branch`` on pushes to the default branch.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

TRIGGERS = ("trusted-push", "command", "default-branch")
DEFAULT_WHEN = ("trusted-push", "command")
DEFAULT_GPU_TEST_PATTERN = r"(?:^|[_:])(?:gpu|cuda|cudnn|cublas|wgpu|cubecl)(?:_|$|::)"
BUILD_LABEL = "cpu"
_JOB_KEYS = {
    "name",
    "labels",
    "requires",
    "build",
    "commands",
    "junit",
    "gpu_test_pattern",
    "timeout_minutes",
    "env",
    "when",
}
_REQUIREMENTS = {"compute_capability", "memory_gb", "driver"}
_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$")
_SM_LABEL = re.compile(r"^sm_(\d+)(\d)[a-z]?$")  # sm_90 -> 9.0, sm_100a -> 10.0


class GpuConfigError(ValueError):
    """A GPU job declaration cannot be used; the message names the job and the key."""


@dataclass(frozen=True)
class GpuJobSpec:
    name: str
    labels: tuple[str, ...]
    build: str = ""
    commands: tuple[str, ...] = ()
    junit: str = ""
    gpu_test_pattern: str = DEFAULT_GPU_TEST_PATTERN
    timeout_minutes: int = 30
    env: dict[str, str] = field(default_factory=dict)
    when: tuple[str, ...] = DEFAULT_WHEN
    requires: dict[str, str] = field(default_factory=dict)

    @property
    def check_name(self) -> str:
        return f"gpuproof / gpu-tests ({self.name})"

    def runs_on(self, trigger: str) -> bool:
        return trigger in self.when

    def to_json(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "labels": list(self.labels),
            "build": self.build,
            "commands": list(self.commands),
            "junit": self.junit,
            "gpu_test_pattern": self.gpu_test_pattern,
            "timeout_minutes": self.timeout_minutes,
            "env": dict(self.env),
            "when": list(self.when),
            "requires": dict(self.requires),
        }

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> GpuJobSpec:
        return cls(
            name=data["name"],
            labels=tuple(data["labels"]),
            build=data.get("build", ""),
            commands=tuple(data.get("commands", ())),
            junit=data.get("junit", ""),
            gpu_test_pattern=data.get("gpu_test_pattern", DEFAULT_GPU_TEST_PATTERN),
            timeout_minutes=int(data.get("timeout_minutes", 30)),
            env=dict(data.get("env", {})),
            when=tuple(data.get("when", DEFAULT_WHEN)),
            requires=dict(data.get("requires", {})),
        )


def gpu_requirements(labels: tuple[str, ...] | list[str], requires: dict[str, str]) -> dict[str, str]:
    """What a GPU must offer: ``requires`` plus the capability an ``sm_XY`` label names."""
    wanted = dict(requires)
    for label in labels:
        sm = _SM_LABEL.match(label)
        if sm and "compute_capability" not in wanted:
            wanted["compute_capability"] = f"{sm.group(1)}.{sm.group(2)}"
    return wanted


def parse_gpu_jobs(value: Any, source: str) -> tuple[GpuJobSpec, ...]:
    if value is None:
        return ()
    if not isinstance(value, list):
        raise GpuConfigError(f"{source}: 'gpu_tests' must be a list of jobs")
    jobs = tuple(_job(item, i, source) for i, item in enumerate(value))
    names = [job.name for job in jobs]
    repeated = sorted({n for n in names if names.count(n) > 1})
    if repeated:
        raise GpuConfigError(f"{source}: gpu_tests job name(s) used twice: {', '.join(repeated)}")
    return jobs


def _job(item: Any, index: int, source: str) -> GpuJobSpec:
    where = f"{source}: gpu_tests[{index}]"
    if not isinstance(item, dict):
        raise GpuConfigError(f"{where} must be a mapping")
    unknown = unknown_keys(item, _JOB_KEYS)
    if unknown:
        raise GpuConfigError(f"{where}: {unknown}")
    name = item.get("name")
    if not isinstance(name, str) or not _NAME.match(name):
        raise GpuConfigError(f"{where}: 'name' must be a short name of letters, digits, '-', '_' or '.'")
    where = f"{source}: gpu_tests job '{name}'"
    labels = _strings(item.get("labels"), f"{where}: 'labels'")
    if not labels:
        raise GpuConfigError(f"{where}: 'labels' must name at least one runner label, e.g. [cuda]")
    build = item.get("build", "")
    commands = _strings(item.get("commands", []), f"{where}: 'commands'")
    if not isinstance(build, str) or bool(build.strip()) == bool(commands):
        raise GpuConfigError(
            f"{where}: give exactly one of 'build' (a cargo test --no-run command) or 'commands'"
        )
    if build and not re.search(r"\bcargo\s+test\b.*--no-run", build):
        raise GpuConfigError(f"{where}: 'build' must be a `cargo test --no-run ...` command")
    when = _strings(item.get("when", list(DEFAULT_WHEN)), f"{where}: 'when'")
    for trigger in when:
        if trigger not in TRIGGERS and not (trigger.startswith("label:") and len(trigger) > 6):
            raise GpuConfigError(
                f"{where}: 'when' has '{trigger}'; allowed: {', '.join(TRIGGERS)}, label:NAME"
            )
    timeout = item.get("timeout_minutes", 30)
    if not isinstance(timeout, int) or isinstance(timeout, bool) or not 1 <= timeout <= 360:
        raise GpuConfigError(f"{where}: 'timeout_minutes' must be a whole number from 1 to 360")
    pattern = item.get("gpu_test_pattern", DEFAULT_GPU_TEST_PATTERN)
    try:
        re.compile(pattern)
    except (re.error, TypeError) as exc:
        raise GpuConfigError(f"{where}: 'gpu_test_pattern' is not a regular expression ({exc})") from None
    return GpuJobSpec(
        name=name,
        labels=labels,
        build=build.strip(),
        commands=commands,
        junit=_text(item.get("junit", ""), f"{where}: 'junit'"),
        gpu_test_pattern=pattern,
        timeout_minutes=timeout,
        env=_env(item.get("env", {}), where),
        when=when,
        requires=_requires(item.get("requires", {}), where),
    )


def unknown_keys(data: dict[Any, Any], allowed: set[str]) -> str:
    """The complaint about keys a mapping should not have ("" when it has none)."""
    unknown = sorted(set(map(str, data)) - allowed)
    return f"unknown key(s) {', '.join(unknown)}; allowed: {', '.join(sorted(allowed))}" if unknown else ""


def _strings(value: Any, what: str) -> tuple[str, ...]:
    if isinstance(value, str):
        value = [value]
    if not isinstance(value, list) or not all(isinstance(v, str) and v.strip() for v in value):
        raise GpuConfigError(f"{what} must be a list of non-empty strings, got {value!r}")
    return tuple(v.strip() for v in value)


def _text(value: Any, what: str) -> str:
    if not isinstance(value, str):
        raise GpuConfigError(f"{what} must be a string")
    return value


def _env(value: Any, where: str) -> dict[str, str]:
    if not isinstance(value, dict) or not all(
        isinstance(k, str) and re.match(r"^[A-Za-z_][A-Za-z0-9_]*$", k) for k in value
    ):
        raise GpuConfigError(f"{where}: 'env' must map variable names to values")
    return {k: str(v) for k, v in value.items()}


def _requires(value: Any, where: str) -> dict[str, str]:
    if not isinstance(value, dict):
        raise GpuConfigError(f"{where}: 'requires' must be a mapping")
    unknown = sorted(set(map(str, value)) - _REQUIREMENTS)
    if unknown:
        allowed = ", ".join(sorted(_REQUIREMENTS))
        raise GpuConfigError(f"{where}: 'requires' has unknown {unknown}; allowed: {allowed}")
    for key, wanted in value.items():
        try:
            float(str(wanted).split(".")[0])
        except ValueError:
            raise GpuConfigError(f"{where}: 'requires.{key}' must be a number, got {wanted!r}") from None
    return {str(k): str(v) for k, v in value.items()}


def gpu_mismatch(requirements: dict[str, str], gpus: list[dict[str, Any]]) -> str:
    """Why none of a runner's GPUs meets the requirements ("" when one does)."""
    if not requirements:
        return ""
    if not gpus:
        return "the runner reported no GPU"
    reasons = []
    for gpu in gpus:
        missing = [
            why for why in (_shortfall(key, wanted, gpu) for key, wanted in requirements.items()) if why
        ]
        if not missing:
            return ""
        reasons.append(f"{gpu.get('name', 'GPU')}: " + "; ".join(missing))
    return " | ".join(reasons)


def _version(text: str) -> tuple[int, ...]:
    return tuple(int(part) for part in re.findall(r"\d+", text)) or (0,)


def _shortfall(key: str, wanted: str, gpu: dict[str, Any]) -> str:
    if key == "compute_capability":
        have = str(gpu.get("compute_capability", "0"))
        return "" if _version(have) >= _version(wanted) else f"compute capability {have} < {wanted}"
    if key == "memory_gb":  # decimal GB, as GPUs are sold: an "80 GB" H100 reports 81559 MiB
        have_gb = int(gpu.get("memory_mib", 0)) * 2**20 / 1e9
        return "" if have_gb >= float(wanted) else f"memory {have_gb:.0f} GB < {wanted} GB"
    have = str(gpu.get("driver", "0"))
    return "" if _version(have) >= _version(wanted) else f"driver {have} < {wanted}"
