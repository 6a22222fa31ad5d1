from __future__ import annotations

import re
from collections.abc import Iterator
from typing import TYPE_CHECKING

from app.checks.model import Severity
from app.checks.prose import GPU_WORD, HOST_WORD, NEXT_STEP, in_quotes
from app.checks.rules.base import Hit, Rule

if TYPE_CHECKING:
    from app.checks.description import DescriptionContext

_CPU = r"(?:the\s+)?(?:cpu|host)"
_GPU = r"(?:the\s+)?(?:gpu|cuda|device|accelerator)"
FORBIDDEN = tuple(
    re.compile(p, re.I)
    for p in (
        rf"\b(?:works?|runs?|executes?|uses?)\s+(?:on\s+)?{_GPU}\s+(?:when|if|where)\s+(?:it\s+is\s+|it's\s+|one\s+is\s+)?"
        rf"(?:available|present|possible)\b(?:[^.;]{{0,60}}?\b{_CPU}(?:\s+otherwise)?)?",
        r"\b(?:gpu|cuda)\s+(?:when|if|where)\s+(?:available|present|possible)\b",
        rf"\b{_CPU}\s+otherwise\b",
        rf"\b(?:{_CPU}|reference)\s+(?:path|implementation|code)\s+otherwise\b",
        rf"\b(?:falls?|falling)\s+back\s+(?:\w+\s+){{0,2}}?to\s+{_CPU}\b",
        rf"\bfall-?back\s+(?:path\s+)?(?:to|on)\s+{_CPU}\b",
        r"\bbest[- ]effort\s+(?:gpu|cuda|device|accelerat\w+)(?:\s+support)?",
        r"\b(?:graceful(?:ly)?|automatic(?:ally)?|transparent(?:ly)?|seamless(?:ly)?|smart)\s+"
        r"(?:\w+\s+)?(?:cpu\s+)?(?:falls?\s+back|fall-?back|degrad\w*)",
        rf"\bdegrad\w*\s+(?:gracefully\s+)?to\s+{_CPU}\b",
        rf"\b(?:if|when)\s+(?:cuda|{_GPU}|a\s+gpu)\s+(?:is\s+)?(?:not\s+available|unavailable|missing|absent|"
        rf"not\s+present)\b[^.;]{{0,50}}?\b{_CPU}\b(?!-only)",
        r"\bcpu[- ](?:round[- ]?trip[- ])?fall-?backs?\b",
        # a fallback taken when the kernel does not build, named as a feature
        r"\b(?:ptx|kernel|nvrtc)[- ](?:compile|compilation)[- ]failure[- ]fall-?backs?\b",
        rf"\bfalls?\s+through\s+to\s+(?:the\s+)?(?:existing\s+)?{_CPU}",
        # "falls through to a new foo_cpu helper", "... to the existing reference path"
        r"\bfalls?\s+(?:through|back)\s+to\s+(?:[\w-]+\s+){0,3}?"
        r"(?:\w+_(?:cpu|host)\b|(?:\w+[- ])?reference\s+(?:path|implementation|code))",
        rf"\b(?:run|runs|do|does|compute|computes|execute|executes)\s+(?:it|them)?\s*on\s+{_CPU}\s+instead\b",
        rf"\botherwise\s+(?:we\s+|it\s+)?(?:do|does|run|runs|compute|computes)\s+(?:it\s+)?on\s+{_CPU}",
        rf"\b{_CPU}\s+(?:version|path|implementation|code)\s+under\s+the\s+hood\b",
        rf"\bunder\s+the\s+hood\b[^.;]{{0,40}}\b{_CPU}\b",
        # "by performing embedding on CPU and transferring results back to MPS": the host
        # round trip offered as the way the op runs
        rf"\b(?:perform|run|comput|execut|do)\w*\s+(?:[^.;]{{0,60}}?\s)?on\s+{_CPU}\s+and\s+(?:then\s+)?"
        r"(?:transfer|cop(?:y|ie)|mov|send|upload)\w*\s+(?:[^.;]{0,30}?\s)?back\s+to\s+(?:the\s+)?"
        r"(?:gpu|cuda|device|accelerator|mps|metal)\b",
    )
)
_NEGATED = re.compile(
    r"\b(?:no\s+longer|not|never|no|removed?|removes|removing|without|instead\s+of|eliminat\w*|no\s+more"
    r"|stop(?:s|ped)?|drop(?:s|ped)?|rather\s+than|forbid\w*|reject\w*|refus\w*|replac\w*|instead|avoid\w*|n't"
    # calling it silent is naming a defect, not presenting a behaviour
    r"|silent(?:ly)?)\b",
    re.I,
)
# "Without a driver it falls back": the negation ends where a new clause's subject starts.
_NEW_CLAUSE = re.compile(r",|\b(?:it|we|they)\b", re.I)
# "CPU fallback removed": the negation comes after the phrase.
_UNDONE = re.compile(
    r"\s*(?:\w+\s+){0,2}(?:removed|removal|gone|eliminated|dropped|deleted|replaced|is\s+an?\s+error)", re.I
)
# "the CPU fallback doesn't fully close issue #4832": the fallback, named, judged wanting.
_FOUND_WANTING = re.compile(
    r"\s*(?:\w+ly\s+)?(?:does\s+not|doesn't|did\s+not|didn't|cannot|can't|fails?\s+to)\b",
    re.I,
)
_A_FALLBACK = re.compile(r"fall-?backs?$", re.I)  # the thing, not "falls back" (what code does)
# "X was falling back to the CPU": the old behaviour the change removes.
_HISTORY = re.compile(r"\b(?:was|were|used\s+to|previously|formerly|had\s+been|before\s+this)\b", re.I)
# "Falls through to the existing CPU path when param.is_cpu()": CPU inputs take the CPU path.
_CPU_INPUTS = re.compile(
    r"^[^.;]{0,20}?\b(?:when|if|for)\b[^;]{0,30}?(?:is_cpu\(\)|\bon\s+(?:the\s+)?cpu\b"
    r"|\bcpu\s+(?:tensors?|inputs?|params?|parameters?|data))",
    re.I,
)
# "automatic fallback to the scalar kernel", "to star topology": the target it names.
_TARGET = re.compile(r"\s*(?:to|on)\s+((?:[\w-]+\s*){1,4})", re.I)
# "falls back to the reference path", "CPU otherwise", "norm_cpu": where the fallback goes.
_PLACE_NAMED = re.compile(r"\b(?:to|on|through|otherwise)\b|cpu|host|reference", re.I)
_HOST_TARGET = re.compile(r"\b(?:cpu|host|reference|naive|slow)\b", re.I)
# "With grouped or dilated configurations, the dispatch falls through to the CPU", "nested
# Nullable inners return None so the caller falls through to CPU": the cases left out.
_LIMITED_CASES = re.compile(
    r"\b(?:with|for)\b[^.;]{0,60}?\b(?:configurations?|shapes?|dtypes?|inputs?|cases?|layouts?|schemas?"
    r"|types?|modes?|variants?|sizes?)\b|\b(?:inners?|variants?|cases?|schemas?|types?)\s+return\b",
    re.I,
)
# The opt-in, said or named: a mode the caller asks for by a name that says the CPU
# (`runtime_for_name("gpu-or-cpu")`, `Device::GpuOrCpu`).
_OPT_IN = re.compile(
    r"\bopt[- ]?in\b|\bgated\s+(?:by|behind)\b|_ENABLE_\w*FALLBACK\b"
    r"|\b(?:gpu|cuda|metal|device)[-_ ]?or[-_ ]?(?:cpu|host)\b",
    re.I,
)


