#!/usr/bin/env python3
"""How far two labellers agree on the same descriptions: the ceiling for what a
labelled set can confirm about ``gpuproof review``.

Two label files in the format of ``bench/descriptions/*.jsonl`` (see
``quality_descriptions.py``), labelled independently for the same commits. The first
is taken as the truth and the second is scored against it exactly as the tool's output
would be: its claims stand in for predicted claims, its phrasings for predicted
phrasings, its gap labels for the gap prediction. Scoring the files the other way round
swaps precision and recall.

Usage::

    python bench/label_agreement.py TRUTH.jsonl OTHER.jsonl

Only commits present in both files are compared.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from quality_descriptions import GAP_RULE, Case, Run, read_cases, report, score_case, summarize


def as_run(case: Case) -> Run:
    """A labeller's answer for one case, in the shape of the tool's JSON report."""
    doc: dict[str, Any] = {
        "claims": [
            {"subject": c["subject"], "backed": c["backed"], "text": c["subject"]} for c in case.claims
        ],
        "phrasings": [{"text": p} for p in case.phrasings],
        "comments": [{"rule": GAP_RULE}] if case.gap_expected else [],
    }
    return Run(rc=0, doc=doc)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("truth", type=Path)
    parser.add_argument("other", type=Path)
    args = parser.parse_args(argv)
    truth = {c.raw.get("commit") or c.id: c for c in read_cases(args.truth)}
    other = {c.raw.get("commit") or c.id: c for c in read_cases(args.other)}
    shared = [commit for commit in truth if commit in other]
    if not shared:
        print("label_agreement: error: the files share no commit", file=sys.stderr)
        return 2
    print(f"{len(shared)} commits labelled in both files")
    scores = [score_case(truth[commit], as_run(other[commit])) for commit in shared]
    report(scores, summarize(scores))
    return 0


if __name__ == "__main__":
    sys.exit(main())
