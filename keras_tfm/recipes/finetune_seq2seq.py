"""Recipe `finetune` of a seq2seq checkpoint (T5, BART, Marian): teacher forcing on sentence pairs.

    results = finetune_seq2seq_checkpoint(checkpoint="opus-mt-en-es", data="spa.txt", output="runs/mt")

The checkpoint's own tokenizer(s), pad id and decoder start id make the batches, as HuggingFace
fine-tunes these models:

    encoder_token_ids  = encode(source tokenizer, source)          (its suffix: T5 and Marian </s>)
    labels             = encode(target tokenizer, target)          (BART: <s> … </s>)
    decoder_token_ids  = [decoder_start_id] + labels[:-1]          (T5 0, BART 2, Marian pad)

each side truncated to `max_length` tokens (keeping the tokenizer's added tokens), batches padded
with the model's pad id, which the loss ignores (the model's compile default, `lm_loss_and_accuracy`).
Pairs are batched by source length (`LengthBucketedBatches`: shuffled chunks sorted by length).

The optimizer is the task's compile default, AdamW (`keras_tfm.optimizers.adamw`, no decay on
biases, norms and embeddings; weight decay 0.01, global norm clipped at 1), with the classifier
recipe's schedule (`finetune.linear_warmup_decay`): linear warmup over `warmup_fraction` of the
steps, then linear decay to 0, peak 2e-5.

Held-out pairs (`dev`, else `test_pairs` taken from `data`) give the teacher-forced loss and token
accuracy, and cased sacreBLEU / chrF (`keras_tfm.analysis.bleu`) of their translations, decoded as the
served `translate` signature decodes (`checkpoint_pairs.translate_rows`: beam search with the
checkpoint's length penalty; sources truncated to `max_length` as in training). `output` is written
with `save_pretrained` (HuggingFace's layout, the tokenizer included), which `from_pretrained` and
`keras-tfm generate --model OUTPUT` read back.
"""

import dataclasses
import os
import random
import time
from collections.abc import Sequence
from typing import Any

from keras_tfm.atomic_files import write_guard
from keras_tfm.checks import (
    check_bool,
    check_float,
    check_non_negative_int,
    check_positive_float,
    check_positive_int,
    check_rate,
    check_seed,
)
from keras_tfm.recipes import _runtime as runtime
from keras_tfm.recipes import output as output_lib
from keras_tfm.recipes.checkpoint_pairs import (
    encode_side,
    pair_batches,
    read_pair_file,
    tokenizer_pair,
    translate_rows,
)
from keras_tfm.recipes.finetune import DEFAULT_MAX_LENGTH, StepTimer, check_max_length, fit_timed, step_budget
from keras_tfm.recipes.options import VERBOSITIES, check_export_name, first_line

#: The `model_type`s of config.json fine-tuned by this recipe (`keras_tfm.checkpoints` SEQ2SEQ_FAMILIES).
SEQ2SEQ_MODEL_TYPES = ("t5", "bart", "marian")


def checkpoint_model_type(directory: str) -> str | None:
    """The `model_type` of `directory`'s config.json; None when it has none or cannot be read."""
    from keras_tfm.checkpoints.files import CONFIG_FILE, read_json

    try:
        config = read_json(directory, CONFIG_FILE, required=False) or {}
    except (OSError, ValueError):
        return None
    return config.get("model_type") if isinstance(config, dict) else None


def check_seq2seq_checkpoint(argument: str, directory: str) -> None:
    """Refuses (ValueError naming `argument`) a directory that is not a T5, BART or Marian checkpoint."""
    if not os.path.isdir(directory):
        raise ValueError(f"`{argument}`: {directory!r} is not a checkpoint directory.")
    model_type = checkpoint_model_type(directory)
    if model_type not in SEQ2SEQ_MODEL_TYPES:
        found = "no config.json with a model_type" if model_type is None else f"model_type {model_type!r}"
        raise ValueError(
            f"`{argument}`: {directory!r} is not a seq2seq checkpoint ({found}); seq2seq fine-tuning takes "
            f"a checkpoint whose config.json has model_type {' / '.join(SEQ2SEQ_MODEL_TYPES)} (e.g. "
            "Helsinki-NLP/opus-mt-en-es, t5-small, facebook/bart-base)."
        )


