"""The description benchmark's matching of labelled claims to predicted ones."""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "bench"))

from quality_descriptions import match_claims


def test_a_name_made_of_words_that_count_for_nothing_alone_still_matches_itself() -> None:
    # "to" is a stop word and "dtype" a weak one: joined, `to_dtype` is the op's name.
    labels = [{"subject": "WebGPU to_dtype kernel (to_dtype.wgsl)", "backed": False}]
    preds = [{"subject": "to_dtype", "text": "feat(wgpu): add to_dtype kernel", "backed": False}]
    matches, invented, _ = match_claims(labels, preds)
    assert matches[0].pred is preds[0]
    assert invented == []


def test_subjects_that_share_only_stop_words_do_not_match() -> None:
    labels = [{"subject": "the cuda kernel for softmax", "backed": False}]
    preds = [{"subject": "the cuda kernel for layer norm", "text": "", "backed": False}]
    matches, invented, _ = match_claims(labels, preds)
    assert matches[0].pred is None
    assert invented == preds


def test_a_claim_whose_subject_names_only_its_backend_matches_by_its_sentence() -> None:
    # The title "Fix cuda" is claimed as "cuda backend": no content word of that subject
    # is the label's, but the sentence it was read from says the label's words.
    labels = [
        {"subject": "cuda fix", "backed": False},
        {"subject": "bf16 conformer conv1d on Metal", "backed": False},
    ]
    preds = [
        {"subject": "cuda backend", "text": "Fix cuda", "backed": False},
        {"subject": "bf16", "text": "Allow bf16 on metal", "backed": False},
    ]
    matches, invented, _ = match_claims(labels, preds)
    assert [m.pred for m in matches] == preds
    assert invented == []


def test_a_claim_with_a_subject_of_its_own_is_not_matched_by_its_sentence() -> None:
    # "checkpoint" names something the label does not; its sentence listing the label's
    # words too does not make it that label's claim.
    labels = [{"subject": "GPU profiler CUDA event timing", "backed": False}]
    preds = [
        {
            "subject": "checkpoint",
            "text": "Tier 3: checkpoint, GPU profiler with CUDA timing",
            "backed": False,
        }
    ]
    matches, invented, _ = match_claims(labels, preds)
    assert matches[0].pred is None
    assert invented == preds
