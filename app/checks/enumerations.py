"""Claims by enumeration. GPU work is often described as a list of ops: "real GPU
kernels for ten more elementwise ops: div, neg, abs, exp, ...", "vec4 loads for
add/sub/mul/neg/relu", "in-place ops (add_, sub_, mul_, div_) with GPU dispatch".
Each op listed in a sentence about GPU work is a claim about that op (spec Step 4),
judged on its own, so that one backed op does not carry the others.

A list after a head that says GPU work was done ("Top-10 GPU backward sites wired:
A, B, C") claims every item, resolvable or not. A list elsewhere in a sentence about
the GPU claims the items that name a function the diff changes (a soft claim).
"""

from __future__ import annotations

import re

from app.checks.prose import (
    GPU_WORD,
    HOST_WORDS,
    MEANS_BEFORE,
    NAME_FAMILY,
    NOT_DONE_WORK,
    PLUMBING_NAME,
    STOP_WORDS,
    subject_words,
)

# One item: a single name, maybe `Type::method` or `name()`, maybe followed by a
# parenthetical that says more about it ("softmax (two-pass tree reduce)").
_NAME = r"(?!(?:and|or)\b)[A-Za-z_]\w*(?:::\w+)?(?:\(\))?"
_PARENS = r"\((?:[^()]|\([^()]*\))*\)"  # one level of nesting: "(1 / (1 + exp(-x)))"
_ITEM = rf"{_NAME}(?:/{_NAME})*(?:\s*{_PARENS})?"  # "add/sub/mul/div_f32" within a list is four
_COMMA_LIST = re.compile(
    rf"(?<![\w./-]){_ITEM}(?:\s*,\s*{_ITEM})+(?:\s*,?\s+(?:and|or)\s+{_ITEM})?(?![\w/-])"
)
_LAST_ITEM = re.compile(r"\s(?:and|or)\s")
_SLASH_LIST = re.compile(rf"(?<![\w./-]){_NAME}(?:\s?/\s?{_NAME})+(?![\w/-]|\.\w)")
# What introduces a list of done GPU work: a colon or a dash after a head that names
# the GPU and says what was done or built.
_HEAD_END = re.compile(r"(?::|\s[—–-])\s*$")
_HEAD_DONE = re.compile(
    r"\b(?:wired|added|adds?|implemented|implements?|ported|ports?|landed|new|wrote|written|built"
    r"|kernels|ops|sites|dispatch(?:es|ed)?|routed|enumerated|expand(?:s|ed)?|covers?|covered)\b",
    re.I,
)
# "8 mixed-precision PTX kernels covering add/mul/div": a counted set of kernels whose
# members the list names, each one claimed.
_COUNTED_KERNELS = re.compile(r"\b\d+\s+(?:[\w-]+\s+){0,3}?(?:kernels|ops)\s+(?:covering|for)\s*$", re.I)
# "Fix two cuda bugs (matmul and where_cond)": a count of fixes, then each one named. Not
# of kernels: "improvements to 5 sibling kernels (LOG_F64_PTX, ..)" says where, not what.
_COUNTED_PARENTHETICAL = re.compile(
    r"(?P<head>\b(?:two|three|four|five|\d+)\s+(?:[\w-]+\s+){0,2}?(?:bugs|fixes|issues))"
    rf"\s*\((?P<items>{_NAME}(?:\s*(?:,|\band\b|&)\s*{_NAME})+)\)",
    re.I,
)
# Besides what is not done work at all, a list of examples or of CPU work.
_NOT_DONE = re.compile(rf"{NOT_DONE_WORK.pattern}|\b(?:{HOST_WORDS}|e\.g|such as|like)\b", re.I)
# "feat(gpu,serialize,llama): ": the scopes of a conventional commit are no list of ops.
_COMMIT_PREFIX = re.compile(r"^\w+\([^)]*\)!?:\s*")
# Clauses of a sentence or a title ("PTX module cache ... + make Softplus/ELU/Mish
# differentiable" is two statements).
_CLAUSE = re.compile(r"(?:\s\+\s|;\s)(?![^()]*\))")  # not inside parentheses
# "Fork/join API", "begin/end/launch surface", "CooTensor / CsrTensor format-conversion
# methods": a list followed by one of these names parts of an interface, not GPU ops.
_NOT_OPS_AFTER = re.compile(
    r"^\s*(?:[\w-]+\s+)?(?:api|apis|surface|methods?|helpers?|accessors?|wrappers?|types?|structs?|fields?"
    r"|flags?|tests?|bindings?|variants?|enums?|traits?|modules?|crates?|files?)\b",
    re.I,
)
# "CaptureMode::{Global, ThreadLocal}", "guard type with begin / finish", "Statistics
# tracking (allocated, peak, reserved)": the variants or the methods of one type, or
# the fields of a record, not GPU ops.
_MEMBERS_OF_A_TYPE = re.compile(
    r"::\s*\{\s*$|\b(?:types?|structs?|enums?|traits?|guards?|wrappers?)\s+with\s+$"
    r"|\b(?-i:[A-Z][a-z0-9]+(?:[A-Z][a-z0-9]*)+)\s+with\s+$"  # "CudaEventWrapper with record/sync/query"
    r"|\b(?:stat(?:s|istics)|metrics|counters|fields|options|settings|flags|param(?:eter)?s)\b[\w\s-]{0,20}\([^()]*$",
    re.I,
)
# Where the phrases of a list begin: a colon, a dash or a parenthesis ("Wave 4 — ").
_LIST_START = re.compile(r"[:(—–]\s*|\s-\s")
_MOST_WORDS_OF_AN_ITEM = 4
# Words that list dtypes, devices or places rather than ops.
_NOT_AN_OP = frozenset(
    """cpu gpu host device cuda wgpu metal rocm vulkan opencl f16 bf16 f32 f64 i32 i64 u8 u16 u32 u64 half
    float double int dtype dtypes shape shapes rs src tests test docs readme changelog in out forward
    backward inverse example examples bench benches benchmark benchmarks""".split()
)
_PARENTHETICAL = re.compile(rf"\s*{_PARENS}")
# "compute_mask_gpu<R>(processor, client, packed)": the parameters of a signature.
_CALL_OPEN = re.compile(r"[\w>]\($")