@dataclasses.dataclass(kw_only=True)
class Seq2SeqFinetuneOptions:
    """The options of `finetune_seq2seq_checkpoint` (keyword-only).

    Attributes:
        checkpoint: a T5, BART or Marian checkpoint directory (config.json, weights, tokenizer files).
        data: tab-separated pairs, SOURCE<TAB>TARGET[<TAB>...] per line (Anki's spa.txt).
        dev: held-out pairs file; None = the first `test_pairs` pairs of `data` after shuffling.
        reverse: translate the second column into the first.
        source_prefix: text put before every source (T5's task prefix, "translate English to German: ").
        max_pairs: use only this many pairs of `data` after shuffling (before holding out), 0 = all.
        test_pairs: pairs of `data` held out when `dev` is None (at most a tenth of them), 0 = none.
        epochs, batch_size, learning_rate, warmup_fraction: the recipe (3, 32, 2e-5, 0.1).
        max_length: tokens per source and per target, longer ones are truncated; None = 64, or the
            checkpoint's positions when fewer (more is refused). Also the held-out translations' limit.
        steps: stop after this many optimizer steps (a quick run); None = the whole `epochs`.
        seed: shuffling, held-out split and dropout seed.
        verbose: Keras fit verbosity (0, 1 or 2); None = 1 on a terminal, else 2.
        bleu_pairs: held-out pairs translated and scored, 0 = all of them.
        num_beams: beam width of the held-out translations, 1 = greedy.
        length_penalty: their length penalty α in [0, 5]; None = the checkpoint's.
        show: held-out translations printed.
        output: write the fine-tuned checkpoint here (`save_pretrained`).
        overwrite: replace an `output` that is not empty.
        export: also export a TF Serving SavedModel named this (`translate` signature).
        export_dir: base folder of `export` (the rule of every recipe, `output.export_base`).
        results: write the figures as JSON here.
    """

    checkpoint: str
    data: str
    dev: str | None = None
    reverse: bool = False
    source_prefix: str = ""
    max_pairs: int = 0
    test_pairs: int = 200
    epochs: int = 3
    batch_size: int = 32
    max_length: int | None = None
    learning_rate: float = 2e-5
    warmup_fraction: float = 0.1
    steps: int | None = None
    seed: int = 0
    verbose: int | None = None
    bleu_pairs: int = 500
    num_beams: int = 4
    length_penalty: float | None = None
    show: int = 3
    output: str | None = None
    overwrite: bool = False
    export: str | None = None
    export_dir: str | None = None
    results: str | None = None

    def __post_init__(self):
        for name in ("epochs", "batch_size", "num_beams"):
            check_positive_int(name, getattr(self, name))
        for name in ("max_pairs", "test_pairs", "bleu_pairs", "show"):
            check_non_negative_int(name, getattr(self, name))
        check_positive_int("max_length", self.max_length, allow_none=True)
        check_positive_int("steps", self.steps, allow_none=True)
        check_positive_float("learning_rate", self.learning_rate)
        check_rate("warmup_fraction", self.warmup_fraction)
        check_float("length_penalty", self.length_penalty, low=0.0, high=5.0, allow_none=True)
        check_seed("seed", self.seed)
        check_bool("reverse", self.reverse)
        check_bool("overwrite", self.overwrite)
        check_export_name(self.export)
        if not isinstance(self.source_prefix, str):
            raise TypeError(f"`source_prefix` must be a str; received {type(self.source_prefix).__name__}.")
        if self.verbose is not None and self.verbose not in VERBOSITIES:
            raise ValueError(f"`verbose` must be 0, 1, 2 or None; received {self.verbose!r}.")


