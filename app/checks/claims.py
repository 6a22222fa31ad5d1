"""GPU claims in a PR description, held against the code the diff changes (spec
Step 4 and 5), and the hostile reviewer's questions of 4e answered from the code."""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass, field

from app.checks.engine import HOST_DETOUR_RULES
from app.checks.gpu_tests import gpu_test_reach, is_gpu_test
from app.checks.model import Finding
from app.checks.prose import Sentence, names_subject, subject_words
from app.checks.rules import disabled_gpu_test
from app.checks.workspace import IndexedFunction, Workspace

_DONE = (
    r"(?:implemented|implements|implement|added|adds|wrote|writes|landed|lands|introduced|introduces"
    r"|ported|ports|moved|moves|brought|brings|enabled|enables|built|builds|shipped|ships|now does)"
)
_TARGET = r"(?:the\s+)?(?:gpu|gpus|cuda|device|wgpu|cubecl|metal|accelerator)\b"
_X = r"(?P<x>[\w<>\-/+.,()' ]{2,80}?)"
CLAIM_PATTERNS = tuple(
    re.compile(p, re.I)
    for p in (
        rf"\b{_DONE}\s+(?:a\s+|an\s+)?(?:gpu|cuda|cubecl|wgpu|ptx|device)[- ](?:side\s+)?"
        rf"(?:support|kernels?|path|implementation|version|backend|forward|backward|port)s?\s+(?:for|of)\s+{_X}"
        r"(?=\s*(?:[.;:!]|$|\s+(?:with|using|via|and|so|which|that|—|-|\()))",
        rf"\b{_DONE}\s+{_X}\s+(?:on|for|to|in)\s+{_TARGET}",
        rf"\b(?:gpu|cuda)[- ]accelerated\s+{_X}(?=\s*(?:[.;:!,]|$|\s+(?:with|using|via|and|for)))",
        rf"\b{_X}\s+(?:is|are)\s+(?:now\s+)?(?:fully\s+)?(?:gpu|cuda)[- ]accelerated",
        rf"\b{_X}\s+(?:now\s+)?(?:runs|run|executes|execute|is computed|are computed|lives|live)"
        rf"\s+(?:entirely\s+|fully\s+|natively\s+)?on\s+{_TARGET}",
        rf"\b(?:gpu|cuda|cubecl|wgpu|ptx)\s+(?:forward\s+|backward\s+)?(?:kernels?|path|implementation)\s+for\s+{_X}"
        r"(?=\s*(?:[.;:!,]|$|\s+(?:with|using|via|and)))",
        rf"^(?:\w+(?:\([\w,\s-]*\))?:\s*)?{_X}\s+(?:cuda|gpu)\s+(?:forward\s+|backward\s+)?(?:kernel|path)s?\b",
    )
)
# What turns a sentence into a negation, a plan or one of the spec's underclaims.
_NOT_A_CLAIM = re.compile(
    r"\b(?:not|no|never|without|cannot|can't|doesn't|don't|isn't|aren't|won't|yet to|todo|planned"
    r"|plan to|will|would|should|could|might|future|follow[- ]?up|scaffolding|stub|stubbed|reference"
    r"|pre-flight|instead of|rather than|removed?|revert(?:ed|s)?|drop(?:ped|s)?)\b",
    re.I,
)
_DETOUR_RULES = HOST_DETOUR_RULES | {"cpu-detour"}
_STUB_RULES = frozenset({"deferred-kernel", "stub-residue"})


@dataclass
class Claim:
    text: str
    subject: str
    line: int
    functions: list[IndexedFunction] = field(default_factory=list)
    missing: list[str] = field(default_factory=list)

    @property
    def backed(self) -> bool:
        return bool(self.functions) and not self.missing

    def to_json(self) -> dict[str, object]:
        return {
            "text": self.text,
            "subject": self.subject,
            "line": self.line,
            "functions": [f"{f.path}::{f.fn.qualname}" for f in self.functions],
            "backed": self.backed,
            "missing": self.missing,
        }


def extract_claims(sentences: Iterable[Sentence]) -> list[Claim]:
    claims: list[Claim] = []
    for sentence in sentences:
        for clause in re.split(
            r"\s*(?:;|\s\+\s|,\s+and\s+|\s+and\s+(?=(?:added|implemented|ported)))\s*", sentence.text
        ):
            for pattern in CLAIM_PATTERNS:
                found = pattern.search(clause)
                if not found:
                    continue
                if _NOT_A_CLAIM.search(clause[: found.end()]):
                    break
                subject = found.group("x").strip(" ,.-")
                if subject_words(subject):
                    claims.append(Claim(clause, subject, sentence.line))
                break
    return claims


