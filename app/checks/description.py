"""What the description rules read: the PR's own sentences, the functions the diff
changes, the code findings in them, and the GPU claims judged against them."""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from app.checks.claims import (
    BACKENDS,
    Claim,
    extract_claims,
    judge,
    listed_title,
    moved_into_a_folder,
    title_topic,
)
from app.checks.engine import Touched
from app.checks.mentions import mentioned_claims, planned_lines
from app.checks.model import Finding
from app.checks.prose import Sentence, sentences, subject_words
from app.checks.rust_index import KERNEL_FILE_EXTENSIONS
from app.checks.workspace import IndexedFunction, Workspace

# Kernel source and its headers (`kernels/src/fill.cu`, `keyswitch.cuh`): GPU code
# gpuproof does not read; the group is the name a kernel constant includes it by.
KERNEL_SOURCE_PATH = re.compile(rf"([\w-]+)\.(?:{KERNEL_FILE_EXTENSIONS}|cuh)$", re.I)
# A squash merge's title names its pull request: "Fix the Metal sampler (#1327)".
_PULL_REQUEST = re.compile(r"\(#\d+\)\s*$")
# The pull request's own number in its title: what a squash merge appends ("(#2203)") or
# a merge commit names ("Merge pull request #22 from ..").
_OWN_NUMBER = re.compile(rf"{_PULL_REQUEST.pattern}|^Merge pull request #\d+")
# The toolchain of a kernel file, by extension; the rest are shaders (WGSL, SPIR-V,
# GLSL, HLSL). A `unary.metal` the diff changes is not the `unary.ptx` a constant of
# the CUDA backend includes (candle has both).
_TOOLCHAINS = {"metal": "metal", **dict.fromkeys(("ptx", "cu", "cuh", "cubin", "fatbin"), "cuda")}


def kernel_file_key(path: str) -> tuple[str, str] | None:
    """(name, toolchain) of a kernel file: ``("fill", "cuda")`` for `kernels/src/fill.cu`
    and for the `fill.ptx` it compiles to; None for another file."""
    found = KERNEL_SOURCE_PATH.search(path)
    if found is None:
        return None
    return found.group(1), _TOOLCHAINS.get(path.rsplit(".", 1)[1].lower(), "shader")


@dataclass
class DescriptionContext:
    ws: Workspace
    title: str
    body: str
    sentences: list[Sentence]
    changed: list[IndexedFunction]  # product code (not tests) the diff adds or changes
    findings: list[Finding]  # code findings in the changed functions
    touched: Touched  # path -> the lines the diff adds or changes
    moved: Touched  # path -> the lines of ``touched`` the diff only moves
    claims: list[Claim] = field(default_factory=list)

    @property
    def text(self) -> str:
        """The title and the body, as one text to search; the title's own pull-request
        number is left out: it is no follow-up the description points to."""
        return f"{_OWN_NUMBER.sub('', self.title)}\n{self.body}"


def kernel_sources(touched: Touched) -> list[str]:
    """The kernel source files the diff changes: GPU code that is not Rust."""
    return sorted(path for path in touched if KERNEL_SOURCE_PATH.search(path))


def added_whole(item: IndexedFunction, touched: Touched) -> bool:
    """The diff adds the function: every line of it is one the diff writes."""
    written = touched.get(item.path, ())
    return all(line in written for line in range(item.fn.line, item.fn.end_line + 1))


