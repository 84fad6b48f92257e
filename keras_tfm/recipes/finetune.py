"""Recipe `finetune`: a published checkpoint fine-tuned on a text-classification task.

    results = finetune_checkpoint(checkpoint="all-MiniLM-L6-v2", data="sst2_sentence_level", output="runs/sst2")

The lecture's recipe ("model = load_pretrained('bert-base'); lower learning
rate 2e-5; 3 epochs") with BERT's schedule:

    lr(s) = 2e-5 · s / W                   s < W        (linear warmup, W = 10 % of the steps)
    lr(s) = 2e-5 · (S − s) / (S − W)       W ≤ s ≤ S    (linear decay to 0)
    AdamW, weight decay 0.01 (not on LayerNorm scales/offsets and biases)

and dynamic padding: sentences are tokenized once, truncated to
`max_length`, and batched with others of similar length (shuffled chunks
sorted by length, then the batches shuffled), each batch padded only to its
own longest sentence, so an epoch of SST-2 (mean ≈ 25 tokens) costs well
under half of padding everything to 64.

`finetune_checkpoint(**options)` (the fields of `FinetuneOptions`) reads `<label> <sentence>` lines (a file, or a
folder holding SST-2's `stsa.binary.train` and `stsa.binary.dev`), fine-tunes, prints the dev accuracy,
and optionally writes the model as a checkpoint (`output`, `save_pretrained` layout) and a TF Serving
SavedModel with the `classify` signature (`export`). Its parts work on any model and texts:

    model = keras_tfm.models.from_pretrained(path, task="classifier", num_classes=2)
    tokenizer = keras_tfm.tokenizers.WordPieceTokenizer.from_pretrained(path)
    finetune_classifier(model, tokenizer, texts, labels)
    accuracy = evaluate_classifier(model, tokenizer, dev_texts, dev_labels)
"""

import dataclasses
import math
import os
import time
from collections.abc import Sequence
from typing import Any

import keras
import numpy as np

from keras_tfm.atomic_files import write_guard
from keras_tfm.checks import (
    check_bool,
    check_choice,
    check_positive_float,
    check_positive_int,
    check_rate,
    check_seed,
)
from keras_tfm.models.bert_text import encode_texts
from keras_tfm.models.text_batches import LengthBucketedBatches
from keras_tfm.recipes import _runtime as runtime
from keras_tfm.recipes import output as output_lib
from keras_tfm.recipes.bert import read_label_sentences
from keras_tfm.recipes.options import VERBOSITIES, check_export_name, first_line

TASKS = ("classifier",)
#: `max_length` when not given (capped by the checkpoint's positions).
DEFAULT_MAX_LENGTH = 64
POOLINGS = ("cls", "mean", "max")


def linear_warmup_decay(learning_rate, total_steps, warmup_fraction=0.1):
    """BERT's schedule: linear warmup over `warmup_fraction` of the steps, then linear decay to 0."""
    from keras_tfm.schedules import WarmupStableDecay

    warmup = int(round(warmup_fraction * total_steps))
    return WarmupStableDecay(
        learning_rate,
        total_steps,
        warmup_steps=warmup,
        decay_steps=max(1, total_steps - warmup),
        min_ratio=0.0,
    )


def finetune_optimizer(learning_rate, total_steps, warmup_fraction=0.1, weight_decay=0.01):
    """AdamW with BERT's schedule and no weight decay on LayerNorm parameters and biases."""
    optimizer = keras.optimizers.AdamW(
        learning_rate=linear_warmup_decay(learning_rate, total_steps, warmup_fraction),
        weight_decay=weight_decay,
        epsilon=1e-6,
    )
    optimizer.exclude_from_weight_decay(var_names=["gamma", "beta", "bias"])
    return optimizer


class StepTimer(keras.callbacks.Callback):
    """Stops after `steps` optimizer steps and records every step's wall time.

    `step_seconds` holds the time of every step but the first (which includes
    tracing the train function); `median_step_seconds` summarises them.
    """

    def __init__(self, steps):
        super().__init__()
        self.steps, self.seen, self.step_seconds, self._last = steps, 0, [], None

    def on_train_batch_begin(self, batch, logs=None):
        self._last = time.perf_counter()

    def on_train_batch_end(self, batch, logs=None):
        if self.seen:
            self.step_seconds.append(time.perf_counter() - self._last)
        self.seen += 1
        if self.seen >= self.steps:
            self.model.stop_training = True

    @property
    def median_step_seconds(self):
        return float(np.median(self.step_seconds)) if self.step_seconds else float("nan")


