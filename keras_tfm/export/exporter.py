"""`export_for_serving`: a keras_tfm model + tokenizer → a TF Serving SavedModel version."""

import errno
import json
import os
import shutil
import tempfile

import keras
import tensorflow as tf

from keras_tfm.export import signatures as sig
from keras_tfm.export import warmup as warmup_lib

KINDS = ("gpt", "seq2seq", "bert_classifier", "bert_mlm")


def _has_layer(model, name):
    try:
        model.get_layer(name)
        return True
    except ValueError:
        return False


def detect_kind(model):
    """ "gpt" | "seq2seq" | "bert_classifier" | "bert_mlm" from the builders' layer names."""
    input_names = {
        getattr(t, "name", "").split(":")[0] for t in tf.nest.flatten(getattr(model, "inputs", None) or [])
    }
    encoder_decoder = _has_layer(model, "encoder_block_0") and _has_layer(model, "decoder_block_0")
    if "encoder_token_ids" in input_names or encoder_decoder:
        return "seq2seq"
    if _has_layer(model, "decoder_block_0"):
        return "gpt"
    if _has_layer(model, "mlm_output_bias"):
        return "bert_mlm"
    if (
        _has_layer(model, "classifier")
        and _has_layer(model, "encoder_block_0")
        and len(model.output.shape) == 2
    ):
        return "bert_classifier"
    raise ValueError(
        f"Cannot tell which kind of keras_tfm model {model.name!r} is; pass `kind=` one of {list(KINDS)} "
        "(GPT, seq2seq, BERT sequence classifier or BERT masked LM built with keras_tfm.models)."
    )


def list_versions(base_dir):
    """Sorted integer versions present under `base_dir` (TF Serving layout)."""
    if not os.path.isdir(base_dir):
        return []
    return sorted(
        int(n) for n in os.listdir(base_dir) if n.isdigit() and os.path.isdir(os.path.join(base_dir, n))
    )


def _split_tokenizers(tokenizer):
    if isinstance(tokenizer, dict):
        return tokenizer.get("source"), tokenizer.get("target", tokenizer.get("source"))
    if isinstance(tokenizer, (tuple, list)):
        if len(tokenizer) != 2:
            raise ValueError("`tokenizer` for a seq2seq model: one tokenizer or a (source, target) pair.")
        return tokenizer[0], tokenizer[1]
    return tokenizer, tokenizer


def build_serving(
    model,
    tokenizer=None,
    kind="auto",
    label_names=None,
    max_new_tokens_limit=None,
    beam_widths=(1, 2, 4),
    eos_id=None,
    jit_compile=True,
    max_prompt_length=None,
):
    """The serving helper object of `model` (endpoints + warmup requests)."""
    if tokenizer is None:
        tokenizer = getattr(model, "tokenizer", None)
    if kind == "auto":
        kind = detect_kind(model)
    if kind not in KINDS:
        raise ValueError(f"Unknown `kind` {kind!r}; expected 'auto' or one of {list(KINDS)}.")
    if kind == "gpt":
        return sig.GPTServing(
            model,
            tokenizer,
            max_new_tokens_limit=max_new_tokens_limit,
            eos_id=eos_id,
            jit_compile=jit_compile,
            max_prompt_length=max_prompt_length,
        )
    if kind == "seq2seq":
        source, target = _split_tokenizers(tokenizer)
        return sig.Seq2SeqServing(
            model,
            source,
            target,
            max_new_tokens_limit=max_new_tokens_limit,
            beam_widths=beam_widths,
            eos_id=sig.EOS if eos_id is None else eos_id,
            jit_compile=jit_compile,
        )
    if kind == "bert_classifier":
        return sig.BertClassifierServing(model, tokenizer, label_names=label_names)
    return sig.BertMaskedLMServing(model, tokenizer)


def _tokenizers_of(serving):
    out = []
    for name in ("tokenizer", "source_tokenizer", "target_tokenizer"):
        t = getattr(serving, name, None)
        if t is not None and all(t is not o for o in out):
            out.append(t)
    return out


EXPORT_INFO = "keras_tfm.json"


def _write_export_info(version_dir, kind, serving):
    """`assets.extra/keras_tfm.json`: the model kind and the request limits fixed at export (for clients
    such as `keras-tfm generate`, whose defaults must fit them; TF Serving ignores the file)."""
    info = {"kind": kind}
    if getattr(serving, "max_new_tokens_limit", None) is not None:
        info["max_new_tokens_limit"] = int(serving.max_new_tokens_limit)
    if kind == "gpt" and serving.max_length is not None:  # prompt + new tokens must fit it
        info["max_length"] = int(serving.max_length)
    folder = os.path.join(version_dir, "assets.extra")
    os.makedirs(folder, exist_ok=True)
    with open(os.path.join(folder, EXPORT_INFO), "w", encoding="utf-8") as f:
        json.dump(info, f)


