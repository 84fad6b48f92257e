"""The parts of a HuggingFace `tokenizer.json` that keras_tfm implements, read strictly.

Each reader returns a plain description of one part (normalizer,
pre-tokenizer, decoder, post-processor, BPE model options, added tokens) and
raises a ValueError naming the file, the field and the value for anything
else, so that no file is ever read differently from what HuggingFace
`tokenizers` does with it.
"""

import os
from typing import Any

METASPACE = "\u2581"
#: transformers' Qwen2 `PRETOKENIZE_REGEX` (models/qwen2/tokenization_qwen2.py).
QWEN2_REGEX = r"""(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+"""


def unsupported(file: str | os.PathLike, field: str, value: Any, supported: str) -> ValueError:
    """The ValueError for a part of `file` that is not implemented."""
    return ValueError(
        f"{os.fspath(file)!r}: `{field}` {value!r} is not implemented (supported: {supported}); "
        "keras_tfm refuses the file rather than tokenize differently from HuggingFace."
    )


def _flatten(part, field, sequence_key):
    """[(field path, part dict)] of a part or a `Sequence` of parts (nested sequences flattened)."""
    if part is None:
        return []
    if not isinstance(part, dict):
        raise ValueError(f"`{field}` must be a JSON object or null; found {part!r}.")
    if part.get("type") != "Sequence":
        return [(field, part)]
    items = part.get(sequence_key)
    if not isinstance(items, list):
        raise ValueError(f"`{field}.{sequence_key}` must be a list; found {items!r}.")
    out = []
    for i, item in enumerate(items):
        out += _flatten(item, f"{field}.{sequence_key}[{i}]", sequence_key)
    return out


def read_normalizer(data: dict, file: str) -> list[str]:
    """List of "nfc", "prepend" (Prepend("▁")) and "escape" (Replace(" ", "▁")), in order."""
    steps = []
    supported = "null, NFC, Prepend('▁'), Replace(' ' -> '▁'), a Sequence of them"
    for field, part in _flatten(data.get("normalizer"), "normalizer", "normalizers"):
        kind = part.get("type")
        if kind == "NFC":
            steps.append("nfc")
        elif kind == "Prepend" and part.get("prepend") == METASPACE:
            steps.append("prepend")
        elif (
            kind == "Replace" and part.get("pattern") == {"String": " "} and part.get("content") == METASPACE
        ):
            steps.append("escape")
        else:
            raise unsupported(file, field, part, supported)
    return steps


def read_pre_tokenizer(data: dict, file: str) -> list[tuple]:
    """List of ("metaspace", prepend_scheme, split), ("split", regex) and ("byte_level", use_regex)."""
    steps = []
    for field, part in _flatten(data.get("pre_tokenizer"), "pre_tokenizer", "pretokenizers"):
        kind = part.get("type")
        if kind == "Metaspace" and part.get("replacement") == METASPACE:
            scheme = part.get("prepend_scheme", "always")
            if part.get("add_prefix_space") is False:
                scheme = "never"
            if scheme not in ("always", "first", "never"):
                raise unsupported(file, f"{field}.prepend_scheme", scheme, "'always', 'first', 'never'")
            steps.append(("metaspace", scheme, bool(part.get("split", True))))
        elif kind == "Split":
            pattern = part.get("pattern") or {}
            if pattern != {"Regex": QWEN2_REGEX}:
                raise unsupported(file, f"{field}.pattern", pattern, f"Qwen2's regex {QWEN2_REGEX!r}")
            if part.get("behavior") != "Isolated" or part.get("invert", False):
                raise unsupported(
                    file,
                    f"{field}.behavior",
                    (part.get("behavior"), part.get("invert")),
                    "Isolated, not inverted",
                )
            steps.append(("split", pattern["Regex"]))
        elif kind == "ByteLevel":
            if part.get("add_prefix_space", True):
                raise unsupported(
                    file, f"{field}.add_prefix_space", part.get("add_prefix_space", True), "false"
                )
            steps.append(("byte_level", bool(part.get("use_regex", True))))
        else:
            raise unsupported(file, field, part, "null, Metaspace('▁'), Split (Qwen2's regex), ByteLevel")
    return steps


