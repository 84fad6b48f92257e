"""Export a GPT, seq2seq or BERT model to LiteRT (`.tflite`), checked against TensorFlow.

    export_for_litert(model, "gpt.tflite", tokenizer=tokenizer)            → gpt.tflite (+ beside it)
    export_for_litert(model, "gpt_int8.tflite", quantize="int8")           weights int8, activations float

Beside `PATH` it writes `PATH.json` (the metadata the runner needs, with the sha256 of
`PATH`) and the tokenizer(s) as keras_tfm vocabulary files (`PATH.tokenizer.vocab`, or
`PATH.source_tokenizer.vocab` / `PATH.target_tokenizer.vocab`; see `litert_tokenizers`).
Every file is written under a temporary name and renamed, the `.tflite` last; the runner
refuses a model whose metadata records another file's digest.

The signatures are those of `litert_signatures`; the runner is `litert_runner`. The model
goes through a SavedModel of the traced signatures and the variables (`_convert`; TF 2.21's
`TFLiteConverter.from_concrete_functions` with several functions leaves a Keras model's
weights out of the file) and `tf.lite.TFLiteConverter` with LiteRT's built-in operators
only (no TensorFlow kernels: the `ai-edge-litert` runtime has none). What it cannot convert
is refused with the option, or the operator and the layer, named. After conversion the
runner generates from a probe prompt twice, on the TensorFlow functions and on the
`.tflite` interpreter (GPT: through every prefill width and past the context); the export
is refused unless the tokens are equal and the logits agree to 1e-3 of their scale. An
int8 file (`quantize="int8"`: dynamic-range quantization, int8 weights with one scale per
tensor, float activations; "int8_per_channel": a scale per output channel) is checked to
run with finite logits, and the share of probe steps whose top token agrees with float32
is recorded in the metadata (`verification`).
"""

import json
import os
import re
import tempfile

import numpy as np

from keras_tfm.atomic_files import atomic_write_bytes, atomic_write_text
from keras_tfm.checks import check_choice, check_int
from keras_tfm.export.exporter import detect_kind
from keras_tfm.export.litert_encoder import LiteRTEncoder
from keras_tfm.export.litert_runner import (
    FORMAT,
    LiteRTGenerator,
    interpreter_class,
    make_interpreter,
    sidecar_path,
)
from keras_tfm.export.litert_signatures import (
    EncoderSignatures,
    GPTSignatures,
    Seq2SeqSignatures,
    constant_sinusoids,
)
from keras_tfm.export.litert_verification import verify
from keras_tfm.generation.prompts import model_defaults
from keras_tfm.tokenizers.special_tokens import CLS, SEP

__all__ = ["LITERT_KINDS", "QUANTIZE", "bucket_prefill_lengths", "export_for_litert"]

#: Model kinds `export_for_litert` writes.
LITERT_KINDS = ("causal_lm", "seq2seq_lm", "classifier", "sentence_embedding")
#: `quantize` values: None (float32), "int8" (dynamic range: int8 weights with one scale per tensor,
#: float activations) or "int8_per_channel" (one scale per output channel: closer to float32, larger).
QUANTIZE = (None, "int8", "int8_per_channel")
#: Smallest width of `bucket_prefill_lengths` (powers of two up to `max_length`).
MIN_PREFILL_LENGTH = 8


def bucket_prefill_lengths(max_length: int) -> tuple[int, ...]:
    """8, 16, 32, ... below `max_length`, then `max_length`: prompt widths for `prefill_lengths`
    that make a short prompt's prefill cost what its bucket costs (each adds a signature)."""
    widths, width = [], MIN_PREFILL_LENGTH
    while width < max_length:
        widths.append(width)
        width *= 2
    return (*widths, max_length)


