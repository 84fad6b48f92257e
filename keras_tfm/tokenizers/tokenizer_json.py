"""`load_tokenizer_json`: the keras_tfm tokenizer a HuggingFace `tokenizer.json` describes.

The model type, normalizer, pre-tokenizer, post-processor and decoder of the
file choose the tokenizer:

    WordPiece + BertNormalizer / BertPreTokenizer      WordPieceTokenizer.from_pretrained
    BPE + ByteLevel pre-tokenizer (GPT-2's regex)      BytePairTokenizer
    BPE + Split(Qwen2's regex) + ByteLevel [+ NFC]     Qwen2BPETokenizer
    BPE + Prepend/Replace normalizer or Metaspace      SentencePieceBPETokenizer (Llama, Mistral)
    Unigram                                            not implemented yet (the `unigram` module)

Anything else is refused with a ValueError naming the file, the field and the
value (`tokenizer_json_fields`). The special tokens the post-processor puts
around a text become `add_bos` / `add_eos`; `bos_token`, `eos_token` and
`pad_token` of `tokenizer_config.json` / `special_tokens_map.json` beside the
file name the other roles. The file's `truncation` and `padding` (encoding
options of HuggingFace's `Tokenizer`) are not applied: pass `max_length`.

Known difference: `BytePairTokenizer` (GPT-2) does not cut added tokens such as
`<|endoftext|>` out of the text; it tokenizes them as text.
"""

import os

from keras_tfm.tokenizers import huggingface_files as F
from keras_tfm.tokenizers import tokenizer_json_fields as J
from keras_tfm.tokenizers.base import Tokenizer
from keras_tfm.tokenizers.byte_pair import BytePairTokenizer
from keras_tfm.tokenizers.qwen2_bpe import Qwen2BPETokenizer
from keras_tfm.tokenizers.sentencepiece_bpe import SentencePieceBPETokenizer
from keras_tfm.tokenizers.wordpiece import WordPieceTokenizer

MODEL_TYPES = ("BPE", "WordPiece", "Unigram")


def tokenizer_json_file(path: str | os.PathLike) -> str:
    """`path` if it is a file, else `path/tokenizer.json` (FileNotFoundError when absent)."""
    if not isinstance(path, (str, os.PathLike)):
        raise TypeError(f"`path` must be a tokenizer.json file or its directory; received {path!r}.")
    if os.path.isfile(path):
        return os.fspath(path)
    return F.checkpoint_file(path, "tokenizer.json")


def load_tokenizer_json(path: str | os.PathLike, **kwargs) -> Tokenizer:
    """Builds the keras_tfm tokenizer that a HuggingFace `tokenizer.json` describes.

    Args:
        path: a `tokenizer.json` file, or a checkpoint directory holding one
            (its `tokenizer_config.json` / `special_tokens_map.json` are read
            too when present).
        **kwargs: constructor arguments that override what the files say
            (e.g. `max_length=128`, `add_bos=False`).

    Returns:
        A `WordPieceTokenizer`, `BytePairTokenizer`, `Qwen2BPETokenizer`,
        `SentencePieceBPETokenizer` or `UnigramTokenizer` whose `tokenize` gives HuggingFace's
        `Tokenizer.encode(text).ids` and whose `detokenize` gives its
        `decode(ids, skip_special_tokens=True)`.

    Raises:
        FileNotFoundError: no such file or directory.
        ValueError: the file is malformed or uses a part keras_tfm does not
            implement (the message names the file, the field and the value).
    """
    file = tokenizer_json_file(path)
    directory = os.path.dirname(os.path.abspath(file))
    data = F.read_json(file)
    model = data.get("model")
    if not isinstance(model, dict) or model.get("type") not in MODEL_TYPES:
        kind = model.get("type") if isinstance(model, dict) else model
        raise J.unsupported(file, "model.type", kind, ", ".join(MODEL_TYPES))
    if model["type"] == "Unigram":  # SentencePiece Unigram (T5, Flan-T5): its own reader
        from keras_tfm.tokenizers.unigram import UnigramTokenizer

        return UnigramTokenizer.from_tokenizer_json(file, **kwargs)
    if model["type"] == "WordPiece":
        return _wordpiece(data, file, directory, kwargs)
    return _byte_pair(data, file, directory, kwargs)


def _wordpiece(data, file, directory, kwargs):
    """BERT's WordPiece: the parts `WordPieceTokenizer.from_pretrained` implements."""
    expected = {
        "normalizer": "BertNormalizer",
        "pre_tokenizer": "BertPreTokenizer",
        "decoder": "WordPiece",
    }
    for field, kind in expected.items():
        part = data.get(field)
        if not isinstance(part, dict) or part.get("type") != kind:
            raise J.unsupported(file, field, part, kind)
    vocabulary = (data.get("model") or {}).get("vocab") or {}
    prefix, suffix = _bert_post_processor(data, file, vocabulary)
    if os.path.basename(file) != "tokenizer.json":
        raise ValueError(
            f"`path` {file!r}: a WordPiece tokenizer.json is read from its checkpoint directory."
        )
    tokenizer = WordPieceTokenizer.from_pretrained(directory, **kwargs)
    expected_ids = ([vocabulary[t] for t in prefix], [vocabulary[t] for t in suffix])
    if "add_cls_sep" not in kwargs and (tokenizer.prefix_ids, tokenizer.suffix_ids) != tuple(
        map(tuple, expected_ids)
    ):
        raise ValueError(
            f"{file!r}: `post_processor` adds {prefix} ... {suffix}, but the tokenizer files name "
            f"[CLS] / [SEP] tokens {tokenizer.prefix_ids} / {tokenizer.suffix_ids}."
        )
    return tokenizer


