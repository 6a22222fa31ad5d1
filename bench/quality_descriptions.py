#!/usr/bin/env python3
"""Quality benchmark of ``gpuproof review`` on PR descriptions (the description rules).

The labelled set (``bench/descriptions/cases.jsonl``, one JSON object a line) has two
kinds of case:

* ``real``: a commit of the repository ``--git-dir`` names (forecast-bio/ferrotorch
  for most sets; huggingface/candle and tracel-ai/burn for ``heldout7_*`` to
  ``heldout9_*``; EricLBuehler/mistral.rs and tracel-ai/cubecl for ``heldout10_*``;
  coreylowman/dfdx and luminal-ai/luminal for ``heldout11_*``; webonnx/wonnx for
  ``heldout12_wonnx``; huggingface/ratchet and crabml/crabml for ``heldout13_*``;
  EricLBuehler/candle-vllm for ``heldout14_cvllm``; fff-rs/juice for
  ``heldout15_juice``; huggingface/text-embeddings-inference for
  ``heldout16_tei``; coreylowman/cudarc for ``heldout17_cudarc``;
  filecoin-project/bellperson for ``heldout18_bellperson``; sonos/tract for
  ``heldout19_tract``; cryscan/web-rwkv and linebender/vello for ``heldout20_*``;
  charles-r-earp/autograph for ``heldout21_autograph``; lambdaclass/lambdaworks for
  ``heldout22_lambdaworks``; risc0/risc0 for ``heldout23_risc0``; Rust-GPU/Rust-CUDA
  for ``heldout24_rustcuda``; argumentcomputer/neptune for ``heldout25_neptune``;
  ingonyama-zk/icicle for ``heldout26_icicle``; zama-ai/tfhe-rs for ``heldout27_tfhe``;
  LaurentMazare/tch-rs for ``heldout28_tch``; pykeio/ort for ``heldout29_ort``;
  guoqingbao/vllm.rs for ``heldout30_vllmrs``; openvm-org/stark-backend for
  ``heldout31_stark``; qdrant/qdrant for ``heldout32_qdrant``; gfx-rs/wgpu for
  ``heldout33_wgpu``; EricLBuehler/mistral.rs again for ``heldout34_mistral``;
  huggingface/candle again for ``heldout35_candle``; guoqingbao/vllm.rs again for
  ``heldout36_vllmrs``; tracel-ai/cubecl again for ``heldout37_cubecl``;
  forecast-bio/ferrotorch again for ``heldout38_ferrotorch`` and ``heldout40_ferrotorch``;
  tracel-ai/burn again for ``heldout39_burn``; EricLBuehler/mistral.rs again for
  ``heldout41_mistral``; tracel-ai/burn and huggingface/candle again for ``heldout42_burn``
  and ``heldout43_candle``; forecast-bio/ferrotorch and EricLBuehler/mistral.rs again for
  ``heldout44_ferrotorch`` and ``heldout45_mistral``; forecast-bio/ferrotorch,
  tracel-ai/cubecl and huggingface/candle again for ``heldout46_ferrotorch``,
  ``heldout47_cubecl`` and ``heldout48_candle``; tracel-ai/burn and
  EricLBuehler/mistral.rs again for ``heldout49_burn`` and ``heldout50_mistral``;
  forecast-bio/ferrotorch, huggingface/candle and EricLBuehler/mistral.rs again for
  ``heldout51_ferrotorch``, ``heldout52_candle`` and ``heldout53_mistral``;
  forecast-bio/ferrotorch, huggingface/candle and tracel-ai/burn again for
  ``heldout54_ferrotorch``, ``heldout55_candle`` and ``heldout56_burn``;
  huggingface/candle, tracel-ai/burn and EricLBuehler/mistral.rs again for
  ``heldout57_candle``, ``heldout58_burn`` and ``heldout59_mistral``, again for
  ``heldout60_candle``, ``heldout61_burn`` and ``heldout62_mistral``, again for
  ``heldout63_candle``, ``heldout64_burn`` and ``heldout65_mistral`` (the first ten
  commits of the first two also labelled by a second labeller:
  ``heldout63_candle_second_labeller`` and ``heldout64_burn_second_labeller``, for
  ``label_agreement.py``), again for ``heldout66_candle``, ``heldout67_burn`` and
  ``heldout68_mistral``, again for ``heldout69_candle``, ``heldout70_burn`` and
  ``heldout71_mistral``, again for ``heldout72_candle``, ``heldout73_burn`` and
  ``heldout74_mistral``, again for ``heldout75_candle``, ``heldout76_burn`` and
  ``heldout77_mistral``, again for ``heldout78_candle``, ``heldout79_burn`` and
  ``heldout80_mistral``, and again for ``heldout81_candle``, ``heldout82_burn`` and
  ``heldout83_mistral`` (13 commits: every candidate left);
  huggingface/candle, tracel-ai/burn and tracel-ai/cubecl again for
  ``heldout84_candle``, ``heldout85_burn`` and ``heldout86_cubecl``, again for
  ``heldout87_candle``, ``heldout88_burn`` and ``heldout89_cubecl``, again for
  ``heldout90_candle``, ``heldout91_burn`` and ``heldout92_cubecl``, and again for
  ``heldout93_candle`` (16 commits: every candidate left), ``heldout94_burn`` and
  ``heldout95_cubecl``;
  a file the mirror lacks, such as a large compiled ``.ptx``, is left out of the case's
  tree with a note on stderr). The description is the commit message (read from the git
  dir at run time, never stored in this repository; a GitHub merge commit's body is the
  pull request's title) and the change is ``commit^..commit`` (a merge's first parent:
  the whole pull request).
* ``adversarial``: a hand-written ``title`` and ``body`` with a tiny Rust workspace:
  ``base_files`` (the base state, possibly empty) and ``files`` (the head state).

Labels of every case: ``claims`` ([{"subject", "backed"}], every GPU claim a careful
reviewer would extract, judged against the diff by spec Step 4), ``phrasings`` (the
forbidden phrasings as they appear, outside quotes and code), ``gap_report_required``
and ``gap_report_present``, and a short ``note``.

Labelling conventions (spec ``rust-gpu-discipline`` Steps 3-5, RULES.md):

* A claim is *backed* only if the code it names, as changed by the diff, has backend
  evidence (4a), no CPU detour, host readback-and-finish, dtype/shape bypass or
  default-on fallback (4b, Step 3), no stub residue in a reachable path (4c), and a
  GPU test reaching it (4d). A test that is ``#[ignore]``d, compiled out, never
  builds a device, or returns early when the device is missing (Step 2 #9) does not
  count. Violations in pre-existing callees outside the diff are not held against it.
* A claim naming nothing the diff touches is unbacked (unverifiable).
* Negated claims ("does not add GPU support yet"), plans and the spec's underclaims
  ("Wrote a CPU reference + scaffolding for the GPU path") are not claims; "Removed
  silent CPU fallback in X; now returns Err(...)" is allowed vocabulary, not a claim.
* A phrasing is forbidden when it presents a CPU fallback/degradation as acceptable
  behaviour without naming the opt-in (spec's three forbidden phrasings and their
  paraphrases). Text in code blocks, inline code, ``>`` quotes or quotation marks, and
  negations ("no longer falls back") do not count; an explicit limitation stated as a
  gap ("still takes the CPU path until #496") is a gap report, not a phrasing.
* ``gap_report_required``: the diff leaves GPU work incomplete (some claim unbacked, or
  stubs / not-yet-implemented GPU entry points / deferred GPU work left in the diff).
  ``gap_report_present``: the description says what works, what does not, and a
  concrete next step (a tracked follow-up counts).

For each case the script builds a throwaway git repository under ``--workdir`` (two
commits: base and head), splits the description into a title (a commit message's
subject line) and a body, as the App receives a pull request's, writes the body to a
file and runs::

    <gpuproof> review --base <base> --head <head> --title <title> --body <file> --format json

in it. Exit status 0 or 1 is a report; anything else, a traceback or output that is
not the JSON report is a tool error.

Scores:

* claims, with "unbacked" as the positive class. Each labelled claim is matched to the
  predicted claim whose ``subject`` (falling back to ``text``) shares the most content
  tokens (lowercase words, camelCase/snake_case split, stop words and generic GPU
  words dropped; "forward"/"backward"/dtypes count half; at least one shared content
  token). Matching is one-to-one first (best pairs first); a label left over may then
  share a predicted claim that merged it with another. A label still unmatched is then
  paired with an unmatched predicted claim whose subject names only a backend or a
  dtype ("cuda backend" for the title "Fix cuda", "BF16") when the sentence it was
  read from shares at least two words with the label's subject, backend and kernel
  words counted ("cuda fix"). TP = labelled unbacked and
  predicted unbacked; FP = labelled backed but predicted unbacked, or a predicted
  unbacked claim that matches no label (invented); FN = labelled unbacked and predicted
  backed or not extracted. Also: backed claims recognised as backed, extraction recall
  (labelled claims matched at all), invented claims (all), and predicted claims that
  only duplicate an already matched label (reported, not scored).
* phrasings: predicted ``phrasings[].text`` against the labels, one-to-one; a pair
  matches when one normalised text contains the other or the prediction covers at
  least half of the label's words. Precision and recall.
* gap report: a case is predicted "missing gap report" when the output carries a
  ``missing-gap-report`` finding (a comment or finding with that ``rule``, an
  annotation titled so, or the rule id in the "gpuproof / description" check's
  summary/title); expected when ``gap_report_required and not gap_report_present``.
  Accuracy and the confusion counts.

Every error is printed per case, then the totals with PASS/FAIL against the targets
(claim precision >= 0.9 and recall >= 0.9, phrasing precision >= 0.95).

Usage::

    python bench/quality_descriptions.py [--cases bench/descriptions/cases.jsonl] \
        [--git-dir /path/to/ferrotorch.git] [--gpuproof gpuproof] [--workdir DIR] \
        [--only ID ...] [--kind real|adversarial] [--json-out FILE] [--timeout S]

Without ``--git-dir`` (or ``$FERROTORCH_GIT_DIR``) the real cases are skipped.
Exit status: 0 when the tool produced a report for every case run (whatever the
figures); 2 when it failed on some case, or when this script's input is unusable.

Standard library only (Python 3.11).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import re
import shlex
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from git_export import ExportError, export_sources, present_suffixes

REPO_ROOT = Path(__file__).resolve().parent.parent
DEFAULT_CASES = REPO_ROOT / "bench" / "descriptions" / "cases.jsonl"

# Exported from real commits. Rust and TOML are what the analysis needs; kernel sources
# ride along when the commit has any (a pathspec matching nothing makes `git archive`
# fail, so each suffix is checked first). One large JSON blob of the mirror is absent,
# which is why nothing else is exported.

TARGETS = {"claim_precision": 0.9, "claim_recall": 0.9, "phrasing_precision": 0.95}

GIT_ENV = {
    "GIT_AUTHOR_NAME": "gpuproof-bench",
    "GIT_AUTHOR_EMAIL": "bench@gpuproof.invalid",
    "GIT_COMMITTER_NAME": "gpuproof-bench",
    "GIT_COMMITTER_EMAIL": "bench@gpuproof.invalid",
    "GIT_AUTHOR_DATE": "2026-01-01T00:00:00Z",
    "GIT_COMMITTER_DATE": "2026-01-01T00:00:00Z",
    "GIT_CONFIG_NOSYSTEM": "1",
}


class UsageError(Exception):
    pass


# --------------------------------------------------------------------------
# Cases
# --------------------------------------------------------------------------


@dataclass
class Case:
    id: str
    kind: str
    raw: dict[str, Any]
    claims: list[dict[str, Any]]
    phrasings: list[str]
    gap_required: bool
    gap_present: bool

    @property
    def gap_expected(self) -> bool:
        return self.gap_required and not self.gap_present


def read_cases(path: Path) -> list[Case]:
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except OSError as exc:
        raise UsageError(f"cannot read {path}: {exc}") from None
    cases: list[Case] = []
    seen: set[str] = set()
    for n, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            obj = json.loads(line)
        except ValueError as exc:
            raise UsageError(f"{path}:{n}: not JSON ({exc})") from None
        cid = obj.get("id")
        kind = obj.get("kind")
        if not isinstance(cid, str) or not cid or cid in seen:
            raise UsageError(f"{path}:{n}: missing or duplicate id {cid!r}")
        seen.add(cid)
        if kind == "real":
            if not re.fullmatch(r"[0-9a-f]{40}", str(obj.get("commit", ""))):
                raise UsageError(f"{path}:{n}: real case {cid} needs a full 40-hex 'commit'")
        elif kind == "adversarial":
            if not isinstance(obj.get("body"), str) or not isinstance(obj.get("files"), dict):
                raise UsageError(f"{path}:{n}: adversarial case {cid} needs 'body' and 'files'")
        else:
            raise UsageError(f"{path}:{n}: unknown kind {kind!r}")
        claims = obj.get("claims", [])
        phrasings = obj.get("phrasings", [])
        if not isinstance(claims, list) or not all(
            isinstance(c, dict) and isinstance(c.get("subject"), str) and isinstance(c.get("backed"), bool)
            for c in claims
        ):
            raise UsageError(f"{path}:{n}: {cid}: 'claims' must be [{{subject, backed}}]")
        if not isinstance(phrasings, list) or not all(isinstance(p, str) for p in phrasings):
            raise UsageError(f"{path}:{n}: {cid}: 'phrasings' must be a list of strings")
        cases.append(
            Case(
                cid,
                kind,
                obj,
                claims,
                phrasings,
                bool(obj.get("gap_report_required")),
                bool(obj.get("gap_report_present")),
            )
        )
    return cases


# --------------------------------------------------------------------------
# Throwaway repositories
# --------------------------------------------------------------------------


def run_git(args: list[str], cwd: Path | None = None, git_dir: Path | None = None, binary=False):
    cmd = ["git"] + ([f"--git-dir={git_dir}"] if git_dir else []) + args
    env = dict(os.environ, **GIT_ENV)
    proc = subprocess.run(cmd, cwd=cwd, capture_output=True, text=not binary, env=env)
    if proc.returncode != 0:
        err = proc.stderr if isinstance(proc.stderr, str) else proc.stderr.decode("utf-8", "replace")
        raise UsageError(f"git {' '.join(args[:3])} failed: {err.strip()[:400]}")
    return proc.stdout


def export_commit(git_dir: Path, commit: str, dest: Path) -> None:
    export_sources(git_dir, commit, dest, present_suffixes(git_dir, commit))


def write_files(dest: Path, files: dict[str, str]) -> None:
    for rel, text in files.items():
        p = (dest / rel).resolve()
        if dest.resolve() not in p.parents:
            raise UsageError(f"file path escapes the repository: {rel!r}")
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(text, encoding="utf-8")


def clear_worktree(repo: Path) -> None:
    for child in repo.iterdir():
        if child.name == ".git":
            continue
        if child.is_dir() and not child.is_symlink():
            shutil.rmtree(child)
        else:
            child.unlink()


def commit_all(repo: Path, message: str) -> str:
    run_git(["add", "-A"], cwd=repo)
    run_git(["commit", "-q", "--allow-empty", "--no-verify", "-m", message], cwd=repo)
    return run_git(["rev-parse", "HEAD"], cwd=repo).strip()


_GITHUB_MERGE = re.compile(r"Merge pull request #\d+ from ")


def description_of(case: Case, git_dir: Path | None) -> tuple[str, str]:
    """(title, body), as the App receives a pull request's: a commit message's subject
    line is the title, the rest the body. A GitHub merge commit ("Merge pull request #N
    from owner/branch") carries the pull request's title as its body's first line."""
    if case.kind == "real":
        assert git_dir is not None
        message = run_git(["log", "-1", "--format=%B", case.raw["commit"]], git_dir=git_dir)
        title, _, body = message.partition("\n")
        if _GITHUB_MERGE.match(title):
            title, _, body = body.strip("\n").partition("\n")
        return title.strip(), body.strip("\n") + "\n"
    return (case.raw.get("title") or "").strip(), case.raw["body"].rstrip("\n") + "\n"


def build_case(case: Case, workdir: Path, git_dir: Path | None) -> tuple[Path, str, str, Path]:
    """The case's repository (cached by content hash), base and head SHAs, body file."""
    cdir = workdir / case.id
    repo = cdir / "repo"
    body_file = cdir / "description.md"
    stamp = cdir / "built.json"
    key = hashlib.sha256(
        json.dumps({k: v for k, v in case.raw.items() if k not in ("note",)}, sort_keys=True).encode()
    ).hexdigest()
    if stamp.exists() and repo.is_dir() and body_file.exists() and (cdir / "title.txt").exists():
        try:
            info = json.loads(stamp.read_text())
            if info.get("key") == key:
                return repo, info["base"], info["head"], body_file
        except (ValueError, KeyError):
            pass
    if cdir.exists():
        shutil.rmtree(cdir)
    repo.mkdir(parents=True)
    run_git(["init", "-q", "-b", "main"], cwd=repo)
    run_git(["config", "commit.gpgsign", "false"], cwd=repo)
    if case.kind == "real":
        assert git_dir is not None
        commit = case.raw["commit"]
        parent = run_git(["rev-parse", f"{commit}^"], git_dir=git_dir).strip()
        export_commit(git_dir, parent, repo)
        base = commit_all(repo, "base")
        clear_worktree(repo)
        export_commit(git_dir, commit, repo)
        subject = run_git(["log", "-1", "--format=%s", commit], git_dir=git_dir).strip()
        head = commit_all(repo, subject or "head")
    else:
        write_files(repo, case.raw.get("base_files") or {})
        base = commit_all(repo, "base")
        clear_worktree(repo)
        write_files(repo, case.raw["files"])
        head = commit_all(repo, case.raw.get("title") or "head")
    title, body = description_of(case, git_dir)
    body_file.write_text(body, encoding="utf-8")
    (cdir / "title.txt").write_text(title, encoding="utf-8")
    stamp.write_text(json.dumps({"key": key, "base": base, "head": head}))
    return repo, base, head, body_file


# --------------------------------------------------------------------------
# Running the tool
# --------------------------------------------------------------------------


@dataclass
class Run:
    rc: int | None = None
    doc: dict[str, Any] | None = None
    error: str = ""
    seconds: float = 0.0


def run_review(cmd: list[str], repo: Path, base: str, head: str, body: Path, timeout: float) -> Run:
    t0 = time.monotonic()
    title = (body.parent / "title.txt").read_text(encoding="utf-8")
    argv = [*cmd, "review", "--base", base, "--head", head, "--title", title, "--body", str(body)]
    argv += ["--format", "json"]
    try:
        proc = subprocess.run(argv, cwd=repo, capture_output=True, text=True, timeout=timeout)
    except FileNotFoundError:
        return Run(None, None, f"gpuproof command not found: {cmd[0]}", time.monotonic() - t0)
    except subprocess.TimeoutExpired:
        return Run(None, None, f"timed out after {timeout:.0f}s", time.monotonic() - t0)
    secs = time.monotonic() - t0
    tail = (proc.stderr or "").strip()[-800:]
    if proc.returncode not in (0, 1):
        return Run(
            proc.returncode, None, f"exit {proc.returncode}: {tail or proc.stdout.strip()[-800:]}", secs
        )
    if "Traceback (most recent call last)" in (proc.stderr or ""):
        return Run(proc.returncode, None, f"traceback on stderr: {tail}", secs)
    try:
        doc = json.loads(proc.stdout)
        if not isinstance(doc, dict):
            raise TypeError("top level is not an object")
        for key in ("claims", "phrasings"):
            if not isinstance(doc.get(key, []), list):
                raise TypeError(f"'{key}' is not a list")
    except (ValueError, TypeError) as exc:
        return Run(
            proc.returncode, None, f"exit {proc.returncode} without a JSON report ({exc}): {tail}", secs
        )
    return Run(proc.returncode, doc, "", secs)


# --------------------------------------------------------------------------
# Matching
# --------------------------------------------------------------------------

# "where" is no stop word: every labelled subject that says it names the op (`where_`).
STOP = set(
    """
a an the and or of to in on for with by from at as is are was were be been being it its this that these
those now new no not yet also just only all any each every both via into onto over under than then there
here so such can could will would should may might must do does did done has have had we our us you your
they their them he she his her i my me which who whom what when why how x
gpu gpus cuda cudarc device devices resident kernel kernels path paths native natively accelerated
acceleration accelerate support supported supports implement implemented implementation implements
port ported porting added adds adding wire wired wiring run runs running ran execute executes
executed use uses using used fast op ops operation operations ptx cubecl wgpu metal vram
fully entirely end work works working make made moved move onto aware
""".split()
)
WEAK = {"forward", "backward", "f32", "f64", "f16", "bf16", "dtype", "shape", "step"}

_CAMEL_1 = re.compile(r"([a-z0-9])([A-Z])")
_CAMEL_2 = re.compile(r"([A-Z]+)([A-Z][a-z])")


def _stem(tok: str) -> str:
    if len(tok) > 3 and tok.endswith("s") and not tok.endswith("ss"):
        return tok[:-1]
    return tok


def subject_tokens(text: str) -> tuple[set[str], set[str]]:
    """(content tokens, weak tokens) of a claim subject."""
    toks: set[str] = set()
    for compound in re.findall(r"[A-Za-z0-9]+(?:[_-][A-Za-z0-9]+)+", text or ""):
        parts = [p.lower() for p in re.split(r"[_-]", compound)]
        if len(parts) > 1 and (
            not any(p in STOP or p in WEAK for p in parts) or all(p in STOP or p in WEAK for p in parts)
        ):
            # "index_select" also matches "indexselect"; "to_dtype", made of words that
            # count for nothing alone, is still a name
            toks.add("".join(parts))
    for word in re.findall(r"[A-Za-z0-9]+", text or ""):
        split = _CAMEL_2.sub(r"\1 \2", _CAMEL_1.sub(r"\1 \2", word)).split()
        parts = [p.lower() for p in split]
        if len(parts) > 1:
            parts.append(word.lower())  # "SiLU" also matches "silu"
        toks.update(_stem(p) for p in parts)
    toks = {t for t in toks if len(t) > 1 and not t.isdigit()}
    weak = {t for t in toks if t in WEAK}
    strong = {t for t in toks if t not in WEAK and t not in STOP}
    return strong, weak


def claim_score(label: tuple[set[str], set[str]], pred: tuple[set[str], set[str]]) -> float:
    strong = len(label[0] & pred[0])
    if strong == 0:
        return 0.0
    return strong + 0.5 * len(label[1] & pred[1])


def pred_subject(p: dict[str, Any]) -> str:
    subj = p.get("subject")
    return subj if isinstance(subj, str) and subj.strip() else str(p.get("text", ""))


@dataclass
class ClaimMatch:
    label: dict[str, Any]
    pred: dict[str, Any] | None
    shared: bool = False  # matched to a prediction another label already took


# The words that say where a claim's work runs. A claim whose subject names only that
# place or a dtype ("cuda backend" for the title "Fix cuda", "BF16" for "Enable BF16 on
# metal.") shares no content token with its label ("cuda fix"), but its sentence says
# the label's words.
_PLACE_WORDS = frozenset(
    {"gpu", "gpus", "cuda", "metal", "wgpu", "ptx", "cubecl", "kernel", "kernels", "device"}
)
_SAID_STOP = STOP - _PLACE_WORDS
_NO_CONTENT = frozenset({"backend"})  # "cuda backend": the subject of a title naming only its backend
_LEAST_WORDS_SHARED = 2


def _said_tokens(text: str) -> set[str]:
    words = {_stem(w.lower()) for w in re.findall(r"[A-Za-z0-9]+", text or "")}
    return {w for w in words if len(w) > 1 and not w.isdigit() and w not in _SAID_STOP}


def _paired_by_their_words(
    labels: list[dict[str, Any]], preds: list[dict[str, Any]], labels_paired: set[int], preds_paired: set[int]
) -> dict[int, int]:
    """Labels no predicted subject matched, paired one-to-one (most words first) with
    predicted claims no label matched whose subject names only a place or a dtype and
    whose sentence shares at least two words with the label's subject, the words of the
    place included ("cuda fix" and the claim "cuda backend" read from the title "Fix cuda")."""
    pairs = []
    for i, label in enumerate(labels):
        if i in labels_paired:
            continue
        wanted = _said_tokens(label["subject"])
        for j, pred in enumerate(preds):
            if j in preds_paired or subject_tokens(pred_subject(pred))[0] - _NO_CONTENT:
                continue
            shared = len(wanted & _said_tokens(str(pred.get("text", ""))))
            if shared >= _LEAST_WORDS_SHARED:
                pairs.append((shared, -i, -j, i, j))
    pairs.sort(reverse=True)
    found: dict[int, int] = {}
    for *_, i, j in pairs:
        if i not in found and j not in found.values():
            found[i] = j
    return found


def match_claims(
    labels: list[dict[str, Any]], preds: list[dict[str, Any]]
) -> tuple[list[ClaimMatch], list[dict[str, Any]], list[dict[str, Any]]]:
    """(label matches, invented predictions, duplicate predictions)."""
    ltoks = [subject_tokens(c["subject"]) for c in labels]
    ptoks = [subject_tokens(pred_subject(p)) for p in preds]
    pairs = []
    for i, lt in enumerate(ltoks):
        for j, pt in enumerate(ptoks):
            s = claim_score(lt, pt)
            if s > 0:
                union = len(lt[0] | pt[0]) or 1
                pairs.append((s, len(lt[0] & pt[0]) / union, -j, i, j))
    pairs.sort(reverse=True)
    lab_to: dict[int, int] = {}
    used: set[int] = set()
    for _, _, _, i, j in pairs:
        if i in lab_to or j in used:
            continue
        lab_to[i] = j
        used.add(j)
    related = {p[4] for p in pairs}
    by_words = _paired_by_their_words(labels, preds, {p[3] for p in pairs}, used | related)
    lab_to.update(by_words)
    used.update(by_words.values())
    matches: list[ClaimMatch] = []
    for i, label in enumerate(labels):
        if i in lab_to:
            matches.append(ClaimMatch(label, preds[lab_to[i]]))
            continue
        best = max((p for p in pairs if p[3] == i), default=None)
        matches.append(ClaimMatch(label, preds[best[4]], shared=True) if best else ClaimMatch(label, None))
    invented = [p for j, p in enumerate(preds) if j not in used and j not in related]
    duplicates = [p for j, p in enumerate(preds) if j not in used and j in related]
    return matches, invented, duplicates


def _norm_phrase(text: str) -> str:
    text = re.sub(r"[*_`>~]", " ", text or "")
    return " ".join(text.lower().split())


def _phrase_tokens(text: str) -> list[str]:
    return re.findall(r"[a-z0-9]+", _norm_phrase(text))


def phrase_match(label: str, pred: str) -> float:
    """Match strength (0 = no match)."""
    a, b = _norm_phrase(label), _norm_phrase(pred)
    if not a or not b:
        return 0.0
    if a in b or b in a:
        return 2.0
    lt, pt = _phrase_tokens(label), set(_phrase_tokens(pred))
    if not lt:
        return 0.0
    cover = sum(1 for t in lt if t in pt) / len(lt)
    return cover if cover >= 0.5 else 0.0


def match_phrasings(
    labels: list[str], preds: list[str]
) -> tuple[list[tuple[str, str]], list[str], list[str]]:
    pairs = sorted(
        ((phrase_match(lab, pr), -j, i, j) for i, lab in enumerate(labels) for j, pr in enumerate(preds)),
        reverse=True,
    )
    li: set[int] = set()
    pj: set[int] = set()
    matched = []
    for s, _, i, j in pairs:
        if s <= 0 or i in li or j in pj:
            continue
        li.add(i)
        pj.add(j)
        matched.append((labels[i], preds[j]))
    missed = [lab for i, lab in enumerate(labels) if i not in li]
    extra = [pr for j, pr in enumerate(preds) if j not in pj]
    return matched, missed, extra


GAP_RULE = "missing-gap-report"


def predicts_missing_gap(doc: dict[str, Any]) -> bool:
    for key, items in doc.items():
        if key in ("claims", "phrasings", "questions") or not isinstance(items, list):
            continue
        for item in items:
            if isinstance(item, dict) and item.get("rule") == GAP_RULE:
                return True
    for check in doc.get("checks", []) or []:
        if not isinstance(check, dict):
            continue
        name = str(check.get("name", ""))
        output = check.get("output") if isinstance(check.get("output"), dict) else {}
        annotations = (check.get("annotations") or []) + (output.get("annotations") or [])
        for ann in annotations:
            if isinstance(ann, dict) and GAP_RULE in (
                str(ann.get("rule", "")),
                str(ann.get("title", "")),
            ):
                return True
            if isinstance(ann, dict) and str(ann.get("message", "")).startswith(GAP_RULE):
                return True
        if "description" in name.lower():
            for text in (check.get("summary"), check.get("title"), output.get("summary"), output.get("text")):
                if isinstance(text, str) and GAP_RULE in text:
                    return True
    return False


# --------------------------------------------------------------------------
# Scoring
# --------------------------------------------------------------------------


@dataclass
class CaseScore:
    case: Case
    run: Run
    tp: int = 0
    fp: int = 0
    fn: int = 0
    backed_total: int = 0
    backed_ok: int = 0
    labels: int = 0
    extracted: int = 0
    invented: int = 0
    duplicates: int = 0
    ph_tp: int = 0
    ph_fp: int = 0
    ph_fn: int = 0
    gap_pred: bool | None = None
    errors: list[str] = field(default_factory=list)


def score_case(case: Case, run: Run) -> CaseScore:
    sc = CaseScore(case, run)
    doc = run.doc
    if doc is None:
        return sc
    preds = [p for p in doc.get("claims", []) if isinstance(p, dict)]
    matches, invented, duplicates = match_claims(case.claims, preds)
    sc.labels = len(case.claims)
    for m in matches:
        lab_unbacked = not m.label["backed"]
        if m.pred is not None:
            sc.extracted += 1
        pred_unbacked = None if m.pred is None else (m.pred.get("backed") is False)
        if not lab_unbacked:
            sc.backed_total += 1
        if lab_unbacked and pred_unbacked:
            sc.tp += 1
        elif lab_unbacked:
            sc.fn += 1
            why = "not extracted" if m.pred is None else f'predicted backed as "{pred_subject(m.pred)}"'
            sc.errors.append(f'FN claim "{m.label["subject"]}" (labelled unbacked): {why}')
        elif pred_unbacked:
            sc.fp += 1
            missing = "; ".join(str(x) for x in (m.pred or {}).get("missing", []) or [])
            sc.errors.append(
                f'FP claim "{m.label["subject"]}" (labelled backed) predicted unbacked as '
                f'"{pred_subject(m.pred or {})}"' + (f" — missing: {missing}" if missing else "")
            )
        elif pred_unbacked is False:
            sc.backed_ok += 1
        else:
            sc.errors.append(f'MISS claim "{m.label["subject"]}" (labelled backed): not extracted')
    for p in invented:
        sc.invented += 1
        if p.get("backed") is False:
            sc.fp += 1
            sc.errors.append(
                f'FP invented unbacked claim "{pred_subject(p)}" (line {p.get("line")}): '
                f"{str(p.get('text', ''))[:100]!r}"
            )
        else:
            sc.errors.append(f'note: invented backed claim "{pred_subject(p)}" (line {p.get("line")})')
    sc.duplicates = len(duplicates)
    ptexts = [str(p.get("text", "")) for p in doc.get("phrasings", []) if isinstance(p, dict)]
    matched, missed, extra = match_phrasings(case.phrasings, ptexts)
    sc.ph_tp, sc.ph_fn, sc.ph_fp = len(matched), len(missed), len(extra)
    sc.errors += [f"FN phrasing {m!r}" for m in missed]
    sc.errors += [f"FP phrasing {e!r}" for e in extra]
    sc.gap_pred = predicts_missing_gap(doc)
    if sc.gap_pred != case.gap_expected:
        sc.errors.append(
            f"GAP predicted missing-gap-report={sc.gap_pred}, expected {case.gap_expected} "
            f"(required={case.gap_required}, present={case.gap_present})"
        )
    return sc


def ratio(num: int, den: int) -> float | None:
    return num / den if den else None


def fmt(x: float | None) -> str:
    return "n/a" if x is None else f"{x:.3f}"


def verdict(x: float | None, target: float) -> str:
    return "PASS" if x is not None and x >= target else "FAIL"


def summarize(scores: list[CaseScore]) -> dict[str, Any]:
    ok = [s for s in scores if s.run.doc is not None]
    tot = {
        k: sum(getattr(s, k) for s in ok)
        for k in (
            "tp",
            "fp",
            "fn",
            "backed_total",
            "backed_ok",
            "labels",
            "extracted",
            "invented",
            "duplicates",
            "ph_tp",
            "ph_fp",
            "ph_fn",
        )
    }
    gap_cases = [s for s in ok if s.gap_pred is not None]
    gap_correct = sum(1 for s in gap_cases if s.gap_pred == s.case.gap_expected)
    conf = {
        "tp": sum(1 for s in gap_cases if s.gap_pred and s.case.gap_expected),
        "fp": sum(1 for s in gap_cases if s.gap_pred and not s.case.gap_expected),
        "fn": sum(1 for s in gap_cases if not s.gap_pred and s.case.gap_expected),
        "tn": sum(1 for s in gap_cases if not s.gap_pred and not s.case.gap_expected),
    }
    return {
        "cases_run": len(scores),
        "tool_errors": [s.case.id for s in scores if s.run.doc is None],
        "claims": {
            **{k: tot[k] for k in ("tp", "fp", "fn", "labels", "extracted", "invented", "duplicates")},
            "precision": ratio(tot["tp"], tot["tp"] + tot["fp"]),
            "recall": ratio(tot["tp"], tot["tp"] + tot["fn"]),
            "backed_recognised": tot["backed_ok"],
            "backed_labelled": tot["backed_total"],
            "extraction_recall": ratio(tot["extracted"], tot["labels"]),
        },
        "phrasings": {
            "tp": tot["ph_tp"],
            "fp": tot["ph_fp"],
            "fn": tot["ph_fn"],
            "precision": ratio(tot["ph_tp"], tot["ph_tp"] + tot["ph_fp"]),
            "recall": ratio(tot["ph_tp"], tot["ph_tp"] + tot["ph_fn"]),
        },
        "gap": {
            "cases": len(gap_cases),
            "correct": gap_correct,
            "accuracy": ratio(gap_correct, len(gap_cases)),
            **conf,
        },
        "seconds": round(sum(s.run.seconds for s in scores), 2),
    }


def report(scores: list[CaseScore], summary: dict[str, Any]) -> None:
    w = print
    w("== gpuproof review: description quality ==")
    for s in scores:
        c = s.case
        if s.run.doc is None:
            w(f"[{c.id}] ({c.kind}) TOOL ERROR: {s.run.error}")
            continue
        for e in s.errors:
            w(f"[{c.id}] ({c.kind}) {e}")
    cl, ph, gap = summary["claims"], summary["phrasings"], summary["gap"]
    w("")
    w(
        f"cases run: {summary['cases_run']}, tool errors: {len(summary['tool_errors'])}, "
        f"tool time: {summary['seconds']}s"
    )
    w(
        f"claims (positive = unbacked): TP={cl['tp']} FP={cl['fp']} FN={cl['fn']}  "
        f"precision={fmt(cl['precision'])} [{verdict(cl['precision'], TARGETS['claim_precision'])} >= "
        f"{TARGETS['claim_precision']}]  recall={fmt(cl['recall'])} "
        f"[{verdict(cl['recall'], TARGETS['claim_recall'])} >= {TARGETS['claim_recall']}]"
    )
    w(
        f"  backed claims recognised as backed: {cl['backed_recognised']}/{cl['backed_labelled']}; "
        f"extraction recall: {fmt(cl['extraction_recall'])} ({cl['extracted']}/{cl['labels']}); "
        f"invented: {cl['invented']}; duplicate predictions: {cl['duplicates']}"
    )
    w(
        f"phrasings: TP={ph['tp']} FP={ph['fp']} FN={ph['fn']}  precision={fmt(ph['precision'])} "
        f"[{verdict(ph['precision'], TARGETS['phrasing_precision'])} >= {TARGETS['phrasing_precision']}]  "
        f"recall={fmt(ph['recall'])}"
    )
    w(
        f"gap report: accuracy={fmt(gap['accuracy'])} ({gap['correct']}/{gap['cases']}); "
        f"TP={gap['tp']} FP={gap['fp']} FN={gap['fn']} TN={gap['tn']}"
    )


# --------------------------------------------------------------------------
# Main
# --------------------------------------------------------------------------


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--cases", type=Path, default=DEFAULT_CASES)
    ap.add_argument(
        "--git-dir",
        type=Path,
        default=None,
        help="bare mirror of forecast-bio/ferrotorch (default: $FERROTORCH_GIT_DIR)",
    )
    ap.add_argument("--gpuproof", default="gpuproof", help="command that runs gpuproof (shell-split)")
    ap.add_argument("--workdir", type=Path, default=None, help="where the throwaway repositories go")
    ap.add_argument("--only", nargs="+", default=None, help="case ids to run")
    ap.add_argument("--kind", choices=("real", "adversarial"), default=None)
    ap.add_argument("--timeout", type=float, default=300.0, help="seconds per review run")
    ap.add_argument("--json-out", type=Path, default=None, help="write per-case results and totals here")
    return ap.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    try:
        cases = read_cases(args.cases)
        if args.only:
            unknown = set(args.only) - {c.id for c in cases}
            if unknown:
                raise UsageError(f"unknown case id(s): {', '.join(sorted(unknown))}")
            cases = [c for c in cases if c.id in set(args.only)]
        if args.kind:
            cases = [c for c in cases if c.kind == args.kind]
        git_dir = args.git_dir or (
            Path(os.environ["FERROTORCH_GIT_DIR"]) if os.environ.get("FERROTORCH_GIT_DIR") else None
        )
        if git_dir is not None:
            run_git(["rev-parse", "--git-dir"], git_dir=git_dir)
        elif any(c.kind == "real" for c in cases):
            print("note: no --git-dir given; skipping the real cases", file=sys.stderr)
            cases = [c for c in cases if c.kind != "real"]
        cmd = shlex.split(args.gpuproof)
        if not cmd:
            raise UsageError("--gpuproof is empty")
        workdir = args.workdir or Path(tempfile.mkdtemp(prefix="gpuproof-descriptions-"))
        workdir.mkdir(parents=True, exist_ok=True)
        scores: list[CaseScore] = []
        for case in cases:
            repo, base, head, body = build_case(case, workdir, git_dir)
            run = run_review(cmd, repo, base, head, body, args.timeout)
            scores.append(score_case(case, run))
    except (UsageError, ExportError) as exc:
        print(f"quality_descriptions: error: {exc}", file=sys.stderr)
        return 2
    summary = summarize(scores)
    report(scores, summary)
    if args.json_out:
        per_case = [
            {
                "id": s.case.id,
                "kind": s.case.kind,
                "rc": s.run.rc,
                "error": s.run.error,
                "seconds": round(s.run.seconds, 3),
                "errors": s.errors,
                "predicted_claims": (s.run.doc or {}).get("claims"),
                "predicted_phrasings": (s.run.doc or {}).get("phrasings"),
                "gap_predicted": s.gap_pred,
            }
            for s in scores
        ]
        args.json_out.write_text(json.dumps({"summary": summary, "cases": per_case}, indent=2) + "\n")
    return 2 if summary["tool_errors"] else 0


if __name__ == "__main__":
    sys.exit(main())
