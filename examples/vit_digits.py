"""Train a small Vision Transformer on the 8×8 handwritten digits (offline).

The data set is the UCI digits set that ships inside scikit-learn
(`sklearn/datasets/data/digits.csv.gz`, 1797 images, 10 classes). It is read
directly with NumPy: install the optional extra (`pip install
keras-tfm[examples]`, i.e. scikit-learn) or pass `--data path/to/digits.csv.gz`.
Nothing is downloaded.

    python examples/vit_digits.py                 # patch 4 → 4 tokens + [CLS]
    python examples/vit_digits.py --patch-size 2  # 16 tokens + [CLS]

Prints the test accuracy on a fixed, stratified 20 % split (359 images).
Measured on CPU with the defaults (4 layers, 4 heads, d_model 64, 40 epochs,
~135k parameters, 1-4 min): patch 4 → 97.2 % (seed 0), 97.8 % (seed 1);
patch 2 → 94.4 % (seed 0); patch 2 with `--augment --epochs 60` → 84.7 %
(±1 pixel shifts are too strong for 8×8 digits).
"""

import argparse
import importlib.util
import os
import sys
import time

import numpy as np


def find_digits_csv(path=None):
    """Path of digits.csv.gz: `path`, or the file inside an installed scikit-learn."""
    if path is not None:
        if not os.path.isfile(path):
            raise FileNotFoundError(f"`--data` {path!r} does not exist.")
        return path
    spec = importlib.util.find_spec("sklearn")
    if spec is None or not spec.submodule_search_locations:
        raise FileNotFoundError(
            "The digits data set ships with scikit-learn: `pip install keras-tfm[examples]` (or scikit-learn), "
            "or pass --data path/to/digits.csv.gz."
        )
    candidate = os.path.join(list(spec.submodule_search_locations)[0], "datasets", "data", "digits.csv.gz")
    if not os.path.isfile(candidate):
        raise FileNotFoundError(f"scikit-learn is installed but {candidate} is missing; pass --data.")
    return candidate


def load_digits(path=None):
    """Images (N, 8, 8, 1) float32 in [0, 1] and labels (N,) int32."""
    data = np.loadtxt(find_digits_csv(path), delimiter=",", dtype=np.float32)
    images = (data[:, :-1] / 16.0).reshape(-1, 8, 8, 1)
    return images, data[:, -1].astype(np.int32)


def stratified_split(labels, test_fraction=0.2, seed=0):
    rng = np.random.default_rng(seed)
    train, test = [], []
    for c in np.unique(labels):
        idx = rng.permutation(np.flatnonzero(labels == c))
        n_test = int(round(test_fraction * len(idx)))
        test.extend(idx[:n_test])
        train.extend(idx[n_test:])
    return np.array(sorted(train)), np.array(sorted(test))


def main(argv=None):
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--data", default=None, help="digits.csv.gz (default: the one inside scikit-learn).")
    parser.add_argument(
        "--patch-size", type=int, default=4, choices=[1, 2, 4, 8], help="Patch size (default 4)."
    )
    parser.add_argument("--num-layers", type=int, default=4)
    parser.add_argument("--num-heads", type=int, default=4)
    parser.add_argument("--d-model", type=int, default=64)
    parser.add_argument("--epochs", type=int, default=40)
    parser.add_argument("--batch-size", type=int, default=64)
    parser.add_argument("--learning-rate", type=float, default=2e-3)
    parser.add_argument("--dropout", type=float, default=0.1)
    parser.add_argument("--augment", action="store_true", help="Random ±1 pixel shifts during training.")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--output", default=None, help="Save the trained model to this .keras file.")
    args = parser.parse_args(argv)

    os.environ.setdefault("KERAS_BACKEND", "tensorflow")
    import keras

    from keras_tfm.models import vit_classifier
    from keras_tfm.schedules import nanogpt_schedule

    keras.utils.set_random_seed(args.seed)
    images, labels = load_digits(args.data)
    train, test = stratified_split(labels, seed=args.seed)
    x_train, y_train, x_test, y_test = images[train], labels[train], images[test], labels[test]
    print(
        f"digits: {len(x_train)} train / {len(x_test)} test images of 8×8, patch {args.patch_size} "
        f"→ {(8 // args.patch_size) ** 2} tokens + [CLS]"
    )

    model = vit_classifier(
        image_size=8,
        patch_size=args.patch_size,
        num_classes=10,
        num_layers=args.num_layers,
        num_heads=args.num_heads,
        d_model=args.d_model,
        d_ff=2 * args.d_model,
        num_channels=1,
        dropout=args.dropout,
    )
    steps = args.epochs * int(np.ceil(len(x_train) / args.batch_size))
    schedule = nanogpt_schedule(args.learning_rate, steps, warmup_steps=max(1, steps // 20), min_ratio=0.05)
    model.compile(
        optimizer=keras.optimizers.AdamW(schedule, weight_decay=0.05),
        loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True),
        metrics=["accuracy"],
    )
    if args.augment:
        import tensorflow as tf

        def shift(x, y):
            x = tf.pad(x, [[1, 1], [1, 1], [0, 0]])
            return tf.image.random_crop(x, (8, 8, 1)), y

        train_data = (
            tf.data.Dataset.from_tensor_slices((x_train, y_train))
            .shuffle(2048, seed=args.seed)
            .map(shift)
            .batch(args.batch_size)
        )
        fit_args = dict(x=train_data)
    else:
        fit_args = dict(x=x_train, y=y_train, batch_size=args.batch_size)
    start = time.time()
    model.fit(epochs=args.epochs, verbose=2, **fit_args)
    _, accuracy = model.evaluate(x_test, y_test, verbose=0)
    print(f"test accuracy: {accuracy:.4f} ({model.count_params():,} parameters, {time.time() - start:.0f} s)")
    if args.output:
        model.save(args.output)
    return accuracy


if __name__ == "__main__":
    sys.exit(0 if main() is not None else 1)
