"""Text in, text out for the generating models (the providers of `GPT.generate` /
`beam_search` and `Seq2Seq.generate` / `beam_search` / `translate`).

Each model method takes either token ids or text:

* ids (a 2-D int array or a list of id sequences): exactly
  `generation.generate(model, ids, ...)` / `generation.beam_search(...)`, same
  options, same outputs;
* text (a str or a non-empty list of str), with the model's tokenizer
  (`model.tokenizer`; a seq2seq model: one shared tokenizer or a `(source,
  target)` pair): the strings are tokenized as the tokenizer's `tokenize` does
  (its BOS/EOS/CLS-SEP additions included, without padding to its
  `sequence_length`), the ids go through the same call, and the generated ids
  are detokenized by the rule of the served signatures
  (`keras_tfm.export.common.detokenize`): the first `lengths[b]` new ids of
  row b, ids past the tokenizer's vocabulary read as `[UNK]` (dropped by a
  tokenizer without special tokens), special tokens dropped.

GPT text: `detokenize(prompt ids + new ids)`, the prompt followed by its
completion, as KerasHub's `generate` returns it (the prompt as the tokenizer
reads it back: unchanged for a lossless tokenizer such as a byte-level BPE or
a character tokenizer that knows every character); `completion_only=True`
returns `detokenize(new ids)`, the `completions` of the served `generate`
signature for the same `eos_id` (an export's default is none). `eos_id` defaults to the tokenizer's `eos_id` (None when it has
none: no stop). Seq2seq text: the translations (the target side alone), with
the ids of the exported `translate` signature: first decoder token `BOS` (5)
and stop id `EOS` (6) of `keras_tfm.tokenizers.special_tokens`.
"""

from collections.abc import Sequence

import numpy as np
import tensorflow as tf

from keras_tfm.checks import check_bool, check_float, check_int
from keras_tfm.generation import api
from keras_tfm.models import extensions
from keras_tfm.models.gpt import GPT
from keras_tfm.models.seq2seq import Seq2Seq
from keras_tfm.tokenizers.special_tokens import BOS, EOS, UNK

__all__ = [
    "generate_text",
    "beam_search_text",
    "translate",
    "text_batch",
    "tokenize_texts",
    "detokenize_ids",
]

#: Marks an option the caller did not give (`eos_id=None` means "no stop id").
_UNSET = object()

#: Options of the ids path that have no meaning on the text path (the text path returns strings).
_IDS_ONLY = ("return_lengths", "output_scores", "prompt_lengths", "source_lengths", "decoder_prompt_ids")


def text_batch(name: str, inputs) -> tuple[list[str], bool] | None:
    """`inputs` as a list of strings and whether it was one str; None for token ids.

    Text is a str or a list / tuple whose items are all str. A list holding str
    and other items raises a TypeError naming the first non-str item, an empty
    list a ValueError (an empty batch); anything else is left to the ids path.
    """
    if isinstance(inputs, str):
        return [inputs], True
    if isinstance(inputs, np.ndarray) and inputs.dtype.kind == "U":
        inputs = inputs.tolist()
        if isinstance(inputs, str):
            return [inputs], True
    if not isinstance(inputs, (list, tuple)):
        return None
    if not inputs:
        raise ValueError(f"`{name}` is an empty batch; pass a str, a non-empty list of str or token ids.")
    is_text = [isinstance(item, str) for item in inputs]
    if not any(is_text):
        return None
    if not all(is_text):
        index = is_text.index(False)
        raise TypeError(
            f"`{name}` mixes text and other items: `{name}[{index}]` is {inputs[index]!r} "
            f"({type(inputs[index]).__name__}); pass a list of str, or token ids only."
        )
    return list(inputs), False