def _bert_post_processor(data, file, vocabulary):
    post = data.get("post_processor")
    if isinstance(post, dict) and post.get("type") == "BertProcessing":
        return [post["cls"][0]], [post["sep"][0]]
    return J.read_post_processor(data, file, vocabulary)


def _byte_pair(data, file, directory, kwargs):
    """The three BPE tokenizers, told apart by their normalizer and pre-tokenizer."""
    model = data["model"]
    vocab = model.get("vocab")
    if not isinstance(vocab, dict) or not vocab:
        raise ValueError(f"{file!r}: `model.vocab` must be a non-empty token -> id object.")
    merges = model.get("merges")
    if not isinstance(merges, list):
        raise ValueError(f"{file!r}: `model.merges` must be a list; found {type(merges).__name__}.")
    normalizer = J.read_normalizer(data, file)
    pre_tokenizer = J.read_pre_tokenizer(data, file)
    decoder = J.read_decoder(data, file)
    added, vocabulary = J.read_added_tokens(data, file, vocab)
    prefix, suffix = J.read_post_processor(data, file, {t: i for i, t in enumerate(vocabulary)})
    config = _special_tokens(directory, vocabulary, prefix, suffix)
    if pre_tokenizer == [("byte_level", True)]:
        J.check_gpt2_byte_level(data, file)
        config.update(kwargs)
        return BytePairTokenizer(vocabulary, merges, **config)
    if any(step[0] in ("split", "byte_level") for step in pre_tokenizer):
        if pre_tokenizer != [("split", J.QWEN2_REGEX), ("byte_level", False)]:
            raise J.unsupported(
                file,
                "pre_tokenizer",
                data.get("pre_tokenizer"),
                "Sequence[Split(Qwen2's regex), ByteLevel(use_regex=false)]",
            )
        options = J.read_bpe_options(model, file, byte_level=True)
        if normalizer not in ([], ["nfc"]) or decoder != "byte_level":
            field = "decoder" if normalizer in ([], ["nfc"]) else "normalizer"
            raise J.unsupported(file, field, data.get(field), "NFC or null normalizer, ByteLevel decoder")
        config.update(nfc=normalizer == ["nfc"], ignore_merges=options["ignore_merges"])
        config.update(kwargs)
        return Qwen2BPETokenizer(vocabulary, merges, added, **config)
    config.update(_sentencepiece_options(data, file, normalizer, pre_tokenizer, decoder))
    config.update(kwargs)
    return SentencePieceBPETokenizer(vocabulary, merges, added, **config)


def _sentencepiece_options(data, file, normalizer, pre_tokenizer, decoder):
    """Constructor options of `SentencePieceBPETokenizer` from the parts of the file."""
    if "nfc" in normalizer:
        raise J.unsupported(
            file, "normalizer", data.get("normalizer"), "Prepend('▁') and Replace(' ' -> '▁')"
        )
    metaspace = pre_tokenizer[0] if pre_tokenizer else None
    if len(pre_tokenizer) > 1:
        raise J.unsupported(file, "pre_tokenizer", data.get("pre_tokenizer"), "null or one Metaspace('▁')")
    if "escape" not in normalizer and metaspace is None:
        raise J.unsupported(
            file, "normalizer", data.get("normalizer"), "Replace(' ' -> '▁') or a Metaspace pre-tokenizer"
        )
    if not isinstance(decoder, tuple):
        raise J.unsupported(
            file, "decoder", data.get("decoder"), "Sequence[Replace, ByteFallback, Fuse, Strip]"
        )
    options = J.read_bpe_options(data["model"], file, byte_level=False)
    return {
        "normalizer": normalizer,
        "metaspace": metaspace[1] if metaspace else None,
        "split": bool(metaspace and metaspace[2]),
        "byte_fallback": options["byte_fallback"],
        "unk_token": options["unk_token"],
        "fuse_unk": options["fuse_unk"],
        "ignore_merges": options["ignore_merges"],
        "byte_fallback_decoding": decoder[1],
        "strip_left": decoder[2],
    }


def _special_tokens(directory, vocabulary, prefix, suffix):
    """`special_tokens`, `add_bos`, `add_eos` from the post-processor and the config files beside it."""
    options = F.read_tokenizer_options(directory)
    special = F.special_tokens_from_options(options, ("bos", "eos", "pad"), vocabulary, repr(directory))
    if prefix:
        special["bos"] = prefix[0]
    if suffix:
        special["eos"] = suffix[0]
    return {"special_tokens": special or False, "add_bos": bool(prefix), "add_eos": bool(suffix)}
