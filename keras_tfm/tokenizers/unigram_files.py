"""Readers that turn a checkpoint's tokenizer files into `UnigramTokenizer` arguments.

- `read_tokenizer_json`: a HuggingFace `tokenizer.json` with a `Unigram` model
  (T5, Flan-T5), read as HuggingFace `tokenizers` runs it.
- `read_t5_model`: a T5 `spiece.model`, converted as transformers'
  `T5Tokenizer` converts it (all pieces with their scores, then the
  `<extra_id_N>` sentinels in reverse order, `<unk>` = id 2, the charsmap as
  the only normaliser, `WhitespaceSplit` + `Metaspace`, `</s>` appended).
- `read_marian`: one side of a Marian / OPUS-MT checkpoint, as transformers'
  `MarianTokenizer` runs it (the `sentencepiece` library on `source.spm` or
  `target.spm`, the pieces mapped to ids by `vocab.json`).

Whatever they do not implement (a model type, normaliser, pre-tokeniser,
decoder, post-processor, added-token option, SentencePiece option) is refused
with a ValueError naming the file and the field.
"""

import base64
import os

import numpy as np

from keras_tfm.tokenizers import huggingface_files as F
from keras_tfm.tokenizers import sentencepiece_model as S
from keras_tfm.tokenizers.charsmap import decode_charsmap
from keras_tfm.tokenizers.unigram_lattice import UNK_PENALTY

_TOP_KEYS = {"version", "truncation", "padding", "added_tokens", "normalizer", "pre_tokenizer", "model"}
_TOP_KEYS |= {"post_processor", "decoder"}
_NORMALIZER_KEYS = {
    "Precompiled": {"precompiled_charsmap"},
    "Strip": {"strip_left", "strip_right"},
    "Replace": {"pattern", "content"},
    "Prepend": {"prepend"},
}
_ROLES = ("pad", "unk", "bos", "eos")
_METASPACE = {"type": "Metaspace", "replacement": "\u2581", "prepend_scheme": "always", "split": True}


def _refuse(where, field, value, expected):
    raise ValueError(f"{where}: `{field}` is {value!r}; keras_tfm's UnigramTokenizer supports {expected}.")


def _known_keys(where, field, mapping, known):
    unknown = sorted(set(mapping) - set(known) - {"type"})
    if unknown:
        raise ValueError(
            f"{where}: `{field}` has fields {unknown} that keras_tfm's UnigramTokenizer does not implement."
        )


def _steps(where, field, node, key, known):
    """The steps of a (possibly `Sequence`) component as a flat list of dicts."""
    if node is None:
        return []
    if not isinstance(node, dict):
        _refuse(where, field, node, "an object")
    if node.get("type") == "Sequence":
        return [
            s
            for i, item in enumerate(node.get(key) or [])
            for s in _steps(where, f"{field}.{key}[{i}]", item, key, known)
        ]
    if node.get("type") not in known:
        _refuse(where, f"{field}.type", node.get("type"), f"{sorted(known)} (and Sequence)")
    _known_keys(where, field, node, known[node["type"]])
    return [(field, node)]


def _normalizers(where, data):
    steps, charsmap = [], None
    for field, node in _steps(where, "normalizer", data.get("normalizer"), "normalizers", _NORMALIZER_KEYS):
        kind = node["type"]
        if kind == "Precompiled":
            if charsmap is not None:
                _refuse(where, field, "a second Precompiled normalizer", "one")
            charsmap = node.get("precompiled_charsmap")
            decode_charsmap(charsmap, f"{where}: {field}")
            steps.append({"type": "Precompiled"})
        elif kind == "Strip":
            steps.append(
                {
                    "type": "Strip",
                    "left": bool(node.get("strip_left")),
                    "right": bool(node.get("strip_right")),
                }
            )
        elif kind == "Replace":
            pattern = node.get("pattern") or {}
            if "String" in pattern:
                steps.append(
                    {
                        "type": "Replace",
                        "pattern": pattern["String"],
                        "regex": False,
                        "content": node["content"],
                    }
                )
            elif pattern.get("Regex") == " {2,}":
                steps.append(
                    {"type": "Replace", "pattern": " {2,}", "regex": True, "content": node["content"]}
                )
            else:
                _refuse(where, f"{field}.pattern", pattern, "a String pattern or the Regex ' {2,}'")
        else:
            steps.append({"type": "Prepend", "prepend": node["prepend"]})
    return steps, charsmap