def read_decoder(data: dict, file: str) -> str | tuple | None:
    """ "byte_level", None (no decoder), or ("sentencepiece", byte_fallback, strip_left)."""
    decoder = data.get("decoder")
    if decoder is None:
        return None
    if isinstance(decoder, dict) and decoder.get("type") == "ByteLevel":
        return "byte_level"
    steps = [part for _, part in _flatten(decoder, "decoder", "decoders")]
    names = [p.get("type") for p in steps]
    supported = "ByteLevel, or Sequence[Replace('▁' -> ' '), ByteFallback, Fuse, Strip(' ', n, 0)]"
    replace = {"type": "Replace", "pattern": {"String": METASPACE}, "content": " "}
    strip = steps[-1] if names[-1:] == ["Strip"] else None
    if strip is not None and (
        strip.get("content") != " " or strip.get("stop", 0) != 0 or names[-2:-1] != ["Fuse"]
    ):
        raise unsupported(file, "decoder", decoder, supported)
    body = names[:-1] if strip is not None else names
    if (
        not steps
        or steps[0] != replace
        or body not in (["Replace", "ByteFallback", "Fuse"], ["Replace", "Fuse"])
    ):
        raise unsupported(file, "decoder", decoder, supported)
    return ("sentencepiece", "ByteFallback" in body, int(strip.get("start", 0)) if strip else 0)


def read_post_processor(data: dict, file: str, vocabulary: dict[str, int]) -> tuple[list[str], list[str]]:
    """(prefix tokens, suffix tokens) the post-processor puts around a single sequence."""
    post = data.get("post_processor")
    if post is None or (isinstance(post, dict) and post.get("type") == "ByteLevel"):
        return [], []
    supported = (
        "null, ByteLevel, RobertaProcessing, TemplateProcessing with one special token at most before "
        "and after $A"
    )
    if isinstance(post, dict) and post.get("type") == "RobertaProcessing":
        return _roberta_post_processor(post, file, vocabulary)
    if not isinstance(post, dict) or post.get("type") != "TemplateProcessing":
        raise unsupported(file, "post_processor", post, supported)
    single = post.get("single") or []
    sequences = [i for i, item in enumerate(single) if "Sequence" in item]
    if len(sequences) != 1 or single[sequences[0]]["Sequence"].get("id") != "A":
        raise unsupported(file, "post_processor.single", single, supported)
    specials = post.get("special_tokens") or {}
    tokens = []
    for i, item in enumerate(single):
        if "Sequence" in item:
            tokens.append(None)
            continue
        name = (item.get("SpecialToken") or {}).get("id")
        entry = specials.get(name) or {}
        ids, names = entry.get("ids"), entry.get("tokens")
        if name is None or not ids or len(ids) != 1 or names != [name] or vocabulary.get(name) != ids[0]:
            raise unsupported(file, f"post_processor.single[{i}]", item, "a special token of the vocabulary")
        tokens.append(name)
    split = tokens.index(None)
    prefix, suffix = tokens[:split], tokens[split + 1 :]
    if len(prefix) > 1 or len(suffix) > 1:
        raise unsupported(file, "post_processor.single", single, supported)
    return prefix, suffix


def _roberta_post_processor(post: dict, file: str, vocabulary: dict[str, int]) -> tuple[list[str], list[str]]:
    """RoBERTa's / BART's `<s> $A </s>`: `cls` before a single sequence, `sep` after it (`trim_offsets`
    and `add_prefix_space` there act on offsets only)."""
    tokens = []
    for role in ("cls", "sep"):
        entry = post.get(role)
        if (
            not isinstance(entry, list)
            or len(entry) != 2
            or not isinstance(entry[0], str)
            or vocabulary.get(entry[0]) != entry[1]
        ):
            raise unsupported(file, f"post_processor.{role}", entry, "[token, id] of the vocabulary")
        tokens.append(entry[0])
    return [tokens[0]], [tokens[1]]


