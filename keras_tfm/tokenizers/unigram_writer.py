"""Writing `UnigramTokenizer`s in their checkpoint formats: the inverse of `unigram_files`.

    write_t5_tokenizer(tokenizer, directory)              tokenizer.json + tokenizer_config.json
    write_marian_tokenizers(source, target, directory)    source.spm + target.spm + vocab.json
                                                          (+ target_vocab.json) + tokenizer_config.json

A T5 tokenizer (`compatibility="tokenizers"`) becomes the `tokenizer.json` that
HuggingFace `tokenizers` runs as it does: the Unigram model (the tokens up to
the last scored one, with their scores), the added tokens, the normalizer,
pre-tokenizer, `TemplateProcessing` post-processor and `Metaspace` decoder of
the tokenizer's options. A Marian pair (`compatibility="sentencepiece"`)
becomes two SentencePiece Unigram `ModelProto`s (`sentencepiece_model`):
`<unk>` (UNKNOWN), the control tokens (CONTROL), every scored piece and extra
piece (NORMAL, by descending score) and the tokens the decoding model knows
without a score (UNUSED), with the side's charsmap and normaliser flags, and
the shared `vocab.json` that maps pieces to ids. `unigram_files` reads both back
to the same tokenizers. Files are written into an existing `directory` (the
temporary directory of `save_pretrained`, which appears whole).
"""

import base64
import json
import os
import re

from keras_tfm.tokenizers import sentencepiece_model as S
from keras_tfm.tokenizers.tokenizer_json_writer import _post_processor
from keras_tfm.tokenizers.unigram import UnigramTokenizer

_SENTINEL = re.compile(r"<extra_id_\d+>")


def _check(tokenizer, compatibility, role):
    if not isinstance(tokenizer, UnigramTokenizer) or tokenizer.compatibility != compatibility:
        kind = getattr(tokenizer, "compatibility", type(tokenizer).__name__)
        raise TypeError(
            f"`{role}` must be a UnigramTokenizer with compatibility={compatibility!r}; received {kind!r}."
        )
    return tokenizer.get_config()


def _normalizer(config):
    nodes = []
    for step in config["normalizers"]:
        kind = step["type"]
        if kind == "Precompiled":
            nodes.append({"type": kind, "precompiled_charsmap": config["precompiled_charsmap"]})
        elif kind == "Strip":
            nodes.append(
                {"type": kind, "strip_left": step.get("left", False), "strip_right": step.get("right", False)}
            )
        elif kind == "Replace":
            pattern = {"Regex" if step.get("regex") else "String": step["pattern"]}
            nodes.append({"type": kind, "pattern": pattern, "content": step["content"]})
        else:
            nodes.append({"type": kind, "prepend": step["prepend"]})
    return _sequence(nodes, "normalizers")


def _pre_tokenizer(config):
    nodes = [
        {"type": "WhitespaceSplit"}
        if step["type"] == "WhitespaceSplit"
        else {
            "type": "Metaspace",
            "replacement": step["replacement"],
            "prepend_scheme": step["prepend_scheme"],
            "split": step.get("split", True),
        }
        for step in config["pre_tokenizers"]
    ]
    return _sequence(nodes, "pretokenizers")


def _sequence(nodes, key):
    if not nodes:
        return None
    return nodes[0] if len(nodes) == 1 else {"type": "Sequence", key: nodes}