class StepProgbar(keras.callbacks.ProgbarLogger):
    """Keras's progress bar counting the steps the run will take: an epoch's target is the smaller of its
    length and the steps left of `steps` (Keras's own says "n/217" and ends at "217/217" when `StepTimer`
    stops at step 150), and an epoch stopped early by another callback ends at the steps it ran."""

    def __init__(self, steps):
        super().__init__()
        self.steps, self.done, self.epoch_steps = steps, 0, None

    def set_params(self, params):
        super().set_params(params)
        self.epoch_steps = self.target

    def on_epoch_begin(self, epoch, logs=None):
        left = self.steps - self.done
        self.target = left if self.epoch_steps is None else min(self.epoch_steps, left)
        super().on_epoch_begin(epoch, logs)

    def on_epoch_end(self, epoch, logs=None):
        self.done += self.seen
        stopped = self.model is not None and self.model.stop_training
        if stopped and self.progbar is not None and 0 < self.seen < (self.target or float("inf")):
            self.target = self.progbar.target = self.seen
        super().on_epoch_end(epoch, logs)


def finetune_classifier(
    model: Any,
    tokenizer: Any,
    texts: Sequence[str],
    labels: Sequence[int],
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
    callbacks: Sequence[keras.callbacks.Callback] = (),
) -> tuple[Any, "StepTimer"]:
    """Fine-tunes a sequence classifier with the lecture's recipe (see the module docstring).

    Args:
        model: a classifier (`from_pretrained(path, task="classifier", ...)`).
        tokenizer: its tokenizer (`WordPieceTokenizer.from_pretrained(path)`).
        texts, labels: training sentences and integer labels.
        epochs, batch_size, max_length, learning_rate, warmup_fraction,
            weight_decay: the recipe (3, 32, 64, 2e-5, 0.1, 0.01).
        steps: stop after this many optimizer steps (a quick run; the
            schedule then spans `steps`).
        seed: shuffling and dropout seed.
        verbose, callbacks: passed to `fit`.

    Returns:
        `(history, timer)`: the Keras history and a `StepTimer` (`seen` steps,
        `median_step_seconds`, `step_seconds`, `total_seconds`).
    """
    check_max_length(model, max_length)
    keras.utils.set_random_seed(check_seed("seed", seed))
    rows = encode_texts(tokenizer, texts, max_length)
    data = LengthBucketedBatches(rows, labels, batch_size, pad_id=tokenizer.pad_id, seed=seed)
    total, epochs = step_budget(len(data), epochs, steps)
    from keras_tfm.training import compile_for_classification

    # Batches differ in length: graph mode with relaxed shapes (XLA would compile every width).
    compile_for_classification(
        model, finetune_optimizer(learning_rate, total, warmup_fraction, weight_decay), jit_compile=False
    )
    return fit_timed(model, data, epochs, total, verbose, callbacks)


def step_budget(batches, epochs, steps=None):
    """`(total optimizer steps, epochs)`: `epochs` passes over `batches` batches, cut to `steps`
    (a positive int) when given, with the epochs that reach it."""
    total = epochs * batches
    if steps is not None:
        total = min(total, check_positive_int("steps", steps))
        epochs = math.ceil(total / batches)
    return total, epochs


def fit_timed(model, data, epochs, total, verbose, callbacks=()):
    """`model.fit` for `total` steps with a `StepTimer` (and a bar that ends at `total` unless
    `callbacks` bring their own); returns `(history, timer)`."""
    timer = StepTimer(total)
    own_bar = any(isinstance(c, keras.callbacks.ProgbarLogger) for c in callbacks)
    progress = [StepProgbar(total)] if verbose and not own_bar else []
    start = time.perf_counter()
    history = model.fit(data, epochs=epochs, verbose=verbose, callbacks=[*callbacks, timer, *progress])
    timer.total_seconds = time.perf_counter() - start
    return history, timer


def check_max_length(model, max_length, argument="max_length"):
    """`max_length`, refused (ValueError naming `argument`) when longer than the model's positions."""
    check_positive_int(argument, max_length)
    limit = getattr(model, "max_length", None)
    if limit is not None and max_length > limit:
        raise ValueError(
            f"`{argument}` must be at most the checkpoint's {limit} positions (max_position_embeddings); "
            f"received {max_length}."
        )
    return max_length


def predict_classes(
    model: Any, tokenizer: Any, texts: Sequence[str], max_length: int = 64, batch_size: int = 64
) -> np.ndarray:
    """Class ids for `texts` (batched by length, returned in input order)."""
    rows = encode_texts(tokenizer, texts, max_length)
    data = LengthBucketedBatches(rows, None, batch_size, shuffle=False, pad_id=tokenizer.pad_id)
    predictions = np.zeros(len(rows), np.int32)
    for i in range(len(data)):
        logits = np.asarray(model.predict_on_batch(data[i]))
        predictions[data.batches[i]] = (
            (logits[:, 0] > 0).astype(np.int32) if logits.shape[-1] == 1 else logits.argmax(-1)
        )
    return predictions


