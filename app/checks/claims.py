"""GPU claims in a PR description, held against the code the diff changes (spec
Step 4 and 5), and the hostile reviewer's questions of 4e answered from the code."""

from __future__ import annotations

import re
import weakref
from collections.abc import Callable, Iterable, Sequence
from collections.abc import Set as AbstractSet
from dataclasses import dataclass, field
from functools import partial
from typing import NamedTuple

from app.checks.engine import HOST_DETOUR_RULES, Touched
from app.checks.enumerations import enumerated_subjects
from app.checks.gpu_code import backends_named, is_test, runs_on_wasm
from app.checks.gpu_tests import (
    code_said,
    fails_without_a_gpu,
    gpu_test_reach,
    test_said,
    tests_reaching,
    untaken_dispatch,
)
from app.checks.model import Arm, Finding, Function
from app.checks.prose import (
    DEVICE_WORD,
    DTYPE_NAME,
    FLASH_KERNELS,
    GPU_WORD,
    HOST_WORD,
    MADE_FROM,
    NAME_FAMILY,
    PLUMBING_NAME,
    Sentence,
    in_quotes,
    names_subject,
    said_of_the_host,
    subject_words,
    words,
)
from app.checks.rules import disabled_gpu_test
from app.checks.workspace import IndexedFunction, Workspace

