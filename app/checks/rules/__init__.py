"""The rule registry. Order matters: when two rules flag the same line, the one
listed first (the more specific) is reported."""

from __future__ import annotations

from app.checks.rules import (
    autograd_cpu_detour,
    cfg_gated_stub,
    cpu_detour,
    cpu_dispatch_arm,
    deferred_kernel,
    disabled_gpu_test,
    eprintln_fallback,
    fake_gpu_function,
    fallback_without_warn,
    forbidden_phrasing,
    gpu_code_without_test,
    gpu_test_ran_on_cpu,
    host_readback_per_op,
    missing_gap_report,
    reference_punt,
    shape_bypass,
    silent_fallback,
    stub_residue,
    suppression_without_reason,
    unbacked_claim,
)
from app.checks.rules.base import Hit, Rule

RULES: tuple[Rule, ...] = (
    fake_gpu_function.RULE,
    deferred_kernel.RULE,
    cfg_gated_stub.RULE,
    reference_punt.RULE,
    cpu_dispatch_arm.RULE,
    autograd_cpu_detour.RULE,
    host_readback_per_op.RULE,
    gpu_code_without_test.RULE,
    disabled_gpu_test.RULE,
    shape_bypass.RULE,
    eprintln_fallback.RULE,
    fallback_without_warn.RULE,
    silent_fallback.RULE,
    stub_residue.RULE,
    cpu_detour.RULE,
    suppression_without_reason.RULE,
    # Description rules: they read the PR title and body (gpuproof review).
    forbidden_phrasing.RULE,
    unbacked_claim.RULE,
    missing_gap_report.RULE,
    # Run-time rule: the GPU runner reports it.
    gpu_test_ran_on_cpu.RULE,
)
BY_ID: dict[str, Rule] = {rule.id: rule for rule in RULES}
SUPPRESSION_RULE = suppression_without_reason.RULE
DESCRIPTION_RULES: tuple[Rule, ...] = tuple(r for r in RULES if r.is_description_rule)

__all__ = ["BY_ID", "DESCRIPTION_RULES", "RULES", "SUPPRESSION_RULE", "Hit", "Rule"]