def _check_prefill_lengths(prefill_lengths, max_length):
    if prefill_lengths is None:
        return (max_length,)
    if isinstance(prefill_lengths, (str, bytes)) or not hasattr(prefill_lengths, "__iter__"):
        raise TypeError(f"`prefill_lengths` must be a list of ints; received {prefill_lengths!r}.")
    widths = sorted(
        {
            check_int("prefill_lengths", w, minimum=1, maximum=max_length, maximum_name="`max_length`")
            for w in prefill_lengths
        }
    )
    if not widths or widths[-1] != max_length:
        widths.append(max_length)  # the widest prompt must fit a prefill
    return tuple(widths)


def _refuse_options(model, kind):
    """ValueErrors naming what LiteRT cannot run, before converting."""
    for layer in model._flatten_layers():
        policy = layer.dtype_policy
        if {policy.compute_dtype, policy.variable_dtype} & {"float16", "bfloat16"}:
            raise ValueError(
                f"Layer {layer.name!r} has the dtype policy {policy.name!r}; LiteRT export converts float32 "
                "models (build the model with dtype='float32' and set its weights; `quantize='int8'` makes "
                "the file small)."
            )
    if kind in ("causal_lm", "seq2seq_lm") and getattr(model, "cache_dtype", None) not in (None, "float32"):
        raise ValueError(
            f"`model.cache_dtype`={model.cache_dtype!r}: LiteRT export keeps float32 caches; set it to None."
        )
    impl = model.config.get("attention_impl", "auto")
    if impl not in SUPPORTED_ATTENTION:
        raise ValueError(
            f"The model's `attention_impl`={impl!r} cannot be exported to LiteRT (its cached decoding step "
            f"does not convert); export a model built with attention_impl in {list(SUPPORTED_ATTENTION)} "
            "(the weights are the same)."
        )


#: `attention_impl` values whose prefill and decoding steps convert ("local" and "linear" do not: their
#: cached calls fail in TensorFlow already).
SUPPORTED_ATTENTION = ("auto", "standard", "reference", "chunked", "fused")


def _signatures(model, kind, max_length, prefill_lengths):
    if kind == "causal_lm":
        return GPTSignatures(model, max_length, prefill_lengths)
    if kind == "seq2seq_lm":
        return Seq2SeqSignatures(model, max_length)
    return EncoderSignatures(model, max_length, "logits" if kind == "classifier" else "embeddings")


_UNSUPPORTED_OP = re.compile(r"'(tf\.\w+)' op is neither a custom op nor a flex op")
_OP_NODE = re.compile(r'fused\["\w+:", (?:callsite\()?"([^"@]+)@')


def _conversion_error(error, model):
    """A ValueError naming the operator LiteRT lacks and the layer that uses it."""
    message = str(error)
    ops = sorted(set(_UNSUPPORTED_OP.findall(message)))
    nodes = [n for n in _OP_NODE.findall(message) if "/" in n]
    layer = re.sub(r"_\d+(?=/|$)", "", nodes[0].rsplit("/", 1)[0]) if nodes else None
    where = f" in layer {layer!r}" if layer else ""
    if ops:
        return ValueError(
            f"LiteRT cannot convert the model: operator(s) {ops}{where} have no LiteRT built-in kernel "
            f"(model options: position={model.config.get('position')!r}, "
            f"attention_impl={model.config.get('attention_impl')!r})."
        )
    return ValueError(f"LiteRT cannot convert the model: {message.strip().splitlines()[-1]}")