_DONE = (
    r"(?:implemented|implements|implement|added|adds|wrote|writes|landed|lands|introduced|introduces"
    r"|ported|ports|moved|moves|brought|brings|enabled|enables|built|builds|shipped|ships|now does"
    r"|routes|routed|dispatches|dispatched|wire|wired|wires|add|move|port|enable|bring|build|ship|land"
    r"|introduce|write|route|dispatch|migrate|migrated|migrates|unblocks?|unblocked)"
)
# "to the metal job" is a CI job, not the GPU as the place of the work.
_TARGET = (
    r"(?:the\s+)?`?(?:gpu|gpus|cuda|device|wgpu|cubecl|metal|vulkan|rocm|opencl|accelerator)\b`?"
    r"(?![\s-]+(?:jobs?|workflows?|ci|runners?)\b)"
)
BACKENDS = "cuda|metal|wgpu|webgpu|cubecl|vulkan|rocm|opencl"  # the names of GPU backends
_BACKEND = rf"(?:gpu|ptx|{BACKENDS})"  # the word that names a GPU backend
# GPU code by its name: "rope kernel", "int8 matmul shader"; not an operating system's
# kernel ("exhausting kernel stack", "the guest kernel").
_KERNEL = (
    # An OS kernel, a zkVM guest's, an ONNX custom operator's (host code: "threadpool
    # access in operator kernels", "kernel attribute types") is no GPU kernel; nor is a
    # convolution's ("Infer convolution kernel shape from weight").
    r"(?<!linux )(?<!guest )(?<!operator )(?:kernel|shader)s?"
    r"(?!\s+(?:stack|mode|space|panics?|images?|elf|binar\w*|entry|syscalls?|attributes?|shapes?|sizes?)\b)"
)
# What an implementation of an op for a backend is called.
_IMPLEMENTATION = rf"(?:implementation|{_KERNEL}|support|bindings?|version|variant)"
_X = r"(?P<x>(?:[\w<>\-/+.,()' ]|::|(?<=_)\*){2,80}?)"  # `::` joins a path (Tensor::amin), one `:` ends
_X_IN_A_CLAUSE = r"(?P<x>(?:[\w<>\-/+.()' ]|::){2,80}?)"  # no comma: one item of a list
# A name of up to four words, all a title says before "implementation for cuda".
_NAME_X = r"(?P<x>(?:[\w<>\-/.()']|::|(?<=_)\*)+(?:\s+(?:[\w<>\-/.()']|::|(?<=_)\*)+){0,3})"
_END = (
    r"(?=\s*(?:[.;!,]|:(?!:)|$|\s+(?:with|using|via|and|so|which|that|for|on|in|into|onto"
    r"|eliminating|removing|replacing|avoiding)\b|\s+(?:—|-|\(|\[)))"
)
_GPU_ADJ = r"(?:gpu|cuda)[- ]accelerated"
_RESIDENT_ADJ = r"(?:gpu|cuda)[- ](?:native|resident|aware)|device[- ]resident|on[- ]device"
_COMMIT_TYPE = r"(?:feat|fix|perf|refactor|chore|docs|test|build|ci|style|revert)"  # "feat:" is no subject
_PREFIX = r"^(?:\w+(?:\([\w,\s-]*\))?:\s*)?"  # a conventional-commit "feat(gpu): "
# Claims that say outright that the work is done on the GPU. Unresolvable ones are
# reported as unverifiable.
CLAIM_PATTERNS = tuple(
    re.compile(p, re.I)
    for p in (
        # "add Metal GPU kernel optimizations for FFT and CFFT"
        rf"\b{_DONE}\s+(?:a\s+|an\s+|the\s+)?(?:native\s+)?(?:(?:metal|vulkan|opencl|rocm)\s+)?"
        rf"(?:gpu|cuda|cubecl|wgpu|ptx|device)[- ](?:side\s+)?"
        rf"(?:support|kernels?|path|implementation|version|backend|forward|backward|port|dispatch)"
        rf"(?:s|es)?(?:\s+optimi[sz]ations?)?\s+(?:for|of)\s+{_X}{_END}",
        # "Added differentiable exp/log/sin with GPU-aware backward" claims the backward of each
        rf"\b{_DONE}\s+{_X}\s+with\s+(?:{_RESIDENT_ADJ}|gpu|cuda)\s+(?P<dir>backward|forward)(?:\s+pass(?:es)?)?{_END}",
        rf"\b{_X}\s+(?:(?:has|have)\s+been\s+|(?:is|are|was|were)\s+)?(?:ported|moved|implemented)\s+(?:over\s+)?"
        rf"(?:on|to|onto|in|into)\s+{_TARGET}",
        rf"\b{_X}\s+(?:on|for|in)\s+{_TARGET}\s+(?:(?:has|have)\s+been\s+|(?:is|are|was|were)\s+)?"
        rf"(?:added|implemented|ported|supported|enabled)\b",
        rf"\b{_X}\s+(?:is|are)\s+(?:now\s+)?(?:(?:computed|implemented|executed|done|run)\s+(?:by|with|in|as)\s+)?"
        rf"(?:a|an)\s+(?:[\w-]+\s+){{0,2}}?(?:ptx|cuda|gpu|cubecl|wgpu)\s+kernel",
        rf"\b{_DONE}\s+{_X}\s+to\s+(?:{_RESIDENT_ADJ})",
        rf"\b{_X}\s+(?:now\s+)?(?:keeps?|stays?|remains?)\s+(?:\w+\s+){{0,2}}?"
        rf"on[- ](?:the\s+)?(?:device|gpu)\b",
        rf"\b{_DONE}\s+(?:over\s+)?{_X}\s+(?:over\s+)?(?:on|for|to|in|onto|into)\s+{_TARGET}",
        rf"\b(?:{_GPU_ADJ})\s+{_X}{_END}",
        rf"\b{_X}\s+(?:is|are)\s+(?:now\s+)?(?:fully\s+)?(?:{_GPU_ADJ})\b",
        rf"{_PREFIX}{_X}\s+(?:now\s+)?(?:{_GPU_ADJ})\b",
        rf"\b{_X}\s+(?:now\s+)?(?:runs|run|executes|execute|is computed|are computed|lives|live)"
        rf"\s+(?:entirely\s+|fully\s+|natively\s+)?on\s+{_TARGET}",
        # "It is now possible to use Neptune with Pasta curves on the GPU"
        rf"\b(?:possible\s+to|able\s+to|can(?:\s+now)?)\s+(?:use|run|execute)\s+{_X}\s+on\s+{_TARGET}",
        rf"\b(?:native\s+|best[- ]effort\s+|proper\s+)?(?:gpu|cuda|cubecl|wgpu|ptx)\s+"
        rf"(?:forward\s+|backward\s+)?"
        rf"(?:kernels?|path|implementation|support|dispatch|acceleration)"
        rf"\s+for\s+{_X}{_END}",
        rf"\b(?:gpu|cuda)\s+(?P<dir>forward|backward)\s+for\s+{_X}{_END}",
        rf"\bnative\s+(?:ptx|cuda|gpu)\s+{_X}{_END}",
        rf"\b(?:ptx|wgsl)\s+for\s+{_X}{_END}",  # kernel source is a kernel: "hand-written PTX for X"
        rf"{_PREFIX}{_NAME_X}\s+{_IMPLEMENTATION}\s+(?:for|on|in)\s+{_TARGET}\s*[.!]?\s*$",
        rf"\b{_IMPLEMENTATION}\s+(?:of|for)\s+{_X}\s+(?:for|on|in)\s+{_TARGET}",
        # "..., and gpu_matmul_bf16 via cublasGemmEx": the library is the means of the
        # nearest thing named, not of the clauses before it.
        rf"\b{_X_IN_A_CLAUSE}\s+via\s+(?:cublas|cublaslt|cufft|cusolver|cudnn|nccl|cusparse|curand)\w*",
        rf"\b{_X}\s+(?:gpu|cuda)\s+acceleration\b",
        rf"\b{_DONE}\s+(?:a\s+|an\s+|the\s+)?(?:missing\s+)?{_BACKEND}\s+{_X}{_END}",
        # "Select kernel from CPA to CubeCL": the kernel now lives in the GPU backend
        rf"{_PREFIX}{_NAME_X}\s+kernels?\s+(?:from\s+\S+\s+)?to\s+{_TARGET}",
        rf"\b{_X}\s+supports?\s+[^.;]{{0,30}}\bon\s+{_TARGET}",
        rf"^(?!{_COMMIT_TYPE}\b){_X}\s*:\s*(?:a\s+|an\s+)?(?:new\s+)?(?:ptx|cuda|gpu)\s+(?:kernel|dispatch|path)",
        rf"\b{_DONE}\s+(?P<x2>(?:gpu|cuda)_\w+)",
    )
)
# Weaker shapes, trusted only when they resolve to a changed function: a title or a
# heading that names a thing "for CUDA" / "on GPU", or just "GPU <thing>".
SOFT_CLAIM_PATTERNS = tuple(
    re.compile(p, re.I)
    for p in (
        rf"{_PREFIX}{_X}\s+(?:for|on)\s+{_TARGET}(?:\s+(?:inputs?|tensors?|devices?|backends?))?\s*$",
        rf"{_PREFIX}(?:gpu|cuda)\s+{_X}\s*$",
        rf"\b{_X}\s*,?\s+on\s+{_TARGET}\s*[.!]?\s*$",
        rf"\b{_X}\s+(?:uses|use)\s+(?:the\s+)?(?:gpu|cuda)\b",
        rf"{_PREFIX}(?:native\s+)?{_BACKEND}\s+{_X}\s+(?:kernels?|path|(?P<dir2>backward|forward))\b",
        # a branch name: "Feat/wgpu/repeat", not "Refactor/wgpu/prng"
        rf"^(?!(?:refactor|chore|ci|docs?|tests?|style|bench\w*)/)\w+/{_BACKEND}/(?P<x>[\w-]+)$",
        rf"{_PREFIX}(?P<done>{_DONE}\s+)?{_X}\s+{_BACKEND}\s+(?:forward\s+|backward\s+)?"
        rf"(?:kernel|path|bindings?|implementation|variant)s?\b",
        # "Add the where kernels.": in a GPU project a kernel is GPU code (kept when it resolves)
        rf"{_PREFIX}{_DONE}\s+(?:the\s+|a\s+|an\s+)?(?:missing\s+|new\s+)?{_X}\s+{_KERNEL}\b(?!\s+(?:on|for)\s+(?:the\s+)?(?:cpu|host))",
        rf"(?:\b|\()(?:{_RESIDENT_ADJ})\)?\s+(?:[\w-]+\s+){{0,2}}?(?:paths?|kernels?|implementations?|versions?)"
        rf"\s+(?:for|of)\s+{_X}{_END}",
        rf"^\w+\((?P<scope>[\w-]+)\):\s*(?:{_RESIDENT_ADJ}|gpu|cuda)\s+(?:fast\s+)?(?:paths?|kernels?|support)\b",
        rf"^\w+\([\w,\s-]*\b(?:gpu|cuda)\b[\w,\s-]*\):\s*{_X}\s+kernels?\b",
        rf"{_PREFIX}{_X}\s+(?:now\s+)?(?:{_RESIDENT_ADJ}|on[- ]device)\b",
        # "expressed via device-resident X": X is the means, the claim is about the subject
        rf"(?<!via\s)(?<!using\s)(?<!through\s)\b(?:{_RESIDENT_ADJ})\s+{_X}{_END}",
        rf"\b{_X}\s+(?:is|are)\s+(?:now\s+)?(?:fully\s+)?(?:{_RESIDENT_ADJ})\b",
    )
)
# "GPU kernels:" followed by a list: each item is a claim.
_LIST_HEAD = re.compile(
    r"^(?:new\s+)?(?:gpu|cuda|ptx|native)\s+(?:kernels?|ops?|support|paths?)\s*(?:for)?\s*:\s*$", re.I
)
# A line that introduces a list of new kernels in other words ("Five more hand-written
# PTX kernels for the bf16 forward:"): each item that starts with the name of a function
# the diff changes claims that function.
_KERNEL_LIST_HEAD = re.compile(rf"^.{{0,160}}\b(?:{_KERNEL}|primitives)\b.{{0,160}}:\s*$", re.I)
# A counted collective that introduces a list ("7 optimizers auto-routed:", "Foreach
# auto-route (7 optimizers, ~35 LoC each):"): the names listed are its members, each
# one claimed by the description's GPU claim about the collective.
_COUNTED_HEAD = re.compile(r"\b\d+\s+[a-z][\w-]*s\b[^:]{0,80}:\s*", re.I)
_LIST_SEPARATOR = r"(?:\s*,\s*(?:and\s+)?|\s+and\s+)"
_NAME_LIST = re.compile(rf"(?:[A-Za-z_]\w*(?:::\w+)?{_LIST_SEPARATOR})+[A-Za-z_]\w*(?:::\w+)?\s*\.?\s*")
# "Muon Pattern B (~300 LoC refactor):": the bullets under it speak of Muon; a GPU
# statement there without a subject of its own is about it (soft: kept when it resolves).
# The name must look like code or an acronym (KFAC, GpuUNet, Adam::step), not a word
# that starts a sentence ("Tests:", "Implementation:").
_SECTION_HEAD = re.compile(
    r"^(?P<name>(?:[A-Z]{3,}\w*|[A-Z][a-z0-9]+[A-Z]\w*|[A-Z]\w*_\w*)(?:::\w+)?)\b[^:;]{0,80}:$"
)
_ON_DEVICE = re.compile(
    rf"\b(?:{_RESIDENT_ADJ})\b|\bon\s+(?:the\s+)?(?:\w+'?s?\s+)?(?:device|gpu|cuda)\b", re.I
)
# The words an item of a kernel list starts with, before its explanation.
_ITEM_HEAD = re.compile(r"^[A-Za-z][\w+/ -]{0,60}?(?=\s*(?:[(:;,.]|\s[—–-]\s|$))")
# "- ferrotorch-core/src/grad_fns/activation.rs softmax CPU path: ...": an item that
# starts with a file names the place of the work, not a kernel.
_FILE_PATH = re.compile(r"^\W*[\w.-]+(?:/[\w.-]+)+\.\w+\b")
# "- BCEWithLogitsLoss: sigmoid + sub + mul": the name an item gives before its colon.
_LEADING_LABEL = re.compile(r"^\W*(?P<name>[A-Za-z_]\w*(?:::\w+)?):\s")
_LEADING_NAME = re.compile(r"^\W*(?P<name>[A-Za-z_]\w*_\w*|[A-Z]\w*::\w+)(?=[\s:,(\[-]|$)")
# What turns a sentence into a negation, a plan or one of the spec's underclaims.
_NOT_A_CLAIM = re.compile(
    r"\b(?:not|no|never|without|cannot|can't|doesn't|don't|isn't|aren't|won't|yet to|todo|planned"
    r"|plan to|will|would|should|could|might|future|follow[- ]?up|scaffold\w*|skeletons?|stub|stubbed"
    r"|reference"
    r"|pre-flight|instead of|rather than|remov(?:e|es|ed|ing)|revert(?:ed|s)?|pytorch"
    r"|torch(?!::)"  # a comparison with PyTorch; `torch::cuda` is the C++ library's namespace
    r"|drop(?:ped|s)?(?!\s+(?:with|in|on|when|under)\b)"  # not "a performance drop with Metal"
    r"|pre-?existing|already|disabl\w*|wip|work\s+in\s+progress|initial\s+work)\b"  # work begun is not done
    r"|\?\s*$"  # "Does this prevent the kernels' test suite from being run ?": a question
    # "Only support the contiguous case for cublas matmul": a restriction, no new work
    r"|\bonly\s+(?:supports?|accepts?|allows?|handles?)\b|\bsupports?\s+only\b"
    r"|\bnext(?:\s+steps?)?\s*:|\btests?\s+(?:for|of|cover\w*)\b"
    rf"|\bskip(?:s|ped|ping)?\s+(?:the\s+)?(?:gpu|{BACKENDS}|{_KERNEL})\b"  # "skip Metal kernels when .."
    r"|\bskip(?:s|ped|ping)?\b[^.;:]{0,60}?\btests?\b"  # "Skip q8k and q8_1 tests on cuda": a gap, not work
    # "Added empty backend to Metal": a backend or kernel that does nothing is no GPU work.
    rf"|\b(?:empty|dummy|placeholder|no-?op|mock|fake)\s+(?:(?:gpu|{BACKENDS})\s+)?"
    rf"(?:backends?|devices?|{_KERNEL}|impl\w*)\b",
    re.I,
)
_NOT_A_SUBJECT = re.compile(
    r"\s*(?:\d(?!-?d\b)|(?:one|two|three|four|five|six|seven|eight|nine|ten|dozens?)\b|in\b|on\b|for\b|when\b|via\b|to\b|at\b|is\b|are\b|over\b|by\b|with\b|from\b|as\b"
    r"|through\b|into\b|onto\b|more\b|others?\b|every(?:thing)?\b|each\b|major\b|etc\b|this\b|that\b|it\b|result|tensor\b(?!::)|output|input|data\b|end-to-end|next\b|done\b|todo\b|tests?\b"
    r"|can\b|may\b"  # "Native GPU kernel can be implemented in a follow-up PR": a verb, not a name
    r"|changes?\b|summary\b|notes?\b|status\b|rs\b|add(?:s|ed)?\b|implement\w*|port(?:s|ed)?\b|wire\w*|new\b|use[sd]?\b"
    r"|(?:interfaces?|traits?|apis?|surfaces?)\s*$|\w+ly\s*$"  # "dispatch interface", "cleanly"
    r"|(?:(?:gpu|cuda)\s+)?acceleration\s*$)",  # "add Metal GPU acceleration for X" is about X
    re.I,
)
_ASIDE = re.compile(r"\([^()]*\)")  # a parenthetical: "(native, no round-trip)"
# "... guard in cubecl irfft": the code a clause's work was done in (up to three words).
_PLACE = re.compile(r"\bin\s+(?:the\s+)?((?:[\w:.-]+\s*){1,3})\s*[.;,)]?\s*$", re.I)
_MADE_OF_KERNELS = re.compile(rf"{MADE_FROM}(?:\s+\d+)?\s*$", re.I)  # "composed from 8" GPU kernels
# "Move image tensor to device in trocr example", "enable vulkan for guide example",
# "enable metal backend on ci", "add cuda backend in benches": the work done is an
# example's, a benchmark's or CI's, support code.
_IN_SUPPORT_CODE_WORDS = (
    r"(?:in\s+(?:the\s+|an?\s+)?(?:[\w-]+\s+)?|for\s+(?:the\s+|an?\s+)?[\w-]+\s+)examples?\b"
    r"|(?:in|to)\s+(?:the\s+)?(?:[\w-]+\s+)?bench(?:es|marks?)\b"
    r"|(?:on|in)\s+(?:the\s+)?ci\b"
    r"|(?:ci|wf|workflows?)\b"  # "Add compute cap to cuda wf": the backend's CI workflow
)
_IN_SUPPORT_CODE = re.compile(rf"\s*(?:{_IN_SUPPORT_CODE_WORDS})", re.I)
_ITEM = r"(?:[\w<>\-/.]|::)+(?:\s*\([^)]*\))?"  # one name, maybe with a parenthetical
# "kernels for GELU (tanh), SiLU and ReLU": the list goes on past X, one name an item.
_MORE_ITEMS = re.compile(
    rf"(?:\s*\([^)]*\))?(?:\s*,\s*{_ITEM})*(?:,?\s+(?:and|or|\+)\s+{_ITEM})?(?=\s*(?:[.;:!,\[(]|$))"
)
# What separates the items of a list in a title or a clause ("X PTX kernel + Y GPU path"),
# and the parentheses inside which a separator separates nothing of the clause's.
_ITEM_SEPARATOR = re.compile(r"\s+\+\s+|,\s+|(?P<paren>[()])")
_ENDS_WITH_PREPOSITION = re.compile(r"\b(?:as|to|by|via|in|into|onto|of|on|for|with|from)$", re.I)
# "an example that runs on the GPU is a claim": a kind of thing described, not one made to
# run ("X, which stays on-device" still says it of X).
_RELATIVE_CLAUSE = re.compile(r"\b(?:that|who)$", re.I)
# Tests, CI, benchmarks, docs and tooling are not GPU ops ("Add a GPU CI job", "cuda
# example + doc", "Perf/wgpu/benches").
_TEST_NAME = re.compile(
    r"test|_matches_|_reference\b|\bci\b|\bjobs?\b|workflow|\brunners?\b|benchmark|\bbench(?:es)?\b"
    r"|\bdocs?\b|documentation|readme",
    re.I,
)
# "some kernels", "a couple kernels": how many, not which.
_QUANTIFIERS = "some|more|couple|few|several"
# Words around the subject that are not part of its name.
_SUBJECT_NOISE = re.compile(
    rf"\([^)]*\)|<[^>]*>|\b(?:the|a|an|fused|native|new|all|both|full|fully|its|our|existing|missing|{_QUANTIFIERS}|"
    rf"{_KERNEL}|ops?|paths?|support|implementation|version|forward|dispatch|now|too|also"
    rf"|unblocks?|extends?|extended|impls?|{BACKENDS})\b|'s\b|\b\d-?D\b",
    re.I,
)
# `qmv_fast`, `is_available`: a name of code a title spells (see _code_names).
_SNAKE_NAME = re.compile(r"(?<![\w-])[A-Za-z]\w*?_\w*[A-Za-z0-9](?![\w-])")
_LONGEST_KERNEL_NAME = 60  # longer string literals are messages, not kernel names
_NOT_CODE_NAME = re.compile(r"sm_\d+|(?:(?:b?f|u|i)\d+_?)+|\w+_t", re.I)
_DETOUR_RULES = HOST_DETOUR_RULES | {"cpu-detour"}
# A list item that says what it did: "- Fix GroupNorm/RMSNorm backward ...".
_DID = re.compile(
    r"^\W*(?:(?:bug|hot)?fix|port|mov|mak|wire|add|implement|enabl|support|improv|patch|optimi[sz]|speed|accelerat)\w*\b",
    re.I,
)
# A list item that reads as the title of a commit a squash merge lists: a few words that
# say what was done, or where ("broadcast_matmul on GPU").
_TITLE_LIKE_ITEM = re.compile(rf"{_DID.pattern}|\b(?:on|for|to)\s+{_TARGET}\s*[.!]?\s*$", re.I)
# "* Use fused topk kernel on CUDA", "* Avoid materializing flash attn masks", "* Dispatch to
# the 2pass kernel": an item that changes what runs on the GPU, said in words of GPU work
# ("* Use released cubecl" names a dependency).
_CHANGES_WHAT_RUNS = re.compile(
    r"^\W*(?:us(?:e|es|ed|ing)(?!\s+(?:the\s+)?correct\b)|allow\w*|avoid\w*|dispatch\w*|fus(?:e|es|ing)"
    r"|rout(?:e|es|ed|ing)|switch\w*)\b"  # "* Use correct kernel" is a fix of a name
    r"(?=.*\b(?:kernels?|gpus?|cuda|metal|vulkan|rocm|hip|webgpu|cudnn|cublas\w*"
    rf"|{FLASH_KERNELS})\b)"
    r"(?!.*:\s*$)",
    re.I,
)
_MOST_WORDS_OF_A_TITLE = 10
_MOST_LINES_OF_AN_ACCESSOR = 3  # `fn x(&self) -> usize {`, `self.x`, `}`
_CONVENTIONAL_PREFIX = re.compile(r"^\s*\w+(?:\([^)]*\))?!?:\s*")
_BACKEND_NAME = re.compile(r"(?<![a-z])(?:cuda|metal|wgpu|webgpu|vulkan|rocm|opencl)(?![a-z])", re.I)
# A title that names a GPU backend (or the GPU) as the place of the work.
_BACKEND_WORD = re.compile(
    rf"\b(?:gpu|{BACKENDS}|hip|spirv|cudnn|cublas\w*|nccl|tensorrt|directml|ptx|wgsl|msl|mps"
    rf"|{FLASH_KERNELS})\b",  # FlashAttention's and FlashInfer's kernels are CUDA's; NCCL's collectives too
    re.I,
)
# Upkeep, not GPU work: a title about it makes no claim ("Update cubecl", "Metal commands
# refactoring", "Split the cuda error file", "ci: fix wgpu-info", "fix/cudnn/test: ..",
# "fix(tests): ..", "fix cuda docker image", "fix metal test silu usage", "add X in
# test-cuda", "Replace closure in gemm kernel").
_UPKEEP = re.compile(
    r"^(?:\w+/)*(?:tests?|ci|docs?)(?:/\w+)*:|^\w+\((?:tests?|ci|docs?|bench\w*)\):"
    # "nccl: update bindings to 2.28.3": the upkeep verb after a scope's label ("feat:" and
    # "fix:" say the change is work: "feat: update GPU device id after EP registration")
    r"|^(?:\[[^\]]*\]\s*|(?!(?:feat|fix|perf)\b)[\w-]+:\s+)?(?:(?:refactor|chore|test|tests|ci|style|build|revert)\b"
    r"|(?:update|upgrade|bump|merge|release|mov(?:e|es|ed|ing)|split|cleanup|clean up|format|pin)\b"
    r"|migrat\w*\s+to\b"  # "Migrate to BufferUsage": onto a new API, nothing moved to the GPU
    r"|replac\w*\b(?!.*\b(?:with|by)\b))"  # an edit inside code; "replace X with a kernel" claims
    # a backend's tests ("GPU pool tests", "more cuda testing")
    rf"|\b(?:gpu|{BACKENDS})\s+(?:[\w-]+\s+)?test(?:s|ing)?\b|\bin\s+test-\w+"
    r"|\btests?\s+backends?\b"  # "Migrate default test backend from NdArray to Flex": what tests run on
    rf"|\btests?\s+(?:on|for)\s+(?:the\s+)?(?:gpu|{BACKENDS})\b"  # "Fix tests on metal"
    r"|\b(?:kernels?|ptx|shaders?)\s+build(?:s|ing)?\b"  # "Use cudaforge for kernel build": tooling
    # "Specific cache dir for the flash attn build artifacts": where the build keeps its output
    r"|\bbuild\s+(?:artifacts?|outputs?|cache)\b|\bcache\s+dir(?:s|ectory|ectories)?\b"
    rf"|\b(?:{BACKENDS})\s+v?\d+\.\d+"  # "Support CUDA 12.9 and 13.0": a toolkit's release
    r"|\bcuda[-_ ]?\d{4,5}\b"  # "Make cuda 12080 optional": 12.8 as cudarc's features spell it
    r"|\b(?:refactor\w*|polish\w*|cleanup|version|revisions?|submodules?|msrv|toolchains?|xcode|deps|dependenc\w+|readme|changelog|notes?|typos?|clippy|lints?"
    r"|exports?|re-?exports?|import(?:s|ing|er)?|naming|bench\w*|fuzz\w*|ci|logging|warn(?:ings?|s)?|macros?"
    r"|simplif\w*|unif\w*|renam\w*|docs?|documentation|docker\w*|debug\w*"
    r"|cargo|rerun-if-changed|when\s+(?:building|compiling)|(?:static\s+)?linking"
    r"|(?:avoid|skip|stop)\w*\s+(?:compil|build|link)\w*"  # "Avoid compiling any OpenCL on macos"
    r"|fix(?:es|ed|ing)?\s+(?:the\s+|a\s+)?(?:build|compil\w*)|fix(?:es|ed|ing)?\s+[\w-]+\s+builds"
    r"|msvc)\b"  # "Fix build for cuda graph", "Fix windows builds", "on non-MSVC targets"
    r"|(?<![\w-])-f[a-z][\w-]*"  # a compiler flag: "add -fPIC on non-MSVC targets"
    r"|\b(?:gpu|ci|self-hosted)\s+runners?\b"  # "Add GB10 gpu runner": a CI machine
    # "Fix cuda build (#1389)"; "Fix metal build for paged attn" names the work built
    r"|\bfix\w*\s+[\w-]+\s+build(?:\s+again)?\W*(?:\(#\d+\))?\s*$"
    r"|\bus(?:e|es|ed|ing)\s+(?:the\s+)?(?:upstream|released|published|latest)\b"  # a dependency's release
    r"|\b(?:no[-_\s]?)?std\b(?!::)"  # "Fix cubecl std usage": which standard library a build links
    r"|\bto\s+(?:compile|build|link)\b"  # "fix metal_profile to compile with metal"
    r"|\bbuilds?\s+with\b"  # "Make flash-attn build with max sm_90 capability"
    # "Add new CUDA default path for Ubuntu 24.04": where the toolkit is installed
    r"|\b(?:default|install\w*|library|lib|include|search|toolkit|sdk)\s+paths?\b"
    rf"|\b(?:{_IN_SUPPORT_CODE_WORDS})"  # "Add vulkan in example"
    # "Port some compiletests", "reduce bitonic shuffle test iterations": the tests' own settings
    r"|\b(?:compile|unit|integration|smoke|regression)[- ]?tests?\b"
    r"|\btests?\s+(?:iterations?|sizes?|tolerances?|timeouts?|param\w*|inputs?|data|amounts?|counts?|numbers?|cases)\b"
    r"|\btoleran\w*"  # "Fix f16 vulkan tolerances": how close a test's results must be
    # "Fix cargo risczero guest test (#3592)" is about a test; "erf operator + test" is not
    r"|^(?!.*(?:\s(?:and|with|plus)\s|\s[+&]\s)).*\btests?\W*(?:\(#\d+\))?\W*$",
    re.I,
)
# A title that names a backend or a kernel puts its work on the GPU ("rope kernel",
# "Metal training works"): it is a claim even when none of its words names a function.
_ON_THE_GPU = re.compile(rf"{_BACKEND_WORD.pattern}|\b{_KERNEL}\b", re.I)
# "Feat/wgpu/conv", "[Metal]", "feat(cuda):": the label of a title, not its subject.
_BRANCH_PREFIX = re.compile(r"^\s*(?:\w+/)*\w+(?:\([^)]*\))?:|^\s*(?:\w+/)+|^\s*\[[^\]]*\]")
# The words of a title that are not its topic: verbs of change, backend names, fillers.
_TOPIC_NOISE = re.compile(
    r"\b(?:fix(?:es|ed|ing)?|add(?:s|ed|ing)?|handl(?:e[sd]?|ing)|improv(?:e[sd]?|ing)|support(?:s|ed|ing)?"
    r"|enabl(?:e[sd]?|ing)|activat(?:e[sd]?|ing)|implement\w*|feat|perf|mak(?:e|es|ing)|allow\w*|us(?:e[sd]?|ing)"
    rf"|faster|better|new|initial|first|draft|{_QUANTIFIERS}|small|missing"
    rf"|the|a|an|for|on|in|to|of|with|and|from|via|gpu|{BACKENDS}|hip|spirv"
    rf"|backends?|{_KERNEL}|impls?|implementations?|ops?|operations?|operators?|nodes?|paths?|tests?)\b"
    r"|\(#\d+\)",
    re.I,
)
# "the cuda panic", "cudnn error msg", "ack api changes in metal", "compute cap from
# env", "workspace setting", "cubecl macro", "cuda structure", "memory info", "comments
# for Metal backend compatibility", "partial
# ContextProperties struct", "candle-nn/cuda feature", "cuda-all image", "wgpu files",
# "GPU work a span", "cuda mod and poc", "ptx compilation make rule", "error handling",
# "Metal GPU stubs", "cuda fft fuzzer", "the metal job", "gpu memory tracking metrics",
# "`cfg_aliases` to `wgpu-core`":
# a subject whose head noun is the plumbing or tooling around GPU code (its messages,
# errors and their handling, interfaces, settings, names, macros, types, scaffolding,
# stubs, modules, cargo features and dependencies, build rules, images, files, trace
# spans, fuzzers, profilers, metrics and other reports, lints, comments, `cfg` settings,
# CI jobs), not GPU work.
_PLUMBING_HEAD = re.compile(
    r"\b(?:panics?|messages?|msgs?|notices?|errors?|apis?|api\s+changes|env|environment|settings?|config(?:s|uration)?"
    r"|names?|checks?|macros?|flags?|features?|images?|files?|spans?|stubs?|fuzz\w*|profil(?:er|ing)|jobs?|bindings"
    r"|metrics?|telemetry|stat(?:s|istics)|info(?:rmation)?|counters?|lints?|comments?|cfg\w*"
    r"|(?:make|build|compil\w*|link\w*)\s+(?:rules?|issues?|errors?|failures?|problems?|warnings?|breakage)"
    r"|compilation|(?:error|exception)\s+handling|dependenc\w+|deps"
    r"|builders?|(?:architecture|arch)\s+(?:suffix\w*|names?|lists?)"
    r"|structure|structs?|enums?|scaffold\w*|skeleton|boilerplate"
    r"|constraints?|(?:trait\s+)?bounds)\W*$"  # "fixup gpu constraints": a type's bounds
    # "cuda mod and poc", "fix(gpu): compile"; a backend's compiler is GPU work (it writes the kernels)
    r"|^\W*(?:mods?|modules?|pocs?|compil(?!ers?\b)\w*|build(?:s|ing)?)\W*$"
    r"|^\W*building\s"  # "support for building libtorch with CUDA": a build option
    r"|^\W*build\.rs\b",  # "Add build.rs to avoid metal kernel jit compile overhead": a build script
    re.I,
)
_WHAT_IT_IS_FOR = re.compile(r"\s+(?:for|of)\s+", re.I)  # "error handling for softmax"
_REPLACED = re.compile(r"\s+(?:instead\s+of|rather\s+than)\b.*", re.I)
# "fix delta calculation when Torus is not a 64-bit type", "Handle the case where the
# kernel is not contiguous": the case a fix is for, whose negation negates the case, not
# the claim.
_CONDITION = re.compile(
    r"\s+(?:when|if|unless|whenever|where|with\s+(?:the\s+)?[\w-]+\s+(?:disabled|enabled))\b.*", re.I
)  # "Fix burn-cubecl with autotune disabled": the setting a fix is for
# A topic that is only a model of a model zoo ("Implement Llama 4!", "support Qwen 3.5
# model family", "Add LFM2.5 (Liquid Foundation Model 2.5) support"): its layers are the
# framework's ops, and a title that names no device or kernel claims the model, not GPU
# work. "multi-rank inference of Mistral-3-VL models" and "SDPA head dims for SigLIP"
# name work beyond the model.
_MODEL_NAMES = (
    r"llama|qwen|gemma|mistral|mixtral|phi|deepseek|gpt-?oss|whisper|bert|t5|lfm|glm|falcon|mamba"
    r"|olmo|granite|smollm|llava|idefics|pixtral|siglip|minicpm|starcoder|dia"
)
_MODEL = rf"\b(?:{_MODEL_NAMES})|\bmodels?\b"
_MODEL_NAME = re.compile(rf"\b(?:{_MODEL_NAMES})", re.I)
_ONLY_A_MODEL = re.compile(
    rf"(?=.*(?:{_MODEL}))(?:(?:{_MODEL})[\w.-]*|\b\d[\w.]*"
    r"|\b(?:famil(?:y|ies)|vision|language|foundation|liquid|tts|multimodal|moe|vl|next|quantized|full)\b"
    r"|[\s\-.,&!()])+",
    re.I,
)
# "reject unsupported kernel argument types": an input turned away, no work done on it.
_REJECTS = re.compile(r"\s*(?:reject|refus)\w*\s", re.I)
# A topic that is only the case a fix is for ("when running"); "where" is an op too.
_CASE_ONLY = re.compile(r"(?:when|if|unless|whenever)\s", re.I)
# "prevent u32 overflow", "u64 offsets": an integer type as the width of a count or an
# index the code keeps, not a dtype of the data a test must use.
_COUNTER_WIDTH = re.compile(
    r"\b[iu](?:8|16|32|64)\s+(?:overflow|wrap|limit|max|counter|offset|index|indices|indexing)\w*", re.I
)
_DTYPE = re.compile(r"(?:f|bf|u|i)|\d+")  # the subject words of "f32", "bf16", "u8"
_BFLOAT = re.compile(r"\bbfloat(?:16)?\b", re.I)  # "missing bfloat unary kernels" are bf16's
_BACKWARD_NAME = re.compile(r"backward|_grad\b|grad_|Backward|vjp", re.I)
_FALLBACK = re.compile(r"\bfall(?:s|ing)?[- ]?backs?\b", re.I)
_SET_UP_NAME = re.compile(rf"{PLUMBING_NAME.pattern}|^(?:init|setup|register|configure|load)(?:_|$)")
# A function of the host by its name or place (`im2col_cpu`, `div/cpu_kernel.rs`,
# `cpu_backend/`, candle's `accelerate.rs` and `mkl.rs`: Apple's Accelerate and Intel's
# MKL are CPU libraries), unless its name also says the device (`cpu_to_gpu`): the host
# twin of the op, not what a GPU claim is about.
_HOST_NAME = re.compile(r"(?<![a-z])(?:cpu|host|accelerate|mkl)(?![a-z])", re.I)
_DEVICE_NAME = re.compile(rf"(?<![a-z])(?:gpu|device|ptx|{BACKENDS})(?![a-z])", re.I)
_STUB_RULES = frozenset({"deferred-kernel", "stub-residue"})
# Code that says it stands in for the real thing: cubecl's first Flash Attention launched
# a `DummyAlgorithm` from `tile/dummy/`.
_PLACEHOLDER_WORDS = frozenset({"dummy", "placeholder", "mock"})  # not "fake": fake quantization is real work
_DATA_WORK = frozenset({"readback", "upload", "device_memory", "host_loop", "to_vec"})
# "copy_into_async", "2D memcpy", "synchronize method", "pinned buffers": a claim about
# device memory, transfers or synchronisation, whose work is the driver's (spec 4a counts
# `cudarc::driver::` device memory as backend evidence), not a kernel's. "Zero-copy
# views" are the opposite: no copy is made.
_MEMORY_WORK = re.compile(
    r"(?<![a-z])(?<!zero-)(?<!zero )(?<!no )(?:memory|mem(?:cpy|set)|cop(?:y|ies)|transfers?|alloc\w*"
    r"|malloc\w*|buffers?|synchroni[sz]\w*|sync|pinned|staging|htod|dtoh|dtod|uploads?|downloads?|readbacks?)(?![a-z])",
    re.I,
)
_DRIVER_WORK = frozenset({"device_memory", "upload", "readback", "sync"})
# What a changed callee's code does to every op that calls it.
_INHERITED_RULES = _STUB_RULES | {"silent-fallback", "eprintln-fallback", "fallback-without-warn"}