def tokenize_texts(tokenizer, texts: Sequence[str], name: str = "inputs") -> list[list[int]]:
    """Id lists of `texts`: `tokenizer.tokenize` without padding (its prefix and
    suffix ids around the text's ids); an empty row raises a ValueError naming `name[i]`."""
    try:
        body = tokenizer.encode_text(tf.constant(list(texts), tf.string)).to_list()
    except tf.errors.InvalidArgumentError as error:  # a tokenizer without [UNK] met an unknown token
        message = error.message.strip().splitlines()[0]
        raise ValueError(f"`{name}` cannot be tokenized by the model's tokenizer: {message}") from None
    prefix, suffix = list(tokenizer.prefix_ids), list(tokenizer.suffix_ids)
    rows = [prefix + [int(i) for i in row] + suffix for row in body]
    for index, row in enumerate(rows):
        if not row:
            raise ValueError(
                f"`{name}[{index}]`={texts[index]!r} has no tokens; every text needs at least one."
            )
    return rows


def detokenize_ids(tokenizer, rows: Sequence[Sequence[int]]) -> list[str]:
    """Strings of id lists, by the rule of the served signatures: ids past the
    tokenizer's vocabulary become `[UNK]` (are dropped without special tokens),
    then `tokenizer.detokenize` (which drops the special tokens but `[UNK]`)."""
    size, special = tokenizer.vocabulary_size, bool(getattr(tokenizer, "special_tokens", False))
    clean = [
        [int(i) if i < size else UNK for i in row] if special else [int(i) for i in row if i < size]
        for row in rows
    ]
    strings = tokenizer.detokenize(tf.ragged.constant(clean, dtype=tf.int32, ragged_rank=1)).numpy()
    return [s.decode("utf-8", errors="replace") for s in strings]


def _new_ids(tokens, lengths):
    """Row b's first `lengths[b]` ids of `tokens` (b, max_new_tokens)."""
    lengths = np.minimum(lengths, tokens.shape[1])
    return [tokens[b, : int(n)].tolist() for b, n in enumerate(lengths)]


def _check_text_options(method, options):
    given = sorted(set(options) & set(_IDS_ONLY))
    if given:
        raise TypeError(
            f"`{method}` on text does not take {given} (they belong to the ids path, which returns "
            "arrays); pass token ids for them."
        )


def _tokenizers(model, method):
    """`(source, target)` tokenizers of a seq2seq model, `(tokenizer, tokenizer)` of a GPT."""
    tokenizer = model.require_tokenizer(method)
    if isinstance(tokenizer, (tuple, list)):
        return tokenizer[0], tokenizer[1]
    return tokenizer, tokenizer


def _method(model, name):
    return f"{type(model).__name__}.{name}"


def _check_model(model, method):
    if not isinstance(model, (GPT, Seq2Seq)):
        raise TypeError(
            f"`{method}` needs a keras_tfm GPT or Seq2Seq model; received {type(model).__name__}."
        )


def _check_sources(model, rows, texts, name):
    """Every source fits the seq2seq model's `max_length` (as the served `translate` requires)."""
    for index, row in enumerate(rows):
        if model.max_length is not None and len(row) > model.max_length:
            raise ValueError(
                f"`{name}[{index}]`={texts[index]!r} has {len(row)} tokens, more than the model's maximum "
                f"source length {model.max_length}."
            )


def _result(strings, scalar):
    return strings[0] if scalar else strings


def _text_request(model, method, texts, completion_only, options):
    """Checks a text request and tokenizes it: `(rows, target tokenizer, options)`, the options
    with the text path's default ids (GPT: the tokenizer's `eos_id`; seq2seq: `BOS`, `EOS`)."""
    _check_text_options(method, options)
    source_tok, target_tok = _tokenizers(model, method)
    rows = tokenize_texts(source_tok, texts)
    options = dict(options)
    if isinstance(model, Seq2Seq):
        _check_sources(model, rows, texts, "inputs")
        if completion_only:
            raise TypeError(f"`{method}`: `completion_only` is for GPT (a translation holds no prompt).")
        options.setdefault("bos_id", BOS)
        options.setdefault("eos_id", EOS)
    else:
        eos_id = options.pop("eos_id", _UNSET)
        options["eos_id"] = target_tok.eos_id if eos_id is _UNSET else eos_id
    return rows, target_tok, options


def _texts(model, rows, new, target_tok, completion_only, scalar):
    """The strings of the new ids (GPT: after their prompts, unless `completion_only`)."""
    if isinstance(model, GPT) and not completion_only:
        new = [prompt + ids for prompt, ids in zip(rows, new)]
    return _result(detokenize_ids(target_tok, new), scalar)