def evaluate_classifier(
    model: Any,
    tokenizer: Any,
    texts: Sequence[str],
    labels: Sequence[int],
    max_length: int = 64,
    batch_size: int = 64,
) -> float:
    """Accuracy of `model` on `(texts, labels)`."""
    predictions = predict_classes(model, tokenizer, texts, max_length, batch_size)
    return float(np.mean(predictions == np.asarray(labels)))


@dataclasses.dataclass(kw_only=True)
class FinetuneOptions:
    """The options of `finetune_checkpoint` (keyword-only).

    Attributes:
        checkpoint: checkpoint directory (config.json, model.safetensors, the vocabulary).
        data: '<label> <sentence>' file, or a folder holding stsa.binary.train.
        dev: dev file; None = stsa.binary.dev of a `data` folder (if there).
        task: what to fine-tune: "classifier".
        num_classes: None = the largest label + 1.
        pooling: the sentence vector the classifier reads: "cls", "mean" (how MiniLM was trained) or "max".
        epochs, batch_size, max_length, learning_rate, warmup_fraction: the recipe (3, 32, 64, 2e-5, 0.1;
            `max_length` truncates the sentences; None = 64, or the checkpoint's positions when fewer;
            more than the checkpoint's positions is refused).
        steps: stop after this many optimizer steps (a quick run); None = the whole `epochs`.
        seed: shuffling and dropout seed.
        verbose: Keras fit verbosity (0, 1 or 2); None = 1 on a terminal, else 2.
        output: write the fine-tuned checkpoint here (`save_pretrained`).
        overwrite: replace an `output` that is not empty.
        export: also export a TF Serving SavedModel named this: `export_dir/export/VERSION`.
        export_dir: base folder of `export`; None = `output/saved_models` with `output`, else
            saved_models (the rule of every recipe, `keras_tfm.recipes.output.export_base`).
        label_names: class names of the export (one per class).
    """

    checkpoint: str
    data: str
    dev: str | None = None
    task: str = "classifier"
    num_classes: int | None = None
    pooling: str = "mean"
    epochs: int = 3
    batch_size: int = 32
    max_length: int | None = None
    learning_rate: float = 2e-5
    warmup_fraction: float = 0.1
    steps: int | None = None
    seed: int = 0
    verbose: int | None = None
    output: str | None = None
    overwrite: bool = False
    export: str | None = None
    export_dir: str | None = None
    label_names: list[str] | None = None

    def __post_init__(self):
        check_choice("task", self.task, TASKS)
        check_positive_int("num_classes", self.num_classes, allow_none=True)
        check_choice("pooling", self.pooling, POOLINGS)
        for name in ("epochs", "batch_size"):
            check_positive_int(name, getattr(self, name))
        check_positive_int("max_length", self.max_length, allow_none=True)
        check_positive_int("steps", self.steps, allow_none=True)
        check_positive_float("learning_rate", self.learning_rate)
        check_rate("warmup_fraction", self.warmup_fraction)
        check_seed("seed", self.seed)
        check_bool("overwrite", self.overwrite)
        check_export_name(self.export)
        if self.verbose is not None and self.verbose not in VERBOSITIES:
            raise ValueError(f"`verbose` must be 0, 1, 2 or None; received {self.verbose!r}.")
        if self.label_names is not None:
            self.label_names = [str(name) for name in self.label_names]


def read_splits(data, dev=None):
    """(train, dev) `(texts, labels)` of `data` (a file or an SST-2 folder) and `dev` (None: the folder's
    stsa.binary.dev, else no dev split)."""
    if os.path.isdir(data):
        train_file = os.path.join(data, "stsa.binary.train")
        if not os.path.isfile(train_file):
            raise ValueError(f"`data`: the folder {data!r} has no stsa.binary.train.")
        if dev is None and os.path.isfile(os.path.join(data, "stsa.binary.dev")):
            dev = os.path.join(data, "stsa.binary.dev")
        data = train_file
    elif not os.path.isfile(data):
        raise ValueError(f"`data`: {data!r} does not exist.")
    if dev is not None and not os.path.isfile(dev):
        raise ValueError(f"`dev`: {dev!r} does not exist.")
    train = read_label_sentences(data, "data")
    return train, (read_label_sentences(dev, "dev") if dev else None)