@dataclass
class Claim:
    text: str
    subject: str
    line: int
    functions: list[IndexedFunction] = field(default_factory=list)
    missing: list[str] = field(default_factory=list)
    soft: bool = False  # a weak shape: dropped when it resolves to nothing
    listed: bool = False  # an item of a list of ops: its words are whole words of the names
    topic: bool = False  # a title's topic: when it names no function, it stands for the diff's GPU work
    of_an_op: bool = False  # a title's topic naming no backend: about the GPU code of the op it names

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
    listing = ""  # "subjects" after a "GPU kernels:" line, "names" after a looser kernel list,
    # "members" after a counted collective
    item_line = -1  # a bullet item can run to several sentences: only its first names it
    about_gpu: bool | None = None  # the title (or a message's subject line) speaks of the GPU
    section = ""  # the name a "Name ...:" head gives the bullets under it
    head_about_gpu = False  # the last line that is not a list item speaks of the GPU
    head_under_gpu_title = False  # ... or is a list head ("Core (16 files):") under a GPU title
    for sentence in sentences:
        text = sentence.with_code or sentence.text
        if about_gpu is None:
            about_gpu = bool(GPU_WORD.search(text))
        members = _members(text, listing == "members" and sentence.bullet, about_gpu)
        if members:
            claims.extend(Claim(text, name, sentence.line, soft=True) for name in members)
            continue
        if listing and sentence.bullet:
            first = sentence.line != item_line
            item_line = sentence.line
            if listing == "subjects":
                claims.extend(Claim(text, subject, sentence.line) for subject in _subjects(text))
                continue
            named = _LEADING_NAME.match(text)
            if listing == "names" and first and named:
                # soft: "kernel" in the head may be an operating system's; a name the
                # diff does not have is no kernel claimed
                claims.append(Claim(text, named.group("name"), sentence.line, soft=True))
                continue
            if listing == "names" and first and _FILE_PATH.match(text):
                continue  # "Kernels touched:" then files: places of work, kernels of any device
            if listing == "names" and first:
                # "- ELU forward + backward (with alpha)": the item names the kernel in words.
                item = _ITEM_HEAD.match(text)
                subjects = _subjects(item.group()) if item else []
                if subjects:
                    claims.extend(Claim(text, subject, sentence.line, soft=True) for subject in subjects)
                    continue
        else:
            listing = _list_kind(sentence)
        if not sentence.bullet:
            head = _SECTION_HEAD.match(text)
            section = head.group("name") if head else ""
            head_about_gpu = bool(GPU_WORD.search(text))
            head_under_gpu_title = bool(
                about_gpu and text.rstrip().endswith(":") and not HOST_WORD.search(text)
            )
        found = [
            claim
            for clause in re.split(r"\s*(?:;|\s+and\s+(?=(?:added|implemented|ported|moved)))\s*", text)
            for claim in _clause_claims(clause, sentence.line)
        ]
        if section and sentence.bullet and all(c.soft for c in found) and _said_of_the_device(text):
            found.append(Claim(text, section, sentence.line, soft=True))
        subjects_found = [set(subject_words(c.subject)) for c in found]
        # An item that says what it did ("- Fix GroupNorm/RMSNorm backward ...") under a
        # GPU title's list head is that title's GPU work.
        gpu_item = head_about_gpu or (head_under_gpu_title and _DID.match(text) is not None)
        for subject, soft in enumerated_subjects(text, sentence.bullet and gpu_item):
            if not any(set(subject_words(subject)) <= words for words in subjects_found):
                found.append(Claim(text, subject, sentence.line, soft=soft, listed=True))
        claims.extend(found)
    return claims


