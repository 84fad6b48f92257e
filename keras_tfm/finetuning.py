"""Fine-tuning a pretrained checkpoint on a text-classification task.

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

    model = keras_tfm.checkpoints.from_pretrained(path, task="classifier", num_classes=2)
    tokenizer = keras_tfm.tokenizers.WordPieceTokenizer.from_pretrained(path)
    finetune_classifier(model, tokenizer, texts, labels)
    accuracy = evaluate_classifier(model, tokenizer, dev_texts, dev_labels)
"""

import math
import time

import keras
import numpy as np

from keras_tfm.checks import check_positive_int, positive_float_arg, positive_int_arg, rate_arg
from keras_tfm.data.text_batches import LengthBucketedBatches, encode_texts


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


def finetune_classifier(
    model,
    tokenizer,
    texts,
    labels,
    *,
    epochs=3,
    batch_size=32,
    max_length=64,
    learning_rate=2e-5,
    warmup_fraction=0.1,
    weight_decay=0.01,
    max_steps=None,
    seed=0,
    verbose="auto",
    callbacks=(),
):
    """Fine-tunes a sequence classifier with the lecture's recipe (see the module docstring).

    Args:
        model: a classifier (`from_pretrained(path, task="classifier", ...)`).
        tokenizer: its tokenizer (`WordPieceTokenizer.from_pretrained(path)`).
        texts, labels: training sentences and integer labels.
        epochs, batch_size, max_length, learning_rate, warmup_fraction,
            weight_decay: the recipe (3, 32, 64, 2e-5, 0.1, 0.01).
        max_steps: stop after this many optimizer steps (a quick run; the
            schedule then spans `max_steps`).
        seed: shuffling and dropout seed.
        verbose, callbacks: passed to `fit`.

    Returns:
        `(history, timer)`: the Keras history and a `StepTimer` (`seen` steps,
        `median_step_seconds`, `step_seconds`, `total_seconds`).
    """
    keras.utils.set_random_seed(seed)
    rows = encode_texts(tokenizer, texts, max_length)
    data = LengthBucketedBatches(rows, labels, batch_size, pad_id=tokenizer.pad_id, seed=seed)
    total = epochs * len(data)
    if max_steps is not None:
        total = min(total, check_positive_int("max_steps", max_steps))
        epochs = math.ceil(total / len(data))
    from keras_tfm.training import compile_for_classification

    # Batches differ in length: graph mode with relaxed shapes (XLA would compile every width).
    compile_for_classification(
        model, finetune_optimizer(learning_rate, total, warmup_fraction, weight_decay), jit_compile=False
    )
    timer = StepTimer(total)
    start = time.perf_counter()
    history = model.fit(data, epochs=epochs, verbose=verbose, callbacks=[*callbacks, timer])
    timer.total_seconds = time.perf_counter() - start
    return history, timer


def predict_classes(model, tokenizer, texts, max_length=64, batch_size=64):
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


def evaluate_classifier(model, tokenizer, texts, labels, max_length=64, batch_size=64):
    """Accuracy of `model` on `(texts, labels)`."""
    predictions = predict_classes(model, tokenizer, texts, max_length, batch_size)
    return float(np.mean(predictions == np.asarray(labels)))


#: The recipe's options: `finetune_classifier` keyword arguments, and the flags of
#: `add_recipe_arguments` (`keras-tfm finetune`, examples/finetune_sst2.py).
RECIPE_OPTIONS = (
    "epochs",
    "batch_size",
    "max_length",
    "learning_rate",
    "warmup_fraction",
    "max_steps",
    "seed",
)


def add_recipe_arguments(parser):
    """Adds the recipe's flags (--epochs, --batch-size, --max-length, --learning-rate, --warmup-fraction,
    --max-steps, --seed; the recipe's defaults) to an argparse parser; `recipe_options(args)` reads them."""
    parser.add_argument("--epochs", type=positive_int_arg, default=3)
    parser.add_argument("--batch-size", type=positive_int_arg, default=32)
    parser.add_argument("--max-length", type=positive_int_arg, default=64)
    parser.add_argument("--learning-rate", type=positive_float_arg, default=2e-5)
    parser.add_argument("--warmup-fraction", type=rate_arg, default=0.1)
    parser.add_argument(
        "--max-steps", type=positive_int_arg, default=None, help="stop after N optimizer steps (a quick run)"
    )
    parser.add_argument("--seed", type=int, default=0)


def recipe_options(args):
    """`finetune_classifier` keyword arguments from the flags of `add_recipe_arguments`."""
    return {name: getattr(args, name) for name in RECIPE_OPTIONS}
