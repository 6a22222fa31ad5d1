"""PR titles and descriptions as text a rule can read: Markdown code, quotes and
comments removed (what is quoted or shown as code is not the author's claim),
emphasis and links flattened, and split into sentences that keep their line."""

from __future__ import annotations

import re
from dataclasses import dataclass

_FENCE = re.compile(r"^\s*(```|~~~)")
_INLINE_CODE = re.compile(r"`[^`\n]*`")
_HTML_COMMENT = re.compile(r"<!--.*?-->", re.S)
_LINK = re.compile(r"\[([^\]]*)\]\([^)]*\)")
# `_` emphasises only at word edges: `index_select_dim` keeps its underscores.
_EMPHASIS = re.compile(r"(\*\*|\*|~~|(?<!\w)__|(?<!\w)_)(?=\S)(.+?)(?<=\S)\1(?!\w)")
_BULLET = re.compile(r"^\s*(?:[-*+•◦▪‣]|\d+[.)])\s+(?:\[[ xX]\]\s+)?")
# A Markdown heading, or a line framed by rules the way commit messages head a section
# ("--- feat: GPU abs_backward ---", "=== Results ===").
_HEADING = re.compile(r"^\s*#{1,6}\s*|^\s*(?:-{3,}|={3,})\s+(?=\S.*\s(?:-{3,}|={3,})\s*$)")
_HEADING_TAIL = re.compile(r"\s+(?:-{3,}|={3,})\s*$")
_SENTENCE_END = re.compile(r"(?<=[.!?;])\s+(?=[A-Z0-9`\"'(])")
# A line of Rust pasted without a fence ("let unet = config.build_unet(&files, &device)?;")
# and the brackets and string items around it: code shown, like a code block.
_CODE_LINE = re.compile(
    r"""^\s*(?:let\s+(?:mut\s+)?\w+\b.*;|use\s+[\w:{}, *]+;|[\]\)}]+[;,]?|"[^"]*",|.*\w\(.*\)\??;)\s*$"""
)


@dataclass(frozen=True, slots=True)
class Sentence:
    text: str  # plain text, single-spaced, inline code removed
    line: int  # 1-based line of the description where it starts (the title is line 0)
    with_code: str = ""  # the same with inline code kept as words (names of functions)
    bullet: bool = False  # an item of a list


def sentences(title: str, body: str) -> list[Sentence]:
    """The author's own sentences: code blocks, quotes and HTML comments dropped; one
    entry per sentence (a heading or a bullet item is a sentence of its own)."""
    out = [Sentence(_plain(title), 0, _plain(title, keep_code=True))] if title.strip() else []
    body = _HTML_COMMENT.sub(lambda m: "\n" * m.group().count("\n"), body)
    in_fence = False
    paragraph: list[str] = []
    start = 0
    bullet = False

    def flush() -> None:
        if paragraph:
            joined = " ".join(paragraph)
            texts = _SENTENCE_END.split(_plain(joined))
            coded = _SENTENCE_END.split(_plain(joined, keep_code=True))
            if len(texts) != len(coded):  # inline code changed the split: keep whole
                texts, coded = [" ".join(texts)], [" ".join(coded)]
            out.extend(Sentence(t, start, c, bullet) for t, c in zip(texts, coded, strict=True) if c.strip())
            paragraph.clear()

    for number, raw in enumerate(body.splitlines(), start=1):
        if _FENCE.match(raw):
            flush()
            in_fence = not in_fence
            continue
        if in_fence or raw.lstrip().startswith(">") or _CODE_LINE.match(raw):
            flush()
            continue
        heading = _HEADING.match(raw) is not None
        if not raw.strip() or _BULLET.match(raw) or heading:
            flush()
        if raw.strip():
            if not paragraph:
                start = number
                bullet = _BULLET.match(raw) is not None
            line = _BULLET.sub("", raw)
            paragraph.append(_HEADING_TAIL.sub("", _HEADING.sub("", line)) if heading else line)
        if heading:
            flush()  # a heading is a sentence of its own
    flush()
    return [s for s in out if s.with_code]


# "Softmax implementation for cuda. (#747)": the merged PR's number is no part of a sentence.
_PR_NUMBER = re.compile(r"\s*\(#\d+\)(?=\s*(?:[.:;,]|\(#|$))")


# "fixes w/ multimodal edge cases", "w/o the GPU": words, not a list of two names.
_WITH = re.compile(r"(?<![\w/])w/(o?)(?=\s|$)", re.I)


