"""`export_for_serving`: a keras_tfm model + tokenizer → a TF Serving SavedModel version."""

import errno
import json
import os
import shutil
from collections.abc import Sequence

import keras
import tensorflow as tf

from keras_tfm.atomic_files import NO_SPACE, publish, remove_stale_temporaries, temporary_directory
from keras_tfm.checks import check_token_id
from keras_tfm.export import signatures as sig
from keras_tfm.export import warmup as warmup_lib
from keras_tfm.export.client import list_versions
from keras_tfm.models.base import check_tokenizer_fits
from keras_tfm.models.bert_classifiers import BertClassifier
from keras_tfm.models.bert_tasks import BertMaskedLM
from keras_tfm.models.gpt import GPT
from keras_tfm.models.sentence_encoder import SentenceEncoder
from keras_tfm.models.seq2seq import Seq2Seq
from keras_tfm.tokenizers.base import Tokenizer

KINDS = ("causal_lm", "seq2seq_lm", "classifier", "masked_lm", "sentence_embedding")

#: The signatures each kind of model can export.
SIGNATURES = {
    "causal_lm": ("serving_default", "generate", "generate_ids", "beam_search", "beam_search_ids"),
    "seq2seq_lm": ("translate",),
    "classifier": ("classify",),
    "masked_lm": ("fill_mask",),
    "sentence_embedding": ("embed",),
}
#: Those exported when `signatures` is None (GPT: beam search on request; without a tokenizer the
#: text signatures are left out).
DEFAULT_SIGNATURES = dict(SIGNATURES, causal_lm=("serving_default", "generate", "generate_ids"))
#: GPT signatures that take or return strings (they need a tokenizer).
TEXT_SIGNATURES = ("generate", "beam_search")


def select_signatures(kind, signatures, has_tokenizer):
    """The signature names to export: `signatures` checked against the `kind`'s.

    Args:
        kind: one of `KINDS`.
        signatures: None (the kind's defaults, `DEFAULT_SIGNATURES`), "all", one name or a
            sequence of names from `SIGNATURES[kind]`.
        has_tokenizer: whether the export has a tokenizer (GPT text signatures need one).

    Returns:
        A tuple of names, in `SIGNATURES[kind]` order.

    Raises:
        TypeError: `signatures` is not None, a str or a sequence of str.
        ValueError: an empty selection, a name no kind has, a name of another kind, or a text
            signature of a GPT export without a tokenizer.
    """
    available = SIGNATURES[kind]
    if signatures is None:
        names = DEFAULT_SIGNATURES[kind]
        if kind == "causal_lm" and not has_tokenizer:
            names = tuple(n for n in names if n not in TEXT_SIGNATURES)
        return names
    if signatures == "all":
        if kind == "causal_lm" and not has_tokenizer:
            return tuple(n for n in available if n not in TEXT_SIGNATURES)
        return available
    if isinstance(signatures, str):
        signatures = (signatures,)
    if not isinstance(signatures, Sequence) or not all(isinstance(n, str) for n in signatures):
        raise TypeError(
            f"`signatures` must be None, 'all', a signature name or a sequence of names; received "
            f"{signatures!r}."
        )
    if not signatures:
        raise ValueError(f"`signatures` is empty; expected some of {list(available)} (or None, 'all').")
    for name in signatures:
        if name in available:
            continue
        owners = [k for k, names in SIGNATURES.items() if name in names]
        if owners:
            raise ValueError(
                f"`signatures`: a {kind} export has no {name!r} signature (a {owners[0]} one); expected "
                f"some of {list(available)}."
            )
        raise ValueError(f"`signatures`: unknown signature {name!r}; a {kind} export has {list(available)}.")
    if kind == "causal_lm" and not has_tokenizer:
        text = [n for n in signatures if n in TEXT_SIGNATURES]
        if text:
            raise ValueError(
                f"`signatures`: {text[0]!r} takes and returns text and needs a tokenizer (pass `tokenizer` "
                "or set `model.tokenizer`), or export the id signatures (generate_ids, beam_search_ids)."
            )
    return tuple(n for n in available if n in signatures)