def enumerated_subjects(text: str, head_about_gpu: bool) -> list[tuple[str, bool]]:
    """(subject, soft) for each op the sentence lists as GPU work. ``head_about_gpu``:
    the sentence is an item of a list whose head speaks of the GPU."""
    found: dict[str, bool] = {}
    text = _COMMIT_PREFIX.sub("", text)
    for counted in _COUNTED_PARENTHETICAL.finditer(text):
        if GPU_WORD.search(counted.group("head")):
            for name in _items(counted.group("items")):
                found.setdefault(name, False)
    for listing in (*_COMMA_LIST.finditer(text), *_SLASH_LIST.finditer(text)):
        # "X, Y" is too often two clauses; a list has three items, counted outside their
        # parentheticals ("compiler (cc/gcc, or $CC), loads it" has two).
        outer = _PARENTHETICAL.sub("", listing.group())
        if listing.re is _COMMA_LIST and outer.count(",") + len(_LAST_ITEM.findall(outer)) < 2:
            continue
        before, after = text[: listing.start()], text[listing.end() :]
        if listing.re is _SLASH_LIST and _variants_in_an_aside(before, after):
            continue
        if (
            _NOT_DONE.search(before)
            or MEANS_BEFORE.search(before)
            or _NOT_OPS_AFTER.match(after)
            or _CALL_OPEN.search(before)
            or _MEMBERS_OF_A_TYPE.search(before)
        ):
            continue
        # The head may span clauses ("sites enumerated + wired: A, B, C"); the context
        # of a list in running text is its own clause.
        claimed = bool(
            GPU_WORD.search(before)
            and ((_HEAD_END.search(before) and _HEAD_DONE.search(before)) or _COUNTED_KERNELS.search(before))
        )
        clause_start = max((m.end() for m in _CLAUSE.finditer(before)), default=0)
        clause_end = next((listing.end() + m.start() for m in _CLAUSE.finditer(after)), len(text))
        # A GPU word inside the list is one of its items ("..., GRU, f64 GPU"), no context;
        # so is one in the phrases the list runs on from.
        items_start = _earlier_items(before, clause_start)
        rest = text[clause_start:items_start] + text[listing.end() : clause_end]
        about_gpu = head_about_gpu or bool(GPU_WORD.search(rest))
        if not claimed and not (about_gpu and not _NOT_DONE.search(rest)):
            continue
        for name in _items(listing.group()):
            found.setdefault(name, not claimed)
    return list(found.items())


# A word of the same phrase right before or after a list ("causal conv update/full").
_WORD_BEFORE = re.compile(r"\w\s+$")
_WORD_AFTER = re.compile(r"\s+(?!(?:and|or)\b)\w")


def _variants_in_an_aside(before: str, after: str) -> bool:
    """A slash list inside a parenthetical that is part of a longer phrase ("GDN CUDA
    kernels (decode recurrence, scalar/warp/chunked prefill recurrence, causal conv
    update/full)"): the variants of the one thing the aside details, not ops of their own."""
    inside = before.count("(") > before.count(")")
    return inside and (_WORD_BEFORE.search(before) is not None or _WORD_AFTER.match(after) is not None)


def _earlier_items(before: str, clause_start: int) -> int:
    """Where a list begins that runs on from phrases before the names it gives ("Wave 4
    — FlashAttention GPU, gradient penalty, PagedAttention, GGUF" lists four things, of
    which "penalty, PagedAttention, GGUF" are names): at the colon, dash or parenthesis
    before those phrases, when each is a few words long; else where the names begin."""
    starts = [m.end() for m in _LIST_START.finditer(before, clause_start)]
    start = starts[-1] if starts else clause_start
    phrases = before[start:].split(",")
    if len(phrases) > 1 and all(len(p.split()) <= _MOST_WORDS_OF_AN_ITEM for p in phrases):
        return start
    return len(before)


def _items(listing: str) -> list[str]:
    """The names a list gives, and those of the lists inside its parentheticals
    ("norm layers (LayerNorm, GroupNorm, RMSNorm)")."""
    names = [
        item.strip(" ,.()")
        for item in re.split(r"\s*(?:,|/|&|\band\b|\bor\b)\s*", _PARENTHETICAL.sub("", listing))
    ]
    for inner in _PARENTHETICAL.finditer(listing):
        for nested in (*_COMMA_LIST.finditer(inner.group()), *_SLASH_LIST.finditer(inner.group())):
            names.extend(_items(nested.group()))
    return [name for name in names if _is_op_name(name)]


def _is_op_name(name: str) -> bool:
    words = subject_words(name)
    return (
        len(name) >= 2
        and bool(words)
        and not all(w in _NOT_AN_OP or w in STOP_WORDS for w in words)
        and name.lower() not in _NOT_AN_OP
        and not PLUMBING_NAME.match(name)
        and not NAME_FAMILY.fullmatch(name)
    )