def _metaspace_options(where, field, node):
    if len(node.get("replacement", "")) != 1:
        _refuse(where, f"{field}.replacement", node.get("replacement"), "one character")
    scheme = node.get("prepend_scheme")
    if scheme is None:
        scheme = "always" if node.get("add_prefix_space", True) else "never"
    if scheme not in ("always", "never"):
        _refuse(where, f"{field}.prepend_scheme", scheme, "'always' and 'never'")
    return {"replacement": node["replacement"], "prepend_scheme": scheme}


def _pre_tokenizers(where, data):
    known = {
        "WhitespaceSplit": set(),
        "Metaspace": {"replacement", "prepend_scheme", "split", "add_prefix_space", "str_rep"},
    }
    steps = []
    for field, node in _steps(where, "pre_tokenizer", data.get("pre_tokenizer"), "pretokenizers", known):
        if node["type"] == "WhitespaceSplit":
            steps.append({"type": "WhitespaceSplit"})
        else:
            steps.append(
                {
                    "type": "Metaspace",
                    **_metaspace_options(where, field, node),
                    "split": bool(node.get("split", True)),
                }
            )
    return steps


def _decoder(where, data):
    node = data.get("decoder")
    if not isinstance(node, dict) or node.get("type") != "Metaspace":
        _refuse(
            where, "decoder", node if not isinstance(node, dict) else node.get("type"), "a Metaspace decoder"
        )
    _known_keys(
        where, "decoder", node, {"replacement", "prepend_scheme", "split", "add_prefix_space", "str_rep"}
    )
    return _metaspace_options(where, "decoder", node)


def _template(where, data):
    """(prefix token, suffix token) of a TemplateProcessing post-processor (each None or a token)."""
    node = data.get("post_processor")
    if node is None:
        return None, None
    if node.get("type") != "TemplateProcessing":
        _refuse(where, "post_processor.type", node.get("type"), "TemplateProcessing or null")
    single = node.get("single") or []
    kinds = ["A" if "Sequence" in item else item.get("SpecialToken", {}).get("id") for item in single]
    if kinds.count("A") != 1 or len(kinds) > 3:
        _refuse(where, "post_processor.single", single, "[token] $A [token]")
    at = kinds.index("A")
    if at > 1 or len(kinds) - at > 2:
        _refuse(where, "post_processor.single", single, "at most one token before and one after $A")
    specials = node.get("special_tokens") or {}
    for token in kinds[:at] + kinds[at + 1 :]:
        if len(specials.get(token, {}).get("ids", [])) != 1:
            _refuse(
                where, f"post_processor.special_tokens[{token!r}]", specials.get(token), "one id per token"
            )
    prefix = kinds[0] if at == 1 else None
    suffix = kinds[at + 1] if at + 1 < len(kinds) else None
    return prefix, suffix


def _added_tokens(where, data, vocabulary, scores):
    added = []
    for i, token in enumerate(data.get("added_tokens") or []):
        field = f"added_tokens[{i}]"
        for flag in ("single_word", "lstrip", "rstrip", "normalized"):
            if token.get(flag):
                _refuse(where, f"{field}.{flag}", True, "false")
        content, token_id = token.get("content"), token.get("id")
        if not isinstance(content, str) or not content or not isinstance(token_id, int):
            _refuse(where, field, token, "{'id': int, 'content': str, ...}")
        if token_id == len(vocabulary):
            vocabulary.append(content)
            scores.append(None)
        elif not 0 <= token_id < len(vocabulary) or vocabulary[token_id] != content:
            _refuse(
                where, f"{field}.id", token_id, f"the id of {content!r} in model.vocab or the next free id"
            )
        added.append([content, bool(token.get("special"))])
    return added