def _convert(signatures, quantize):
    """The `.tflite` bytes of `signatures.signatures()` and their TensorFlow concrete functions.

    The SavedModel in between holds the model's weights (read-only: the converter freezes them
    into the file) and the cache variables (assigned by the signatures: LiteRT resource
    variables). Each function is traced once, here, and saved as a signature only: a
    `tf.function` attribute would be traced again by `tf.saved_model.save`.
    """
    import tensorflow as tf

    holder = tf.Module()
    holder.model_weights = [variable.value for variable in signatures.model.variables]
    holder.caches = list(signatures.variables)
    functions = {}
    with constant_sinusoids(signatures.model, signatures.cache_length):
        for name, fn, inputs in signatures.signatures():
            traced = tf.function(fn, input_signature=inputs, autograph=False)
            functions[name] = traced.get_concrete_function()
    with tempfile.TemporaryDirectory(prefix="keras_tfm_litert_") as folder:
        tf.saved_model.save(holder, folder, signatures=functions)
        converter = tf.lite.TFLiteConverter.from_saved_model(folder, signature_keys=list(functions))
        converter.target_spec.supported_ops = [tf.lite.OpsSet.TFLITE_BUILTINS]
        converter.experimental_enable_resource_variables = True
        if quantize is not None:
            converter.optimizations = [tf.lite.Optimize.DEFAULT]
            # "int8": one scale per weight tensor. Per-channel scales and zero points cost 12 bytes per
            # output channel of every matrix (sizes and agreement of both: bench/litert.py).
            converter._experimental_disable_per_channel = quantize == "int8"
        try:
            content = converter.convert()
        except Exception as error:  # ConverterError and the MLIR pass errors alike
            raise _conversion_error(error, signatures.model) from None
    return content, functions


def _tensorflow_callables(functions):
    """name → `(**numpy) → dict of numpy`, running the traced functions in TensorFlow."""

    def wrap(fn):
        return lambda **inputs: {k: np.asarray(v) for k, v in fn(**inputs).items()}

    return {name: wrap(fn) for name, fn in functions.items()}


def _tokenizer_roles(model, kind, tokenizer):
    if tokenizer is None:
        tokenizer = getattr(model, "tokenizer", None)
    if tokenizer is None:
        return {}
    if kind == "seq2seq_lm":
        pair = tuple(tokenizer) if isinstance(tokenizer, (tuple, list)) else (tokenizer, tokenizer)
        if len(pair) != 2:
            raise ValueError("`tokenizer` of a seq2seq model: one tokenizer or a (source, target) pair.")
        roles = {"source_tokenizer": pair[0], "target_tokenizer": pair[1]}
        sizes = {
            "source_tokenizer": model.source_vocabulary_size,
            "target_tokenizer": model.target_vocabulary_size,
        }
    else:
        roles, sizes = {"tokenizer": tokenizer}, {"tokenizer": model.vocabulary_size}
    for role, tok in roles.items():
        if tok.vocabulary_size > sizes[role]:
            raise ValueError(
                f"`tokenizer`: the {role.replace('_', ' ')} has {tok.vocabulary_size} ids but the model only "
                f"{sizes[role]}."
            )
    return roles


def _metadata(model, kind, signatures, max_length, quantize, tokenizers, label_names):
    metadata = {
        "format": FORMAT,
        "kind": kind,
        "max_length": max_length,
        "model_max_length": int(model.max_length),
        "quantize": quantize,
        "signatures": [name for name, _, _ in signatures.signatures()],
        "tokenizers": sorted(tokenizers),
        "pad_id": 0,
        **signatures.metadata(),
    }
    if kind in ("causal_lm", "seq2seq_lm"):
        defaults = model_defaults(model)  # ints and a list of ids (`check_generation_config`)
        metadata["generation_config"] = {
            key: [int(i) for i in value] if key == "suppressed_ids" else None if value is None else int(value)
            for key, value in defaults.items()
        }
    if kind == "causal_lm":
        metadata["vocabulary_size"] = int(model.vocabulary_size)
    elif kind == "seq2seq_lm":
        metadata["vocabulary_size"] = int(model.target_vocabulary_size)
        metadata["source_vocabulary_size"] = int(model.source_vocabulary_size)
        target = tokenizers.get("target_tokenizer")
        if target is not None:  # text requests start and stop as `translate` does (`seq2seq_ids`)
            defaults = model_defaults(model)
            start, stop = defaults.get("decoder_start_id"), defaults.get("eos_id")
            metadata["decoder_start_id"] = target.bos_id if start is None else int(start)
            metadata["eos_id"] = target.eos_id if stop is None else int(stop)
    else:
        metadata["vocabulary_size"] = int(model.vocabulary_size)
        tokenizer = tokenizers.get("tokenizer")
        metadata["cls_id"] = int(getattr(tokenizer, "cls_id", None) or CLS)
        metadata["sep_id"] = int(getattr(tokenizer, "sep_id", None) or SEP)
        if label_names is not None:
            metadata["label_names"] = [str(n) for n in label_names]
    return metadata