def description_context(
    ws: Workspace,
    title: str,
    body: str,
    changed: list[IndexedFunction],
    findings: list[Finding],
    touched: Touched,
    kernel_files: list[str],
    moved: Touched,
) -> DescriptionContext:
    """The description's sentences and its GPU claims judged against the diff.
    ``kernel_files`` (the diff's ``kernel_sources``) say why a title over no Rust GPU
    code cannot be verified."""
    said = sentences(title, body)
    planned = planned_lines(said)
    claims = [
        c for c in extract_claims(said) if c.line not in planned and not moved_into_a_folder(c, touched)
    ]
    ctx = DescriptionContext(ws, title, body, said, changed, findings, touched, moved, claims)
    held = [f for f in findings if f.line in touched.get(f.path, ())]  # on the lines the diff writes
    for claim in ctx.claims:
        judge(ws, claim, changed, findings, held, touched)
    ctx.claims = [c for c in ctx.claims if c.functions or not c.soft]
    for claim, named in mentioned_claims(said, changed, ctx.claims):
        judge(ws, claim, named, findings, held, touched)
        if claim.functions:
            ctx.claims.append(claim)
    # A description that claims nothing in so many words is a terse one: its title is
    # its claim, whatever titles of its commits a squash merge lists below it. A pull
    # request's title that puts work on the GPU is a claim of its own when the body's
    # claims are of other things ("New, fast sampler for Metal! (#1327)" over "* Use
    # LRU prefix cacher", "* Add metal sort kernels").
    topic = title_topic(said[0]) if said and said[0].line == 0 else None
    added = [f for f in changed if added_whole(f, touched)]
    of_its_own = bool(
        topic and not topic.soft and _PULL_REQUEST.search(title) and _new_topic(topic, ctx.claims)
    )
    if topic and (not ctx.claims or of_its_own) and not moved_into_a_folder(topic, touched):
        judge(ws, topic, changed, findings, held, touched, kernel_files, added)
        if topic.functions or not topic.soft:
            ctx.claims.append(topic)
    taken = planned | {c.line for c in ctx.claims}
    subjects = {c.subject.lower() for c in ctx.claims}  # the first commit's title is often the PR's
    # The titles of the commits a squash merge lists are claims of their own.
    listed: list[Claim] = []
    for item in said:
        if not item.bullet or item.line in taken:
            continue
        item_claim = listed_title(item)
        if (
            item_claim is None
            or item_claim.subject.lower() in subjects
            or moved_into_a_folder(item_claim, touched)
        ):
            continue
        subjects.add(item_claim.subject.lower())
        listed.append(item_claim)
    for claim in listed:
        judge(ws, claim, changed, findings, held, touched, kernel_files, added)
    ctx.claims.extend(c for c in listed if c.functions or not c.soft)
    ctx.claims = _without_vague_repeats(_each_once(sorted(ctx.claims, key=lambda c: c.line)))
    return ctx


def _each_once(claims: list[Claim]) -> list[Claim]:
    """The claims without repeats: a squash merge's first item is often the PR's title,
    and it may list one commit title twice ("Fix mrope with new rope kernels"); the same
    subject on the same functions, judged the same, is one claim, reported where it is
    first made."""
    seen: set[tuple[str, tuple[int, ...], tuple[str, ...]]] = set()
    once = []
    for claim in claims:
        key = (claim.subject.lower(), tuple(id(f) for f in claim.functions), tuple(claim.missing))
        if key not in seen:
            seen.add(key)
            once.append(claim)
    return once


# Subject words that name no thing of their own: a backend, "backend" or "kernel", the
# parts of a dtype, a pass.
_NAMES_NOTHING = re.compile(rf"gpu|hip|{BACKENDS}|backend|kernel|forward|backward|b?f|fp|u|i|\d+")


def _names_nothing(claim: Claim) -> bool:
    return all(_NAMES_NOTHING.fullmatch(word) for word in subject_words(claim.subject))


def _without_vague_repeats(claims: list[Claim]) -> list[Claim]:
    """The claims without those that name nothing ("Fix metal", "Add some bf16 kernels"
    in a squash merge's list) over functions a claim naming its thing covers, judged
    the same: the finding is that claim's, reported once."""
    return [
        claim
        for claim in claims
        if not (
            claim.functions
            and _names_nothing(claim)
            and any(
                other is not claim
                and other.backed == claim.backed
                and not _names_nothing(other)
                and {id(f) for f in claim.functions} <= {id(f) for f in other.functions}
                for other in claims
            )
        )
    ]


def _new_topic(topic: Claim, claims: list[Claim]) -> bool:
    """The title's topic shares no word with the claims of the body: it is not their
    summary ("Metal matmul (#12)" over "* Tile the matmul kernel")."""
    words = set(subject_words(topic.subject))
    return not any(words & set(subject_words(c.subject)) for c in claims)