def detect_kind(model: keras.Model) -> str:
    """The model's task (`checkpoint_task`: "causal_lm", "seq2seq_lm", "classifier", "masked_lm",
    "sentence_embedding"), the kind of its export."""
    kind = getattr(model, "checkpoint_task", None)
    if isinstance(model, (Seq2Seq, GPT, BertMaskedLM, BertClassifier, SentenceEncoder)) and kind in KINDS:
        return kind
    raise ValueError(
        f"Cannot export a {type(model).__name__} ({model.name!r}); expected a keras_tfm GPT, Seq2Seq, "
        "BertClassifier, BertMaskedLM or SentenceEncoder (built with keras_tfm.models)."
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
    max_beams=4,
    eos_id=None,
    jit_compile=True,
    max_prompt_length=None,
):
    """The serving helper object of `model` (endpoints + warmup requests)."""
    if tokenizer is None:
        tokenizer = getattr(model, "tokenizer", None)
    for part in _split_tokenizers(tokenizer):
        if part is not None:  # a str or a path would fail later with an AttributeError
            check_tokenizer_fits("tokenizer", part, None)
    if kind == "auto":
        kind = detect_kind(model)
    if kind not in KINDS:
        raise ValueError(f"Unknown `kind` {kind!r}; expected 'auto' or one of {list(KINDS)}.")
    try:
        detected = detect_kind(model)
    except ValueError:  # not recognisable: trust the explicit kind
        detected = kind
    if detected != kind:
        raise ValueError(
            f"`kind`={kind!r} does not match the model {model.name!r}, which is a {detected!r} model; "
            f"pass kind={detected!r} or 'auto'."
        )
    defaults = getattr(model, "generation_defaults", None) or {}
    if (
        eos_id is None and kind == "causal_lm"
    ):  # a HuggingFace checkpoint's (`Checkpoint.generation_defaults`)
        eos_id = defaults.get("eos_id")
    if eos_id is not None and kind in ("causal_lm", "seq2seq_lm"):
        check_token_id(
            "eos_id", eos_id, model.vocabulary_size, consequence=": the generator could never stop"
        )
    if kind == "causal_lm":
        return sig.GPTServing(
            model,
            tokenizer,
            max_new_tokens_limit=max_new_tokens_limit,
            eos_id=eos_id,
            jit_compile=jit_compile,
            max_prompt_length=max_prompt_length,
            max_beams=max_beams,
        )
    if kind == "seq2seq_lm":
        source, target = _split_tokenizers(tokenizer)
        return sig.Seq2SeqServing(
            model,
            source,
            target,
            max_new_tokens_limit=max_new_tokens_limit,
            max_beams=max_beams,
            eos_id=eos_id,
            jit_compile=jit_compile,
        )
    if kind == "sentence_embedding":
        return sig.SentenceEncoderServing(model, tokenizer)
    if kind == "classifier":
        return sig.BertClassifierServing(model, tokenizer, label_names=label_names)
    return sig.BertMaskedLMServing(model, tokenizer)


def _tokenizers_of(serving):
    out = []
    for name in ("tokenizer", "source_tokenizer", "target_tokenizer"):
        t = getattr(serving, name, None)
        if t is not None and all(t is not o for o in out):
            out.append(t)
    return out


def _has_tokenizer(serving):
    return any(getattr(serving, n, None) is not None for n in ("tokenizer", "target_tokenizer"))


EXPORT_INFO = "keras_tfm.json"


def _write_export_info(version_dir, kind, serving):
    """`assets.extra/keras_tfm.json`: the model kind and the request limits fixed at export (for clients
    such as `keras-tfm generate`, whose defaults must fit them; TF Serving ignores the file)."""
    info = {"kind": kind}
    for key in ("max_new_tokens_limit", "max_beams"):
        if getattr(serving, key, None) is not None:
            info[key] = int(getattr(serving, key))
    if kind == "causal_lm" and serving.max_length is not None:  # prompts must fit it
        info["max_length"] = int(serving.max_length)
        info["sliding_window"] = True  # `generate` goes past max_length (generation.sliding_window)
    folder = os.path.join(version_dir, "assets.extra")
    os.makedirs(folder, exist_ok=True)
    with open(os.path.join(folder, EXPORT_INFO), "w", encoding="utf-8") as f:
        json.dump(info, f)


