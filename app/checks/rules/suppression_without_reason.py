from __future__ import annotations

from app.checks.model import Severity
from app.checks.rules.base import Rule

RULE = Rule(
    id="suppression-without-reason",
    severity=Severity.ERROR,
    spec="DESIGN.md (suppressions)",
    summary="`// gpuproof: allow(<rule>)` with no `-- <reason>`",
    check=None,
    doc="""
    ## What it does
    Flags a suppression comment that gives no reason, and ignores it: the finding
    it meant to silence is still reported.

    ## Why is this bad?
    A suppression is a claim that a pattern is legitimate here (an end-of-pipeline
    readback, a CLI where the user chose the CPU). A claim without its reason
    cannot be reviewed, and "why is this allowed?" is exactly the question the
    spec asks reviewers to answer.

    ## Example
    ```rust
    pub fn gpu_argsort(x: &GpuTensor) -> Result<GpuTensor, GpuError> {
        // gpuproof: allow(cpu-detour)
        let keys = x.to_cpu()?;
        launch_sort_kernel(&keys)
    }
    ```

    ## Use instead
    ```rust
    pub fn gpu_argsort(x: &GpuTensor) -> Result<GpuTensor, GpuError> {
        // gpuproof: allow(cpu-detour) -- keys are tiny and sorted once at model load, issue #12
        let keys = x.to_cpu()?;
        launch_sort_kernel(&keys)
    }
    ```
    """,
)
