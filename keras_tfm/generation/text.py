"""Text in, text out for the generating models: the work of `GPT.generate` / `beam_search` and
`Seq2Seq.generate` / `beam_search` / `translate`.

Each method takes token ids or text:

* ids (a 2-D int array or a list of id sequences): exactly `generator.generate(model, ids,
  ...)` / `generator.beam_search(...)`, same options, same outputs;
* text (a str, bytes, a list of them, a 1-D string array or tensor; `checks.text_batch`),
  with `model.tokenizer` (a seq2seq model: one shared tokenizer or a `(source, target)`
  pair): tokenized as `tokenizers.text.encode` does, generated from with the same call, and
  the new ids detokenized by `tokenizers.text.decode` (the rule of the served signatures).

GPT text: the prompt followed by its completion, `decode(prompt ids + new ids)`, as KerasHub's
`generate` returns it; `completion_only=True` returns `decode(new ids)`, the `completions` of
the served `generate`. `eos_id` defaults to the tokenizer's `eos_id` (None: no stop).

Seq2seq text: the target side alone, decoded from the model's `decoder_start_id` (else the
target tokenizer's BOS) to the model's `eos_id` (else the target tokenizer's EOS), both from a
checkpoint's `generation_config`; a tokenizer without them is refused.
The tokenizers are TensorFlow ops, imported when text arrives.
"""

import numpy as np

from keras_tfm.checks import check_bool, check_float, check_int, text_batch
from keras_tfm.generation import generator
from keras_tfm.generation.prompts import model_defaults

#: Marks an option the caller did not give (`eos_id=None` means "no stop id").
_UNSET = object()

#: Options of the ids path that have no meaning on the text path (the text path returns strings).
IDS_ONLY = ("return_lengths", "output_scores", "prompt_lengths", "source_lengths", "decoder_prompt_ids")


def _new_ids(tokens, lengths):
    """Row b's first `lengths[b]` ids of `tokens` (b, max_new_tokens)."""
    lengths = np.minimum(lengths, tokens.shape[1])
    return [tokens[b, : int(n)].tolist() for b, n in enumerate(lengths)]


def seq2seq_ids(model, target, method: str) -> tuple[int, int]:
    """`(decoder start id, stop id)` of a seq2seq text request: the model's `decoder_start_id`
    and `eos_id` (a checkpoint's `generation_config`), else the target tokenizer's BOS and EOS;
    a ValueError when missing."""
    defaults = model_defaults(model)
    start, stop = defaults.get("decoder_start_id"), defaults.get("eos_id")
    start = target.bos_id if start is None else start
    stop = target.eos_id if stop is None else stop
    if start is None or stop is None:
        raise ValueError(
            f"`{method}` on text needs the target tokenizer's BOS and EOS ids (the first decoder token and "
            f"the stop token); the model's {type(target).__name__} has "
            f"bos_id={target.bos_id!r}, eos_id={target.eos_id!r}: build it with special tokens, or pass "
            "token ids with `bos_id` and `eos_id`."
        )
    return int(start), int(stop)


def check_sources(model, rows, texts, name):
    """Every source fits the seq2seq model's `max_length` (as the served `translate` requires)."""
    for index, row in enumerate(rows):
        if model.max_length is not None and len(row) > model.max_length:
            raise ValueError(
                f"`{name}[{index}]`={texts[index]!r} has {len(row)} tokens, more than the model's maximum "
                f"source length {model.max_length}."
            )


def _text_request(model, name, inputs, completion_only, options, arg):
    """None for token ids; for text `(rows, target tokenizer, options, single)`: the texts
    tokenized by the (source) tokenizer, and the options with the text path's defaults."""
    method = f"{type(model).__name__}.{name}"
    seq2seq = hasattr(model, "encode_context")  # the decoder protocol of an encoder–decoder model
    tokenizer = model.tokenizer
    batch = text_batch(arg, inputs)
    completion_only = check_bool("completion_only", completion_only)
    if batch is None:
        if completion_only:
            raise TypeError(f"`{method}`: `completion_only` is for text inputs (ids in give only new ids).")
        return None
    if completion_only and seq2seq:
        raise TypeError(f"`{method}`: `completion_only` is for GPT (a translation holds no prompt).")
    given = sorted(set(options) & set(IDS_ONLY))
    if given:
        raise TypeError(
            f"`{method}` on text does not take {given} (they belong to the ids path, which returns "
            "arrays); pass token ids for them."
        )
    if tokenizer is None:
        raise ValueError(
            f"`{method}` was given text but the model has no tokenizer: set `model.tokenizer = tokenizer` "
            "(or load the model with `from_preset`, which attaches it), or pass token ids."
        )
    from keras_tfm.tokenizers import text as text_lib  # TensorFlow ops: imported when text arrives

    source, target = tokenizer if isinstance(tokenizer, (tuple, list)) else (tokenizer, tokenizer)
    texts, single = batch
    rows = text_lib.encode(source, texts, arg)
    options = dict(options)
    if seq2seq:
        check_sources(model, rows, texts, arg)
        start, stop = seq2seq_ids(model, target, method)
        options.setdefault("bos_id", start)
        options.setdefault("eos_id", stop)
    elif options.get("eos_id", _UNSET) is _UNSET:
        options["eos_id"] = target.eos_id
    return rows, target, options, single


