"""``docs/rules.md`` and ``gpuproof explain``, generated from the rule registry."""

from __future__ import annotations

from app.checks.rules import RULES, Rule


def explain(rule: Rule) -> str:
    return (
        f"# {rule.id}\n\nSeverity: {rule.severity}. Spec: {rule.spec}."
        f"{' Applies to the functions a diff touches.' if rule.needs_diff else ''}\n\n"
        f"{rule.summary}.\n\n{rule.docs}\n"
    )


def rules_markdown() -> str:
    lines = [
        "# gpuproof rules",
        "",
        "Generated from `app/checks/rules/` by `gpuproof docs`; do not edit by hand.",
        "The spec (`spec/rust-gpu-discipline.md`) is the authority for every rule.",
        "",
        "Suppress a finding with `// gpuproof: allow(<rule>) -- <reason>` on the line,",
        "the line above it, or above the function. A suppression without a reason is",
        "itself reported (`suppression-without-reason`).",
        "",
        "| rule | severity | spec | flags |",
        "|---|---|---|---|",
    ]
    lines += [f"| [`{r.id}`](#{r.id}) | {r.severity} | {r.spec} | {r.summary} |" for r in RULES]
    lines.append("")
    for rule in RULES:
        body = explain(rule).replace("\n## ", "\n### ")
        lines.append(body.replace(f"# {rule.id}", f"## {rule.id}", 1))
    return "\n".join(lines).rstrip() + "\n"