def check(ctx: DescriptionContext) -> Iterator[Hit]:
    """## What it does
    Flags the spec's forbidden phrasings in the PR title and description, and their
    paraphrases, whatever the case or Markdown formatting: "works on the GPU when
    available, CPU otherwise", "falls back to CPU", "best-effort GPU support",
    "graceful CPU fallback". Text in code blocks, quotes and quotation marks is ignored,
    and so are negations ("no longer falls back to the CPU") and the allowed vocabulary
    ("opt-in CPU fallback gated by FERROTORCH_ENABLE_GPU_FALLBACK", or a mode the caller
    asks for by a name that says the CPU: `runtime_for_name("gpu-or-cpu")`), and so are
    history ("the reduction was falling back to the host before this change"), a fallback
    named to say it falls short ("the CPU fallback doesn't fully close #4832"), the CPU path taken
    for CPU inputs ("falls through to the CPU path when `param.is_cpu()`"), a
    fallback that names a target other than the host ("automatic fallback to the
    scalar kernel", "to star topology") or names no place in a sentence about neither
    the GPU nor the host ("the graceful fallback in the conformance tests"), and a
    limitation stated as a gap: the cases left on the CPU, in a description that gives
    the next step ("With grouped configurations the dispatch falls through to the CPU.
    Tracked as #1003.").

    ## Why is this bad?
    Spec Step 3, "Honest reporting vocabulary": these phrasings hide the
    silent-fallback policy violation. The reader cannot tell whether their tensors
    ever reach the GPU.

    ## Example
    ```text
    Softmax now works on the GPU when available, CPU otherwise.
    ```

    ## Use instead
    ```text
    Removed silent CPU fallback in softmax; it now returns Err(GpuError::PtxCompileFailed)
    when the kernel cannot be built.
    ```
    """
    for sentence in ctx.sentences:
        if _OPT_IN.search(sentence.text):
            continue  # the allowed "opt-in fallback gated by ..." vocabulary
        for pattern in FORBIDDEN:
            # a phrase inside quotation marks is named, not said ('the rule flags "CPU fallback"')
            text = sentence.text
            found = next((m for m in pattern.finditer(text) if not in_quotes(text, m.start(), m.end())), None)
            if not found:
                continue
            before = sentence.text[max(0, found.start() - 40) : found.start()]
            after = sentence.text[found.end() : found.end() + 40]
            if (
                _negated(before, found.group())
                or _UNDONE.match(after)
                or (_A_FALLBACK.search(found.group()) and _FOUND_WANTING.match(after))
                or _said_of_no_fallback(before, found, after)
                or _not_about_the_device(text, found)
                or (_LIMITED_CASES.search(sentence.text[: found.start()]) and NEXT_STEP.search(ctx.text))
            ):
                break
            yield Hit(
                sentence.line,
                f'forbidden phrasing "{found.group()}" (spec Step 3): it hides whether the '
                f'code falls back to the CPU. Say exactly what runs where, e.g. "Implemented X on '
                f'GPU; returns Err(GpuError::...) when the GPU is not available".',
            )
            break