def finetune_seq2seq(
    model: Any,
    pairs: Sequence[tuple[str, str]],
    *,
    epochs: int = 3,
    batch_size: int = 32,
    max_length: int = 64,
    learning_rate: float = 2e-5,
    warmup_fraction: float = 0.1,
    weight_decay: float = 0.01,
    steps: int | None = None,
    seed: int = 0,
    verbose: int | str = "auto",
) -> tuple[Any, StepTimer]:
    """Fine-tunes a seq2seq checkpoint's model on `(source, target)` text pairs (module docstring).

    Args:
        model: a `Seq2Seq` of `from_pretrained` with its tokenizer(s).
        pairs: the training pairs (str, str).
        epochs, batch_size, max_length, learning_rate, warmup_fraction, weight_decay: the recipe.
        steps: stop after this many optimizer steps (the schedule then spans `steps`).
        seed: shuffling and dropout seed.
        verbose: passed to `fit`.

    Returns:
        `(history, timer)`: the Keras history and the `StepTimer` (`seen` steps, times).
    """
    import keras

    from keras_tfm.optimizers import adamw
    from keras_tfm.recipes.finetune import linear_warmup_decay

    check_max_length(model, max_length)
    keras.utils.set_random_seed(check_seed("seed", seed))
    data = pair_batches(model, pairs, max_length, batch_size, seed=seed)
    total, epochs = step_budget(len(data), epochs, steps)
    schedule = linear_warmup_decay(learning_rate, total, warmup_fraction)
    optimizer = adamw(schedule, weight_decay=weight_decay, global_clipnorm=1.0)
    model.compile(optimizer=optimizer, jit_compile=False)  # the task's loss; batches differ in shape
    return fit_timed(model, data, epochs, total, verbose)


def evaluate_seq2seq_pairs(model, pairs, max_length, bleu_pairs=0, num_beams=4, length_penalty=None):
    """Teacher-forced loss and token accuracy on `pairs`, and cased sacreBLEU / chrF of the
    translations of the first `bleu_pairs` of them (0 = all; sources whose tokens pass `max_length`
    are truncated as in training). Returns the scores and "translations"."""
    from keras_tfm.analysis.bleu import corpus_scores

    metrics = model.evaluate(
        pair_batches(model, pairs, max_length, 64, shuffle=False, name="dev"), verbose=0, return_dict=True
    )
    scored = pairs[: bleu_pairs or len(pairs)]
    rows = encode_side(tokenizer_pair(model)[0], [s for s, _ in scored], max_length, "dev")
    start = time.perf_counter()
    translations = translate_rows(model, rows, max_length - 1, num_beams, length_penalty)
    scores = corpus_scores(translations, [t for _, t in scored])
    return {
        "dev_loss": float(metrics["loss"]),
        "dev_token_accuracy": float(metrics["accuracy"]),
        **scores,
        "bleu_pairs": len(scored),
        "num_beams": num_beams,
        "decode_seconds": time.perf_counter() - start,
        "translations": translations,
    }