def export_for_serving(
    model: keras.Model,
    path: str | os.PathLike,
    tokenizer: Tokenizer | tuple[Tokenizer, Tokenizer] | dict[str, Tokenizer] | None = None,
    version: int | None = None,
    kind: str = "auto",
    label_names: Sequence[str] | None = None,
    max_new_tokens_limit: int | None = None,
    warmup: bool = True,
    max_beams: int = 4,
    eos_id: int | None = None,
    jit_compile: bool = True,
    max_prompt_length: int | None = None,
    verbose: bool = False,
    signatures: str | Sequence[str] | None = None,
) -> str:
    """Exports a keras_tfm model as a TF Serving model version, atomically.

    Writes `path/VERSION/` (`saved_model.pb`, `variables/`, `assets.extra/`):
    the SavedModel is written into a temporary directory `path/.VERSION.tmp-PID@HOST-*`
    and renamed into place, so a reader (TF Serving polls `path`) never sees a
    partial version, and a failed export leaves nothing behind (the folder of
    a killed export is removed by the next export to `path`, see
    `keras_tfm.atomic_files.remove_stale_temporaries`). An existing
    version is never overwritten.

    Signatures (tokenization and request validation inside the graph; see
    `keras_tfm.export.signatures`; `signatures` picks which):

    * GPT: `serving_default` (`token_ids` int32 [B, T] → `logits` float32
      [B, T, V]); `generate` (`prompts` string [B], `max_new_tokens`,
      `temperature`, `top_k`, `top_p`, `seed` scalars → `completions` string
      [B], `num_tokens` int32 [B]); `generate_ids` (`token_ids` int32 [B, T]
      right-padded + `lengths` int32 [B] + the same scalars → `token_ids`
      int32 [B, max_new_tokens], `lengths` int32 [B]); `beam_search`
      (`prompts` string [B], `max_new_tokens` int32, `num_beams` int32 (any
      width in [1, max_beams], 1 = greedy), `length_penalty` float32 → the
      best beam's `completions` string [B], `num_tokens` int32 [B], `scores`
      float32 [B] (log-prob / ((5 + length) / 6)^length_penalty));
      `beam_search_ids` (`token_ids` + `lengths` as in `generate_ids`, the
      beam scalars → `token_ids` int32 [B, max_new_tokens], `lengths`,
      `scores`). Every generation signature goes past the model's maximum
      length with a sliding window, as in process.
    * seq2seq: `translate` (`inputs` string [B], `max_new_tokens` int32,
      `num_beams` int32 (any width in [1, max_beams], 1 = greedy), `length_penalty`
      float32 → `translations` string [B], `num_tokens` int32 [B]).
    * BERT classifier: `classify` (`inputs` string [B] → `probabilities`
      float32 [B, C], `labels` string [B], `truncated` bool [B]: the input
      had more tokens than the model's length and only the first
      `max_length - 2` were classified).
    * BERT masked LM: `fill_mask` (`inputs` string [B] with `[MASK]` →
      `filled` string [B], `top_tokens` string [B, 5], `top_probabilities`
      float32 [B, 5] for the first mask).

    Args:
        model: a keras_tfm GPT / seq2seq / BERT classifier / BERT masked LM /
            SentenceEncoder.
        path: the model's base directory, e.g. "saved_models/NAME".
        tokenizer: a keras_tfm tokenizer (seq2seq: one, or `(source,
            target)`). GPT: optional (without it no `generate`); default
            `model.tokenizer` if the model has one.
        version: positive int; None = one more than the largest existing.
        kind: "auto" or one of `KINDS` ("causal_lm", "seq2seq_lm", "classifier", "masked_lm",
            "sentence_embedding").
        label_names: class names of a classifier (default LABEL_i).
        max_new_tokens_limit: largest `max_new_tokens` a request may ask for.
            GPT: default max(max_length - 1, 256), any value (past the
            model's context `generate` slides a window, see
            `keras_tfm.generation.sliding_window`); seq2seq: default and cap
            the model's max_length - 1. Sizes the caches.
        warmup: write `assets.extra/tf_serving_warmup_requests`.
        max_beams: the widest beam search a request may ask for (seq2seq
            `translate`, GPT `beam_search` / `beam_search_ids`: `num_beams`
            in [1, max_beams]; the loops are compiled for it, a narrower
            request keeps the spare beams dead).
        eos_id: GPT: stop id (default: the `eos_id` of the model's
            `generation_defaults`, i.e. the eos id of the HuggingFace checkpoint it
            was loaded from, else none); seq2seq: default the target
            tokenizer's EOS (first decoder token: the model's `decoder_start_id`,
            else the tokenizer's BOS; a tokenizer without them is refused). An id
            in [0, vocabulary size) (a ValueError names `eos_id` and the size).
        jit_compile: compile the decoding loops with XLA.
        max_prompt_length: GPT: longest prompt accepted (default the model's
            max_length); with `max_new_tokens_limit` it sizes the decoding loops.
        verbose: print the endpoints (Keras' summary).
        signatures: the signatures to export: None (the kind's defaults: GPT
            `serving_default`, `generate` (with a tokenizer) and
            `generate_ids`; the other kinds their one signature), "all", one
            name or a sequence of names from `SIGNATURES[kind]`. Each decoding
            loop costs export and load time (beam search: on request). Without
            "serving_default" among them, the first is also exported as
            `serving_default` (TF Serving's default).

    Returns:
        The path of the written version directory.

    Raises:
        FileExistsError: the version directory already exists.
        OSError: a write found no room (errno ENOSPC, EFBIG or EDQUOT), also when TensorFlow wrote.
        ValueError: `path` is (or lies below) a file; bad arguments, unknown model kind, a `kind` that does not
            match the model (a GPT exported as "masked_lm"), tokenizer/model
            mismatch, `max_prompt_length` < 1 or beyond the model's length,
            `signatures` naming a signature the kind lacks or a GPT text
            signature without a tokenizer.
        TypeError: `signatures` is not None, a str or a sequence of str.
    """
    base = _check_base(path)
    if version is not None and (isinstance(version, bool) or not isinstance(version, int) or version < 1):
        raise ValueError(f"`version` must be a positive int or None; received {version!r}.")
    serving = build_serving(
        model,
        tokenizer,
        kind=kind,
        label_names=label_names,
        max_new_tokens_limit=max_new_tokens_limit,
        max_beams=max_beams,
        eos_id=eos_id,
        jit_compile=jit_compile,
        max_prompt_length=max_prompt_length,
    )
    kind = detect_kind(model) if kind == "auto" else kind
    names = select_signatures(kind, signatures, _has_tokenizer(serving))
    if version is None:
        existing = list_versions(base)  # [] while `base` does not exist
        version = existing[-1] + 1 if existing else 1
    final = os.path.join(base, str(version))
    _refuse_existing(final)

    archive = keras.export.ExportArchive()
    for tok in _tokenizers_of(serving):  # their lookup tables; the variables come with the functions
        archive.track(tok)
    for name, fn, signature in serving.endpoints():
        if name in names:
            archive.add_endpoint(name, fn, signature)
    requests = [r for r in serving.warmup_requests() if r[0] in names] if warmup else None

    def write(temp):
        archive.write_out(temp, verbose=verbose)
        if requests is not None:
            warmup_lib.write_warmup_requests(temp, os.path.basename(base), requests)
        _write_export_info(temp, kind, serving)

    _write_version(write, base, final)
    return final