def export_for_litert(
    model,
    path: str,
    *,
    tokenizer=None,
    max_length: int | None = None,
    quantize: str | None = None,
    prefill_lengths=None,
    label_names=None,
    kind: str = "auto",
) -> str:
    """Writes `model` as a LiteRT model `path` (`.tflite`) with its metadata and tokenizers beside it.

    Args:
        model: a keras_tfm `GPT`, `Seq2Seq`, `BertClassifier` or `SentenceEncoder` (float32).
        path: the `.tflite` file to write (its folder is created).
        tokenizer: the model's tokenizer (seq2seq: one, or a `(source, target)` pair);
            default `model.tokenizer`; None: the runner takes ids only.
        max_length: W, the context the file holds (GPT: prompt + new tokens before the
            window slides; seq2seq: source and decoder length; BERT: the input length);
            default and maximum the model's `max_length`. Tokens equal in-process
            generation's while the window slides at the model's own length (the default).
        quantize: None (float32), "int8" (dynamic-range quantization: int8 weights with one
            scale per tensor, float activations) or "int8_per_channel" (a scale per output
            channel).
        prefill_lengths: GPT prompt widths of prefill signatures (W is always there, as
            `prefill`; each other width P adds `prefill_P`, e.g. `bucket_prefill_lengths(W)`);
            default: W alone (a prompt is left-padded to W).
        label_names: classifier class names (recorded in the metadata).
        kind: "auto" or one of `LITERT_KINDS`.

    Returns:
        `path`.

    Raises:
        ValueError: a bad argument, an option or operator LiteRT cannot run (named), or a
            converted file whose tokens or logits differ from TensorFlow's.
    """
    if not isinstance(path, (str, os.PathLike)) or not os.fspath(path).endswith(".tflite"):
        raise ValueError(f"`path` must be a file name ending in `.tflite`; received {path!r}.")
    path = os.fspath(path)
    interpreter_class()  # the converted file is checked with the runtime: refuse now without it
    kind = detect_kind(model) if kind == "auto" else kind
    check_choice("kind", kind, LITERT_KINDS)
    check_choice("quantize", quantize, QUANTIZE)
    limit = int(model.max_length)
    max_length = (
        limit
        if max_length is None
        else check_int(
            "max_length", max_length, minimum=2, maximum=limit, maximum_name="the model's max_length"
        )
    )
    _refuse_options(model, kind)
    tokenizers = _tokenizer_roles(model, kind, tokenizer)
    prefill_lengths = _check_prefill_lengths(prefill_lengths, max_length) if kind == "causal_lm" else ()
    signatures = _signatures(model, kind, max_length, prefill_lengths)
    content, functions = _convert(signatures, quantize)
    metadata = _metadata(model, kind, signatures, max_length, quantize, tokenizers, label_names)
    runner_class = LiteRTGenerator if kind in ("causal_lm", "seq2seq_lm") else LiteRTEncoder
    interpreter = make_interpreter(model_content=content)
    litert = {name: interpreter.get_signature_runner(name) for name in metadata["signatures"]}
    reference = runner_class.from_parts(metadata, _tensorflow_callables(functions))
    metadata["verification"] = verify(reference, runner_class.from_parts(metadata, litert), quantize)
    metadata["sha256"] = _digest(content)
    for role, tok in tokenizers.items():
        tok.save_vocabulary(sidecar_path(path, role))
    atomic_write_text(sidecar_path(path, "json"), json.dumps(metadata, indent=1) + "\n")
    atomic_write_bytes(path, content)
    return path


def _digest(content):
    import hashlib

    return hashlib.sha256(content).hexdigest()
