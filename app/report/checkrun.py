"""A review rendered as GitHub would show it: the "gpuproof / code" and "gpuproof /
description" check runs (conclusion, title, Markdown summary, annotations) and the
inline review comments. Summaries stay under GitHub's 65,535-character limit."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from app.checks.claims import Claim, ReviewAnswers, shown_paths
from app.checks.model import Finding, Severity
from app.checks.review import Review
from app.checks.rules import BY_ID

GITHUB_TEXT_LIMIT = 65_535
MAX_TABLE_ROWS = 150
CODE_CHECK = "gpuproof / code"
DESCRIPTION_CHECK = "gpuproof / description"
_LEVEL = {Severity.ERROR: "failure", Severity.WARNING: "warning", Severity.NOTE: "notice"}

# path, line -> Markdown for that location (a link when the repository is known)
Linker = Callable[[str, int], str]


def plain_location(path: str, line: int) -> str:
    return f"`{path}:{line}`"


def github_linker(repository_url: str, sha: str) -> Linker:
    base = repository_url.rstrip("/")
    return lambda path, line: f"[`{path}:{line}`]({base}/blob/{sha}/{path}#L{line})"


def render(review: Review, link: Linker = plain_location) -> dict[str, Any]:
    return {
        "checks": [code_check(review, link), description_check(review, link)],
        "comments": inline_comments(review),
        "claims": [c.to_json() for c in review.claims],
        "phrasings": [
            {"text": _quoted(f.message), "line": f.line}
            for f in review.description
            if f.rule == "forbidden-phrasing"
        ],
        "questions": [a.to_json() for a in review.answers],
    }


def code_check(review: Review, link: Linker) -> dict[str, object]:
    findings = review.code.findings
    errors = sum(1 for f in findings if f.severity == Severity.ERROR)
    warnings = len(findings) - errors
    # The diff's other files (docs, manifests, kernel sources) are read, not checked.
    rust_files = [path for path in review.touched if path.endswith(".rs")]
    if not rust_files:
        conclusion, title = "neutral", "No Rust code in this change"
    elif errors:
        conclusion, title = "failure", f"{errors} error(s), {warnings} warning(s) in the changed code"
    else:
        conclusion = "success"
        title = (
            f"{warnings} warning(s) in the changed code" if warnings else "No findings in the changed code"
        )
    checked = (
        f"{len(rust_files)} changed Rust file(s) checked against the rust-gpu-discipline rules"
        if rust_files
        else "the rust-gpu-discipline rules apply to Rust files only"
    )
    parts = [f"**{title}** — {checked}."]
    if findings:
        parts.append(_findings_table(findings, link))
        parts.append(_rule_details(findings))
    if review.code.notes:
        parts.append(
            "<details><summary>Notes on the input</summary>\n\n"
            + "\n".join(f"- `{n.path}`: {n.message}" for n in review.code.notes)
            + "\n</details>"
        )
    return {
        "name": CODE_CHECK,
        "conclusion": conclusion,
        "title": title,
        "summary": fit("\n\n".join(parts)),
        "annotations": [_annotation(f) for f in findings],
    }


def description_check(review: Review, link: Linker) -> dict[str, object]:
    findings = review.description
    errors = sum(1 for f in findings if f.severity == Severity.ERROR)
    unbacked = [c for c in review.claims if not c.backed]
    bits = []
    if unbacked:
        bits.append(f"{len(unbacked)} of {len(review.claims)} GPU claim(s) not backed by the code")
    phrasing = sum(1 for f in findings if f.rule == "forbidden-phrasing")
    if phrasing:
        bits.append(f"{phrasing} forbidden phrasing(s)")
    if any(f.rule == "missing-gap-report" for f in findings):
        bits.append("no gap report for incomplete GPU work")
    if bits:
        title = "; ".join(bits)
    elif review.claims:
        title = f"All {len(review.claims)} GPU claim(s) backed by the code"
    else:
        title = "No GPU claims; no forbidden phrasing"
    parts = [f"**{title[0].upper() + title[1:]}**"]
    # The phrasing and gap-report findings come before the claims table, whose length
    # grows with the claims: cut to GitHub's limit, the table loses rows, not them.
    other = [f for f in findings if f.rule != "unbacked-claim"]
    if other:
        parts.append("\n".join(f"- **{f.rule}** ({_where(f)}): {f.message}" for f in other))
    if review.claims:
        parts.append(_claims_table(review.claims, link))
    parts.append(_questions(review, link))
    annotations = [
        {
            "path": item.path,
            "start_line": item.fn.fn_line,
            "end_line": item.fn.fn_line,
            "annotation_level": "failure",
            "title": "unbacked-claim",
            "message": f'The description claims "{claim.text}"; missing: ' + "; ".join(claim.missing),
        }
        for claim in unbacked
        for item in claim.functions
    ]
    return {
        "name": DESCRIPTION_CHECK,
        "conclusion": "failure" if errors else "success",
        "title": title,
        "summary": fit("\n\n".join(parts)),
        "annotations": annotations,
    }


def inline_comments(review: Review) -> list[dict[str, object]]:
    """One comment per code finding on a line the diff adds or changes (GitHub only
    accepts review comments on lines of the diff's right side)."""
    comments: list[dict[str, object]] = []
    for f in review.code.findings:
        if f.line not in review.touched.get(f.path, frozenset()):
            continue
        rule = BY_ID[f.rule]
        body = (
            f"**gpuproof · {f.rule}** ({f.severity}): {f.message}\n\n"
            f"<sub>Spec {rule.spec}. Details: `gpuproof explain {f.rule}`. If this is legitimate here, "
            f"say why: `// gpuproof: allow({f.rule}) -- <reason>`.</sub>\n"
            f"<!-- gpuproof:finding {f.fingerprint} -->"
        )
        comments.append({"path": f.path, "line": f.line, "body": body, "rule": f.rule})
    return comments


def fit(text: str, limit: int = GITHUB_TEXT_LIMIT) -> str:
    """Cut text to GitHub's limit at a line boundary, saying that it was cut."""
    if len(text) <= limit:
        return text
    note = (
        f"\n\n… truncated ({len(text) - limit:,} more characters). Run `gpuproof review` on "
        f"the branch for the full report."
    )
    cut = text.rfind("\n", 0, limit - len(note))
    return text[: cut if cut > 0 else limit - len(note)] + note


def _findings_table(findings: Sequence[Finding], link: Linker) -> str:
    rows = ["| | rule | where | function | finding |", "|---|---|---|---|---|"]
    for f in findings[:MAX_TABLE_ROWS]:
        icon = "❌" if f.severity == Severity.ERROR else "⚠️"
        rows.append(f"| {icon} | `{f.rule}` | {link(f.path, f.line)} | `{f.function}` | {_cell(f.message)} |")
    if len(findings) > MAX_TABLE_ROWS:
        rows.append(f"\n… and {len(findings) - MAX_TABLE_ROWS} more (see the annotations).")
    return "\n".join(rows)


def _rule_details(findings: Sequence[Finding]) -> str:
    parts = []
    for rule_id in sorted({f.rule for f in findings}):
        rule = BY_ID[rule_id]
        parts.append(
            f"**`{rule_id}`** (spec {rule.spec}): {rule.summary}.\n\n{rule.section('Why is this bad?')}"
        )
    return "<details><summary>Why these rules</summary>\n\n" + "\n\n".join(parts) + "\n</details>"


def _claims_table(claims: Sequence[Claim], link: Linker) -> str:
    rows = ["| claim | functions | verdict | missing evidence |", "|---|---|---|---|"]
    for claim in claims[:MAX_TABLE_ROWS]:
        functions = (
            ", ".join(f"`{f.fn.qualname}` {link(f.path, f.fn.fn_line)}" for f in claim.functions) or "—"
        )
        verdict = (
            "✅ backed" if claim.backed else ("❓ unverifiable" if not claim.functions else "❌ unbacked")
        )
        missing = "<br>".join(_cell(m) for m in claim.missing) or "—"
        rows.append(f"| {_cell(claim.text)} | {functions or '—'} | {verdict} | {missing} |")
    return "\n".join(rows)


def _questions(review: Review, link: Linker) -> str:
    head = "### The hostile reviewer (spec 4e)\n\n"
    if not review.answers and review.kernel_sources:
        return head + (
            f"The diff adds or changes no GPU op in Rust. It changes kernel source "
            f"({shown_paths(review.kernel_sources)}), which gpuproof does not read: these questions "
            "stay unanswered for it."
        )
    if not review.answers:
        return head + "The diff adds or changes no GPU op."
    blocks = [_answers_block(a, link) for a in review.answers]
    if review.ops_changed > len(review.answers):
        blocks.append(f"… and {review.ops_changed - len(review.answers)} more GPU op(s) not questioned here.")
    return head + "\n\n".join(blocks)


def _answers_block(answers: ReviewAnswers, link: Linker) -> str:
    item = answers.function
    unanswered = "**unanswered**"
    rows = [
        ("Where is the kernel launched?", answers.kernel_launch or unanswered),
        ("Where is the data allocated in device memory?", answers.device_memory or unanswered),
        ("Which test exercises it on the GPU?", answers.gpu_test or unanswered),
        (
            "Would that test pass on a machine with no GPU, and what would it test?",
            answers.without_gpu or unanswered,
        ),
    ]
    table = "\n".join(f"| {q} | {_cell(a)} |" for q, a in rows)
    return (
        f"<details><summary><code>{item.fn.qualname}</code> ({link(item.path, item.fn.fn_line)})"
        f"</summary>\n\n| question | answer from the code |\n|---|---|\n{table}\n</details>"
    )


def _annotation(f: Finding) -> dict[str, object]:
    return {
        "path": f.path,
        "start_line": f.line,
        "end_line": f.end_line,
        "annotation_level": _LEVEL[f.severity],
        "title": f.rule,
        "message": f.message,
    }


def _where(f: Finding) -> str:
    return "title" if f.line == 0 else f"line {f.line}"


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def _quoted(message: str) -> str:
    start = message.find('"')
    end = message.find('"', start + 1)
    return message[start + 1 : end] if 0 <= start < end else message
