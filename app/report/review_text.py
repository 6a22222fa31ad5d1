"""``gpuproof review --format text``: what the App would post, for a terminal."""

from __future__ import annotations

from typing import Any


def render_review_text(rendered: dict[str, Any]) -> str:
    out: list[str] = []
    for check in rendered["checks"]:
        out.append(f"== {check['name']}: {check['conclusion']} — {check['title']}")
        out.append(check["summary"])
        out.append("")
    comments = rendered["comments"]
    out.append(f"== {len(comments)} inline comment(s)")
    for comment in comments:
        first_line = comment["body"].split("\n", 1)[0]
        out.append(f"{comment['path']}:{comment['line']}: {first_line}")
    return "\n".join(out)