def _check_base(path):
    """The absolute path of `path`, the model's base folder; a ValueError when it, or the nearest part of
    it that exists, is a file (os.makedirs would say "[Errno 17] File exists")."""
    if not isinstance(path, (str, os.PathLike)):
        raise TypeError(f"`path` must be a folder path (str or os.PathLike); received {path!r}.")
    base = os.path.abspath(os.fspath(path))
    existing = base
    while not os.path.exists(existing):
        existing = os.path.dirname(existing)
    if not os.path.isdir(existing):
        where = "is a file" if existing == base else f"lies below the file {existing!r}"
        raise ValueError(
            f"`path`: {os.fspath(path)!r} {where}; expected the model's base folder, which holds its "
            "versions (e.g. saved_models/NAME)."
        )
    return base


def _refuse_existing(final):
    if os.path.exists(final):
        raise FileExistsError(
            errno.EEXIST, f"Model version already exists (never overwritten): {final}", final
        )


def _make_folders(folder):
    """Creates `folder` and its missing parents; returns those created, innermost first."""
    created = []
    missing = folder
    while not os.path.exists(missing):
        created.append(missing)
        missing = os.path.dirname(missing)
    os.makedirs(folder, exist_ok=True)
    return created


def _no_space(error, path):
    """The OSError (errno of `NO_SPACE`) of a TensorFlow write that found no room, or None: TensorFlow
    reports a full disk or a file-size limit as an `OpError` whose message holds the C library's text."""
    for code in NO_SPACE:
        if os.strerror(code) in str(error):
            return OSError(code, os.strerror(code), path)
    return None


def _write_version(write, base, final):
    """Runs `write(temp)` into a temporary folder beside `final`, then renames it to `final`. A failed or
    interrupted write leaves nothing behind: the temporary is removed, and so are `base` and its parents
    when this call created them and they are still empty. A full disk raises the `OSError` of `NO_SPACE`
    (`keras_tfm.atomic_files.write_guard` turns it into one line)."""
    created = _make_folders(base)
    try:
        remove_stale_temporaries(base)
        temp = temporary_directory(final)
        try:
            try:
                write(temp)
            except tf.errors.OpError as error:
                no_space = _no_space(error, final)
                if no_space is None:
                    raise
                raise no_space from error
            _refuse_existing(final)
            publish(temp)  # mkdtemp makes it 0700; the server may run as another user
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
    except BaseException:
        for folder in created:  # innermost first; a folder another writer filled meanwhile stays
            try:
                os.rmdir(folder)
            except OSError:
                break
        raise
