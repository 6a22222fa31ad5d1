"""Claims by mention. Commit messages and PR descriptions of GPU work name the
functions, kernels and autograd nodes they touched, in titles, bullets and running
prose ("SigmoidBackward: uses sigmoid_backward_f32 directly", "compiled pipelines for
matmul_f32, bmm_f32 and softmax_f32"). Whatever the sentence's shape, naming a GPU
function the diff changes, in a sentence that is not a negation, a plan or history,
presents it as done work: a claim about that function, held to the same evidence as
any other (spec Step 4).

Only distinctive names count (``snake_case``, ``CamelCase``, ``Type::method``), and only
when they are exactly a changed GPU function's name, its ``Type::method``, its type
(when that type has one changed GPU method), its name without a ``gpu_``/``cuda_``
prefix, or the name of a kernel it loads (a string such as ``"cumsum_kernel"`` in a
function that launches); a word such as "matmul" alone is left to the claim patterns.
"""

from __future__ import annotations

import re
from collections import defaultdict
from collections.abc import Iterable

from app.checks.claims import Claim, reads_a_field
from app.checks.prose import (
    GPU_WORDS,
    MEANS_BEFORE,
    NOT_DONE_WORK,
    PLUMBING_NAME,
    Sentence,
    said_of_the_host,
    subject_words,
)
from app.checks.workspace import IndexedFunction

_IDENTIFIER = re.compile(r"(?<![\w:])[A-Za-z_]\w*(?:::[A-Za-z_]\w*)*")
_DISTINCTIVE = re.compile(r"[A-Za-z0-9]_[A-Za-z0-9]|::|[a-z][A-Z]")
_KERNEL_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9]*_\w+")
_BACKEND_PREFIX = re.compile(r"^(?:gpu|cuda|cu|wgpu|metal|mtl)_", re.I)
# Names of GPU work appear next to these words; a sentence without one (and under a
# title or list head without one) talks about something else, e.g. a cache flag. The
# meta device is not one: it has shapes and no data.
_GPU_CONTEXT = re.compile(
    rf"\b(?:{GPU_WORDS}|(?<!meta )(?<!meta-)device|launch\w*|backward)\b|Gpu[A-Z]", re.I
)
# The method an op type (an autograd node, a kernel, a module) exists for.
_OP_METHOD = re.compile(r"^(?:backward|forward|apply|call|launch|execute|run|compute|step)$")
# A heading after which the items are plans or gaps, not done work.
_PLAN_HEAD = re.compile(
    r"\b(?:next(?:\s+steps?)?|todo|follow[- ]?ups?|out of scope|not (?:yet )?(?:done|covered|implemented)"
    r"|known (?:issues|gaps|limitations)|limitations|remaining|deferred|open questions)\b",
    re.I,
)


def _said_of_the_gpu(text: str) -> bool:
    """The sentence speaks of GPU work: a kernel of a sentence about the host and no
    device ("compiles C source for InductorTarget::CpuC and dispatches to the native
    kernel") is the host's."""
    return bool(_GPU_CONTEXT.search(text)) and not said_of_the_host(text)


def _is_gpu_op(function: IndexedFunction) -> bool:
    """A function that presents itself as GPU code or does GPU work. Living in a GPU
    crate is not enough: its allocator's `round_len` and `pool_take` are host helpers."""
    if function.support_code or function.cpu_build or reads_a_field(function):
        return False
    if PLUMBING_NAME.match(function.fn.name):
        return bool(function.direct_evidence)
    return bool(function.claim or function.evidence)


def _names_of(changed: list[IndexedFunction]) -> dict[str, list[IndexedFunction]]:
    """Every name a changed GPU function goes by in prose, lower-cased."""
    names: dict[str, list[IndexedFunction]] = defaultdict(list)
    methods_of: dict[str, list[IndexedFunction]] = defaultdict(list)
    for function in filter(_is_gpu_op, changed):
        name, qualname = function.fn.name, function.fn.qualname
        keys = {name, qualname, _BACKEND_PREFIX.sub("", name), *function.kernel_sources}
        if function.direct_evidence:  # the kernels it loads by name: get_func(.., "cumsum_kernel")
            loaded = (literal.text.strip('"') for literal in function.fn.literals)
            keys.update(kernel for kernel in loaded if _KERNEL_NAME.fullmatch(kernel))
        if "::" in qualname:
            methods_of[qualname.rsplit("::", 1)[0]].append(function)
        for key in keys:
            names[key.lower()].append(function)
    for owner, methods in methods_of.items():
        # "SigmoidBackward" names its one changed method when that method is what the
        # type is for; "CudaBackendImpl" does not name whichever method changed.
        if len(methods) == 1 and _OP_METHOD.match(methods[0].fn.name):
            names[owner.rsplit("::", 1)[-1].lower()].append(methods[0])
    return names


def planned_lines(said: Iterable[Sentence]) -> set[int]:
    """Lines of the list items under a "Next steps:" / "Follow-ups:" / "Limitations:"
    heading: plans and gaps, which claim nothing, whatever their wording."""
    lines: set[int] = set()
    in_plan = False
    for sentence in said:
        text = sentence.with_code or sentence.text
        if not sentence.bullet:
            in_plan = bool(_PLAN_HEAD.search(text)) and text.rstrip().endswith(":")
        elif in_plan:
            lines.add(sentence.line)
    return lines


def mentioned_claims(
    said: Iterable[Sentence], changed: list[IndexedFunction], claimed: Iterable[Claim]
) -> list[tuple[Claim, list[IndexedFunction]]]:
    """Claims for changed GPU functions the description names and no other claim
    names, each with the functions it names."""
    names = _names_of(changed)
    # A name another claim already names is not claimed again; a broad claim ("the
    # activation backward paths") that happens to cover a function does not stop the
    # sentence naming it from being a claim of its own.
    named_already = [set(subject_words(claim.subject)) for claim in claimed]
    found: list[tuple[Claim, list[IndexedFunction]]] = []
    said = list(said)
    planned = planned_lines(said)
    # The first sentence is the title, or the commit subject when the description is
    # a commit message.
    title_is_gpu = bool(said) and bool(_GPU_CONTEXT.search(said[0].with_code or said[0].text))
    head_is_gpu = False
    for sentence in said:
        text = sentence.with_code or sentence.text
        if not sentence.bullet:
            head_is_gpu = bool(_GPU_CONTEXT.search(text))
        if sentence.line in planned or NOT_DONE_WORK.search(text):
            continue
        gpu_context = _said_of_the_gpu(text) or (sentence.bullet and head_is_gpu) or title_is_gpu
        if not gpu_context:
            continue
        for mention in _IDENTIFIER.finditer(text):
            identifier = mention.group()
            if not _DISTINCTIVE.search(identifier) or MEANS_BEFORE.search(text[: mention.start()]):
                continue
            functions = names.get(identifier.lower(), [])
            words = set(subject_words(identifier)) or {identifier.lower()}
            if functions and not any(words <= earlier for earlier in named_already):
                named_already.append(words)
                found.append((Claim(text, identifier, sentence.line), functions))
    return found