def judge(ws: Workspace, claim: Claim, changed: list[IndexedFunction], findings: list[Finding]) -> None:
    """Resolve the claim to the functions the diff changes and say what evidence is
    missing (empty when the claim is backed)."""
    subject = subject_words(claim.subject)
    named = [f for f in changed if names_subject(f.fn.qualname, subject)]
    gpu_named = [f for f in named if f.claim or f.evidence]
    claim.functions = gpu_named or named
    if not claim.functions:
        claim.missing = [
            f"no function the diff adds or changes matches `{claim.subject}`: the claim cannot be verified"
        ]
        return
    reach = gpu_test_reach(ws)
    for item in claim.functions:
        where = f"`{item.fn.qualname}` ({item.path}:{item.fn.fn_line})"
        if not item.evidence:
            claim.missing.append(
                f"{where}: no backend evidence (no kernel launch, BLAS call or "
                f"kernel source, itself or through its callees) — 4a"
            )
        own = [f for f in findings if f.path == item.path and item.fn.line <= f.line <= item.fn.end_line]
        for finding in own:
            if finding.rule in _DETOUR_RULES:
                claim.missing.append(f"{where}: {finding.rule} at {finding.path}:{finding.line} — 4b/Step 3")
            elif finding.rule in _STUB_RULES:
                claim.missing.append(f"{where}: {finding.rule} at {finding.path}:{finding.line} — 4c")
        if id(item) not in reach:
            claim.missing.append(f"{where}: no GPU test reaches it — 4d")


@dataclass
class ReviewAnswers:
    """The hostile reviewer's questions (spec 4e) for one GPU op, answered from code;
    an empty answer is an unanswered question."""

    function: IndexedFunction
    kernel_launch: str
    device_memory: str
    gpu_test: str
    without_gpu: str

    def to_json(self) -> dict[str, str]:
        return {
            "function": f"{self.function.path}::{self.function.fn.qualname}",
            "kernel_launch": self.kernel_launch,
            "device_memory": self.device_memory,
            "gpu_test": self.gpu_test,
            "without_gpu": self.without_gpu,
        }


def answer_questions(ws: Workspace, op: IndexedFunction) -> ReviewAnswers:
    reached = [ws.functions[i] for i in sorted(ws.reached_from([op]))]
    reached.sort(key=lambda f: f is not op)  # the op itself first
    launch = _first_signal(reached, {"launch"}, prefer=("launch", "gemm", "dispatch", "cublas"))
    memory = _first_signal(reached, {"device_memory", "upload"})
    tests = [c for c in ws.callers_of(op) if is_gpu_test(c)]
    if not tests:
        return ReviewAnswers(op, launch, memory, "", "")
    test = tests[0]
    memory = memory or _first_signal([test], {"device_memory", "upload"})
    disabled = list(disabled_gpu_test.check(ws, test))
    if disabled:
        without = f"yes, and then it tests nothing: {disabled[0].message}"
    elif re.search(rb"\.expect\(|\.unwrap\(\)|\?", test.fn.text) and any(
        s.kind == "gpu_device" for s in test.fn.signals
    ):
        without = "no: it builds a GPU device and fails when there is none"
    else:
        without = ""
    shown = f"`{test.fn.qualname}` ({test.path}:{test.fn.fn_line})"
    more = f" and {len(tests) - 1} more" if len(tests) > 1 else ""
    return ReviewAnswers(op, launch, memory, shown + more, without)


def _first_signal(functions: list[IndexedFunction], kinds: set[str], prefer: tuple[str, ...] = ()) -> str:
    """The first signal of those kinds, preferring one whose text names a ``prefer`` word
    (a `.launch(` over the `get_func(` that loaded the kernel)."""
    for wanted in (prefer, ()) if prefer else ((),):
        found = _first_matching(functions, kinds, wanted)
        if found:
            return found
    return ""


def _first_matching(functions: list[IndexedFunction], kinds: set[str], words: tuple[str, ...]) -> str:
    for item in functions:
        for signal in item.fn.signals:
            if signal.kind in kinds and (not words or any(w in signal.text.lower() for w in words)):
                line = item.fn.line_of(signal.offset)
                return f"`{signal.text.strip()}` in `{item.fn.qualname}` ({item.path}:{line})"
    return ""