# "moved most of utils to gpu": a move into the crate or folder of that name.
_MOVED_TO = re.compile(r"\bmov(?:e|es|ed|ing)\b.*?\bto\s+`?([\w-]+)`?", re.I)


def moved_into_a_folder(claim: Claim, paths: Iterable[str]) -> bool:
    """A claim that code moved to a name that is, spelled the same, a folder of the
    files the diff changes ("move sync rule to gpu" of `gpu/src/sync.rs`): code moved
    between crates, not onto the device."""
    moved = _MOVED_TO.search(claim.text)
    return moved is not None and any(moved.group(1) in path.split("/")[:-1] for path in paths)


# The end of a title's first sentence, when another follows (not "e.g. X", "v0.3. X").
# Narrower than the body's sentence split (prose): a title's "; now returns Err" and
# its "(#955)" stay with the claim they qualify.
_NEXT_SENTENCE = re.compile(r"(?<=[a-z]{3})\.\s+(?=[A-Z][a-z])")


def title_topic(title: Sentence) -> Claim | None:
    """The claim a terse title makes of the whole change ("Fix mistral attention on
    Metal", "[Metal] Concurrent dispatching", "WGPU: matmul vec4"): a title that is
    neither upkeep (a refactor, a bump, CI) nor about the host. Its subject is the title
    without the backend and the verb; it is soft. When it names a GPU backend and its
    subject names no changed function, it stands for the diff's GPU code of that
    backend (the title of a one-topic change describes the diff). When it names none
    ("feat: implement HardSigmoid operation" in a runtime whose every op is a shader),
    it claims the op only where the diff's GPU code names that op. A title that names
    only the backend ("added cuda support") is about that backend's code in the diff."""
    # "Fixes metal randn determinism. Ensure we use the 2 atomic_uints buffer correctly":
    # the first sentence is the topic; what follows says how.
    text = _without_upkeep_parts(_NEXT_SENTENCE.split(title.with_code or title.text, maxsplit=1)[0])
    # "reuse cuda devices instead of instantiating contexts": what is replaced is no claim,
    # and names no negation or host of the work claimed; nor does the case a fix is for.
    said = _REPLACED.split(text, maxsplit=1)[0]
    unconditioned = _CONDITION.split(said, maxsplit=1)[0]
    if _UPKEEP.search(text) or HOST_WORD.search(said) or _NOT_A_CLAIM.search(unconditioned):
        return None
    unlabelled = _BRANCH_PREFIX.sub(" ", said)
    if _REJECTS.match(unlabelled):
        return None
    subject = _topic_of(unlabelled)
    if _CASE_ONLY.match(subject) and not _BACKEND_NAME.search(unconditioned):
        return None  # "Fix when running on the gpu": it names only the case a fix is for
    # "[metal] Some fixes": with nothing else named, the label's backend is the topic of
    # the words after it ("[Metal]" alone says nothing).
    words_after_label = re.search(r"[a-z]", unlabelled, re.I) is not None
    backend = _BACKEND_NAME.search(said if words_after_label and not subject else unlabelled)
    if backend and not subject:
        subject = f"{backend.group()} backend"  # "added cuda support", "Fixing metal backend."
    elif backend and subject.lower() in ("device", "devices"):
        subject = f"{backend.group()} {subject}"  # "Add the Vulkan device": which device
    parts = _topic_parts(unlabelled)  # "cuda mod and poc": each thing it lists is plumbing
    # "Throw error when Cast tries to convert data types not supported": the plumbing
    # named before the case it is for.
    plumbing = _PLUMBING_HEAD.search(subject) or _PLUMBING_HEAD.search(
        _topic_of(_BRANCH_PREFIX.sub(" ", unconditioned))
    )
    if not subject or plumbing or (parts and all(map(_PLUMBING_HEAD.search, parts))):
        return None
    if _FALLBACK.search(text):
        return None  # "eliminate 3 silent fallbacks in codegen", "add X for graceful Metal fallback"
    # "Prioritize swap-out instead of GPU context-cache release": the GPU is what the
    # work replaces, not where it is done.
    of_an_op = not _BACKEND_WORD.search(said)
    on_the_gpu = bool(_ON_THE_GPU.search(said))
    if of_an_op and not on_the_gpu and _ONLY_A_MODEL.fullmatch(subject):
        return None
    return Claim(text, subject, title.line, soft=not on_the_gpu, topic=True, of_an_op=of_an_op)


def listed_title(item: Sentence) -> Claim | None:
    """The claim of a list item that reads as a commit title ("* Fix home folder for
    metal" in a squash merge) and puts its work on the GPU, as a terse title's. An item
    that names plumbing before what it is for ("Add error handling for CUDA's softmax
    implementation") claims nothing, though a title may still claim the work it ends on."""
    text = item.text
    # "* perf(cuda): optimize hybrid qwen decode path": a conventional commit's type and
    # scope come before what it did.
    done = (
        _TITLE_LIKE_ITEM.search(text)
        or _TITLE_LIKE_ITEM.search(_CONVENTIONAL_PREFIX.sub("", text))
        or _CHANGES_WHAT_RUNS.match(item.with_code or text)  # not a name's verb: "`f()` dispatches"
    )
    if len(text.split()) > _MOST_WORDS_OF_A_TITLE or not done:
        return None
    if _PLUMBING_HEAD.search(_WHAT_IT_IS_FOR.split(text, maxsplit=1)[0]):
        return None
    claim = title_topic(item)
    return claim if claim is not None and not claim.soft else None


# "improve cuda p2p backend and docs (#2181)": the last word of a title, after an "and";
# "Activate bfloat affine and add benchmark (#1543)": a last short clause of its own verb.
_LAST_AND = re.compile(
    r"\s+and\s+(?=(?:(?:add|updat|fix|remov|improv|clean|bump|refactor)\w*\s+(?:\S+\s+){0,2})?\S+"
    r"(?:\s+\(#\d+\))?\s*$)",
    re.I,
)


