"""A pull request's review, as data: the code findings in the functions the diff
touches, the description findings, the judged claims, and the hostile reviewer's
answers for every GPU op the diff adds or changes. Pure, like the rest of the core;
rendering it for GitHub is ``app.report.checkrun``'s job."""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass

from app.checks.claims import Claim, ReviewAnswers, answer_questions
from app.checks.description import description_context, kernel_file_key, kernel_sources
from app.checks.engine import Analysis, Touched, analyze_workspace, touches
from app.checks.model import Finding
from app.checks.rules import DESCRIPTION_RULES
from app.checks.workspace import IndexedFunction, SourceFile, Workspace
from app.config import RepoConfig

# The backend a function's path or name names (`candle-core/src/cuda_backend/mod.rs`,
# `Sigmoid::cuda_fwd`): the toolchain of the kernel files it can launch.
_BACKEND_NAMED = re.compile(r"cuda|metal")

# An error's message (`impl Display for MissingAtomicAdd`) is no work a claim is about;
# a `Display` that writes kernel source (a code generator's instruction) is.
_FORMATTING_TRAITS = frozenset({"Display", "Debug"})

DESCRIPTION_PATH = "PR description"
MAX_OPS_QUESTIONED = 40  # the 4e block answers for at most this many ops


@dataclass
class Review:
    code: Analysis
    description: list[Finding]  # path is DESCRIPTION_PATH; line 0 is the title
    claims: list[Claim]
    answers: list[ReviewAnswers]
    touched: Touched
    ops_changed: int  # GPU ops the diff adds or changes (answers may stop at MAX_OPS_QUESTIONED)
    kernel_sources: list[str]  # kernel source files the diff changes (not Rust: not read)


def review(
    files: Iterable[SourceFile],
    config: RepoConfig,
    touched: Touched,
    title: str,
    body: str,
    moved: Touched | None = None,
) -> Review:
    """``touched``: the lines the diff writes; ``moved``: those of them it only moves."""
    ws = Workspace(files, config)
    code = analyze_workspace(ws, touched)
    # A function is changed when its lines are, or when the kernel source it launches is.
    kernel_files = kernel_sources(touched)
    kernels = _changed_kernel_sources(ws, touched, kernel_files)
    kernel_names: dict[str, set[str]] = {}  # name -> the toolchains of its changed files
    for (_, name), toolchains in kernels.items():
        kernel_names.setdefault(name, set()).update(toolchains)
    changed = [
        f
        for f in ws.functions
        if (touches(touched, f) or _launches_changed_source(f, kernels, kernel_names))
        and not f.support_code
        and not (f.fn.trait in _FORMATTING_TRAITS and not f.evidence)
    ]
    ctx = description_context(ws, title, body, changed, code.findings, touched, kernel_files, moved or {})
    description: list[Finding] = []
    for rule in DESCRIPTION_RULES:
        severity = config.severity_for(rule.id, rule.severity)
        if severity is None or rule.check_description is None:
            continue
        for hit in rule.check_description(ctx):
            description.append(
                Finding(rule.id, severity, DESCRIPTION_PATH, hit.line, hit.line, "", hit.message)
            )
    ops = [f for f in changed if f.claim or f.evidence]
    changed_tests = frozenset(id(f) for f in ws.functions if f.support_code and touches(touched, f))
    answers = [answer_questions(ws, op, changed_tests) for op in ops[:MAX_OPS_QUESTIONED]]
    return Review(code, description, ctx.claims, answers, touched, len(ops), kernel_files)


def _launches_changed_source(
    item: IndexedFunction, kernels: dict[tuple[str, str], set[str]], names: dict[str, set[str]]
) -> bool:
    """Whether the function names a kernel source constant the diff changes (``kernels``:
    (file, name) -> toolchains, ``names``: name -> toolchains): the one of its own file
    when its file defines that name (dfdx defines a `PTX_SRC` in every kernel file), else
    any file's whose changed kernel file is of the function's backend (candle's CUDA
    backend launches a `kernels::UNARY` built from `unary.cu`, not the Metal one of that
    name)."""
    if not item.kernel_sources:
        return False
    own = {source.name for source in item.file.facts.gpu_sources}
    backends = set(_BACKEND_NAMED.findall(f"{item.path} {item.fn.qualname}".lower()))
    return any(
        (item.path, name) in kernels
        if name in own
        else any(not (backends and toolchain) or toolchain in backends for toolchain in names.get(name, ()))
        for name in item.kernel_sources
    )


def _changed_kernel_sources(
    ws: Workspace, touched: Touched, kernel_files: list[str]
) -> dict[tuple[str, str], set[str]]:
    """(file, name) of the GPU kernel source constants (PTX, WGSL, CUDA C) the diff
    touches, with the toolchains of the change: "" for the constant's own lines in the
    Rust file, "cuda" for the kernel file it includes (`fill.cu` compiled to the
    `fill.ptx` of `FILL`; ``kernel_files``, the diff's kernel files), and so on."""
    changed_files = set(filter(None, map(kernel_file_key, kernel_files)))
    found: dict[tuple[str, str], set[str]] = {}
    for file in ws.files:
        written = touched.get(file.path, ())
        for source in file.facts.gpu_sources:
            toolchains = {key[1] for key in changed_files.intersection(map(kernel_file_key, source.files))}
            if any(source.line <= line <= source.end_line for line in written):
                toolchains.add("")
            if toolchains:
                found[(file.path, source.name)] = toolchains
    return found
