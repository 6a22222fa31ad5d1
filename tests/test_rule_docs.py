"""Every rule documents itself, and every documented example behaves as documented."""

from __future__ import annotations

import pytest

from app.checks.model import Finding
from app.checks.rules import RULES, Rule
from app.report.rules_doc import rules_markdown
from tests.conftest import run_analysis, run_review

DOCUMENTED = [pytest.param(rule, id=rule.id) for rule in RULES]
# Run-time rules need a GPU; their examples run in tests/test_runner.py and docs/gpu-proof.md.
STATIC = [pytest.param(rule, id=rule.id) for rule in RULES if not rule.runtime]


@pytest.mark.parametrize("rule", DOCUMENTED)
def test_rule_has_every_doc_section(rule: Rule) -> None:
    assert rule.missing_sections() == []
    assert rule.summary and rule.spec


def findings_of_example(rule: Rule, fixed: bool) -> list[Finding]:
    """Run a documented example: code rules over its Rust code; description rules over
    its PR text, with its Rust code (if any) as the whole diff."""
    pick = rule.fixed_example if fixed else rule.example
    if not rule.is_description_rule:
        code = pick()
        assert code, f"{rule.id} has no rust example"
        return run_analysis({"src/lib.rs": code}, diff_all=rule.needs_diff).findings
    text = pick("text")
    assert text, f"{rule.id} has no text example"
    return run_review({"src/lib.rs": pick()}, body=text).description


@pytest.mark.parametrize("rule", STATIC)
def test_example_triggers_the_rule(rule: Rule) -> None:
    found = findings_of_example(rule, fixed=False)
    assert rule.id in {f.rule for f in found}, [f.message for f in found]


@pytest.mark.parametrize("rule", STATIC)
def test_fixed_example_is_clean(rule: Rule) -> None:
    found = findings_of_example(rule, fixed=True)
    assert found == [], [f"{f.rule}: {f.message}" for f in found]


def test_docs_file_is_generated_from_the_registry() -> None:
    from pathlib import Path

    committed = (Path(__file__).parent.parent / "docs" / "rules.md").read_text(encoding="utf-8")
    assert committed == rules_markdown(), "docs/rules.md is stale: run `make docs`"


def test_rule_ids_match_the_design_contract() -> None:
    design_ids = {
        "fake-gpu-function",
        "deferred-kernel",
        "cfg-gated-stub",
        "reference-punt",
        "cpu-dispatch-arm",
        "autograd-cpu-detour",
        "host-readback-per-op",
        "gpu-code-without-test",
        "disabled-gpu-test",
        "shape-bypass",
        "silent-fallback",
        "eprintln-fallback",
        "fallback-without-warn",
        "stub-residue",
        "cpu-detour",
    }
    assert design_ids <= {rule.id for rule in RULES}