def t5_tokenizer_json(tokenizer: UnigramTokenizer) -> dict:
    """The `tokenizer.json` contents of a `UnigramTokenizer` with `compatibility="tokenizers"`.

    Raises:
        TypeError: another tokenizer.
        ValueError: an unscored token before the last scored one that is no added token, or
            `extra_pieces` (which a `tokenizer.json` cannot hold).
    """
    config = _check(tokenizer, "tokenizers", "tokenizer")
    vocabulary, scores = config["vocabulary"], config["scores"]
    added = dict(config["added_tokens"])
    end = max(i for i, s in enumerate(scores) if s is not None) + 1
    gaps = [t for t, s in zip(vocabulary[:end], scores[:end]) if s is None]
    outside = [t for t in vocabulary[end:] if t not in added]
    if gaps or outside or config["extra_pieces"]:
        raise ValueError(
            "This UnigramTokenizer has no tokenizer.json form: every token must be a scored piece, or an "
            f"added token after the last one (found {(gaps + outside)[:3]}), and no `extra_pieces`."
        )
    decoder = config["decoder"]
    return {
        "version": "1.0",
        "truncation": None,
        "padding": None,
        "added_tokens": [
            {
                "id": vocabulary.index(token),
                "content": token,
                "single_word": False,
                "lstrip": False,
                "rstrip": False,
                "normalized": False,
                "special": special,
            }
            for token, special in sorted(added.items(), key=lambda item: vocabulary.index(item[0]))
        ],
        "normalizer": _normalizer(config),
        "pre_tokenizer": _pre_tokenizer(config),
        "post_processor": _post_processor(tokenizer),
        "decoder": {"type": "Metaspace", **decoder, "split": True},
        "model": {
            "type": "Unigram",
            "unk_id": tokenizer.unk_id,
            "vocab": [[t, s] for t, s in zip(vocabulary[:end], scores[:end])],
            "byte_fallback": config["byte_fallback"],
        },
    }


def _special_options(tokenizer, config):
    options = {}
    for role in ("bos", "eos", "unk", "pad"):
        token_id = getattr(tokenizer, f"{role}_id", None)
        if token_id is not None:
            options[f"{role}_token"] = config["vocabulary"][token_id]
    options["clean_up_tokenization_spaces"] = config["clean_up_tokenization_spaces"]
    return options


def _write_json(directory, name, data):
    with open(os.path.join(directory, name), "w", encoding="utf-8") as f:
        json.dump(data, f, ensure_ascii=False, indent=1)


def write_t5_tokenizer(tokenizer: UnigramTokenizer, directory: str | os.PathLike) -> None:
    """Writes `tokenizer.json` (`t5_tokenizer_json`) and a `tokenizer_config.json` naming the
    class `T5Tokenizer`, the special tokens and the number of `<extra_id_N>` sentinels."""
    contents = t5_tokenizer_json(tokenizer)
    config = tokenizer.get_config()
    options = {"tokenizer_class": "T5Tokenizer", **_special_options(tokenizer, config)}
    options["extra_ids"] = sum(bool(_SENTINEL.fullmatch(t)) for t in config["vocabulary"])
    _write_json(directory, "tokenizer.json", contents)
    _write_json(directory, "tokenizer_config.json", options)


