"""Int8 quantization of the lab GPT: top-1 agreement and SavedModel size (issue 14 §2).

Model: the lab's character GPT (examples/gpt_shakespeare.py: 4 layers, 4 heads,
d_model 128, context 64, no biases, tied embeddings, exact GELU), trained here
with AdamW for `--steps` steps (or loaded with `--model FILE.keras`). Data: Tiny
Shakespeare, characters, the last 10 % as validation, cut into non-overlapping
windows of 64 (the lab's whole-split evaluation).

Rows, each against the float32 model on every validation position:
  int8 (Keras default)   `model.quantize("int8")`: per-output-channel abs-max int8
                         kernels and per-token dynamic int8 activations (W8A8)
  int8 weight-only       `Int8QuantizationConfig(activation_quantizer=None)`: the
                         same int8 kernels, float activations
Columns: top-1 agreement, largest |logit difference|, validation loss. Then the
SavedModel (Keras `model.export`) size of float32 vs int8 and the stored bytes
per dtype (the projections are stored as int8, not as a float copy).

Usage:  python bench/quantization.py --data ../shared/data/tiny_shakespeare/input.txt [--steps 2000]
        [--model lab.keras] [--save lab.keras]
"""

import argparse
import os
import sys
import tempfile
import time
import warnings

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
os.environ.setdefault("KERAS_BACKEND", "tensorflow")

import keras  # noqa: E402
import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402

from keras_tfm.models import gpt  # noqa: E402

CONTEXT = 64


def load_text(path):
    with open(path, encoding="utf-8") as f:
        text = f.read()
    chars = sorted(set(text))
    lookup = {c: i for i, c in enumerate(chars)}
    ids = np.fromiter((lookup[c] for c in text), dtype=np.int32, count=len(text))
    split = int(0.9 * len(ids))
    return ids[:split], ids[split:], len(chars)


def lab_model(vocabulary_size):
    keras.utils.set_random_seed(1337)
    return gpt(
        vocabulary_size=vocabulary_size,
        max_length=CONTEXT,
        num_layers=4,
        num_heads=4,
        d_model=128,
        dropout=0.0,
        use_bias=False,
        activation="gelu",
    )


def train(model, train_ids, steps, batch=12, seed=0):
    rng = np.random.default_rng(seed)
    optimizer = keras.optimizers.AdamW(1e-3, beta_2=0.99, weight_decay=0.1, global_clipnorm=1.0)
    model.compile(
        optimizer=optimizer,
        loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True),
        jit_compile=True,
    )

    def batches():
        while True:
            starts = rng.integers(0, len(train_ids) - CONTEXT - 1, size=batch)
            x = np.stack([train_ids[s : s + CONTEXT] for s in starts])
            y = np.stack([train_ids[s + 1 : s + CONTEXT + 1] for s in starts])
            yield x, y

    history = model.fit(batches(), steps_per_epoch=steps, epochs=1, verbose=0)
    return history.history["loss"][-1]


def windows(ids):
    n = (len(ids) - 1) // CONTEXT
    x = ids[: n * CONTEXT].reshape(n, CONTEXT)
    y = ids[1 : n * CONTEXT + 1].reshape(n, CONTEXT)
    return x, y


def logits_of(model, x, batch=128):
    fn = tf.function(lambda t: model(t, training=False), jit_compile=False)
    return np.concatenate([fn(tf.constant(x[i : i + batch])).numpy() for i in range(0, len(x), batch)])


def loss_of(logits, y):
    shifted = logits - logits.max(-1, keepdims=True)
    log_probs = shifted - np.log(np.exp(shifted).sum(-1, keepdims=True))
    return float(-np.take_along_axis(log_probs, y[..., None], -1).mean())


def quantized_copy(model, config=None):
    clone = keras.models.clone_model(model)
    clone.set_weights(model.get_weights())
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message=".*does not have a `quantize` method")
        clone.quantize("int8", config=config)
    return clone


def stored_bytes(path):
    reader = tf.train.load_checkpoint(os.path.join(path, "variables", "variables"))
    shapes = reader.get_variable_to_shape_map()
    totals = {}
    for name, dtype in reader.get_variable_to_dtype_map().items():
        if dtype != tf.string:
            totals[dtype.name] = totals.get(dtype.name, 0) + int(np.prod(shapes[name])) * dtype.size
    return totals


def directory_bytes(path):
    return sum(os.path.getsize(os.path.join(r, f)) for r, _, files in os.walk(path) for f in files)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", required=True, help="tiny_shakespeare input.txt")
    parser.add_argument("--steps", type=int, default=2000)
    parser.add_argument("--model", help="a trained lab model (.keras) instead of training")
    parser.add_argument("--save", help="save the trained float model here (.keras)")
    args = parser.parse_args(argv)

    train_ids, val_ids, vocabulary_size = load_text(args.data)
    if args.model:
        model = keras.saving.load_model(args.model)
        print(f"model: {args.model}")
    else:
        model = lab_model(vocabulary_size)
        t0 = time.perf_counter()
        loss = train(model, train_ids, args.steps)
        print(f"trained {args.steps} steps in {time.perf_counter() - t0:.0f} s, last train loss {loss:.3f}")
        if args.save:
            model.save(args.save)
    x, y = windows(val_ids)
    reference = logits_of(model, x)
    top1 = reference.argmax(-1)
    print(
        f"validation: {len(x)} windows of {CONTEXT} = {x.size} positions; float32 loss {loss_of(reference, y):.4f}"
    )
    print(f"{'model':<22} {'top-1 agreement':>16} {'max |logit diff|':>17} {'val loss':>9}")
    quantized = {
        "int8 (Keras default)": quantized_copy(model),
        "int8 weight-only": quantized_copy(
            model, keras.quantizers.Int8QuantizationConfig(activation_quantizer=None)
        ),
    }
    for name, q in quantized.items():
        logits = logits_of(q, x)
        agreement = float(np.mean(logits.argmax(-1) == top1))
        print(
            f"{name:<22} {100 * agreement:>15.2f}% {np.abs(logits - reference).max():>17.4f} "
            f"{loss_of(logits, y):>9.4f}"
        )
    root = tempfile.mkdtemp()
    print(f"{'SavedModel':<22} {'total bytes':>12} {'variables':>10}  stored bytes per dtype")
    for name, m in (("float32", model), ("int8", quantized["int8 (Keras default)"])):
        path = os.path.join(root, name)
        m.export(path, format="tf_saved_model", verbose=False)
        dtypes = ", ".join(f"{k} {v:,}" for k, v in sorted(stored_bytes(path).items()))
        print(
            f"{name:<22} {directory_bytes(path):>12,} {directory_bytes(os.path.join(path, 'variables')):>10,}  {dtypes}"
        )


if __name__ == "__main__":
    sys.exit(main())