def read_bpe_options(model: dict, file: str, byte_level: bool) -> dict[str, Any]:
    """The BPE model's options; refuses dropout, subword prefixes / suffixes and (byte-level) byte fallback."""
    if model.get("dropout") not in (None, 0, 0.0):
        raise unsupported(file, "model.dropout", model.get("dropout"), "null")
    for key in ("continuing_subword_prefix", "end_of_word_suffix"):
        if model.get(key) not in (None, ""):
            raise unsupported(file, f"model.{key}", model.get(key), "null or ''")
    options = {
        "byte_fallback": bool(model.get("byte_fallback", False)),
        "fuse_unk": bool(model.get("fuse_unk", False)),
        "unk_token": model.get("unk_token"),
        "ignore_merges": bool(model.get("ignore_merges", False)),
    }
    if byte_level and options["byte_fallback"]:
        raise unsupported(file, "model.byte_fallback", True, "false for a byte-level BPE")
    return options


def read_added_tokens(data: dict, file: str, vocabulary: dict[str, int]) -> tuple[list[dict], list[str]]:
    """`[{"content", "special", "normalized"}]`, and the full vocabulary (model + added) in id order."""
    tokens, by_id = [], {i: t for t, i in vocabulary.items()}
    for i, item in enumerate(data.get("added_tokens") or []):
        field = f"added_tokens[{i}]"
        if not isinstance(item, dict) or not isinstance(item.get("content"), str) or not item["content"]:
            raise ValueError(
                f"{os.fspath(file)!r}: `{field}` must have a non-empty 'content'; found {item!r}."
            )
        for key in ("lstrip", "rstrip", "single_word"):
            if item.get(key, False):
                raise unsupported(file, f"{field}.{key}", True, "false")
        token_id = item.get("id")
        if (
            not isinstance(token_id, int)
            or token_id < 0
            or by_id.get(token_id, item["content"]) != item["content"]
        ):
            raise ValueError(
                f"{os.fspath(file)!r}: `{field}` gives id {token_id!r} to {item['content']!r}, "
                f"which the model vocabulary gives to {by_id.get(token_id)!r}."
            )
        by_id[token_id] = item["content"]
        special = bool(item.get("special", False))
        normalized = bool(item.get("normalized", not special))
        tokens.append({"content": item["content"], "special": special, "normalized": normalized})
    if sorted(by_id) != list(range(len(by_id))):
        missing = sorted(set(range(max(by_id) + 1)) - set(by_id))[:5]
        raise ValueError(f"{os.fspath(file)!r}: the token ids are not 0..n-1 (missing {missing}).")
    return tokens, [by_id[i] for i in range(len(by_id))]


def check_gpt2_byte_level(data: dict, file: str) -> None:
    """Raises a ValueError naming the field unless `data` (a tokenizer.json) is GPT-2's byte-level BPE,
    the one `BytePairTokenizer` reads (Llama's, Qwen2's, ... are not)."""
    model = data.get("model") or {}
    checks = [
        ("model.type", model.get("type"), model.get("type") == "BPE", "'BPE'"),
        ("model.byte_fallback", model.get("byte_fallback"), not model.get("byte_fallback"), "false"),
        ("normalizer", data.get("normalizer"), data.get("normalizer") is None, "null"),
    ]
    for field, value, ok, expected in checks:
        if not ok:
            raise _not_gpt2(file, field, value, expected)
    try:
        read_bpe_options(model, file, byte_level=True)
        pre_tokenizer = read_pre_tokenizer(data, file)
        decoder = read_decoder(data, file)
    except ValueError as error:
        raise ValueError(f"{error} It is not GPT-2's byte-level BPE.") from error
    if pre_tokenizer != [("byte_level", True)]:
        raise _not_gpt2(file, "pre_tokenizer", data.get("pre_tokenizer"), "ByteLevel(use_regex=true)")
    if decoder not in (None, "byte_level"):
        raise _not_gpt2(file, "decoder", data.get("decoder"), "ByteLevel")


def _not_gpt2(file, field, value, expected):
    return ValueError(
        f"{os.fspath(file)!r}: `{field}` is {value!r}, not GPT-2's byte-level BPE ({expected}); "
        "BytePairTokenizer would tokenize it wrongly. Use keras_tfm.tokenizers.load_tokenizer_json."
    )