def _split_request(model, name, inputs, completion_only):
    """`(method, texts or None, was a str)`; `completion_only` refused with ids."""
    method = _method(model, name)
    _check_model(model, method)
    batch = text_batch("inputs", inputs)
    if check_bool("completion_only", completion_only) and batch is None:
        raise TypeError(f"`{method}`: `completion_only` is for text inputs (ids in give only new ids).")
    return (method, None, False) if batch is None else (method, *batch)


@extensions.provide("generate_text")
def generate_text(model, inputs, max_new_tokens, completion_only=False, **options):
    """`GPT.generate` / `Seq2Seq.generate`: ids → `generation.generate`; text → strings
    (see the module docstring and the methods' documentation)."""
    method, texts, scalar = _split_request(model, "generate", inputs, completion_only)
    if texts is None:
        return api.generate(model, inputs, max_new_tokens, **options)
    rows, target_tok, options = _text_request(model, method, texts, completion_only, options)
    tokens, lengths = api.generate(model, rows, max_new_tokens, return_lengths=True, **options)
    return _texts(model, rows, _new_ids(tokens, lengths), target_tok, completion_only, scalar)


@extensions.provide("beam_search_text")
def beam_search_text(model, inputs, max_new_tokens, num_beams=4, completion_only=False, **options):
    """`GPT.beam_search` / `Seq2Seq.beam_search`: ids → `generation.beam_search`; text →
    the best beam's strings."""
    method, texts, scalar = _split_request(model, "beam_search", inputs, completion_only)
    if texts is None:
        return api.beam_search(model, inputs, max_new_tokens, num_beams=num_beams, **options)
    rows, target_tok, options = _text_request(model, method, texts, completion_only, options)
    sequences, _, lengths = api.beam_search(model, rows, max_new_tokens, num_beams=num_beams, **options)
    new = _new_ids(sequences[:, 0], lengths[:, 0])
    return _texts(model, rows, new, target_tok, completion_only, scalar)


@extensions.provide("translate")
def translate(model, texts, num_beams=4, max_new_tokens=None, length_penalty=0.6):
    """`Seq2Seq.translate`: the request of the exported `translate` signature, in process.

    Sources tokenized by the source tokenizer (`tokenize`), decoding from `BOS`
    to `EOS`, `num_beams` 1 = greedy (`generation.generate`) else the best beam
    of `generation.beam_search`, `max_new_tokens` None = the model's
    `max_length - 1` (the export's default limit); the new ids detokenized by
    the target tokenizer (`detokenize_ids`).
    """
    method = "Seq2Seq.translate"
    if not isinstance(model, Seq2Seq):
        raise TypeError(f"`{method}` needs a keras_tfm Seq2Seq model; received {type(model).__name__}.")
    batch = text_batch("texts", texts)
    if batch is None:
        raise TypeError(
            f"`texts` must be a str or a non-empty list of str; received {type(texts).__name__} "
            "(translate token ids with `generate` / `beam_search`)."
        )
    texts, scalar = batch
    source_tok, target_tok = _tokenizers(model, method)
    rows = tokenize_texts(source_tok, texts, name="texts")
    _check_sources(model, rows, texts, "texts")
    num_beams = check_int("num_beams", num_beams, minimum=1)
    check_float("length_penalty", length_penalty, low=0.0, high=5.0)  # checked for greedy too, as served
    if max_new_tokens is None:
        max_new_tokens = model.max_length - 1
    common = dict(bos_id=BOS, eos_id=EOS)
    if num_beams == 1:
        tokens, lengths = api.generate(
            model, rows, max_new_tokens, sampler="greedy", return_lengths=True, **common
        )
    else:
        sequences, _, lengths = api.beam_search(
            model, rows, max_new_tokens, num_beams=num_beams, length_penalty=length_penalty, **common
        )
        tokens, lengths = sequences[:, 0], lengths[:, 0]
    return _result(detokenize_ids(target_tok, _new_ids(tokens, lengths)), scalar)
