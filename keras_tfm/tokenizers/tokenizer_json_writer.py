"""`write_tokenizer_json`: a HuggingFace `tokenizer.json` (+ `tokenizer_config.json`) of a tokenizer.

The inverse of `load_tokenizer_json` for the tokenizers it builds from a file that
the other checkpoint formats cannot hold:

    SentencePieceBPETokenizer   BPE with byte fallback; Prepend / Replace normalizer or a
                                Metaspace pre-tokenizer; decoder Replace, ByteFallback, Fuse, Strip
    Qwen2BPETokenizer           byte-level BPE; NFC (or no) normalizer; Split(Qwen2's regex) +
                                ByteLevel pre-tokenizer; ByteLevel decoder

Every option of the tokenizer becomes the part `tokenizer_json_fields` reads back,
so `load_tokenizer_json` of the written folder is the same tokenizer, and
HuggingFace `tokenizers` gives the same ids. The model vocabulary holds every token
up to the last one that is not an added token; the added tokens after it exist
only as `added_tokens` (as in Qwen2's files). `add_bos` / `add_eos` become a
`TemplateProcessing` post-processor. `tokenizer_config.json` names the special
tokens and the class `PreTrainedTokenizerFast` (transformers' reader of a
`tokenizer.json` as it is).
"""

import json
import os

from keras_tfm.tokenizers.qwen2_bpe import Qwen2BPETokenizer
from keras_tfm.tokenizers.sentencepiece_bpe import SentencePieceBPETokenizer
from keras_tfm.tokenizers.tokenizer_json_fields import METASPACE, QWEN2_REGEX

#: The tokenizer classes `write_tokenizer_json` writes.
WRITABLE = (SentencePieceBPETokenizer, Qwen2BPETokenizer)


def _merges(tokenizer):
    pairs = []
    for merge in tokenizer.get_config()["merges"]:
        parts = merge.split(" ")
        if len(parts) != 2:
            raise ValueError(f"The merge {merge!r} is not two tokens apart; it cannot be written.")
        pairs.append(parts)
    return pairs


def _vocabularies(tokenizer):
    """(model vocab {token: id}, added_tokens entries) of the tokenizer."""
    vocabulary = list(tokenizer.get_vocabulary())
    added = {t["content"]: t for t in tokenizer.added_tokens}
    end = len(vocabulary)
    while end > 0 and vocabulary[end - 1] in added:
        end -= 1
    entries = [
        {
            "id": vocabulary.index(content),
            "content": content,
            "single_word": False,
            "lstrip": False,
            "rstrip": False,
            "normalized": token["normalized"],
            "special": token["special"],
        }
        for content, token in added.items()
    ]
    return {token: i for i, token in enumerate(vocabulary[:end])}, sorted(entries, key=lambda e: e["id"])


def _post_processor(tokenizer):
    """TemplateProcessing of `add_bos` / `add_eos`: [bos] $A [eos] (pair: the same around $B)."""
    config = tokenizer.get_config()
    prefix = [tokenizer.id_to_token(tokenizer.bos_id)] if config.get("add_bos") else []
    suffix = [tokenizer.id_to_token(tokenizer.eos_id)] if config.get("add_eos") else []

    def template(sequence, type_id):
        specials = [{"SpecialToken": {"id": t, "type_id": type_id}} for t in prefix]
        ends = [{"SpecialToken": {"id": t, "type_id": type_id}} for t in suffix]
        return specials + [{"Sequence": {"id": sequence, "type_id": type_id}}] + ends

    specials = {t: {"id": t, "ids": [tokenizer.token_to_id(t)], "tokens": [t]} for t in prefix + suffix}
    return {
        "type": "TemplateProcessing",
        "single": template("A", 0),
        "pair": template("A", 0) + template("B", 1),
        "special_tokens": specials,
    }


def _model(tokenizer, vocab, **options):
    return {
        "type": "BPE",
        "dropout": None,
        **options,
        "vocab": vocab,
        "merges": _merges(tokenizer),
    }