def marian_model(
    tokenizer: UnigramTokenizer, file: str = "<marian>", unused: bool = True
) -> S.SentencePieceModel:
    """The SentencePiece Unigram `ModelProto` of one side of a Marian pair (module docstring);
    `unused`: add the UNUSED pieces (the side whose model `decode_kinds` describes)."""
    config = _check(tokenizer, "sentencepiece", "tokenizer")
    vocabulary, scores, kinds = config["vocabulary"], config["scores"], config["decode_kinds"]
    unk = vocabulary[tokenizer.unk_id]
    normal = [(t, s) for t, s in zip(vocabulary, scores) if s is not None]
    normal += [tuple(piece) for piece in config["extra_pieces"]]
    normal.sort(key=lambda item: -item[1])
    control = [t for t, k in zip(vocabulary, kinds) if k == "1" and t != unk]
    unused = [
        t for t, s, k in zip(vocabulary, scores, kinds) if unused and k == "0" and s is None and t != unk
    ]
    pieces = [unk] + control + [t for t, _ in normal] + unused
    types = [S.UNKNOWN] + [S.CONTROL] * len(control) + [S.NORMAL] * len(normal) + [S.UNUSED] * len(unused)
    charsmap = config["precompiled_charsmap"]
    normalizer = {"name": "" if charsmap else "identity", "normalization_rule_tsv": ""}
    normalizer["precompiled_charsmap"] = base64.b64decode(charsmap) if charsmap else b""
    for flag in ("add_dummy_prefix", "remove_extra_whitespaces", "escape_whitespaces"):
        normalizer[flag] = bool(config["sentencepiece_normalizer"].get(flag, True))
    role_ids = {
        role: pieces.index(t) if t in control else -1 for role, t in (("bos", "<s>"), ("eos", "</s>"))
    }
    trainer = {
        "model_type": 1,
        "split_by_whitespace": True,
        "treat_whitespace_as_suffix": False,
        "byte_fallback": False,
        "unk_id": 0,
        "bos_id": role_ids["bos"],
        "eos_id": role_ids["eos"],
        "pad_id": -1,
        "unk_piece": unk,
        "bos_piece": "<s>",
        "eos_piece": "</s>",
        "pad_piece": "<pad>",
    }
    scores_out = [0.0] * (1 + len(control)) + [s for _, s in normal] + [0.0] * len(unused)
    return S.SentencePieceModel(pieces, scores_out, types, trainer, normalizer, False, file)


def write_marian_tokenizers(
    source: UnigramTokenizer, target: UnigramTokenizer, directory: str | os.PathLike
) -> None:
    """Writes a Marian pair as `source.spm`, `target.spm`, `vocab.json` (and `target_vocab.json`
    with `separate_vocabs` when the sides' vocabularies differ) and `tokenizer_config.json`.

    Raises:
        TypeError: not two `UnigramTokenizer`s with `compatibility="sentencepiece"`.
        ValueError: a side with byte fallback (Marian has none).
    """
    configs = [_check(source, "sentencepiece", "source"), _check(target, "sentencepiece", "target")]
    if any(c["byte_fallback"] for c in configs):
        raise ValueError("A Marian tokenizer has no byte fallback; `byte_fallback=True` cannot be written.")
    directory = os.fspath(directory)
    separate = configs[0]["vocabulary"] != configs[1]["vocabulary"]
    for side, tokenizer in (("source", source), ("target", target)):
        model = marian_model(tokenizer, f"{side}.spm", unused=separate or side == "source")
        data = S.serialize_sentencepiece_model(model)
        with open(os.path.join(directory, f"{side}.spm"), "wb") as f:
            f.write(data)
    names = ("vocab.json", "target_vocab.json") if separate else ("vocab.json",)
    for name, config in zip(names, configs):
        _write_json(directory, name, {t: i for i, t in enumerate(config["vocabulary"])})
    options = {"tokenizer_class": "MarianTokenizer", **_special_options(source, configs[0])}
    options["separate_vocabs"] = separate
    roles = {options.get(f"{r}_token") for r in ("unk", "eos", "pad")}
    extra = [t for t, _ in configs[0]["added_tokens"] if t not in roles]
    if extra:
        options["additional_special_tokens"] = extra
    _write_json(directory, "tokenizer_config.json", options)


def write_unigram_tokenizer(tokenizer, directory: str | os.PathLike) -> None:
    """`write_marian_tokenizers` for a `(source, target)` pair, else `write_t5_tokenizer`."""
    if isinstance(tokenizer, (tuple, list)):
        if len(tokenizer) != 2:
            raise ValueError(
                f"A Marian tokenizer is a (source, target) pair; received {len(tokenizer)} items."
            )
        write_marian_tokenizers(tokenizer[0], tokenizer[1], directory)
    else:
        write_t5_tokenizer(tokenizer, directory)


__all__ = [
    "marian_model",
    "t5_tokenizer_json",
    "write_marian_tokenizers",
    "write_t5_tokenizer",
    "write_unigram_tokenizer",
]
