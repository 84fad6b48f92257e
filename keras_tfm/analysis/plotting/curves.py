"""Training curves from a History, a dict of lists, a History JSON file or a TensorBoard log directory."""

import glob
import json
import math
import os
from collections.abc import Sequence
from typing import Any

import numpy as np

from keras_tfm.analysis.plotting.figure import new_figure, save_png


def read_tensorboard_scalars(log_dir: str | os.PathLike) -> dict[str, tuple[np.ndarray, np.ndarray]]:
    """Scalars of a TensorBoard log directory: {name: (steps, values)}.

    Keras `TensorBoard` conventions are mapped to History names: tags
    `epoch_<m>` under `train/` become `<m>`, under `validation/` `val_<m>`;
    other tags keep their name (prefixed by their sub-directory when it is not
    `train`, `validation` or the root). Read with TensorFlow only.
    """
    import tensorflow as tf

    if log_dir is None or not os.path.isdir(os.fspath(log_dir)):
        raise FileNotFoundError(f"`log_dir` {log_dir!r} is not a directory.")
    log_dir = os.fspath(log_dir)
    files = sorted(glob.glob(os.path.join(log_dir, "**", "events.out.tfevents.*"), recursive=True))
    if not files:
        raise FileNotFoundError(
            f"`log_dir` {log_dir!r} holds no TensorBoard event file (events.out.tfevents.*)."
        )
    series = {}
    for path in files:
        sub = os.path.relpath(os.path.dirname(path), log_dir).replace(os.sep, "/")
        for event in tf.compat.v1.train.summary_iterator(path):
            if not event.HasField("summary"):
                continue
            for value in event.summary.value:
                if value.HasField("simple_value"):
                    v = float(value.simple_value)
                elif value.HasField("tensor"):
                    array = tf.make_ndarray(value.tensor)
                    if array.size != 1 or array.dtype.kind not in "fiu":
                        continue
                    v = float(array.reshape(()))
                else:
                    continue
                tag = value.tag
                if sub in ("train", "validation") and tag.startswith("epoch_"):
                    name = ("val_" if sub == "validation" else "") + tag[len("epoch_") :]
                elif sub in (".", "train"):
                    name = tag
                else:
                    name = f"{sub}/{tag}"
                series.setdefault(name, []).append((int(event.step), v))
    return {
        k: (np.array([s for s, _ in sorted(v)]), np.array([x for _, x in sorted(v)]))
        for k, v in series.items()
    }


def _curves(source):
    """{name: (x, y)} and the x label from a History, dict, JSON file or log dir."""
    import keras

    if isinstance(source, keras.callbacks.History):
        source = source.history
    if isinstance(source, (str, os.PathLike)):
        path = os.fspath(source)
        if os.path.isfile(path) and path.endswith(".json"):
            with open(path) as f:
                source = json.load(f)
        elif os.path.isdir(path):
            return read_tensorboard_scalars(path), "step"
        else:
            raise FileNotFoundError(
                f"`history_or_logdir` {path!r} is neither a TensorBoard log directory nor a History .json file."
            )
    if not isinstance(source, dict):
        raise ValueError(
            "`history_or_logdir` must be a keras.callbacks.History, a dict {name: values}, a History .json file or a "
            f"TensorBoard log directory; received {type(source).__name__}."
        )
    curves = {}
    for name, values in source.items():
        if isinstance(values, dict):  # {"step": [...], "value": [...]}
            if set(values) != {"step", "value"}:
                raise ValueError(
                    f"Curve {name!r} must be a list of values or a dict with 'step' and 'value'."
                )
            x = np.asarray(values["step"], dtype=np.float64).reshape(-1)
            y = np.asarray(values["value"], dtype=np.float64).reshape(-1)
            if x.shape != y.shape:
                raise ValueError(f"Curve {name!r} has {x.size} steps but {y.size} values.")
        else:
            y = np.asarray(values, dtype=np.float64).reshape(-1)
            x = np.arange(1, len(y) + 1)
        curves[name] = (x, y)
    return curves, "epoch"


def plot_training_curves(
    history_or_logdir: Any,
    path: str | os.PathLike = "training_curves.png",
    keys: Sequence[str] | None = None,
    log_scale: bool | None = None,
    xlabel: str | None = None,
) -> str:
    """Training curves, one panel per metric (a metric and its `val_` twin share a panel).

    Args:
        history_or_logdir: a `keras.callbacks.History`, a dict {name: list of
            values (one per epoch/step) or {"step": [...], "value": [...]}},
            a path to such a JSON file, or a TensorBoard log dir.
        path: output PNG path.
        keys: metrics to draw (default: all; e.g. ["loss", "grad_norm"]).
        log_scale: log y-axis (default: for names containing "loss" or "norm"
            when all values are positive and span more than a factor 10).
        xlabel: x-axis label (default "epoch", or "step" for a log dir).

    Raises:
        ValueError: unknown `keys`, nothing to plot.
        FileNotFoundError: missing log directory / JSON file / event files.
    """
    curves, default_xlabel = _curves(history_or_logdir)
    xlabel = xlabel or default_xlabel
    if not curves:
        raise ValueError("`history_or_logdir` holds no curve to plot.")
    if keys is not None:
        keys = [keys] if isinstance(keys, str) else list(keys)
        unknown = [k for k in keys if k not in curves and f"val_{k}" not in curves]
        if unknown:
            raise ValueError(f"Unknown curve key(s) {unknown} in `keys`; available: {sorted(curves)}.")
        curves = {k: v for k, v in curves.items() if k in keys or (k.startswith("val_") and k[4:] in keys)}
    panels = []
    for name in curves:
        base = name[4:] if name.startswith("val_") and name[4:] in curves else name
        if base not in panels:
            panels.append(base)
    cols = min(3, len(panels))
    rows = math.ceil(len(panels) / cols)
    fig = new_figure((5 * cols, 3.4 * rows))
    axes = fig.subplots(rows, cols, squeeze=False)
    for i in range(rows * cols):
        ax = axes[i // cols][i % cols]
        if i >= len(panels):
            ax.axis("off")
            continue
        base = panels[i]
        positive, low, high = True, np.inf, -np.inf
        for name, label in (
            (base, "train" if f"val_{base}" in curves else base),
            (f"val_{base}", "validation"),
        ):
            if name not in curves:
                continue
            x, y = curves[name]
            ax.plot(x, y, marker="o" if len(x) < 30 else None, markersize=3, label=label)
            finite = y[np.isfinite(y)]
            positive = positive and bool(np.all(finite > 0))
            if finite.size:
                low, high = min(low, finite.min()), max(high, finite.max())
        wide = positive and np.isfinite(low) and high > 10 * low
        use_log = log_scale if log_scale is not None else (wide and ("loss" in base or "norm" in base))
        if use_log:
            ax.set_yscale("log")
        ax.set_title(base, fontsize=9)
        ax.set_xlabel(xlabel)
        ax.grid(alpha=0.3)
        ax.legend(fontsize=7)
    return save_png(fig, path)