def _without_upkeep_parts(title: str) -> str:
    """The title without the upkeep or the removal it adds after an "&", a "+" or a
    comma ("Fix completion on Metal & pypi readme" claims the fix, not the readme; "GPU
    autograd: backward kernels, shape ops graph fix, regression tests" the kernels and
    the fix; "Fix cubecl cuda all-reduce + remove useless check" the fix, which the
    removal does not negate; "improve cuda p2p backend and docs" the backend). An
    "and" often joins the objects of one verb ("Cleanup normalization and softmax
    shaders"), so it splits off only a last word that is upkeep."""
    said, *last = _LAST_AND.split(title, maxsplit=1)
    if last and _UPKEEP.search(last[0]):
        title = said
    first, *rest = re.split(r"(\s+[&+]\s+|,\s+)", title)
    if _UPKEEP.search(first):
        return title
    joined = zip(rest[::2], rest[1::2], strict=True)  # (separator, part)
    return first + "".join(
        joint + part for joint, part in joined if not (_UPKEEP.search(part) or _NOT_A_CLAIM.match(part))
    )


def _topic_parts(title: str) -> list[str]:
    """The things a title's topic lists ("cuda mod and poc" is two), without the words
    that are not its topic."""
    parts = re.split(r"\s*(?:,|/|&|\+|\band\b)\s*", title)
    return [p for p in map(_topic_of, parts) if p]


def _topic_of(title: str) -> str:
    """A title without the words that are not its topic; a word inside a hyphenated
    compound ("Proof-of-Work", "text-to-image") is part of it, and a compound that
    starts or ends with one is a name (the crate `wgpu-core`) that goes with it."""
    kept = _TOPIC_NOISE.sub(partial(_unless_joined, title), title).split()
    return " ".join(w for w in kept if not (w.startswith("-") or w.endswith("-"))).strip(" .:-+,!?")


_FILE_EXTENSION = re.compile(r"\.[a-z]")  # the start of `.rs` after `ops`


def _unless_joined(title: str, noise: re.Match[str]) -> str:
    after = title[noise.end() : noise.end() + 2]
    joined = title[noise.start() - 1 : noise.start()] == "-" and after[:1] == "-"
    a_file = _FILE_EXTENSION.fullmatch(after) is not None  # "Fix mistralrs-quant ops.rs for metal"
    return noise.group() if joined or a_file else " "


def _said_of_the_device(text: str) -> bool:
    """A statement that something is on the device, not negated before it says so
    ("buffers stored as Tensor<T> (device-resident)", "factors on the parameters' device")."""
    said = _ON_DEVICE.search(text)
    if said is None:
        return False
    return not _NOT_A_CLAIM.search(text[: said.start()]) and not HOST_WORD.search(said.group())


def _members(text: str, in_list: bool, about_gpu: bool) -> list[str]:
    """The names a counted collective lists, on its own line after a head ending in a
    colon or after the colon of its own sentence; soft claims, kept when they resolve."""
    head = _counted_head(text)
    start = head.end() if head else 0
    if not (about_gpu and (head or in_list)):
        return []
    # "- BCEWithLogitsLoss: sigmoid + sub + mul" under "4 losses now GPU-native:": an
    # item that names its member before a colon.
    label = _LEADING_LABEL.match(text) if in_list else None
    if label and _names_something(label.group("name")):
        return [label.group("name")]
    if not _NAME_LIST.fullmatch(text, start):
        return []
    return [n for n in re.split(_LIST_SEPARATOR, text[start:].strip(" .")) if _names_something(n)]


def _counted_head(text: str) -> re.Match[str] | None:
    """A counted collective of ops, not of tests ("68 tests covering 8 modules:")."""
    head = _COUNTED_HEAD.search(text)
    return head if head and not _TEST_NAME.search(text[: head.end()]) else None


def _list_kind(sentence: Sentence) -> str:
    text = sentence.with_code or sentence.text
    counted = _counted_head(text)
    if counted and counted.end() == len(text):
        return "members"
    if _LIST_HEAD.match(text):
        return "subjects"
    # "helper primitives that propagate the meta device through op implementations:"
    # lists host code.
    on_the_host = said_of_the_host(sentence.text)
    if _KERNEL_LIST_HEAD.match(sentence.text) and not _NOT_A_CLAIM.search(sentence.text) and not on_the_host:
        return "names"
    return ""


_A_DOCUMENT = re.compile(r"\b(?:notes?|readme|docs?|documentation|changelog)$", re.I)


def _clause_claims(clause: str, line: int) -> list[Claim]:
    """The claims of the first shape that names something, then those of the list
    items after it ("X PTX kernel + Y GPU path", "X kernels, Y GPU inference")."""
    for soft, patterns in ((False, CLAIM_PATTERNS), (True, SOFT_CLAIM_PATTERNS)):
        for pattern in patterns:
            found = pattern.search(clause)
            if not found or any(in_quotes(clause, at, at) for at in (found.start(), found.end() - 1)):
                continue  # "the 'X on CUDA added' shape", "'Add the Vulkan device' says ..": quoted, not said
            # A negation in an aside ("(works on sm_52+, no special hardware needed)",
            # "(native, no host round-trip)") negates nothing the clause claims.
            said = _without_asides(clause[: found.end()], found.start())
            if (
                _NOT_A_CLAIM.search(said)
                or HOST_WORD.search(_ASIDE.sub(" ", found.group()))
                or _IN_SUPPORT_CODE.match(clause, found.end())
            ):
                return []
            groups = found.groupdict()
            weak = soft and not groups.get("done")  # "implement X GPU kernel" says it outright
            phrase = groups.get("x") or groups.get("x2") or groups.get("scope") or ""
            if _MADE_OF_KERNELS.search(phrase):
                return []  # "step composed from 8 GPU kernel calls (scale, add, ..)": the means
            end = found.end()
            listed = _MORE_ITEMS.match(clause, found.end("x")) if groups.get("x") else None
            if listed:
                phrase += listed.group()
                end = max(end, listed.end())
            direction = groups.get("dir") or groups.get("dir2") or ""
            # "Add wgpu recursion limit note": a document about the backend, no work on it.
            subjects = [s for s in _subjects(phrase) if not _A_DOCUMENT.search(s)]
            if direction and subjects:
                subjects = [f"{s} {direction}" for s in subjects]
            if subjects:  # a shape that names nothing leaves the clause to the next one
                claims = [Claim(clause, subject, line, soft=weak) for subject in subjects]
                for item in _items_after(clause, end):
                    claims.extend(_clause_claims(item, line))
                return claims
    return []


def _without_asides(text: str, claim_start: int) -> str:
    """The text without its parentheticals, except one the claim starts inside ("(a
    follow-up could add a GPU backward similarly)" says it all in its aside)."""
    return _ASIDE.sub(lambda aside: aside.group() if aside.start() < claim_start < aside.end() else " ", text)


def _items_after(clause: str, end: int) -> list[str]:
    """The list items that start after ``end``, split at separators outside parentheses."""
    items: list[str] = []
    depth = 0
    start = -1
    for sep in _ITEM_SEPARATOR.finditer(clause):
        if sep.group("paren"):
            depth = depth + 1 if sep.group() == "(" else max(depth - 1, 0)
        elif depth == 0 and sep.start() >= end:
            if start >= 0:
                items.append(clause[start : sep.start()])
            start = sep.end()
    return [*items, clause[start:]] if start >= 0 else items


def _subjects(phrase: str) -> list[str]:
    """The things a claim names: "GELU and SiLU" is two, "(inference)" and "the fused"
    are noise. A phrase that starts with a preposition or a number names nothing."""
    if _NOT_A_SUBJECT.match(phrase) or re.search(r"\bso\b", phrase, re.I):
        return []  # "... so the entire path" runs on into a second clause
    # "GELU is now computed by ...": the subject ends at its verb.
    phrase = re.split(r"\s+(?:is|are|was|were)\s+", phrase, maxsplit=1)[0]
    cleaned = _SUBJECT_NOISE.sub(" ", phrase)
    parts = [" ".join(p.split()).strip(" .-:()") for p in re.split(r"\s*(?:,|/|\band\b|&|\+)\s*", cleaned)]
    # "mean_dim forward + backward": the bare direction belongs to the op before it.
    for i in range(1, len(parts)):
        if parts[i].lower() == "backward" and parts[i - 1]:
            parts[i] = f"{parts[i - 1].split()[0]} backward"
    return [p for p in parts if _names_something(p)]


def _names_something(subject: str) -> bool:
    """A word of three letters or more, not a test's name ("gpu_gelu_matches_cpu_reference")."""
    return (
        any(len(w) >= 3 for w in re.findall(r"[A-Za-z]+", subject))
        and bool(subject_words(subject))
        and not _NOT_A_SUBJECT.match(subject)
        and not _TEST_NAME.search(subject)
        and not _ENDS_WITH_PREPOSITION.search(subject)
        and not _RELATIVE_CLAUSE.search(subject)
        and not NAME_FAMILY.fullmatch(subject)
        and not _PLUMBING_HEAD.search(subject)
    )