def split_pairs(o: Seq2SeqFinetuneOptions) -> tuple[list, list]:
    """(training pairs, held-out pairs) of the options: `data` shuffled by `seed` (and cut to
    `max_pairs`), the held-out pairs from `dev`, else the first `test_pairs` of them (at most a tenth)."""
    pairs = read_pair_file(o.data, "data", o.reverse)
    random.Random(o.seed).shuffle(pairs)
    if o.max_pairs:
        pairs = pairs[: o.max_pairs]
    if o.dev is not None:
        return pairs, read_pair_file(o.dev, "dev", o.reverse)
    n_test = min(o.test_pairs, len(pairs) // 10)
    return pairs[n_test:], pairs[:n_test]


def _load(o):
    """The checkpoint's `Seq2Seq` with its tokenizer(s), errors naming `checkpoint`."""
    from keras_tfm.models import from_pretrained

    try:
        model = from_pretrained(o.checkpoint, task="seq2seq_lm")
    except ValueError as error:
        raise ValueError(f"`checkpoint`: {first_line(error)}") from None
    tokenizer_pair(model)
    return model


def _write(o, model, results):
    """`output` (save_pretrained) and `export` (a SavedModel with `translate`) of the fine-tuned model."""
    from keras_tfm.checkpoints import save_pretrained
    from keras_tfm.checkpoints.files import checkpoint_directory

    if o.output:
        with write_guard(o.output, output_lib.model_bytes(model)):
            output_lib.make_parents(o.output)
            with checkpoint_directory(o.output, overwrite=o.overwrite) as temp:  # renamed when complete
                save_pretrained(model, temp, overwrite=True)
        results["output_path"] = o.output
        runtime.log(f"checkpoint: {o.output}")
    if o.export:
        from keras_tfm.export import export_for_serving

        target = os.path.join(output_lib.export_base(o), o.export)
        try:
            with write_guard(target, output_lib.model_bytes(model)):
                results["export_path"] = export_for_serving(model, target)
        except Exception as error:
            if not o.output:
                raise
            raise ValueError(
                f"`export`: the fine-tuned checkpoint is saved in {o.output!r}, but exporting it failed "
                f"({first_line(error)})."
            ) from error
        runtime.log(f"exported: {results['export_path']}")


def finetune_seq2seq_checkpoint(**options: Any) -> dict[str, Any]:
    """Fine-tunes a T5, BART or Marian checkpoint on sentence pairs (see the module docstring).

    Args:
        **options: the fields of `Seq2SeqFinetuneOptions` (`checkpoint` and `data` are required).

    Returns:
        dict: "steps", "train_pairs", "train_seconds", "median_step_seconds"; with held-out pairs
        "dev_loss", "dev_token_accuracy", "bleu", "chrf" (and sacreBLEU's other figures), "examples";
        "output_path" / "export_path" when written; the fine-tuned "model" and its "tokenizer".

    Raises:
        ValueError / TypeError naming the option, before any training.
    """
    o = Seq2SeqFinetuneOptions(**options)
    check_seq2seq_checkpoint("checkpoint", o.checkpoint)
    if o.output and os.path.isdir(o.output) and os.listdir(o.output) and not o.overwrite:
        raise ValueError(
            f"`output`: {o.output!r} already exists and is not empty; replacing it needs `overwrite`."
        )
    output_lib.check_output_options(o)
    train, held_out = split_pairs(o)
    if not train:
        raise ValueError(
            f"`data`: no training pairs are left in {o.data!r} after holding out {len(held_out)}."
        )
    if o.source_prefix:
        train, held_out = ([(o.source_prefix + s, t) for s, t in rows] for rows in (train, held_out))
    model = _load(o)
    if o.max_length is None:
        o.max_length = min(DEFAULT_MAX_LENGTH, model.max_length or DEFAULT_MAX_LENGTH)
    check_max_length(model, o.max_length)
    runtime.log(
        f"data: {len(train):,} training / {len(held_out):,} held-out pairs; max length {o.max_length}"
    )
    recipe = {
        n: getattr(o, n) for n in ("epochs", "batch_size", "max_length", "learning_rate", "steps", "seed")
    }
    verbose = runtime.default_verbose() if o.verbose is None else o.verbose
    _, timer = finetune_seq2seq(model, train, warmup_fraction=o.warmup_fraction, verbose=verbose, **recipe)
    runtime.log(f"fine-tuned {timer.seen} steps in {timer.total_seconds:.0f} s")
    results = {
        "steps": timer.seen,
        "train_pairs": len(train),
        "train_seconds": timer.total_seconds,
        "median_step_seconds": timer.median_step_seconds,
    }
    if held_out:
        scores = evaluate_seq2seq_pairs(
            model, held_out, o.max_length, o.bleu_pairs, o.num_beams, o.length_penalty
        )
        translations = scores.pop("translations")
        results.update(scores)
        results["examples"] = [
            {"source": s, "reference": r, "translation": h}
            for (s, r), h in list(zip(held_out, translations))[: o.show]
        ]
        _log_scores(results)
    _write(o, model, results)
    runtime.write_results(o, results)
    results["model"] = model
    results["tokenizer"] = model.tokenizer
    return results


def _log_scores(results):
    decoding = "greedy" if results["num_beams"] == 1 else f"beam {results['num_beams']}"
    runtime.log(
        f"held-out token accuracy {results['dev_token_accuracy']:.4f}, loss {results['dev_loss']:.4f}; "
        f"sacreBLEU {results['bleu']:.2f}, chrF {results['chrf']:.2f} on {results['bleu_pairs']} pairs "
        f"({decoding}, {results['decode_seconds']:.1f} s)"
    )
    runtime.log(f"  {results['bleu_signature']}")
    for e in results["examples"]:
        runtime.log(
            f"  source:      {e['source']}\n  reference:   {e['reference']}\n  translation: {e['translation']}"
        )