def _texts(model, rows, new, target, completion_only, single):
    """The strings of the new ids (GPT: after their prompts, unless `completion_only`)."""
    from keras_tfm.tokenizers import text as text_lib

    if not hasattr(model, "encode_context") and not completion_only:
        new = [prompt + ids for prompt, ids in zip(rows, new)]
    strings = text_lib.decode(target, new)
    return strings[0] if single else strings


def generate_text(
    model,
    inputs,
    max_new_tokens: int,
    completion_only: bool = False,
    arg: str = "inputs",
    method: str = "generate",
    **options,
):
    """`GPT.generate` / `Seq2Seq.generate`: ids → `generator.generate`; text → strings (`arg`,
    `method`: the argument's and the method's names in errors)."""
    request = _text_request(model, method, inputs, completion_only, options, arg)
    if request is None:
        return generator.generate(model, inputs, max_new_tokens, **options)
    rows, target, options, single = request
    tokens, lengths = generator.generate(model, rows, max_new_tokens, return_lengths=True, **options)
    return _texts(model, rows, _new_ids(tokens, lengths), target, completion_only, single)


def beam_search_text(
    model,
    inputs,
    max_new_tokens: int,
    num_beams: int = 4,
    completion_only: bool = False,
    arg: str = "inputs",
    method: str = "beam_search",
    **options,
):
    """`GPT.beam_search` / `Seq2Seq.beam_search`: ids → `generator.beam_search`; text → the best
    beam's strings."""
    request = _text_request(model, method, inputs, completion_only, options, arg)
    if request is None:
        return generator.beam_search(model, inputs, max_new_tokens, num_beams=num_beams, **options)
    rows, target, options, single = request
    sequences, _, lengths = generator.beam_search(model, rows, max_new_tokens, num_beams=num_beams, **options)
    return _texts(model, rows, _new_ids(sequences[:, 0], lengths[:, 0]), target, completion_only, single)


def translate(
    model, texts, num_beams: int = 4, max_new_tokens: int | None = None, length_penalty: float | None = None
):
    """`Seq2Seq.translate`: the request of the exported `translate` signature, in process.

    `num_beams` 1 = greedy (`generator.generate`), else the best beam of
    `generator.beam_search`; `max_new_tokens` None = the model's `max_length - 1` (the export's
    default limit); `length_penalty` None = the model's (a checkpoint's: HuggingFace's beam
    search with its `generation_config` α, else GNMT's 0.6).
    """
    if text_batch("texts", texts) is None:
        raise TypeError(
            f"`texts` must be a str or a non-empty list of str; received {type(texts).__name__} "
            "(translate token ids with `generate` / `beam_search`)."
        )
    num_beams = check_int("num_beams", num_beams, minimum=1)
    if length_penalty is not None:  # None: the model's (`beam_styles.beam_options`)
        check_float("length_penalty", length_penalty, low=0.0, high=5.0)  # checked for greedy too, as served
    max_new_tokens = model.max_length - 1 if max_new_tokens is None else max_new_tokens
    if num_beams == 1:
        return generate_text(model, texts, max_new_tokens, arg="texts", method="translate", sampler="greedy")
    return beam_search_text(
        model,
        texts,
        max_new_tokens,
        num_beams=num_beams,
        arg="texts",
        method="translate",
        length_penalty=length_penalty,
    )


__all__ = ["IDS_ONLY", "beam_search_text", "check_sources", "generate_text", "seq2seq_ids", "translate"]