def _plain(text: str, keep_code: bool = False) -> str:
    text = _INLINE_CODE.sub((lambda m: m.group()[1:-1]) if keep_code else " ", text)
    text = _WITH.sub(lambda m: "without" if m.group(1) else "with", text)
    text = _LINK.sub(r"\1", text)
    text = _PR_NUMBER.sub("", text)
    for _ in range(2):  # nested emphasis
        text = _EMPHASIS.sub(r"\2", text)
    return " ".join(text.split())


# A sentence that denies, plans, recounts the past, reports tests or tidies code does
# not claim the names in it.
# Words that say a sentence is about GPU work: the backends, their libraries, kernels.
# FlashAttention, FlashInfer: CUDA kernels (candle-flash-attn, flash-attn v2/v3, flashinfer)
FLASH_KERNELS = r"flash[- ]?(?:attn|attention|infer)"
DEVICE_WORDS = (
    r"gpus?|cuda|ptx|cubecl|wgpu|on-device|device-resident|cublas\w*|cudnn|cusolver|cusparse"
    r"|cufft|nccl|msl|metal|mps|hip|rocm|vulkan|opencl|wgsl|tensor cores?|shaders?"
    r"|tensorrt|directml"  # ONNX Runtime's GPU execution providers (NVIDIA's, DirectX 12's)
    rf"|{FLASH_KERNELS}"
)
GPU_WORDS = rf"{DEVICE_WORDS}|kernels?"
GPU_WORD = re.compile(rf"\b(?:{GPU_WORDS})\b|Gpu[A-Z]", re.I)
# A GPU word that is not "kernel": host code has kernels too.
DEVICE_WORD = re.compile(rf"\b(?:{DEVICE_WORDS})\b|Gpu[A-Z]", re.I)
# A dtype as a word of its own ("for u8 and u32", "bf16 matmul"), not inside a name (`add_f32`).
DTYPE_NAME = re.compile(r"\b(?:[fiu](?:8|16|32|64)|bf16)\b", re.I)
# Words that put work on the host: "moved GPU tensors to CPU", "replace scalar libm",
# "Fix non-cuda builds", "meta device propagation" (PyTorch's meta device has shapes and
# no data: no GPU runs it), names such as "InductorTarget::CpuC" and "CpuStorage", and
# SIMD, the CPU's vector units ("SIMD exp kernel + rayon"; Metal's "SIMD-group" is the GPU's).
HOST_WORDS = (
    r"cpu|host|libm|simd(?![-\s]?groups?)|non-(?:cuda|gpu|metal|wgpu|opencl|flash[- ]?attn)|meta[- ]devices?"
    r"|(?-i:Cpu[A-Z]\w*)"
)
HOST_WORD = re.compile(rf"\b(?:{HOST_WORDS})\b", re.I)

# What comes next, in a gap report: "Next step: ..", "tracked as #1003", "follow-up".
NEXT_STEP = re.compile(
    r"next\s+steps?|follow[- ]?(?:up|on)|remaining\s+work|future\s+work|\bto\s*do\b|\bnext:|\blater\b"
    r"|will\s+(?:add|write|port|follow|land|come)|\bplanned\b|\btracked\s+(?:in|by|as)\b|#\d+",
    re.I,
)
# Accessors and constructors are plumbing, not GPU ops, unless they launch work.
PLUMBING_NAME = re.compile(r"^(?:is|has|get|set|with|new|from|into|as|to)(?:_|$)")
# "Entire step composed from 8 GPU kernel calls (scale, add, ..)": what the subject is
# made of is existing kernels used.
MADE_FROM = r"\b(?:composed|built|made|assembled)\s+(?:out\s+of|of|from)"
# "reuses the kernel via ptx_f32_to_f64", "via device-resident dot / scale": a name
# after these words is the means of the work, not the work claimed.
MEANS_BEFORE = re.compile(
    rf"(?:\b(?:via|through|using|by|reuses?|existing|helpers?|calls?|around|shared)|{MADE_FROM})\s+"
    r"(?:the\s+|a\s+|an\s+)?(?:[\w-]+\s+)?\(?$",
    re.I,
)
# "gpu_svd_, gpu_qr_": the prefix of a family of functions names no one op.
NAME_FAMILY = re.compile(r"\w+_\w*_")
NOT_DONE_WORK = re.compile(
    r"\b(?:not|no|never|without|cannot|can't|doesn't|don't|isn't|aren't|won't|yet|todo|fixme|planned"
    r"|plan|will|would|should|could|might|future|follow[- ]?ups?|previously|formerly|used to|was|were"
    r"|unchanged|untouched|kept|pre-?existing|already|removed?|deleted?|deprecated|revert(?:ed|s)?"
    r"|scaffold\w*|skeletons?|stub(?:s|bed)?"  # the spec's underclaims: GPU work begun, not done
    r"|instead of|rather than|out of scope|skips?|skipped|ignored?|tests?|probes?|benchmarks?"
    r"|renam\w*|refactor\w*|typos?|comments?|docs?|documentation|formatting|clippy|lints?"
    r"|allow(?:s|ed|ing)?\s+(?:clippy::)?[a-z]+(?:_[a-z]+)+"  # "Allow too_many_arguments on ..": a lint
    r"|private|helpers?|converters?|accessors?|diagnostics?|rustdoc|signatures?|refined|guards?|unwrap\w*"
    r"|(?:sys|ffi|raw)\s+bindings?"  # declarations of a driver's functions, no call of them
    r"|(?<!gpu )(?<!cuda )(?<!metal )panics?)\b",  # "Fix X GPU panic" says X now works on the GPU
    re.I,
)
# Quotation marks: straight, curly, or single ones that are not an apostrophe. What
# they hold is named, not said.
QUOTATION = re.compile(r"\"[^\"\n]{1,200}\"|“[^”\n]{1,200}”|(?<!\w)'[^'\n]{1,200}'(?!\w)")