def judge(
    ws: Workspace,
    claim: Claim,
    changed: list[IndexedFunction],
    findings: list[Finding],
    held: list[Finding],
    touched: Touched,
    kernel_sources: Sequence[str] = (),
    added: Sequence[IndexedFunction] = (),
) -> None:
    """Resolve the claim to the functions the diff changes and say what evidence is
    missing (empty when the claim is backed). ``findings`` (the code findings of the
    changed functions) show which code handles GPU work; ``held`` (those on the lines
    the diff writes, ``touched``) count against the claim: a fallback a changed function
    already had is not the new work's. ``kernel_sources``, the kernel files the diff changes,
    say why a title that names no Rust code cannot be verified; ``added``, the functions
    the diff adds whole, are the new work a title claims."""
    subject = subject_words(claim.subject)
    # An item of a list takes the list's words: "GroupNorm/RMSNorm backward" is about
    # `GroupNormBackward::backward`.
    said = subject_words(claim.text) if claim.listed else subject
    about_backward = any(w in ("backward", "grad", "gradient", "vjp") for w in said)
    candidates = [
        f
        for f in _of_the_backend(claim.text, changed)
        if not f.cpu_build
        and not _host_twin(f)
        and (about_backward or not _BACKWARD_NAME.search(f.fn.qualname))
    ]
    named = _named(claim, subject, candidates)
    # A claim that names a backend is about that backend's code (`conv2d` of "Feat/wgpu/conv"
    # in `burn-wgpu`, not `Conv2dConfig::init` in `burn-core`); when what it names is a
    # host helper, about the backend's code that calls it.
    named = _saying_backend(claim.text, named) or _backend_callers(ws, claim.text, named, candidates) or named
    dispatched_by: dict[int, str] = {}  # id() -> the string a function runs the claimed op for
    code_names = _code_names(claim.subject)  # "Optimized Metal qmv_fast path"
    if claim.of_an_op:
        named = _op_functions(subject, candidates, findings, dispatched_by)
    elif claim.topic:
        named = _topic_functions(claim, subject, named, candidates, findings, code_names)
    left_alone = _models_left_alone(claim.subject, candidates) if claim.topic and claim.line else []
    if left_alone:
        # "* Use flash-attn in gemma." in a squash merge whose diff leaves gemma alone: a
        # commit's title that names a model is about that model's code, not the diff's GPU
        # code (the pull request's own title is about the diff: "Fix llama on Metal" of
        # the Metal kernels the model runs).
        claim.missing = [
            f"the claim is about {', '.join(left_alone)}, whose code the diff does not change: "
            "it cannot be verified"
        ]
        return
    if claim.topic and not claim.soft and not named:
        # A title that puts its work on the GPU but whose words name none of the diff's
        # GPU code stands for all of that code ("Metal training works"); one that spells a
        # name of code ("Optimized Metal qmv_fast path") for the changed code of that name.
        if code_names:
            named = [f for f in candidates if _spelled_by(code_names, f)]
        else:
            named = _work_of_a_title(claim.text, candidates, findings)
        host_only = bool(changed) and all(f.cpu_build or _host_twin(f) for f in changed)
        if host_only and not (named or kernel_sources or DEVICE_WORD.search(claim.text)):
            # "Add a const to select the conv2d kernel" over a diff that changes only the
            # CPU backend: host code has kernels too. Over other code a kernel may live in a
            # dependency ("Use faster kernel for sampling"): that claim cannot be verified.
            claim.soft = True
    if not (named or claim.topic or claim.soft):
        named = _partly_named(subject, candidates, findings)
    if not (named or claim.topic or claim.soft):
        named = _building(subject, candidates) or _in_a_folder_named(subject, candidates, findings)
    if not (named or claim.topic or claim.soft) and (place := _PLACE.search(claim.text)):
        # "Add shape validation and edge case guard in cubecl irfft": the subject is
        # what was done, and the place names the code it was done in.
        named = _partly_named(subject_words(place.group(1)), candidates, findings)
    # The functions that do the GPU work stand for the claim; a trait's default method
    # that returns "not implemented" is not the implementation being claimed. One the diff
    # writes a host detour into stays: a `sum_f32` of `CudaBackend` that reads back and
    # sums on the host is the fake GPU function the claim hides.
    with_evidence = [f for f in named if f.evidence or _detours_here(f, held)]
    claim.functions = with_evidence or [f for f in named if f.claim] or named
    # candle's `dummy_cuda_backend.rs` stands in for the CUDA backend in a build without
    # it: the claim is about the real one, when the diff changes that too.
    claim.functions = [f for f in claim.functions if not _placeholder_word(f)] or claim.functions
    if claim.soft and claim.line == 0 and not DEVICE_WORD.search(claim.text):
        # A title's "fused single-pass sigmoid/tanh kernels" of host code: kernels of the
        # CPU (a list under a head takes the head's word for the place of its work). Nor
        # is a front end's `re_isq` of "Add immediate isq predicates for qwen3" GPU work,
        # though the engine crate it calls launches kernels: a title that says no GPU word
        # is about code that does that work itself or through its own crate.
        claim.functions = [f for f in claim.functions if _does_its_own_gpu_work(f, findings)]
    if claim.soft and claim.listed:
        # A listed name that does no GPU work is no GPU op when the GPU-ness is only its
        # place (`pool_take` of "byte_size computation in pool_take/pool_return" under
        # "GPU allocator:", a host helper in a GPU crate) or only the word "kernel" (a CPU
        # backend's "int_gather, int_select, ... contradicted what the kernels accept").
        # Under a device word ("sin, cos, exp forward preserve GPU storage") it is the
        # claimed op, and doing no GPU work is what is missing.
        only_kernels_said = not DEVICE_WORD.search(claim.text)
        claim.functions = [
            f
            for f in claim.functions
            if _does_gpu_work(f, findings) or not (only_kernels_said or f.gpu_location)
        ]
    if not claim.functions:
        if claim.soft:
            return  # a weak shape that names nothing changed: not taken as a claim
        if claim.topic and not code_names:
            claim.missing = [_unverifiable_title(kernel_sources)]
            return
        claim.missing = [
            f"no function the diff adds or changes matches `{claim.subject}`: the claim cannot be verified"
        ]
        return
    reach = gpu_test_reach(ws)
    # 4d asks of the code that does the GPU work: a wrapper that only calls a tested
    # launcher (`Tensor::lu_factor` -> `gpu_lu_factor_f32`) is tested through it.
    launchers = [f for f in claim.functions if f.direct_evidence]
    untested = [f for f in launchers or claim.functions if id(f) not in reach]
    # A test reaches more than it runs: `backward()` walks to every grad fn's kernel. The
    # arm of a dispatch by op (`Op::IndexSelect(..) =>`) runs for a test that names it,
    # the branch on a dtype (`if is_f64::<T>()`) or an opt-in mode for a test that uses it.
    untaken = {
        id(f): why
        for f in launchers or claim.functions
        if id(f) in reach and (why := untaken_dispatch(ws, f))
    }
    untested += [f for f in launchers or claim.functions if id(f) in untaken]
    if claim.topic and len(untested) < len(launchers or claim.functions):
        # A title that stands for the diff's GPU work: a GPU test runs that work, and
        # each launcher the diff adds ("Add more functions from torch::cuda") is that
        # work, so none may be left untested.
        new_ids = {id(f) for f in added}
        untested = [f for f in untested if id(f) in new_ids and f.direct_evidence]
    # A function that runs many ops, one per string it matches on (`"Erf" =>` in wonnx's
    # `compile`), runs the claimed one only for a test that asks for it by that name.
    untested += [
        f
        for f in claim.functions
        if id(f) in dispatched_by
        and f not in untested
        and not _a_test_asks_for(ws, f, [{dispatched_by[id(f)]}])
    ]
    # The diff's work in a function it only adds arms to (`DType::I64 =>` in candle's
    # Metal gather) runs for a test that takes one of those arms, not for every test
    # that reaches the function.
    arms_untaken = {
        id(f): arms
        for f in claim.functions
        if f not in untested and (arms := _new_arms(f, touched)) and not _takes_an_arm(ws, f, arms)
    }
    # "} else if self.device.use_mlx_mm {": the diff's work behind a switch read from the
    # environment runs for a test that turns it on.
    switched_off = {
        id(f): switch
        for f in claim.functions
        if f not in untested
        and id(f) not in arms_untaken
        and (switch := _new_switched_code(ws, f, touched))
        and not _a_test_asks_for(ws, f, [{switch.name}, {switch.variable}])
    }
    # "where-cond for u8 and u32", "bf16 matmul": a claim about dtypes is tested by a GPU
    # test that uses one of them.
    dtype_words = _COUNTER_WIDTH.sub(" ", _BFLOAT.sub("bf16", claim.text))
    dtypes = sorted({d.lower() for d in DTYPE_NAME.findall(dtype_words)})
    dtypes_unused = {
        id(f)
        for f in launchers or claim.functions
        if dtypes
        and f not in untested
        and id(f) not in arms_untaken
        and id(f) not in switched_off
        and not _a_test_asks_for(ws, f, [{d} for d in dtypes])
    }
    # "Fix device creation for wasm": code a native build never compiles; a test of it
    # runs in a wasm build. So does "Fix for weird subgroups on WebGPU": WebGPU is the
    # browser's API, unless the workspace's native backend goes by that name (dfdx's
    # `Webgpu` device).
    in_a_browser = bool(_WASM.search(claim.text)) or bool(
        _WEBGPU.search(claim.text) and not _a_backend_named_webgpu(ws)
    )
    off_wasm = {
        id(f)
        for f in launchers or claim.functions
        if in_a_browser and f not in untested and not _a_wasm_test_reaches(ws, f)
    }
    about_memory = bool(_MEMORY_WORK.search(claim.subject))
    looked_for = "device allocation, copy, synchronisation, " if about_memory else ""
    for item in claim.functions:
        where = f"`{item.fn.qualname}` ({item.path}:{item.fn.fn_line})"
        placeholder = _placeholder_word(item)
        if placeholder:
            claim.missing.append(
                f"{where}: a placeholder by its name (`{placeholder}`), not the implementation — 4c"
            )
        if (
            not item.evidence
            and not _evidence_of_its_op(ws, item)
            and not _launches_by_dispatch(ws, item)
            and not (about_memory and _moves_device_memory(ws, item))
        ):
            claim.missing.append(
                f"{where}: no backend evidence (no {looked_for}kernel launch, BLAS call or "
                f"kernel source, itself or through its callees) — 4a"
            )
        for finding in _findings_reached(ws, item, held, about_backward):
            if finding.rule in _DETOUR_RULES:
                claim.missing.append(f"{where}: {finding.rule} at {finding.path}:{finding.line} — 4b/Step 3")
            elif finding.rule in _STUB_RULES:
                claim.missing.append(f"{where}: {finding.rule} at {finding.path}:{finding.line} — 4c")
        if item in untested and id(item) in dispatched_by:
            claim.missing.append(
                f'{where}: no enabled GPU test asks it for "{dispatched_by[id(item)]}" '
                f"(the GPU tests that reach it run other ops) — 4d"
            )
        elif item in untested and untaken.get(id(item)) == "arms":
            claim.missing.append(
                f"{where}: the GPU tests that reach it do so only through arms of a match over ops "
                f"(`Op::X =>`) whose op none of them names — 4d"
            )
        elif item in untested and id(item) in untaken:
            claim.missing.append(
                f"{where}: the GPU tests that reach it do so only through branches none of them takes: "
                f"on a dtype none uses (`if is_f64::<T>()`) or an opt-in mode none names "
                f"(`if autocast_guard(..)`) — 4d"
            )
        elif item in untested:
            claim.missing.append(f"{where}: no GPU test reaches it — 4d")
        elif id(item) in arms_untaken:
            shown = ", ".join(f"`{' '.join(a.pattern.split())[:40]} =>`" for a in arms_untaken[id(item)][:3])
            claim.missing.append(
                f"{where}: the GPU tests that reach it take none of the arms the diff adds ({shown}) — 4d"
            )
        elif id(item) in switched_off:
            switch = switched_off[id(item)]
            through = f" (`{switch.name}`)" if switch.name != switch.variable else ""
            claim.missing.append(
                f"{where}: the diff's code in it runs only when `{switch.variable}` is set{through}, "
                f"and no GPU test that reaches it sets it — 4d"
            )
        elif id(item) in dtypes_unused:
            claim.missing.append(f"{where}: no GPU test that reaches it uses {' or '.join(dtypes)} — 4d")
        elif id(item) in off_wasm:
            claim.missing.append(
                f"{where}: no GPU test that reaches it runs on wasm (`#[wasm_bindgen_test]`) — 4d"
            )


_WASM = re.compile(r"\bwasm(?:32)?\b|\bweb\s*assembly\b", re.I)
_WEBGPU = re.compile(r"\bweb-?gpu\b", re.I)
_MOST_METHODS_OF_A_MARKER = 2  # cubecl's `WebGpu` graphics API only says which backend wgpu picks


def _a_backend_named_webgpu(ws: Workspace) -> bool:
    """The workspace's own backend type is named `Webgpu`: it implements the ops."""
    methods = sum(1 for f in ws.functions if f.fn.impl_type.lower() == "webgpu")
    return methods > _MOST_METHODS_OF_A_MARKER


def _a_wasm_test_reaches(ws: Workspace, item: IndexedFunction) -> bool:
    """A test that runs in a wasm build reaches the function."""
    wasm_tests = [t for t in ws.functions if runs_on_wasm(t.fn) and is_test(t.fn)]
    return bool(wasm_tests) and ws.index_of(item) in ws.reached_from(wasm_tests)


def _placeholder_word(item: IndexedFunction) -> str:
    """The word of the function's file or name that says it stands in for the real
    thing (`dummy`), "" when none does."""
    return min(_PLACEHOLDER_WORDS.intersection(words(f"{item.path} {item.fn.qualname}")), default="")


def _models_left_alone(subject: str, candidates: list[IndexedFunction]) -> list[str]:
    """The models of a model zoo the subject names that no changed function's path or
    name does."""
    places = " ".join(f"{f.path} {f.fn.qualname}".lower() for f in candidates)
    return [m.group() for m in _MODEL_NAME.finditer(subject) if m.group().lower() not in places]


def _unverifiable_title(kernel_sources: Sequence[str]) -> str:
    """Why a title's GPU work cannot be verified: the diff has none, or has it only in
    kernel source (`keyswitch.cuh`), which is not Rust."""
    where = "adds or changes no GPU code"
    if kernel_sources:
        where = (
            f"changes GPU code only in kernel source ({shown_paths(kernel_sources)}), "
            "which gpuproof does not read"
        )
    return f"the title puts work on the GPU, but the diff {where}: the claim cannot be verified"


def shown_paths(paths: Sequence[str], most: int = 3) -> str:
    """ "`a.cu`, `b.cu` and 2 more": the first few paths, and how many are left out."""
    shown = ", ".join(f"`{path}`" for path in paths[:most])
    return shown + (f" and {len(paths) - most} more" if len(paths) > most else "")


def _evidence_of_its_op(ws: Workspace, item: IndexedFunction) -> bool:
    """A helper of a GPU op that launches: a method of a GPU type another of whose
    methods in the file launches (`MetalGemm::resolve_output_facts` of the gemm whose
    `eval` dispatches), or a function a GPU launcher calls directly (a guard, a launch
    plan). Its work is part of that op's. A function that moves or loops over data
    itself is an op of its own, and answers for its own launch."""
    if not item.is_gpu_code or any(s.kind in _DATA_WORK for s in item.fn.signals):
        return False
    siblings = (ws.functions[i] for i in ws.methods_of(item.fn.impl_type)) if item.fn.impl_type else ()
    return any(f.evidence and f.path == item.path for f in siblings) or any(
        c.evidence and c.is_gpu_code and not c.support_code for c in ws.callers_of(item, within=1)
    )