def read_tokenizer_json(path: str | os.PathLike) -> dict:
    """`UnigramTokenizer` arguments from a `tokenizer.json` (or a directory holding one).

    Reads the Unigram model (`vocab`, `unk_id`, `byte_fallback`), the added
    tokens, the normaliser (`Precompiled`, `Strip`, `Replace`, `Prepend`,
    `Sequence`), the pre-tokeniser (`WhitespaceSplit`, `Metaspace`,
    `Sequence`), the `TemplateProcessing` post-processor and the `Metaspace`
    decoder; with a directory, also the special tokens and
    `clean_up_tokenization_spaces` of `tokenizer_config.json` /
    `special_tokens_map.json`.
    """
    directory = os.fspath(path) if os.path.isdir(path) else None
    file = F.checkpoint_file(directory, "tokenizer.json") if directory else os.fspath(path)
    if not os.path.isfile(file):
        raise FileNotFoundError(f"`path`: no such tokenizer.json: {file!r}.")
    data = F.read_json(file)
    unknown = sorted(set(data) - _TOP_KEYS)
    if unknown:
        raise ValueError(f"{file}: fields {unknown} are not implemented by keras_tfm's UnigramTokenizer.")
    for field in ("truncation", "padding"):
        if data.get(field) is not None:
            _refuse(file, field, "set", "null (use `max_length`)")
    model = data.get("model") or {}
    if model.get("type") != "Unigram":
        _refuse(file, "model.type", model.get("type"), "'Unigram'")
    _known_keys(file, "model", model, {"unk_id", "vocab", "byte_fallback"})
    vocab = model.get("vocab")
    if (
        not isinstance(vocab, list)
        or not vocab
        or not all(isinstance(v, list) and len(v) == 2 for v in vocab)
    ):
        _refuse(file, "model.vocab", type(vocab).__name__, "a non-empty list of [piece, score]")
    vocabulary, scores = [str(p) for p, _ in vocab], [float(s) for _, s in vocab]
    unk_id = model.get("unk_id")
    if not isinstance(unk_id, int) or not 0 <= unk_id < len(vocab):
        _refuse(file, "model.unk_id", unk_id, f"an id in [0, {len(vocab)})")
    unk_score = min(scores) - UNK_PENALTY
    added = _added_tokens(file, data, vocabulary, scores)
    normalizers, charsmap = _normalizers(file, data)
    prefix, suffix = _template(file, data)
    options = F.read_tokenizer_options(directory) if directory else {}
    special = {"unk": vocabulary[unk_id]}
    for role in ("pad", "bos", "eos"):
        token = F.token_content(options.get(f"{role}_token"))
        if token in vocabulary:
            special[role] = token
    if "pad" not in special and "<pad>" in vocabulary:
        special["pad"] = "<pad>"  # T5's and Marian's default pad_token
    if prefix:
        special["bos"] = prefix
    if suffix:
        special["eos"] = suffix
    return {
        "vocabulary": vocabulary,
        "scores": scores,
        "unk_score": unk_score,
        "compatibility": "tokenizers",
        "precompiled_charsmap": charsmap,
        "normalizers": normalizers,
        "pre_tokenizers": _pre_tokenizers(file, data),
        "decoder": _decoder(file, data),
        "added_tokens": added,
        "byte_fallback": bool(model.get("byte_fallback", False)),
        "clean_up_tokenization_spaces": bool(options.get("clean_up_tokenization_spaces", False)),
        "special_tokens": special,
        "add_bos": prefix is not None,
        "add_eos": suffix is not None,
    }


