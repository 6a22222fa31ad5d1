"""The `gpuproof` command end to end: formats, exit codes, bad input, baseline,
diff-aware mode and the cache."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from app.cli import main

FAKE_GPU = """\
pub fn gpu_relu(x: &CudaBuffer<f32>, dev: &GpuDevice) -> GpuResult<CudaBuffer<f32>> {
    let host = gpu_to_cpu(x, dev)?;
    let out: Vec<f32> = host.iter().map(|v| v.max(0.0)).collect();
    cpu_to_gpu(&out, dev)
}
"""

REAL_KERNEL = """\
pub fn gpu_scale(x: &CudaSlice<f32>, dev: &CudaDevice) -> Result<(), GpuError> {
    let f = dev.get_func("k", "scale").ok_or(GpuError::MissingKernel)?;
    unsafe { f.launch(LaunchConfig::for_num_elems(x.len() as u32), (x,)) }?;
    Ok(())
}
"""


def write(root: Path, rel: str, text: str) -> Path:
    path = root / rel
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(textwrap.dedent(text))
    return path


def run_json(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, dict[str, object]]:
    code = main(["check", *args, "--format", "json"])
    return code, json.loads(capsys.readouterr().out)


def test_json_contract_and_exit_code(workspace: Path, capsys: pytest.CaptureFixture[str]) -> None:
    write(workspace, "kernels/src/lib.rs", FAKE_GPU)
    code, report = run_json(capsys, str(workspace))
    assert code == 1
    (finding,) = report["findings"]  # type: ignore[misc]
    assert set(finding) >= {"rule", "severity", "path", "line", "end_line", "function", "message"}
    assert finding["path"] == "kernels/src/lib.rs"  # relative to the scanned root
    assert (finding["rule"], finding["function"], finding["line"]) == ("fake-gpu-function", "gpu_relu", 1)
    assert report["stats"]["files"] == 1  # type: ignore[index]


def test_clean_workspace_exits_zero(workspace: Path, capsys: pytest.CaptureFixture[str]) -> None:
    write(workspace, "kernels/src/lib.rs", REAL_KERNEL)
    code, report = run_json(capsys, str(workspace))
    assert (code, report["findings"]) == (0, [])


def test_text_report_shows_the_offending_line(workspace: Path, capsys: pytest.CaptureFixture[str]) -> None:
    write(workspace, "kernels/src/lib.rs", FAKE_GPU)
    assert main(["check", str(workspace)]) == 1
    out = capsys.readouterr().out
    assert "kernels/src/lib.rs" in out
    assert "[fake-gpu-function] in gpu_relu" in out
    assert "1 | pub fn gpu_relu" in out
    assert "1 error(s)" in out


def test_sarif_is_2_1_0_with_rules_and_results(workspace: Path, capsys: pytest.CaptureFixture[str]) -> None:
    write(workspace, "kernels/src/lib.rs", FAKE_GPU)
    main(["check", str(workspace), "--format", "sarif"])
    sarif = json.loads(capsys.readouterr().out)
    assert sarif["version"] == "2.1.0" and "sarif-2.1.0" in sarif["$schema"]
    run = sarif["runs"][0]
    rule_ids = [r["id"] for r in run["tool"]["driver"]["rules"]]
    (result,) = run["results"]
    assert rule_ids[result["ruleIndex"]] == result["ruleId"] == "fake-gpu-function"
    region = result["locations"][0]["physicalLocation"]["region"]
    assert region == {"startLine": 1, "endLine": 1}
    assert result["partialFingerprints"]["gpuproofFingerprint/v1"]


def test_missing_path_is_exit_2_without_traceback(tmp_path: Path) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "app.cli", "check", str(tmp_path / "nope")],
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 2
    assert "no such file or directory" in done.stderr
    assert "Traceback" not in done.stderr


def test_invalid_config_is_exit_2_with_the_reason(
    workspace: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    write(workspace, ".github/gpuproof.yml", "severities:\n  no-such-rule: error\n")
    assert main(["check", str(workspace)]) == 2
    assert "unknown rule 'no-such-rule'" in capsys.readouterr().err


def test_bad_input_files_get_notes_and_the_scan_completes(
    workspace: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    write(workspace, "kernels/src/lib.rs", FAKE_GPU)
    (workspace / "kernels/src/latin1.rs").write_bytes(b"// caf\xe9\npub fn f() {}\n")
    write(workspace, "kernels/src/broken.rs", "pub fn gpu_x( {{{ let = ;\n")
    (workspace / "kernels/src/huge.rs").write_text("pub fn gpu_y() { " + "let a = 1; " * 100_000 + "}")
    (workspace / "kernels/src/dangling.rs").symlink_to(workspace / "missing-target.rs")
    code, report = run_json(capsys, str(workspace))
    assert code == 1
    notes = {n["path"]: n["message"] for n in report["notes"]}  # type: ignore[union-attr]
    assert "not valid UTF-8" in notes["kernels/src/latin1.rs"]
    assert "syntax errors" in notes["kernels/src/broken.rs"]
    assert "cannot be read" in notes["kernels/src/dangling.rs"]
    assert [f["function"] for f in report["findings"]] == ["gpu_relu"]  # type: ignore[union-attr]
    assert report["stats"]["files"] == 4  # type: ignore[index]


def test_explain_and_unknown_rule(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["explain", "silent-fallback"]) == 0
    out = capsys.readouterr().out
    assert "## What it does" in out and "## Use instead" in out and "Step 3" in out
    assert main(["explain", "nope"]) == 2
    assert "unknown rule 'nope'" in capsys.readouterr().err


def test_suppression_with_and_without_reason(workspace: Path, capsys: pytest.CaptureFixture[str]) -> None:
    justified = "// gpuproof: allow(fake-gpu-function) -- reference impl for the CPU-only build, issue #4\n"
    write(workspace, "kernels/src/lib.rs", justified + FAKE_GPU)
    code, report = run_json(capsys, str(workspace))
    assert (code, report["findings"], report["stats"]["suppressed"]) == (0, [], 1)  # type: ignore[index]

    write(workspace, "kernels/src/lib.rs", "// gpuproof: allow(fake-gpu-function)\n" + FAKE_GPU)
    code, report = run_json(capsys, str(workspace))
    rules = sorted(f["rule"] for f in report["findings"])  # type: ignore[union-attr]
    assert (code, rules) == (1, ["fake-gpu-function", "suppression-without-reason"])


def test_baseline_fails_only_on_new_findings_and_survives_line_moves(
    workspace: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    lib = write(workspace, "kernels/src/lib.rs", FAKE_GPU)
    assert main(["baseline", str(workspace)]) == 0
    capsys.readouterr()
    baseline = json.loads((workspace / ".github/gpuproof-baseline.json").read_text())
    assert len(baseline["fingerprints"]) == 1

    write(workspace, ".github/gpuproof.yml", "baseline: .github/gpuproof-baseline.json\n")
    lib.write_text("// moved down by new lines\n\n\n" + FAKE_GPU)
    code, report = run_json(capsys, str(workspace))
    assert (code, report["findings"], report["stats"]["baselined"]) == (0, [], 1)  # type: ignore[index]

    lib.write_text(FAKE_GPU + FAKE_GPU.replace("gpu_relu", "gpu_relu6"))
    code, report = run_json(capsys, str(workspace))
    assert code == 1
    assert [f["function"] for f in report["findings"]] == ["gpu_relu6"]  # type: ignore[union-attr]

    code, report = run_json(capsys, str(workspace), "--no-baseline")
    assert len(report["findings"]) == 2  # type: ignore[arg-type]


def test_diff_mode_reports_only_touched_functions(
    workspace: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    write(workspace, "kernels/src/lib.rs", FAKE_GPU + FAKE_GPU.replace("gpu_relu", "gpu_tanh"))
    diff = workspace / "change.diff"
    diff.write_text(
        textwrap.dedent("""\
        diff --git a/kernels/src/lib.rs b/kernels/src/lib.rs
        --- a/kernels/src/lib.rs
        +++ b/kernels/src/lib.rs
        @@ -7,1 +7,1 @@
        -    let host = gpu_to_cpu(x, dev).unwrap();
        +    let host = gpu_to_cpu(x, dev)?;
        """)
    )
    _, report = run_json(capsys, str(workspace), "--diff", str(diff))
    assert [f["function"] for f in report["findings"]] == ["gpu_tanh"]  # type: ignore[union-attr]


def test_base_rev_mode_with_git(workspace: Path, capsys: pytest.CaptureFixture[str]) -> None:
    env = {
        **os.environ,
        "GIT_AUTHOR_NAME": "t",
        "GIT_AUTHOR_EMAIL": "t@t",
        "GIT_COMMITTER_NAME": "t",
        "GIT_COMMITTER_EMAIL": "t@t",
    }

    def git(*args: str) -> None:
        subprocess.run(["git", "-C", str(workspace), *args], check=True, capture_output=True, env=env)

    write(workspace, "kernels/src/lib.rs", FAKE_GPU)
    git("init", "-q")
    git("add", ".")
    git("commit", "-qm", "base")
    write(workspace, "kernels/src/new.rs", FAKE_GPU.replace("gpu_relu", "gpu_elu"))
    _, report = run_json(capsys, str(workspace), "--base", "HEAD")
    assert [f["function"] for f in report["findings"]] == []  # new.rs is untracked: not in `git diff`
    git("add", ".")
    _, report = run_json(capsys, str(workspace), "--base", "HEAD")
    assert [f["function"] for f in report["findings"]] == ["gpu_elu"]  # type: ignore[union-attr]
    assert main(["check", str(workspace), "--base", "no-such-rev"]) == 2
    assert "git diff" in capsys.readouterr().err


def test_malformed_diff_is_exit_2(workspace: Path, capsys: pytest.CaptureFixture[str]) -> None:
    write(workspace, "kernels/src/lib.rs", FAKE_GPU)
    bad = workspace / "bad.diff"
    bad.write_text("@@ -1,2 +1,2 @@\n-a\n+b\n")
    assert main(["check", str(workspace), "--diff", str(bad)]) == 2
    assert "malformed diff" in capsys.readouterr().err


def test_an_edit_to_the_extractor_retires_its_cached_facts(tmp_path: Path) -> None:
    """Facts cached by an older extractor are never served to a newer one, even when the
    edit forgot to bump EXTRACTOR_VERSION."""
    copy = tmp_path / "copy"
    shutil.copytree(
        Path(__file__).parents[1] / "app", copy / "app", ignore=shutil.ignore_patterns("__pycache__")
    )
    probe = [sys.executable, "-c", "from app.scan import _facts_version; print(_facts_version())"]

    def version() -> str:
        return subprocess.run(probe, cwd=copy, check=True, capture_output=True, text=True).stdout.strip()

    seen = {version()}
    for module in ("rust_index.py", "gpu_code.py"):  # the extractor, and what it imports
        source = copy / "app/checks" / module
        source.write_text(source.read_text() + "\n# an edit that changes what gets extracted\n")
        seen.add(version())
    assert len(seen) == 3


def test_warm_cache_gives_identical_results_and_lives_in_the_cache_dir(
    workspace: Path, capsys: pytest.CaptureFixture[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    cache = tmp_path / "my-cache"
    monkeypatch.setenv("GPUPROOF_CACHE_DIR", str(cache))
    write(workspace, "kernels/src/lib.rs", FAKE_GPU)
    write(workspace, "kernels/src/ok.rs", REAL_KERNEL)
    _, cold = run_json(capsys, str(workspace))
    assert list(cache.rglob("*.pickle"))
    _, warm = run_json(capsys, str(workspace))
    assert warm["findings"] == cold["findings"]
    assert warm["stats"]["cached_files"] == 2  # type: ignore[index]

    for entry in cache.rglob("*.pickle"):
        entry.write_bytes(b"not a pickle")  # a damaged cache is ignored, not trusted
    _, damaged = run_json(capsys, str(workspace))
    assert damaged["findings"] == cold["findings"]

    (workspace / "kernels/src/lib.rs").write_text(REAL_KERNEL.replace("gpu_scale", "gpu_scale2"))
    _, changed = run_json(capsys, str(workspace))
    assert changed["findings"] == []