def check_bert_checkpoint(argument: str, directory: str) -> None:
    """Refuses a checkpoint whose config.json declares another model type than BERT (a GPT-2 or Llama
    checkpoint), naming `argument`; a missing or damaged config.json is left to `from_pretrained`."""
    from keras_tfm.checkpoints.bert import MODEL_TYPE
    from keras_tfm.checkpoints.files import CONFIG_FILE, read_json

    try:
        config = read_json(directory, CONFIG_FILE, required=False) or {}
    except ValueError:
        return
    model_type = config.get("model_type")
    if model_type is not None and model_type != MODEL_TYPE:
        raise ValueError(
            f"`{argument}`: {directory!r} is not a BERT checkpoint (its config.json has model_type "
            f"{model_type!r}); fine-tuning and sentence embeddings take a BERT checkpoint (model_type "
            f"{MODEL_TYPE!r}, e.g. all-MiniLM-L6-v2)."
        )


def finetune_checkpoint(**options: Any) -> dict[str, Any]:
    """Fine-tunes a published checkpoint with the lecture's recipe (see the module docstring).

    Args:
        **options: the fields of `FinetuneOptions` (`checkpoint` and `data` are required).

    Returns:
        dict: "steps", "train_seconds", "median_step_seconds", "dev_accuracy" (with a dev split),
        "output_path" / "export_path" when written, and the fine-tuned "model" and its "tokenizer".

    Raises:
        ValueError / TypeError naming the option, before any training.
    """
    o = FinetuneOptions(**options)
    if not os.path.isdir(o.checkpoint):
        raise ValueError(f"`checkpoint`: {o.checkpoint!r} is not a checkpoint directory.")
    check_bert_checkpoint("checkpoint", o.checkpoint)
    if o.output and os.path.isdir(o.output) and os.listdir(o.output) and not o.overwrite:
        raise ValueError(
            f"`output`: {o.output!r} already exists and is not empty; replacing it needs `overwrite`."
        )
    output_lib.check_output_options(o)
    (texts, labels), dev = read_splits(o.data, o.dev)
    num_classes = o.num_classes or max(labels) + 1
    if min(labels) < 0 or max(labels) >= num_classes:
        raise ValueError(f"`data`: labels must be in [0, {num_classes}); found {min(labels)}..{max(labels)}.")
    if o.label_names is not None and len(o.label_names) != num_classes:
        raise ValueError(f"`label_names` must name {num_classes} classes; received {len(o.label_names)}.")

    from keras_tfm.checkpoints import save_pretrained
    from keras_tfm.models import from_pretrained
    from keras_tfm.tokenizers import WordPieceTokenizer

    try:
        tokenizer = WordPieceTokenizer.from_pretrained(o.checkpoint)
    except (OSError, ValueError) as error:
        raise ValueError(f"`checkpoint`: cannot read the tokenizer: {error}") from None
    try:
        model = from_pretrained(o.checkpoint, task=o.task, num_classes=num_classes, pooling=o.pooling)
    except ValueError as error:
        raise ValueError(f"`checkpoint`: {error}") from None
    model.tokenizer = tokenizer
    if o.max_length is None:
        o.max_length = min(DEFAULT_MAX_LENGTH, model.max_length)
    check_max_length(model, o.max_length)
    recipe = {
        name: getattr(o, name)
        for name in (
            "epochs",
            "batch_size",
            "max_length",
            "learning_rate",
            "warmup_fraction",
            "steps",
            "seed",
        )
    }
    verbose = runtime.default_verbose() if o.verbose is None else o.verbose
    _, timer = finetune_classifier(model, tokenizer, texts, labels, **recipe, verbose=verbose)
    runtime.log(f"fine-tuned {timer.seen} steps in {timer.total_seconds:.0f} s")
    results = {
        "steps": timer.seen,
        "train_seconds": timer.total_seconds,
        "median_step_seconds": timer.median_step_seconds,
    }
    if dev is not None:
        results["dev_accuracy"] = evaluate_classifier(model, tokenizer, dev[0], dev[1], o.max_length)
        runtime.log(f"dev accuracy: {results['dev_accuracy']:.4f}")
    if o.output:
        with write_guard(o.output, output_lib.model_bytes(model)):
            output_lib.make_parents(o.output)
            save_pretrained(model, o.output, tokenizer=tokenizer, overwrite=o.overwrite)
        results["output_path"] = o.output
        runtime.log(f"checkpoint: {o.output}")
    if o.export:
        from keras_tfm.export import export_for_serving

        target = os.path.join(output_lib.export_base(o), o.export)
        try:
            with write_guard(target, output_lib.model_bytes(model)):
                results["export_path"] = export_for_serving(
                    model, target, tokenizer=tokenizer, label_names=o.label_names
                )
        except Exception as error:
            if not o.output:
                raise
            raise ValueError(
                f"`export`: the fine-tuned checkpoint is saved in {o.output!r}, but exporting it failed "
                f"({first_line(error)})."
            ) from error
        runtime.log(f"exported: {results['export_path']}")
    results["model"] = model
    results["tokenizer"] = tokenizer
    return results