def _model_file(path, name):
    path = os.fspath(path)
    return F.checkpoint_file(path, name) if os.path.isdir(path) else path


def _check_unigram(model, allow_user_defined=False):
    file = model.file
    if model.model_type != "UNIGRAM":
        _refuse(file, "trainer_spec.model_type", model.model_type, "UNIGRAM")
    if model.trainer["treat_whitespace_as_suffix"]:
        _refuse(file, "trainer_spec.treat_whitespace_as_suffix", True, "false")
    if model.has_denormalizer:
        _refuse(file, "denormalizer_spec", "a rule set", "none")
    user = [p for p, t in zip(model.pieces, model.types) if t == S.USER_DEFINED]
    if user and not allow_user_defined:
        _refuse(file, "pieces[].type", f"USER_DEFINED ({user[:3]})", "NORMAL, UNKNOWN, CONTROL, UNUSED")


def read_t5_model(path: str | os.PathLike, extra_ids: int = 100) -> dict:
    """`UnigramTokenizer` arguments from a T5 `spiece.model`, as transformers' `T5Tokenizer` converts it."""
    model = S.read_sentencepiece_model(_model_file(path, "spiece.model"))
    _check_unigram(model, allow_user_defined=True)
    file = model.file
    if model.trainer["unk_id"] != 2:
        _refuse(file, "trainer_spec.unk_id", model.trainer["unk_id"], "2 (T5Tokenizer reads id 2 as <unk>)")
    if model.trainer["byte_fallback"]:
        _refuse(file, "trainer_spec.byte_fallback", True, "false (T5Tokenizer turns it off)")
    vocabulary = list(model.pieces) + [f"<extra_id_{i}>" for i in reversed(range(extra_ids))]
    scores = list(model.scores) + [0.0] * extra_ids
    for token in ("</s>", "<pad>"):
        if token not in model.pieces:
            _refuse(file, "pieces", f"no {token}", f"a model with {token} (T5Tokenizer's default)")
    kinds = {S.CONTROL: True, S.USER_DEFINED: False}
    added = [[p, kinds[t]] for p, t in zip(model.pieces, model.types) if t in kinds]
    added.insert(0, [vocabulary[2], True])
    added += [[f"<extra_id_{i}>", True] for i in reversed(range(extra_ids))]
    charsmap = model.normalizer["precompiled_charsmap"]
    return {
        "vocabulary": vocabulary,
        "scores": scores,
        "unk_score": min(scores) - UNK_PENALTY,
        "compatibility": "tokenizers",
        "precompiled_charsmap": base64.b64encode(charsmap).decode("ascii") if charsmap else None,
        "normalizers": [{"type": "Precompiled"}] if charsmap else [],
        "pre_tokenizers": [{"type": "WhitespaceSplit"}, dict(_METASPACE)],
        "decoder": {"replacement": "\u2581", "prepend_scheme": "always"},
        "added_tokens": added,
        "special_tokens": {"pad": "<pad>", "unk": vocabulary[2], "eos": "</s>"},
        "add_eos": True,
    }


def read_t5_directory(path: str | os.PathLike) -> dict:
    """A T5 checkpoint directory: `tokenizer.json` if there is one, else `spiece.model` (with
    `extra_ids` from `tokenizer_config.json`, default 100)."""
    if F.checkpoint_file(path, "tokenizer.json", required=False):
        return read_tokenizer_json(path)
    options = F.read_tokenizer_options(path)
    extra_ids = options.get("extra_ids", 100)
    if isinstance(extra_ids, bool) or not isinstance(extra_ids, int) or extra_ids < 0:
        _refuse(os.path.join(os.fspath(path), "tokenizer_config.json"), "extra_ids", extra_ids, "an int >= 0")
    config = read_t5_model(F.checkpoint_file(path, "spiece.model"), extra_ids)
    config["clean_up_tokenization_spaces"] = bool(options.get("clean_up_tokenization_spaces", False))
    return config