def _moves_device_memory(ws: Workspace, item: IndexedFunction) -> bool:
    """The function, or what it calls, allocates, copies or synchronises device memory
    through the driver: the backend evidence of a claim about memory."""
    return bool(_first_signal([ws.functions[i] for i in ws.reached_from([item])], _DRIVER_WORK))


def _launches_by_dispatch(ws: Workspace, item: IndexedFunction) -> bool:
    """The function reaches a launch through calls that only the values it builds
    resolve: candle's `rope_thd` hands `&RotaryEmbThd` to `apply_op3_no_bwd`, whose
    storage calls `c.metal_fwd(..)` of that type (the same walk as 4d's test reach)."""
    reached = ws.reached_from([item], skip=lambda f: f.moves_data)
    return any(ws.functions[i].direct_evidence for i in reached)


def _host_twin(item: IndexedFunction) -> bool:
    return bool(_HOST_NAME.search(f"{item.path} {item.fn.qualname}")) and not _DEVICE_NAME.search(
        item.fn.qualname
    )


def _does_gpu_work(item: IndexedFunction, findings: list[Finding]) -> bool:
    """Its name or signature says GPU, it has backend evidence, it puts data on the
    device (`grad.to_device(self.device)` of a backward), or a code finding lies in it.
    Its place alone does not make it GPU work: an allocator's `pool_take` is host
    bookkeeping in the GPU crate."""
    uploads = any(signal.kind == "upload" for signal in item.fn.signals)
    return bool(item.claim or item.evidence) or uploads or _has_a_finding(item, findings)


def _detours_here(item: IndexedFunction, held: list[Finding]) -> bool:
    """A host detour the diff writes lies in the function's body."""
    return _has_a_finding(item, [f for f in held if f.rule in _DETOUR_RULES])


def _has_a_finding(item: IndexedFunction, findings: list[Finding]) -> bool:
    """A code finding lies in the function's body."""
    return any(f.path == item.path and item.fn.line <= f.line <= item.fn.end_line for f in findings)


def _touches_the_gpu(item: IndexedFunction, findings: list[Finding]) -> bool:
    """GPU code by its name or place, backend evidence, or a code finding (the
    analyzer flags only code that handles GPU work)."""
    return item.is_gpu_code or bool(item.evidence) or _has_a_finding(item, findings)


def _does_its_own_gpu_work(item: IndexedFunction, findings: list[Finding]) -> bool:
    """GPU code by its name or place, backend evidence of its own crate (in its body or
    in a callee of the same crate), or a code finding; not a front end whose GPU work is
    another crate's (the server's `re_isq`, the engine's kernels)."""
    return (
        item.is_gpu_code
        or bool(item.evidence and item.evidence_crate == item.crate)
        or _has_a_finding(item, findings)
    )


def _named(claim: Claim, subject: list[str], candidates: list[IndexedFunction]) -> list[IndexedFunction]:
    """The functions the claim's subject names, the first way that finds any: by the
    whole subject; without its dtype words ("where_cond f32" names `where_cond`); by
    the kernel source they launch ("MISH_F64_PTX", "the fill kernels" for `FILL`); by
    the module they are in and the trait they implement ("einops" names `rearrange_with`
    in `einops.rs`, "ViT" the changed functions of `models/vit.rs`, "conv2d" dfdx's
    `impl Conv2DKernel<f32> for Cuda` in `tensor_ops/conv2d/cuda_kernel.rs`), unless the
    claim is a title or a list's head (``_summarises``)."""
    plain = [w for w in subject if not _DTYPE.fullmatch(w)]
    ways: list[tuple[list[str], bool, Callable[[IndexedFunction], Iterable[str]]]] = [
        (subject, claim.listed, lambda f: (f.fn.qualname,)),
        (plain, claim.listed, lambda f: (f.fn.qualname,)),
        (subject, True, lambda f: f.kernel_sources),
    ]
    if not _summarises(claim):
        ways.append((plain, True, lambda f: (_placed_name(f),)))
    for wanted, whole_words, names_of in ways:
        named = [
            f
            for f in candidates
            if any(names_subject(name, wanted, whole_words=whole_words) for name in names_of(f))
        ]
        if named:
            return named
    return []


def _building(subject: list[str], candidates: list[IndexedFunction]) -> list[IndexedFunction]:
    """The changed functions that build a value of the type the claim names: "Add
    Im2Col support on the gpu side" of `CudaStorage::conv2d`, which now runs
    `Im2Col { .. }.map(..)`, is where that support was added."""
    return [f for f in candidates if any(subject_words(t) == subject for t in f.fn.constructs)]


def _in_a_folder_named(
    subject: list[str], candidates: list[IndexedFunction], findings: list[Finding]
) -> list[IndexedFunction]:
    """The diff's GPU code in the folder the subject's last word names, when no
    function's name does: "Migrate wgsl index shaders to gpu representation" is about
    burn's `kernel/index/` (`repeat.rs`, `select.rs`, ..). A word before it qualifies the
    thing named: "quantized matmul" is not all of `quantized/`."""
    if not subject or len(subject[-1]) < 4:
        return []
    return [f for f in _gpu_code(candidates, findings) if subject[-1] in f.path.lower().split("/")[:-1]]


def _partly_named(
    subject: list[str], candidates: list[IndexedFunction], findings: list[Finding]
) -> list[IndexedFunction]:
    """The diff's GPU code that the subject's most specific word names, when no function
    names the whole subject: a subject carries words the code does not ("basic matmul"
    is `matmul`, "synchronize method" `Cuda::synchronize`, "sign unary ops"
    `float_sign`). The most specific word is the one naming the fewest functions."""
    work = _gpu_code(candidates, findings)
    best: list[IndexedFunction] = []
    for word in subject:
        if len(word) < 3:
            continue
        named = [f for f in work if names_subject(f.fn.qualname, [word], whole_words=True)]
        if named and (not best or len(named) < len(best)):
            best = named
        elif named and len(named) == len(best):
            best += [f for f in named if f not in best]
    return best


def _summarises(claim: Claim) -> bool:
    """A title or a list's head: its words are categories ("differentiable
    transcendentals", "Activation backward GPU paths (activation.rs):") that the lines
    below name precisely, not modules to claim whole."""
    return claim.line == 0 or claim.text.rstrip().endswith(":")


def _placed_name(item: IndexedFunction) -> str:
    """A function's name with the modules it is in and the trait it implements."""
    return f"{_module_of(item.path)} {item.module} {item.fn.trait} {item.fn.qualname}"


def _module_of(path: str) -> str:
    """The name of the module a file is: its stem, or its folder's (the crate's, past
    `src/`) for `mod.rs` / `lib.rs` / `main.rs`."""
    *folders, file = [part for part in path.split("/") if part != "src"]
    stem = file.rsplit(".", 1)[0]
    return folders[-1] if stem in ("mod", "lib", "main") and folders else stem


def _of_the_backend(text: str, functions: list[IndexedFunction]) -> list[IndexedFunction]:
    """The functions of the backends a claim names ("Rope cuda bindings" is not about
    `call_rope_i` in the metal kernels crate); all of them when it names none."""
    named = backends_named(text)
    if not named:
        return functions
    return [f for f in functions if not (found := _backends_of(f)) or found & named]


def _backends_of(function: IndexedFunction) -> frozenset[str]:
    """The backends a function's file or name says it belongs to."""
    return backends_named(f"{function.path} {function.fn.qualname}")


def _topic_functions(
    claim: Claim,
    subject: list[str],
    named: list[IndexedFunction],
    candidates: list[IndexedFunction],
    findings: list[Finding],
    code_names: list[str],
) -> list[IndexedFunction]:
    """What a title's topic stands for: the functions it names, when it spells a name of
    code ("Optimized Metal qmv_fast path": not the diff's GPU code at large) or they are
    of the backend it names (or it names none); else the diff's GPU code of that backend,
    when the title speaks of it; else what it names."""
    if code_names:
        return named
    if named and (_saying_backend(claim.text, named) or not backends_named(claim.text)):
        return named
    return _spoken_of(subject, _work_of_a_title(claim.text, candidates, findings)) or named


def _work_of_a_title(
    text: str, candidates: list[IndexedFunction], findings: list[Finding]
) -> list[IndexedFunction]:
    """The diff's GPU code a title stands for: not an accessor of a GPU type
    (`QMetalStorage::device` for "Fixing quantized llama demo on metal."), since
    returning a field is no GPU work."""
    return _gpu_work(text, [f for f in candidates if not reads_a_field(f)], findings)


def _code_names(subject: str) -> list[str]:
    """The names of code the subject spells (`qmv_fast`, `is_available`); not a dtype pair
    (`f16_bf16`), a GPU architecture (`sm_90`) or a C type (`intptr_t`)."""
    return [name for name in _SNAKE_NAME.findall(subject) if not _NOT_CODE_NAME.fullmatch(name)]


def _spelled_by(code_names: list[str], item: IndexedFunction) -> bool:
    """One of the names is the function's, its module's (`to_dtype/cuda_kernel.rs` for
    "to_dtype"), its kernel source's or a kernel's it launches by a string
    (`"flash_attn_mask_to_KV_max"` for "kv_max")."""
    texts = (
        _placed_name(item),
        *item.kernel_sources,
        *(lit.text for lit in item.fn.literals if len(lit.text) < _LONGEST_KERNEL_NAME),
    )
    return any(names_subject(text, subject_words(name)) for name in code_names for text in texts)


def _gpu_work(text: str, candidates: list[IndexedFunction], findings: list[Finding]) -> list[IndexedFunction]:
    """The diff's GPU code, of the backend the text names when some of it is."""
    work = _gpu_code(candidates, findings)
    return _saying_backend(text, work) or work


def _gpu_code(candidates: list[IndexedFunction], findings: list[Finding]) -> list[IndexedFunction]:
    """The candidates that are product code handling GPU work."""
    return [f for f in candidates if not f.support_code and _touches_the_gpu(f, findings)]


def reads_a_field(function: IndexedFunction) -> bool:
    """An accessor (`CudaBuffer::alloc_len` returning `self.alloc_len`): a body of a
    line or two that calls, matches, branches on and signals nothing."""
    fn = function.fn
    does_something = fn.calls or fn.macros or fn.arms or fn.branches or fn.signals
    return not does_something and fn.end_line - fn.fn_line <= _MOST_LINES_OF_AN_ACCESSOR


def _op_functions(
    subject: list[str],
    candidates: list[IndexedFunction],
    findings: list[Finding],
    dispatched_by: dict[int, str],
) -> list[IndexedFunction]:
    """The diff's GPU code that names the op a title without a backend speaks of: by a
    run of the title's words, longest first, as a whole name or as a string it matches
    on (`"HardSigmoid" =>` in wonnx's `compile`); none when the title is about
    something else or names set-up code ("Make init_cuda_backend idempotent").
    ``dispatched_by`` gets, for each one that runs the op among many by the string it
    matches on, that string."""
    work = [f for f in _gpu_code(candidates, findings) if not _SET_UP_NAME.match(f.fn.name)]
    runs = [subject[i : i + n] for n in range(len(subject), 0, -1) for i in range(len(subject) - n + 1)]
    for run in runs:
        joined = "".join(run)
        if len(joined) < 3:
            continue
        named = [f for f in work if _names_the_op(f, run)]
        for f in named:
            by_its_name = names_subject(f.fn.qualname, run, whole_words=True)
            if not by_its_name and (dispatch := _dispatch_string(f, joined)):
                dispatched_by[id(f)] = dispatch
        if named:
            return named
    return []


def _names_the_op(item: IndexedFunction, run: list[str]) -> bool:
    """The function's name, its type's name or one of its string literals is the run of
    words: `gpu_silu`, `RoPE::calculate_dispatch` for "rope" (an acronym's case splits
    no word), `"HardSigmoid" =>` for "hardsigmoid" or "hard sigmoid"."""
    if names_subject(item.fn.qualname, run, whole_words=True):
        return True
    joined = "".join(run)
    names = (item.fn.impl_type, *(lit.text for lit in item.fn.literals if len(lit.text) < 40))
    return any(_spells(name, joined) for name in names)