def _said_of_no_fallback(before: str, found: re.Match[str], after: str) -> bool:
    """History ("was falling back"), the CPU path for CPU inputs, or a fallback that
    stays on the GPU: none presents a CPU fallback as the behaviour now."""
    clause = before[max((m.end() for m in _NEW_CLAUSE.finditer(before)), default=0) :]
    return bool(
        _HISTORY.search(clause)
        or _CPU_INPUTS.match(after)
        or (not re.search(r"\b(?:cpu|host)\b", found.group(), re.I) and _names_another_target(after))
    )


def _not_about_the_device(sentence: str, found: re.Match[str]) -> bool:
    """A fallback that names no place ("graceful fallback") in a sentence that names
    neither the GPU nor the host ("Phase 12's graceful fallback in the conformance
    tests simplified back to direct fvec()"): a fallback of something else."""
    names_a_place = _PLACE_NAMED.search(found.group())
    return not names_a_place and not GPU_WORD.search(sentence) and not HOST_WORD.search(sentence)


def _names_another_target(after: str) -> bool:
    """The fallback says where it goes, and that is not the host ("automatic fallback to
    star topology for non-mesh backends", "to the scalar kernel")."""
    target = _TARGET.match(after)
    return target is not None and not _HOST_TARGET.search(target.group(1))


def _negated(before: str, phrase: str) -> bool:
    """A negation in the phrase's own clause: just before it ("no longer falls back"),
    or at its start ("no CPU fallback")."""
    if _NEGATED.search(phrase[:12]):
        return True
    negations = list(_NEGATED.finditer(before))
    return bool(negations) and not _NEW_CLAUSE.search(before[negations[-1].end() :])


RULE = Rule(
    id="forbidden-phrasing",
    severity=Severity.ERROR,
    spec="Step 3 (honest reporting vocabulary)",
    summary='the spec\'s forbidden phrasings ("GPU when available, CPU otherwise", "falls back to CPU")',
    check=None,
    check_description=check,
)