def read_marian(path: str | os.PathLike, side: str = "source") -> dict:
    """`UnigramTokenizer` arguments for one side of a Marian checkpoint directory, as `MarianTokenizer` runs it.

    The side's SentencePiece model (`source.spm` / `target.spm`) segments;
    `vocab.json` (`target_vocab.json` for the target of `separate_vocabs`
    checkpoints) gives the ids, `<unk>` for a piece it lacks; `</s>` is
    appended; a leading `>>xx<<` language code is one token. Decoding uses the
    source model's piece types unless the vocabularies are separate (as
    MarianTokenizer does).
    """
    if side not in ("source", "target"):
        raise ValueError(f"`side` must be 'source' or 'target'; received {side!r}.")
    options = F.read_tokenizer_options(path)
    separate = bool(options.get("separate_vocabs", False))
    vocab_name = "target_vocab.json" if separate and side == "target" else "vocab.json"
    vocab_file = F.checkpoint_file(path, vocab_name)
    vocabulary = F._ordered_vocabulary(F.read_json(vocab_file), vocab_file, "vocab")
    model = S.read_sentencepiece_model(F.checkpoint_file(path, f"{side}.spm"))
    decoding = (
        model
        if separate or side == "source"
        else S.read_sentencepiece_model(F.checkpoint_file(path, "source.spm"))
    )
    for m in (model, decoding):
        _check_unigram(m)
        if m.trainer["byte_fallback"]:
            _refuse(m.file, "trainer_spec.byte_fallback", True, "false for Marian")
    normal = {p: s for p, s, t in zip(model.pieces, model.scores, model.types) if t == S.NORMAL}
    index = {token: i for i, token in enumerate(vocabulary)}
    special = {}
    for role, default in (("unk", "<unk>"), ("eos", "</s>"), ("pad", "<pad>")):
        token = F.token_content(options.get(f"{role}_token")) or default
        if token not in index:
            _refuse(vocab_file, f"{role}_token", token, "a token of the vocabulary")
        special[role] = token
    added = {special["unk"], special["eos"], special["pad"]}
    added |= {F.token_content(t) for t in options.get("additional_special_tokens") or []} - {None}
    for token_id, token in (options.get("added_tokens_decoder") or {}).items():
        for flag in ("single_word", "lstrip", "rstrip"):
            if isinstance(token, dict) and token.get(flag):
                _refuse(vocab_file, f"added_tokens_decoder[{token_id}].{flag}", True, "false")
        added.add(F.token_content(token))
    missing = sorted(t for t in added - {None} if t not in index)
    if missing:
        _refuse(vocab_file, "added tokens", missing, "tokens of the vocabulary")
    added = sorted(added - {None})
    types = dict(zip(decoding.pieces, decoding.types))
    kinds = "".join(
        "1" if types.get(t) == S.CONTROL else "0" if types.get(t) in (S.NORMAL, S.UNUSED) else "2"
        for t in vocabulary
    )
    charsmap = model.normalizer["precompiled_charsmap"]
    flags = ("add_dummy_prefix", "remove_extra_whitespaces", "escape_whitespaces")
    return {
        "vocabulary": vocabulary,
        "scores": [normal.get(t) for t in vocabulary],
        "extra_pieces": [[p, s] for p, s in normal.items() if p not in index],
        "unk_score": float(np.float32(min(normal.values())) - np.float32(UNK_PENALTY)),
        "compatibility": "sentencepiece",
        "precompiled_charsmap": base64.b64encode(charsmap).decode("ascii") if charsmap else None,
        "sentencepiece_normalizer": {flag: model.normalizer[flag] for flag in flags},
        "decode_kinds": kinds,
        "added_tokens": [[t, True] for t in added],
        "language_codes": True,
        "clean_up_tokenization_spaces": bool(options.get("clean_up_tokenization_spaces", False)),
        "special_tokens": special,
        "add_eos": True,
    }