_STRING_PATTERN = re.compile(r'"([^"\\]{1,40})"')


def _dispatch_string(item: IndexedFunction, op: str) -> str:
    """The string a function of GPU work matches on to run the op, one of many (`"Erf"`
    of `"Erf" =>` in wonnx's `compile`); "" when its type is the op's, or none is."""
    if not item.evidence or _spells(item.fn.impl_type, op):
        return ""
    patterns = (name for arm in item.fn.arms for name in _STRING_PATTERN.findall(arm.pattern))
    return next((name for name in patterns if _spells(name, op)), "")


def _new_arms(item: IndexedFunction, touched: Touched) -> list[Arm]:
    """The match arms the diff adds to a function it does not add whole, when every line
    it writes in the function's body is in one of them."""
    fn = item.fn
    written = _written_in_part(item, touched)
    arms = [a for a in fn.arms if fn.line_of(a.start) in written]
    spans = [(fn.line_of(a.start), fn.line_of(a.end)) for a in arms]
    return arms if arms and _all_within(written, spans) else []


def _written_in_part(item: IndexedFunction, touched: Touched) -> list[int]:
    """The lines the diff writes in the function's body; none when it writes none or
    the whole body (the diff adds the function)."""
    fn = item.fn
    written = [line for line in touched.get(item.path, ()) if fn.body_line <= line <= fn.end_line]
    return [] if len(written) == fn.end_line - fn.body_line + 1 else written


def _all_within(lines: list[int], spans: list[tuple[int, int]]) -> bool:
    return all(any(start <= line <= end for start, end in spans) for line in lines)


class Switch(NamedTuple):
    """A setting read from the environment: the code's name for it (`use_mlx_mm`) and
    the variable (`CANDLE_USE_MLX_MM`)."""

    name: str
    variable: str


# `let use_mlx_mm = match std::env::var("CANDLE_USE_MLX_MM") ..`: a name bound to a
# variable of the environment; `if env::var("X").is_ok()` reads one in place.
_READ_FROM_ENV = re.compile(r'\benv::var(?:_os)?\(\s*(?=")')
_BOUND_TO_ENV = re.compile(rf"\blet\s+(?:mut\s+)?(\w+)\s*(?::[^=;]*)?=[^;]*?{_READ_FROM_ENV.pattern}")


def _new_switched_code(ws: Workspace, item: IndexedFunction, touched: Touched) -> Switch | None:
    """The switch the diff's work in a function it does not add whole runs behind: every
    line it writes in the body is in the then-block of an `if` on a setting of the
    environment, read in place or through a name bound to it (in a field too:
    `self.device.use_mlx_mm`). None when some written line runs without it."""
    fn = item.fn
    written = _written_in_part(item, touched)
    if not written:
        return None
    switches = _environment_switches(ws)
    found: Switch | None = None
    spans = []
    for branch in fn.branches:
        condition = fn.text[branch.start : branch.then_start].decode("latin-1")
        read = _READ_FROM_ENV.search(condition)
        variable = _string_at(fn, branch.start + read.end()) if read else ""
        named = next((n for n in re.findall(r"\w+", condition) if n in switches), "")
        switch = Switch(variable, variable) if variable else switches.get(named)
        if switch is not None:
            found = found or switch
            spans.append((fn.line_of(branch.then_start), fn.line_of(branch.then_end)))
    return found if spans and _all_within(written, spans) else None


_SWITCHES: weakref.WeakKeyDictionary[Workspace, dict[str, Switch]] = weakref.WeakKeyDictionary()


def _environment_switches(ws: Workspace) -> dict[str, Switch]:
    """The names product code binds to variables of the environment, when the name is
    the variable's (`use_mlx_mm` of `CANDLE_USE_MLX_MM`; a `val` of `env::var("X")` is
    any value)."""
    if ws not in _SWITCHES:
        switches = {}
        for f in ws.functions:
            if f.support_code or b"env::var" not in f.fn.text:
                continue
            for bound in _BOUND_TO_ENV.finditer(f.fn.text.decode("latin-1")):
                name, variable = bound.group(1), _string_at(f.fn, bound.end())
                if variable and name.lower() in variable.lower():
                    switches[name] = Switch(name, variable)
        _SWITCHES[ws] = switches
    return _SWITCHES[ws]


def _string_at(fn: Function, offset: int) -> str:
    """The contents of the string literal that starts at the offset of the body, or ""."""
    return next((lit.text.strip('"') for lit in fn.literals if lit.offset == offset), "")


# The names an arm's pattern matches on: a string, a path's last segment, a variant.
_PATTERN_KEY = re.compile(r'"([^"\\]{2,40})"|(?:\w+\s*::\s*)+([A-Za-z]\w*)|\b([A-Z]\w*)\b')
_NO_KEY = frozenset({"Some", "None", "Ok", "Err", "Self", "Box", "Vec", "Option", "Result"})


def _takes_an_arm(ws: Workspace, item: IndexedFunction, arms: list[Arm]) -> bool:
    """A GPU test that reaches the function takes one of the arms (`_a_test_asks_for`
    what it matches on); true when an arm matches on nothing named (`1 | 2 =>`, `_ =>`)."""
    wanted = [_pattern_keys(arm.pattern) for arm in arms]
    return not all(wanted) or _a_test_asks_for(ws, item, wanted)


def _a_test_asks_for(ws: Workspace, item: IndexedFunction, wanted: list[set[str]]) -> bool:
    """An enabled GPU test that reaches the function names, in its code or its helpers',
    everything one of the cases matches on (`"Erf"`; both dtypes of `(DType::U32,
    DType::I64) =>`, as `I64` or `1i64`): it asks for that case. The tests that name a
    case's first word are checked first: a dispatcher is reached by many."""

    def asks(test: IndexedFunction) -> bool:
        said = test_said(test, ws)
        return any(all(_named_in(key, said) for key in keys) for keys in wanted)

    first = frozenset(
        id(t)
        for t in ws.functions
        if t.support_code and any(_named_in(min(keys), code_said(t)) for keys in wanted)
    )
    tests, _ = tests_reaching(ws, item, first)
    return any(asks(t) and not any(disabled_gpu_test.check(ws, t)) for t in tests)


_TURBOFISH = re.compile(r"::\s*<[^<>]*>")  # `WarpInstruction::<Self>::ReduceSum`


def _pattern_keys(pattern: str) -> set[str]:
    return {
        key
        for found in _PATTERN_KEY.finditer(_TURBOFISH.sub("", pattern))
        for key in found.groups()
        if key and key not in _NO_KEY
    }


_WORD_START = re.compile(r"(?<=[a-z0-9])(?=[A-Z])")


def _named_in(key: str, text: str) -> bool:
    """The key is a word of the text, whatever its case (`I64` in `1i64`), or its words
    joined by underscores (the variant `AbsolutePos` as the constant `ABSOLUTE_POS`)."""
    return any(
        re.search(rf"(?<![A-Za-z]){re.escape(form)}(?![A-Za-z0-9])", text, re.I)
        for form in {key, _WORD_START.sub("_", key)}
    )


def _spells(name: str, op: str) -> bool:
    return bool(name) and "".join(subject_words(name)) == op


def _saying_backend(text: str, functions: list[IndexedFunction]) -> list[IndexedFunction]:
    """The functions whose file or name says a backend the text names."""
    named = backends_named(text)
    return [f for f in functions if named & _backends_of(f)]


def _backend_callers(
    ws: Workspace, text: str, named: list[IndexedFunction], candidates: list[IndexedFunction]
) -> list[IndexedFunction]:
    """The functions of the backend the text names that call the named ones, when those
    do no GPU work: "Add scalar support to metal binary kernels" names the host helper
    `Layout::is_scalar_like`, and the Metal work is `MetalStorage::binary`, which calls it."""
    if not named or any(f.evidence for f in named):
        return []
    helpers = {id(f) for f in named}
    return [
        f
        for f in _saying_backend(text, candidates)
        if any(id(target) in helpers for call in f.fn.calls for target in ws.resolve(call, f))
    ]


def _spoken_of(subject: list[str], functions: list[IndexedFunction]) -> list[IndexedFunction]:
    """The diff's GPU code when the title speaks of it: a word of the subject is a word
    of their files, names or calls ("[Metal] Concurrent dispatching" of a change to
    `MTLDispatchType::Concurrent`); none when the title is about something else."""
    spoken = {
        word
        for f in functions
        for text in (f.path, f.fn.qualname, *(f"{c.qualifier} {c.name}" for c in f.fn.calls))
        for word in subject_words(text)
    }
    return functions if set(subject) & spoken else []


def _findings_reached(
    ws: Workspace, item: IndexedFunction, findings: list[Finding], about_backward: bool
) -> list[Finding]:
    """The findings in the function, and the fallbacks and stubs in the functions it
    calls: the code findings are all in changed code, and a fallback the diff adds in a
    helper runs whenever the claimed op does. (A helper's own name is not the op's.) A
    claim of the forward op does not answer for a backward function's stub ("lanczos3
    interpolation backward is not supported"): the forward op never runs it."""
    own = [f for f in findings if f.path == item.path and item.fn.line <= f.line <= item.fn.end_line]
    reached = {id(ws.functions[i]) for i in ws.reached_from([item])}
    called = []
    for finding in findings:
        holder = ws.enclosing(finding.path, finding.line)
        if finding.rule not in _INHERITED_RULES or finding in own or id(holder) not in reached:
            continue
        if holder is not None and not about_backward and _BACKWARD_NAME.search(holder.fn.qualname):
            continue
        called.append(finding)
    return own + called


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


def answer_questions(
    ws: Workspace, op: IndexedFunction, changed_tests: frozenset[int] = frozenset()
) -> ReviewAnswers:
    """``changed_tests``: ``id()`` of the tests the diff adds or changes, named first
    (the test that came with the op, not the nearest of forty older ones)."""
    reached = [ws.functions[i] for i in sorted(ws.reached_from([op]))]
    reached.sort(key=lambda f: f is not op)  # the op itself first
    launch = _first_signal(reached, {"launch"}, prefer=("launch", "gemm", "dispatch", "cublas"))
    launch = launch or _external_launch(ws, reached)
    memory = _first_signal(reached, {"device_memory", "upload"})
    tests, unchecked = tests_reaching(ws, op, changed_tests)
    if not tests:
        return ReviewAnswers(op, launch, memory, "", "")
    test = tests[0]
    memory = memory or _first_signal([test], {"device_memory", "upload"})
    disabled = list(disabled_gpu_test.check(ws, test))
    if disabled:
        without = f"yes, and then it tests nothing: {disabled[0].message}"
    else:
        failure = fails_without_a_gpu(test, ws)
        without = f"no: {failure}" if failure else ""
    shown = f"`{test.fn.qualname}` ({test.path}:{test.fn.fn_line})"
    more = f" and {'at least ' if unchecked else ''}{len(tests) - 1} more" if len(tests) > 1 else ""
    return ReviewAnswers(op, launch, memory, shown + more, without)


def _external_launch(ws: Workspace, functions: list[IndexedFunction]) -> str:
    """The first call of GPU code outside the workspace (`scale_cuda(..)` through FFI, a
    GPU crate's API): the launch happens on its other side."""
    for item in functions:
        for call in item.fn.calls:
            if ws.is_external_gpu_routine(call, item.fn):
                where = f"`{item.fn.qualname}` ({item.path}:{item.fn.line_of(call.offset)})"
                return f"`{call.name}(` in {where}, GPU code outside the workspace"
    return ""


def _first_signal(
    functions: list[IndexedFunction], kinds: AbstractSet[str], prefer: tuple[str, ...] = ()
) -> str:
    """The first signal of those kinds, preferring one whose text names a ``prefer`` word
    (a `.launch(` over the `get_func(` that loaded the kernel)."""
    for wanted in (prefer, ()) if prefer else ((),):
        found = _first_matching(functions, kinds, wanted)
        if found:
            return found
    return ""


def _first_matching(functions: list[IndexedFunction], kinds: AbstractSet[str], words: tuple[str, ...]) -> str:
    for item in functions:
        for signal in item.fn.signals:
            if signal.kind in kinds and (not words or any(w in signal.text.lower() for w in words)):
                line = item.fn.line_of(signal.offset)
                return f"`{signal.text.strip()}` in `{item.fn.qualname}` ({item.path}:{line})"
    return ""