def export_for_serving(
    model,
    path,
    tokenizer=None,
    version=None,
    kind="auto",
    label_names=None,
    max_new_tokens_limit=None,
    warmup=True,
    beam_widths=(1, 2, 4),
    eos_id=None,
    jit_compile=True,
    max_prompt_length=None,
    verbose=False,
):
    """Exports a keras_tfm model as a TF Serving model version, atomically.

    Writes `path/VERSION/` (`saved_model.pb`, `variables/`, `assets.extra/`):
    the SavedModel is written into a temporary directory `path/.tmp-VERSION-*`
    and renamed into place, so a reader (TF Serving polls `path`) never sees a
    partial version, and a failed export leaves nothing behind. An existing
    version is never overwritten.

    Signatures (tokenization and request validation inside the graph; see
    `keras_tfm.export.signatures`):

    * GPT: `serving_default` (`token_ids` int32 [B, T] → `logits` float32
      [B, T, V]); `generate` (`prompts` string [B], `max_new_tokens`,
      `temperature`, `top_k`, `top_p`, `seed` scalars → `completions` string
      [B], `num_tokens` int32 [B]); `generate_ids` (`token_ids` int32 [B, T]
      right-padded + `lengths` int32 [B] + the same scalars → `token_ids`
      int32 [B, max_new_tokens], `lengths` int32 [B]).
    * seq2seq: `translate` (`inputs` string [B], `max_new_tokens` int32,
      `num_beams` int32 (one of `beam_widths`, 1 = greedy), `length_penalty`
      float32 → `translations` string [B], `num_tokens` int32 [B]).
    * BERT classifier: `classify` (`inputs` string [B] → `probabilities`
      float32 [B, C], `labels` string [B]).
    * BERT masked LM: `fill_mask` (`inputs` string [B] with `[MASK]` →
      `filled` string [B], `top_tokens` string [B, 5], `top_probabilities`
      float32 [B, 5] for the first mask).

    Args:
        model: a keras_tfm GPT / seq2seq / BERT classifier / BERT masked LM.
        path: the model's base directory, e.g. "saved_models/NAME".
        tokenizer: a keras_tfm tokenizer (seq2seq: one, or `(source,
            target)`). GPT: optional (without it no `generate`); default
            `model.tokenizer` if the model has one.
        version: positive int; None = one more than the largest existing.
        kind: "auto" or one of "gpt", "seq2seq", "bert_classifier", "bert_mlm".
        label_names: class names of a classifier (default LABEL_i).
        max_new_tokens_limit: largest `max_new_tokens` a request may ask for
            (default and cap: the model's max_length - 1). Sizes the caches.
        warmup: write `assets.extra/tf_serving_warmup_requests`.
        beam_widths: seq2seq beam widths compiled into `translate`.
        eos_id: GPT: stop id (default none); seq2seq: default EOS.
        jit_compile: compile the decoding loops with XLA.
        max_prompt_length: GPT: longest prompt accepted (default the model's
            max_length); one decoding loop is compiled per power-of-two prompt
            bucket up to it, so a smaller value exports faster.
        verbose: print the endpoints (Keras' summary).

    Returns:
        The path of the written version directory.

    Raises:
        FileExistsError: the version directory already exists.
        ValueError: bad arguments, unknown model kind, tokenizer/model mismatch.
    """
    base = os.path.abspath(os.fspath(path))
    if version is not None and (isinstance(version, bool) or not isinstance(version, int) or version < 1):
        raise ValueError(f"`version` must be a positive int or None; received {version!r}.")
    serving = build_serving(
        model,
        tokenizer,
        kind=kind,
        label_names=label_names,
        max_new_tokens_limit=max_new_tokens_limit,
        beam_widths=beam_widths,
        eos_id=eos_id,
        jit_compile=jit_compile,
        max_prompt_length=max_prompt_length,
    )
    os.makedirs(base, exist_ok=True)
    if version is None:
        existing = list_versions(base)
        version = existing[-1] + 1 if existing else 1
    final = os.path.join(base, str(version))
    if os.path.exists(final):
        raise FileExistsError(
            errno.EEXIST, f"Model version already exists (never overwritten): {final}", final
        )

    archive = keras.export.ExportArchive()
    archive.track(model)
    for tok in _tokenizers_of(serving):
        archive.track(tok)
    if hasattr(serving, "generator"):
        archive.track(serving.generator)
    for name, fn, signature in serving.endpoints():
        archive.add_endpoint(name, fn, signature)

    temp = tempfile.mkdtemp(prefix=f".tmp-{version}-", dir=base)
    try:
        archive.write_out(temp, verbose=verbose)
        if warmup:
            warmup_lib.write_warmup_requests(temp, os.path.basename(base), serving.warmup_requests())
        _write_export_info(temp, kind if kind != "auto" else detect_kind(model), serving)
        if os.path.exists(final):
            raise FileExistsError(
                errno.EEXIST, f"Model version already exists (never overwritten): {final}", final
            )
        umask = os.umask(0)
        os.umask(umask)
        os.chmod(temp, 0o777 & ~umask)  # mkdtemp makes it 0700; the server may run as another user
        try:
            os.rename(temp, final)
        except OSError as error:  # a concurrent export created it (non-empty target)
            if error.errno in (errno.EEXIST, errno.ENOTEMPTY):
                raise FileExistsError(
                    errno.EEXIST, f"Model version already exists (never overwritten): {final}", final
                ) from error
            raise
    except BaseException:
        shutil.rmtree(temp, ignore_errors=True)
        raise
    return final
