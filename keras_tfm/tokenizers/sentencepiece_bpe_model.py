"""A SentencePiece BPE `tokenizer.model` (Llama, Mistral) read on its own, as the `sentencepiece` library runs it.

A checkpoint with a `tokenizer.model` and no `tokenizer.json` is read from the
`ModelProto` (`sentencepiece_model`): the pieces in id order are the
vocabulary; CONTROL and UNKNOWN pieces (`<s>`, `</s>`, `<unk>`) are special
added tokens (cut out of the raw text, as HuggingFace does; the `sentencepiece`
library itself reads them as text); BYTE pieces `<0xNN>` are the byte fallback.

The `sentencepiece` BPE encoder normalises the text (`normalizer_spec`:
remove_extra_whitespaces drops leading and trailing spaces and collapses runs
of spaces, add_dummy_prefix puts "▁" in front of a non-empty text,
escape_whitespaces turns " " into "▁"), splits it into characters, then
repeatedly merges the adjacent pair whose concatenation is the NORMAL piece of
highest score (the leftmost of equal scores), and finally turns every character
that is no piece into its UTF-8 bytes `<0xNN>` (byte_fallback) or `<unk>`
(consecutive ones fused). `SentencePieceModelBPETokenizer` is that encoder: a
`SentencePieceBPETokenizer` whose merge rules are every split `left + right`
of a NORMAL piece into two NORMAL pieces, ranked by the piece's score, where
all rules that make the same piece share one rank (`PieceMergeRanks`).

Anything else in the file (another model type, a precompiled charsmap or
normalization rules, whitespace as suffix, a denormalizer, USER_DEFINED or
UNUSED pieces, missing byte pieces, equal scores of two merged pieces) is
refused with a ValueError naming the file and the field.
"""

import os
from collections.abc import Mapping, Sequence
from typing import Any, Self

import keras
import numpy as np
import tensorflow as tf

from keras_tfm.checks import check_bool
from keras_tfm.tokenizers import huggingface_files as F
from keras_tfm.tokenizers import sentencepiece_model as S
from keras_tfm.tokenizers.bpe_merges import MergeRanks, merge_rules
from keras_tfm.tokenizers.sentencepiece_bpe import METASPACE, SentencePieceBPETokenizer


class PieceMergeRanks(MergeRanks):
    """`MergeRanks` where the rules that make the same token share a rank (SentencePiece's BPE:
    of the pairs that make the best piece, the leftmost is merged first, whichever split it is).

    Args:
        vocabulary_size, lefts, rights, results: as `MergeRanks`; rules making the same
            result must be consecutive (the rank of a rule is its result's place in order).
    """

    def __init__(self, vocabulary_size: int, lefts, rights, results, name=None):
        tf.Module.__init__(self, name=name)
        self._size = int(vocabulary_size)
        order = {}
        ranks = [order.setdefault(result, len(order)) for result in results]
        if sorted(ranks) != ranks:
            raise ValueError("PieceMergeRanks: the rules making one token must be consecutive.")
        keys = np.asarray(lefts, np.int64) * self._size + np.asarray(rights, np.int64)
        self._ranks = tf.lookup.StaticHashTable(
            tf.lookup.KeyValueTensorInitializer(
                tf.constant(keys if len(keys) else np.array([-1], np.int64)),
                tf.constant(ranks or [0], tf.int32),
            ),
            default_value=np.iinfo(np.int32).max,
        )
        first_use = {}
        for left, right, rank in zip(lefts, rights, ranks):
            first_use.setdefault(left, rank)
            first_use.setdefault(right, rank)
        cascade = [first_use.get(token, len(order)) < rank for token, rank in order.items()]
        self._results = tf.constant(np.asarray(list(order) or [0], np.int32))
        self._cascade = tf.constant(np.asarray(cascade + [False], bool))
        self.num_cascading = int(sum(cascade))