def _sentencepiece_parts(tokenizer, vocab):
    o = tokenizer.get_config()
    steps = {
        "prepend": {"type": "Prepend", "prepend": METASPACE},
        "escape": {"type": "Replace", "pattern": {"String": " "}, "content": METASPACE},
    }
    normalizers = [steps[name] for name in o["normalizer"]]
    normalizer = normalizers[0] if len(normalizers) == 1 else None
    if len(normalizers) > 1:
        normalizer = {"type": "Sequence", "normalizers": normalizers}
    pre_tokenizer = None
    if o["metaspace"] is not None:
        pre_tokenizer = {
            "type": "Metaspace",
            "replacement": METASPACE,
            "prepend_scheme": o["metaspace"],
            "split": o["split"],
        }
    decoders = [{"type": "Replace", "pattern": {"String": METASPACE}, "content": " "}]
    decoders += [{"type": "ByteFallback"}] if o["byte_fallback_decoding"] else []
    decoders += [{"type": "Fuse"}]
    if o["strip_left"]:
        decoders.append({"type": "Strip", "content": " ", "start": o["strip_left"], "stop": 0})
    model = _model(
        tokenizer,
        vocab,
        unk_token=o["unk_token"],
        continuing_subword_prefix=None,
        end_of_word_suffix=None,
        fuse_unk=o["fuse_unk"],
        byte_fallback=o["byte_fallback"],
        ignore_merges=o["ignore_merges"],
    )
    return normalizer, pre_tokenizer, {"type": "Sequence", "decoders": decoders}, model


def _qwen2_parts(tokenizer, vocab):
    o = tokenizer.get_config()
    pre_tokenizer = {
        "type": "Sequence",
        "pretokenizers": [
            {"type": "Split", "pattern": {"Regex": QWEN2_REGEX}, "behavior": "Isolated", "invert": False},
            {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": True, "use_regex": False},
        ],
    }
    decoder = {"type": "ByteLevel", "add_prefix_space": True, "trim_offsets": True, "use_regex": True}
    model = _model(
        tokenizer,
        vocab,
        unk_token=None,
        continuing_subword_prefix="",
        end_of_word_suffix="",
        fuse_unk=False,
        byte_fallback=False,
        ignore_merges=o["ignore_merges"],
    )
    return ({"type": "NFC"} if o["nfc"] else None), pre_tokenizer, decoder, model


def tokenizer_json(tokenizer: SentencePieceBPETokenizer | Qwen2BPETokenizer) -> dict:
    """The `tokenizer.json` contents of a `SentencePieceBPETokenizer` or `Qwen2BPETokenizer`.

    Raises:
        TypeError: another tokenizer class (named).
    """
    if not isinstance(tokenizer, WRITABLE):
        raise TypeError(
            f"write_tokenizer_json writes {[c.__name__ for c in WRITABLE]}; received "
            f"{type(tokenizer).__name__}."
        )
    vocab, added = _vocabularies(tokenizer)
    parts = _qwen2_parts if isinstance(tokenizer, Qwen2BPETokenizer) else _sentencepiece_parts
    normalizer, pre_tokenizer, decoder, model = parts(tokenizer, vocab)
    return {
        "version": "1.0",
        "truncation": None,
        "padding": None,
        "added_tokens": added,
        "normalizer": normalizer,
        "pre_tokenizer": pre_tokenizer,
        "post_processor": _post_processor(tokenizer),
        "decoder": decoder,
        "model": model,
    }


def tokenizer_config(tokenizer: SentencePieceBPETokenizer | Qwen2BPETokenizer) -> dict:
    """`tokenizer_config.json`: the special tokens, `add_bos_token` / `add_eos_token` and the class."""
    config = tokenizer.get_config()
    options = {
        "tokenizer_class": "PreTrainedTokenizerFast",
        "add_bos_token": bool(config.get("add_bos")),
        "add_eos_token": bool(config.get("add_eos")),
        "clean_up_tokenization_spaces": False,
    }
    for role in ("bos", "eos", "pad", "unk"):
        token_id = getattr(tokenizer, f"{role}_id", None)
        if token_id is not None:
            options[f"{role}_token"] = tokenizer.id_to_token(token_id)
    return options


def write_tokenizer_json(
    tokenizer: SentencePieceBPETokenizer | Qwen2BPETokenizer, directory: str | os.PathLike
) -> None:
    """Writes `tokenizer.json` and `tokenizer_config.json` into an existing `directory` (the
    temporary directory of `save_pretrained`: the caller makes the folder appear whole)."""
    contents = tokenizer_json(tokenizer)
    for name, data in (("tokenizer.json", contents), ("tokenizer_config.json", tokenizer_config(tokenizer))):
        with open(os.path.join(directory, name), "w", encoding="utf-8") as f:
            json.dump(data, f, ensure_ascii=False, indent=1)


__all__ = ["WRITABLE", "tokenizer_config", "tokenizer_json", "write_tokenizer_json"]