def said_of_the_host(text: str) -> bool:
    """A host word and no device word: "kernel" in such a sentence is the CPU's."""
    return bool(HOST_WORD.search(text)) and not DEVICE_WORD.search(text)


def in_quotes(text: str, start: int, end: int) -> bool:
    """Whether the span ``start:end`` of the text lies within one pair of quotation marks."""
    return any(q.start() < start and end < q.end() for q in QUOTATION.finditer(text))


_WORD = re.compile(r"[A-Z]+(?![a-z])|[A-Za-z][a-z]*|\d+")  # an acronym first: FILL, RMSNorm
STOP_WORDS = frozenset(
    """a an the and or of for to on in into with by from at as is are was were be been it its this
    that these those now all new op ops operation operations kernel kernels shader shaders function
    functions fn path paths support supported gpu gpus cuda device devices implementation implementations
    implement implemented version variant variants via using use uses our my their some both each
    forward pass resident native aware accelerated side""".split()
)
# A collective noun in a claim stands for any of these function-name words.
ALTERNATIVES = {
    "reduction": ("sum", "mean", "max", "min", "prod", "reduce", "argmax", "argmin", "amax", "amin"),
    "matmul": ("gemm", "mm", "bmm"),
    "gemm": ("matmul",),
    "elementwise": ("add", "sub", "mul", "div", "unary", "binary"),
    "activation": ("relu", "gelu", "silu", "sigmoid", "tanh", "elu"),
    "convolution": ("conv",),
    "normalization": ("norm",),
    "attention": ("attn", "sdpa", "flash"),
    "gradient": ("grad",),
    "optimizer": ("optim",),
}
# A compound word in a claim is written as separate words in function names.
COMPOUNDS = {
    "layernorm": ("layer", "norm"),
    "batchnorm": ("batch", "norm"),
    "groupnorm": ("group", "norm"),
    "rmsnorm": ("rms", "norm"),
    "softmax": ("soft", "max"),
    "logsoftmax": ("log", "soft", "max"),
}


def words(text: str) -> list[str]:
    """Lower-case words of an identifier or a phrase: ``gpu_layer_norm`` and
    ``LayerNorm`` both give layer, norm."""
    return [w.lower() for w in _WORD.findall(text.replace("_", " "))]


def _stem(word: str) -> str:
    for suffix in ("ations", "ation", "ates", "ate", "ings", "ing", "ies", "es", "s"):
        if word.endswith(suffix) and len(word) - len(suffix) >= 3:
            return word[: -len(suffix)]
    return word


def subject_words(phrase: str) -> list[str]:
    """The words that say what a claim is about, stemmed: "the f64 reductions" gives
    f64, reduction."""
    stems = (_stem(w) for w in words(phrase) if w not in STOP_WORDS)
    return [s for s in stems if s not in STOP_WORDS]  # "passes", "paths"


def names_subject(name: str, subject: list[str], whole_words: bool = False) -> bool:
    """Whether a function name covers every word of a claim's subject, directly, by a
    compound's parts or by one of a collective noun's members. ``whole_words``: a word
    must be one of the name's words, not a part of one ("end" is not in "backend")."""
    if not subject:
        return False
    stems = {_stem(w) for w in words(name)}
    joined = name.lower().replace("_", "")
    if not whole_words and len("".join(subject)) >= 3 and "".join(subject) in joined:
        return True  # RMSNorm -> rms_norm, SiLU -> gpu_silu
    for word in subject:
        if word in stems or (not whole_words and len(word) >= 3 and word in joined):
            continue
        if any(_stem(a) in stems for a in ALTERNATIVES.get(word, ())):
            continue
        parts = COMPOUNDS.get(word)
        if parts and all(p in stems for p in parts):
            continue
        return False
    return True