@keras.saving.register_keras_serializable(package="keras_tfm")
class SentencePieceModelBPETokenizer(SentencePieceBPETokenizer):
    """SentencePiece BPE as the `sentencepiece` library encodes (module docstring).

    Build it with `from_sentencepiece_model(path)` (a `tokenizer.model`, or a
    checkpoint directory holding one).

    Args:
        vocabulary, merges, added_tokens, **kwargs: see `SentencePieceBPETokenizer`
            (`merges`: the rules of equal rank grouped, in the order of the pieces they make).
        remove_extra_whitespaces: before the other steps, drop leading and trailing
            spaces (trailing "▁" too, as `sentencepiece` strips them once escaped) and
            collapse runs of spaces into one.
    """

    def __init__(
        self,
        vocabulary: Sequence[str],
        merges: Sequence[str],
        added_tokens: Sequence[Mapping[str, Any]] = (),
        remove_extra_whitespaces: bool = False,
        **kwargs,
    ):
        super().__init__(vocabulary, merges, added_tokens, **kwargs)
        self.remove_extra_whitespaces = check_bool("remove_extra_whitespaces", remove_extra_whitespaces)
        rules = merge_rules(self._token_index(), merges, "`merges`")
        self._merge_ranks = PieceMergeRanks(len(self._vocabulary), *rules)
        self._set_added_token_matching()

    def _normalize_text(self, text):
        # Also called by the base class's __init__, before `remove_extra_whitespaces` is set; the
        # added tokens are matched again at the end of this __init__.
        if getattr(self, "remove_extra_whitespaces", False):
            text = " ".join(filter(None, text.split(" "))).rstrip(" " + METASPACE)
        return super()._normalize_text(text)

    def _normalize(self, segments):
        if self.remove_extra_whitespaces:
            segments = tf.strings.regex_replace(segments, "^ +", "")
            segments = tf.strings.regex_replace(segments, " {2,}", " ")
            segments = tf.strings.regex_replace(segments, f"[ {METASPACE}]+$", "")
        return super()._normalize(segments)

    @classmethod
    def from_sentencepiece_model(cls, path: str | os.PathLike, **kwargs) -> Self:
        """Reads a SentencePiece BPE `tokenizer.model` (`read_sentencepiece_bpe`).

        Args:
            path: the `.model` file, or a directory holding `tokenizer.model` (whose
                `tokenizer_config.json` may set `add_bos_token` / `add_eos_token`).
            **kwargs: constructor arguments that override what the files say.
        """
        return cls(**{**read_sentencepiece_bpe(path), **kwargs})

    def _tokenizer_config(self):
        config = super()._tokenizer_config()
        config["remove_extra_whitespaces"] = self.remove_extra_whitespaces
        return config


def _refuse(where, field, value, expected):
    raise ValueError(
        f"{where}: `{field}` is {value!r}; keras_tfm's SentencePiece BPE reader supports {expected}."
    )


def _check_model(model):
    where = model.file
    if model.model_type != "BPE":
        _refuse(
            where, "trainer_spec.model_type", model.model_type, "BPE (a Unigram model is a T5 spiece.model)"
        )
    if model.trainer["treat_whitespace_as_suffix"]:
        _refuse(where, "trainer_spec.treat_whitespace_as_suffix", True, "false")
    spec = model.normalizer
    if spec["precompiled_charsmap"]:
        _refuse(
            where, "normalizer_spec.precompiled_charsmap", f"the {spec['name']!r} rules", "none ('identity')"
        )
    if spec["normalization_rule_tsv"]:
        _refuse(where, "normalizer_spec.normalization_rule_tsv", "a rule set", "none")
    if not spec["escape_whitespaces"]:
        _refuse(where, "normalizer_spec.escape_whitespaces", False, "true")
    if model.has_denormalizer:
        _refuse(where, "denormalizer_spec", "a rule set", "none")
    for kind in (S.USER_DEFINED, S.UNUSED):
        found = [p for p, t in zip(model.pieces, model.types) if t == kind]
        if found:
            _refuse(
                where,
                "pieces[].type",
                f"{S.PIECE_TYPES[kind]} ({found[:3]})",
                "NORMAL, UNKNOWN, CONTROL, BYTE",
            )
    unknown = [i for i, t in enumerate(model.types) if t == S.UNKNOWN]
    if len(unknown) != 1:
        _refuse(where, "pieces[].type", f"{len(unknown)} UNKNOWN pieces", "exactly one")
    if len(set(model.pieces)) != len(model.pieces):
        _refuse(where, "pieces", "a repeated piece", "distinct pieces")
    if model.trainer["byte_fallback"]:
        index = dict(zip(model.pieces, model.types))
        missing = [f"<0x{b:02X}>" for b in range(256) if index.get(f"<0x{b:02X}>") != S.BYTE]
        if missing:
            _refuse(where, "pieces", f"no BYTE piece {missing[0]}", "the 256 byte pieces with byte_fallback")
    return unknown[0]


