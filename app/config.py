"""Per-repository configuration: ``.github/gpuproof.yml``.

Every key is optional. An invalid file is an error the user can act on: the
message names the key, what was found and what is allowed.

```yaml
gpu_paths: ["crates/my-kernels/**"]   # extra places whose code is GPU code
exclude: ["vendor/**"]                 # never scanned
severities: {cpu-detour: warning, stub-residue: "off"}
fallback_env_var: MYPROJ_ENABLE_GPU_FALLBACK
error_types: [GpuError, MyError]
baseline: .github/gpuproof-baseline.json
gpu_tests: [...]                       # GPU test jobs: see app/gpu_config.py
```
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from app.checks.model import Severity
from app.gpu_config import GpuConfigError, GpuJobSpec, parse_gpu_jobs, unknown_keys

CONFIG_PATH = ".github/gpuproof.yml"
DEFAULT_FALLBACK_ENV_VAR = "FERROTORCH_ENABLE_GPU_FALLBACK"
DEFAULT_ERROR_TYPES = ("GpuError",)
OFF = "off"


class ConfigError(ValueError):
    """The repository's gpuproof.yml cannot be used; the message says why."""


@dataclass(frozen=True)
class RepoConfig:
    gpu_paths: tuple[str, ...] = ()
    exclude: tuple[str, ...] = ()
    severities: dict[str, str] = field(default_factory=dict)  # rule id -> severity or "off"
    fallback_env_var: str = DEFAULT_FALLBACK_ENV_VAR
    error_types: tuple[str, ...] = DEFAULT_ERROR_TYPES
    baseline: str | None = None
    gpu_jobs: tuple[GpuJobSpec, ...] = ()

    def severity_for(self, rule_id: str, default: Severity) -> Severity | None:
        """The configured severity of a rule; None when the rule is switched off."""
        chosen = self.severities.get(rule_id)
        if chosen is None:
            return default
        return None if chosen == OFF else Severity(chosen)


_KEYS = {"gpu_paths", "exclude", "severities", "fallback_env_var", "error_types", "baseline", "gpu_tests"}


def _string_list(data: dict[str, Any], key: str, source: str) -> tuple[str, ...]:
    value = data.get(key, [])
    if isinstance(value, str):
        value = [value]
    if not isinstance(value, list) or not all(isinstance(v, str) and v for v in value):
        raise ConfigError(f"{source}: '{key}' must be a list of non-empty strings, got {value!r}")
    return tuple(value)


def parse_config(text: str, known_rules: set[str], source: str = CONFIG_PATH) -> RepoConfig:
    """Validate and parse the YAML text of a gpuproof.yml."""
    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" at line {mark.line + 1}, column {mark.column + 1}" if mark else ""
        problem = getattr(exc, "problem", None) or "invalid YAML"
        raise ConfigError(f"{source}: not valid YAML{where}: {problem}") from None
    if data is None:
        return RepoConfig()
    if not isinstance(data, dict):
        raise ConfigError(f"{source}: expected a mapping of settings, got {type(data).__name__}")
    unknown = unknown_keys(data, _KEYS)
    if unknown:
        raise ConfigError(f"{source}: {unknown}")

    severities_raw = data.get("severities", {}) or {}
    if not isinstance(severities_raw, dict):
        raise ConfigError(f"{source}: 'severities' must map rule ids to a severity")
    allowed = [s.value for s in Severity] + [OFF]
    severities: dict[str, str] = {}
    for rule_id, level in severities_raw.items():
        if rule_id not in known_rules:
            raise ConfigError(f"{source}: 'severities' names unknown rule '{rule_id}'")
        level_text = "off" if level is False else str(level)
        if level_text not in allowed:
            raise ConfigError(
                f"{source}: severity of '{rule_id}' is '{level}'; allowed: {', '.join(allowed)}"
            )
        severities[str(rule_id)] = level_text

    env_var = data.get("fallback_env_var", DEFAULT_FALLBACK_ENV_VAR)
    if not isinstance(env_var, str) or not env_var.replace("_", "").isalnum():
        raise ConfigError(f"{source}: 'fallback_env_var' must be an environment variable name")
    baseline = data.get("baseline")
    if baseline is not None and not isinstance(baseline, str):
        raise ConfigError(f"{source}: 'baseline' must be a path relative to the repository root")
    error_types = _string_list(data, "error_types", source) or DEFAULT_ERROR_TYPES
    try:
        gpu_jobs = parse_gpu_jobs(data.get("gpu_tests"), source)
    except GpuConfigError as exc:
        raise ConfigError(str(exc)) from None
    return RepoConfig(
        gpu_paths=_string_list(data, "gpu_paths", source),
        exclude=_string_list(data, "exclude", source),
        severities=severities,
        fallback_env_var=env_var,
        error_types=error_types,
        baseline=baseline,
        gpu_jobs=gpu_jobs,
    )


def load_config(root: Path, known_rules: set[str]) -> RepoConfig:
    """The config of a checkout, or the defaults when it has none."""
    path = root / CONFIG_PATH
    if not path.is_file():
        return RepoConfig()
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigError(f"{CONFIG_PATH}: cannot be read: {exc}") from None
    return parse_config(text, known_rules)