def sentencepiece_merges(model: S.SentencePieceModel) -> list[list[str]]:
    """The merge rules of a BPE `ModelProto`: every `[left, right]` whose pieces and
    concatenation are NORMAL pieces, grouped by that piece, pieces by descending score.

    Raises:
        ValueError: two pieces that merges make have the same score (their order would be the
            position in the text, which no rank expresses).
    """
    normal = {p: s for p, s, t in zip(model.pieces, model.scores, model.types) if t == S.NORMAL}
    made = []
    for index, piece in enumerate(model.pieces):
        if piece not in normal or len(piece) < 2:
            continue
        splits = [
            [piece[:i], piece[i:]]
            for i in range(1, len(piece))
            if piece[:i] in normal and piece[i:] in normal
        ]
        if splits:
            made.append((-np.float32(normal[piece]), index, splits))
    made.sort(key=lambda item: item[:2])
    for (score, _, splits), (next_score, _, _) in zip(made, made[1:]):
        if score == next_score:
            _refuse(
                model.file,
                "pieces[].score",
                f"{-score} for both {splits[0]} and another piece",
                "distinct scores",
            )
    return [split for _, _, splits in made for split in splits]


def read_sentencepiece_bpe(path: str | os.PathLike) -> dict:
    """`SentencePieceModelBPETokenizer` arguments from a SentencePiece BPE `.model` file.

    Args:
        path: the file, or a checkpoint directory holding `tokenizer.model`; a directory's
            `tokenizer_config.json` sets `add_bos_token` (default True, as Llama checkpoints
            are used) and `add_eos_token` (default False).

    Raises:
        ValueError: what the reader does not implement (module docstring), by name.
    """
    path = os.fspath(path)
    directory = path if os.path.isdir(path) else None
    model = S.read_sentencepiece_model(F.checkpoint_file(path, "tokenizer.model") if directory else path)
    unk_id = _check_model(model)
    spec, trainer = model.normalizer, model.trainer
    special = {}  # no "unk" role: a character that is no piece must reach the byte fallback
    for role in ("bos", "eos", "pad"):
        token_id = trainer[f"{role}_id"]
        if 0 <= token_id < len(model.pieces) and model.types[token_id] == S.CONTROL:
            special[role] = model.pieces[token_id]
    options = F.read_tokenizer_options(directory) if directory else {}
    add_bos, add_eos = options.get("add_bos_token", True), options.get("add_eos_token", False)
    for name, flag, role in (("add_bos_token", add_bos, "bos"), ("add_eos_token", add_eos, "eos")):
        if not isinstance(flag, bool) or (flag and role not in special):
            _refuse(
                path, f"tokenizer_config.json {name}", flag, f"a bool (true needs a CONTROL {role} piece)"
            )
    added = [
        {"content": p, "special": True, "normalized": False}
        for p, t in zip(model.pieces, model.types)
        if t in (S.CONTROL, S.UNKNOWN)
    ]
    return {
        "vocabulary": list(model.pieces),
        "merges": sentencepiece_merges(model),
        "added_tokens": added,
        "normalizer": ["prepend", "escape"] if spec["add_dummy_prefix"] else ["escape"],
        "remove_extra_whitespaces": spec["remove_extra_whitespaces"],
        "byte_fallback": trainer["byte_fallback"],
        "unk_token": model.pieces[unk_id],
        "fuse_unk": True,
        "strip_left": 1 if spec["add_dummy_prefix"] else 0,
        "special_tokens": special or False,
        "add_bos": add_bos,
        "add_eos": add_eos,
    }


__all__ = [
    "PieceMergeRanks",
    "SentencePieceModelBPETokenizer",
    "read_sentencepiece_bpe",
    "sentencepiece_merges",
]
