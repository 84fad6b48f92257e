"""Lecture pictures as PNG files (matplotlib, Agg canvas; no pyplot state).

* `plot_attention_heads`: one heatmap per head of one layer for an input.
* `plot_positional_encoding`: the sinusoidal table PE (positions × channels).
* `plot_position_similarity`: cosine similarity PE·PEᵀ / (d/2) of positions.
* `plot_lr_schedule`: a learning-rate schedule over training steps.
* `plot_training_curves`: curves from a `History`, a dict of lists, a
  History JSON file or a TensorBoard log directory.
* `add_plot_subcommand(subparsers)`: registers `keras-tfm plot ...`.

Every function returns the path it wrote. matplotlib is an optional
dependency (`pip install keras-tfm[plot]`).
"""

import glob
import json
import math
import os

import numpy as np

PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"


def _figure(figsize):
    try:
        from matplotlib.backends.backend_agg import FigureCanvasAgg
        from matplotlib.figure import Figure
    except ImportError as e:  # pragma: no cover
        raise ImportError("Plotting needs matplotlib: `pip install keras-tfm[plot]`.") from e
    fig = Figure(figsize=figsize, dpi=100)
    FigureCanvasAgg(fig)
    return fig


def _save(fig, path):
    if path is None or str(path) == "":
        raise ValueError("`path` must be a file path ending in .png; received an empty path.")
    path = os.fspath(path)
    directory = os.path.dirname(path)
    if directory:
        os.makedirs(directory, exist_ok=True)
    fig.savefig(path, format="png", bbox_inches="tight")
    return path


def _check_positive_int(name, value):
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value <= 0:
        raise ValueError(f"`{name}` must be a positive int; received {value!r}.")
    return int(value)


# --------------------------------------------------------------------------- #
# Attention


def resolve_layer(model, layer):
    """The name of the TransformerBlock `layer` (a name or an index into the blocks)."""
    from keras_tfm.inspection import transformer_blocks

    names = [b.name for b in transformer_blocks(model)]
    if not names:
        raise ValueError(f"`model` {model.name!r} has no TransformerBlock layer to plot.")
    if isinstance(layer, (int, np.integer)) and not isinstance(layer, bool):
        if not -len(names) <= layer < len(names):
            raise ValueError(
                f"`layer` index {layer} is out of range: the model has {len(names)} blocks {names}."
            )
        return names[layer]
    if isinstance(layer, str) and layer.lstrip("-").isdigit():
        return resolve_layer(model, int(layer))
    if layer not in names:
        raise ValueError(f"Unknown `layer` {layer!r}; expected an index or one of {names}.")
    return layer


def _label(token):
    """Visible tick label of a token: space → ␣, newline → ↵, other control characters escaped."""
    token = str(token)
    if token == " ":
        return "\u2423"
    if token == "\n":
        return "\u21b5"
    return repr(token)[1:-1]


def plot_attention_weights(weights, path, tokens=None, title=None, query_tokens=None, max_cols=4):
    """Heatmaps of a (H, T, S) attention array, one panel per head."""
    from matplotlib.colors import PowerNorm  # square-root colour scale: small weights stay visible

    w = np.asarray(weights, dtype=np.float32)
    if w.ndim == 2:
        w = w[None]
    if w.ndim != 3:
        raise ValueError(f"`weights` must have shape (heads, query_len, key_len); received {w.shape}.")
    heads, t, s = w.shape
    keys = None if tokens is None else [str(x) for x in tokens]
    queries = keys if query_tokens is None else [str(x) for x in query_tokens]
    for name, labels, n in (("tokens", keys, s), ("query_tokens", queries, t)):
        if labels is not None and len(labels) != n:
            raise ValueError(f"`{name}` has {len(labels)} entries but the attention has length {n}.")
    cols = min(heads, max_cols)
    rows = math.ceil(heads / cols)
    size = max(2.5, min(6.0, 0.25 * max(t, s)))
    fig = _figure((size * cols + 0.8, size * rows + (0.6 if title else 0.2)))
    axes = fig.subplots(rows, cols, squeeze=False)
    image = None
    for h in range(rows * cols):
        ax = axes[h // cols][h % cols]
        if h >= heads:
            ax.axis("off")
            continue
        image = ax.imshow(
            w[h],
            cmap="viridis",
            norm=PowerNorm(gamma=0.5, vmin=0.0, vmax=1.0),
            aspect="auto",
            interpolation="nearest",
        )
        ax.set_title(f"head {h}", fontsize=9)
        ax.set_xlabel("key", fontsize=8)
        ax.set_ylabel("query", fontsize=8)
        if keys is not None and s <= 64:
            ax.set_xticks(range(s))
            ax.set_xticklabels([_label(k) for k in keys], rotation=90, fontsize=6)
        if queries is not None and t <= 64:
            ax.set_yticks(range(t))
            ax.set_yticklabels([_label(q) for q in queries], fontsize=6)
    fig.colorbar(image, ax=axes.ravel().tolist(), shrink=0.8)
    if title:
        fig.suptitle(title)
    return _save(fig, path)


def plot_attention_heads(model, inputs, layer, tokens=None, path="attention.png", example=0, heads=None):
    """Attention heatmaps of every head of one `TransformerBlock` for an input.

    Args:
        model: a functional model built from keras_tfm `TransformerBlock`s.
        inputs: model inputs (batch of at least `example + 1`).
        layer: block name (e.g. "decoder_block_1") or index among the blocks
            (negative allowed).
        tokens: optional labels of the positions (list of str, length T).
        path: output PNG path.
        example: which example of the batch to draw.
        heads: optional list of head indices (default: all).

    Returns:
        `path`.

    Raises:
        ValueError: unknown `layer`, `example` or `heads`, or `tokens` of the wrong length.
    """
    from keras_tfm.inspection import attention_maps

    name = resolve_layer(model, layer)
    weights = attention_maps(model, inputs)[name]
    if (
        isinstance(example, bool)
        or not isinstance(example, (int, np.integer))
        or not 0 <= example < weights.shape[0]
    ):
        raise ValueError(f"`example` must be an index in [0, {weights.shape[0]}); received {example!r}.")
    w = weights[example]
    if heads is not None:
        bad = [h for h in heads if not 0 <= h < w.shape[0]]
        if bad:
            raise ValueError(f"`heads` {bad} out of range: the layer has {w.shape[0]} heads.")
        w = w[list(heads)]
    return plot_attention_weights(w, path, tokens=tokens, title=f"{model.name} · {name} · self-attention")


# --------------------------------------------------------------------------- #
# Positional encoding


def _pe_table(length, d_model, max_wavelength=10000.0):
    from keras_tfm.layers.positional_encoding import sinusoidal_table

    length = _check_positive_int("length", length)
    d_model = _check_positive_int("d_model", d_model)
    return np.asarray(sinusoidal_table(np.arange(length, dtype="float32"), d_model, max_wavelength))


def plot_positional_encoding(length, d_model, path="positional_encoding.png", max_wavelength=10000.0):
    """Heatmap of the sinusoidal encoding PE (positions × channels), plus a few channel curves."""
    table = _pe_table(length, d_model, max_wavelength)
    fig = _figure((10, 6))
    ax, ax2 = fig.subplots(2, 1, gridspec_kw={"height_ratios": [3, 1.4]})
    image = ax.imshow(table, cmap="RdBu", vmin=-1, vmax=1, aspect="auto", interpolation="nearest")
    ax.set_xlabel("channel i (even: sin, odd: cos)")
    ax.set_ylabel("position p")
    ax.set_title(f"Sinusoidal positional encoding (length={length}, d_model={d_model})")
    fig.colorbar(image, ax=ax)
    for i in sorted({0, 2, min(8, d_model - 1), min(d_model // 2, d_model - 1)}):
        ax2.plot(table[:, i], label=f"channel {i}")
    ax2.set_xlabel("position p")
    ax2.legend(fontsize=7, loc="upper right")
    return _save(fig, path)


def position_similarity(length, d_model, max_wavelength=10000.0):
    """Cosine similarity matrix of positions, PE·PEᵀ with unit-norm rows (T, T)."""
    table = _pe_table(length, d_model, max_wavelength).astype(np.float64)
    table /= np.maximum(np.linalg.norm(table, axis=1, keepdims=True), 1e-12)
    return table @ table.T


def plot_position_similarity(length, d_model, path="position_similarity.png", max_wavelength=10000.0):
    """Heatmap of the normalised similarity PE·PEᵀ between positions, and one of its rows."""
    sim = position_similarity(length, d_model, max_wavelength)
    fig = _figure((10, 5))
    ax, ax2 = fig.subplots(1, 2, gridspec_kw={"width_ratios": [1.1, 1]})
    image = ax.imshow(sim, cmap="viridis", vmin=min(0.0, float(sim.min())), vmax=1.0, interpolation="nearest")
    ax.set_xlabel("position q")
    ax.set_ylabel("position p")
    ax.set_title(f"cos(PE_p, PE_q) (d_model={d_model})")
    fig.colorbar(image, ax=ax, shrink=0.8)
    p = length // 2
    ax2.plot(np.arange(length), sim[p])
    ax2.axvline(p, color="grey", linestyle=":")
    ax2.set_xlabel("position q")
    ax2.set_title(f"similarity to position {p}: depends on |p − q| only")
    return _save(fig, path)


# --------------------------------------------------------------------------- #
# Learning rate


def learning_rates(schedule, steps):
    """The learning rate at steps 0..steps-1 (float64 array)."""
    steps = _check_positive_int("steps", steps)
    if isinstance(schedule, (int, float)) and not isinstance(schedule, bool):
        return np.full((steps,), float(schedule))
    if not callable(schedule):
        raise ValueError(
            f"`schedule` must be a LearningRateSchedule, a callable step -> lr, or a number; received {schedule!r}."
        )
    import keras

    try:  # most schedules are elementwise: evaluate all steps at once
        values = schedule(keras.ops.arange(steps, dtype="float32"))
        values = np.asarray(keras.ops.convert_to_numpy(values), dtype=np.float64)
        if values.shape == (steps,):
            return values
    except Exception:  # noqa: BLE001 - scalar-only schedule (e.g. with a cond)
        pass
    import tensorflow as tf

    @tf.function
    def evaluate(all_steps):
        return tf.map_fn(lambda s: tf.cast(schedule(s), tf.float32), all_steps)

    return evaluate(tf.range(steps, dtype=tf.float32)).numpy().astype(np.float64)


def plot_lr_schedule(schedule, steps, path="lr_schedule.png"):
    """The learning rate of `schedule` over `steps` training steps."""
    lr = learning_rates(schedule, steps)
    fig = _figure((8, 4))
    ax = fig.subplots()
    ax.plot(np.arange(len(lr)), lr)
    peak = int(np.argmax(lr))
    ax.plot([peak], [lr[peak]], "o", color="C3")
    ax.annotate(
        f"peak {lr[peak]:.3g} at step {peak}", (peak, lr[peak]), textcoords="offset points", xytext=(8, -12)
    )
    ax.set_xlabel("step")
    ax.set_ylabel("learning rate")
    ax.set_title(type(schedule).__name__ if not isinstance(schedule, (int, float)) else "constant")
    ax.grid(alpha=0.3)
    return _save(fig, path)


# --------------------------------------------------------------------------- #
# Training curves


def read_tensorboard_scalars(log_dir):
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
    history_or_logdir, path="training_curves.png", keys=None, log_scale=None, xlabel=None
):
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
    fig = _figure((5 * cols, 3.4 * rows))
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
    return _save(fig, path)


# --------------------------------------------------------------------------- #
# CLI: `keras-tfm plot ...`


def _parse_ints(text, name):
    try:
        return [int(t) for t in text.replace(",", " ").split()]
    except ValueError:
        raise ValueError(
            f"`{name}` must be integers separated by commas or spaces; received {text!r}."
        ) from None


def _load_schedule(args):
    from keras_tfm.schedules import TransformerSchedule, WarmupStableDecay, nanogpt_schedule

    if args.schedule == "transformer":
        return TransformerSchedule(args.d_model, warmup_steps=args.warmup_steps, scale=args.scale)
    if args.schedule == "nanogpt":
        return nanogpt_schedule(
            args.learning_rate,
            args.decay_steps or args.steps,
            warmup_steps=args.warmup_steps,
            min_ratio=args.min_ratio,
        )
    if args.schedule == "wsd":
        return WarmupStableDecay(
            args.learning_rate,
            args.steps,
            warmup_steps=args.warmup_steps,
            decay_steps=args.decay_steps,
            min_ratio=args.min_ratio,
        )
    raise ValueError(f"Unknown `--schedule` {args.schedule!r}; expected 'transformer', 'nanogpt' or 'wsd'.")


def run_plot(args):
    """Handler of `keras-tfm plot`: draws the requested picture and prints its path. Returns 0."""
    what = args.plot_what
    if what == "pe":
        out = plot_positional_encoding(args.length, args.d_model, args.out)
    elif what == "similarity":
        out = plot_position_similarity(args.length, args.d_model, args.out)
    elif what == "lr":
        out = plot_lr_schedule(_load_schedule(args), args.steps, args.out)
    elif what == "curves":
        out = plot_training_curves(args.source, args.out, keys=args.keys)
    elif what == "attention":
        import keras

        import keras_tfm.models  # noqa: F401  (registers the builders' layers)

        if not os.path.isfile(args.model):
            raise FileNotFoundError(f"`--model` {args.model!r} does not exist.")
        model = keras.saving.load_model(args.model, compile=False)
        tokens = None
        if args.ids is not None:
            ids = _parse_ints(args.ids, "--ids")
        elif args.text is not None:
            if args.vocabulary is None:
                raise ValueError(
                    "`--text` needs `--vocabulary` (a tokenizer vocabulary file); or give `--ids`."
                )
            from keras_tfm.data.tokenizers import load_tokenizer

            tokenizer = load_tokenizer(args.vocabulary)
            ids = [int(i) for i in np.asarray(tokenizer.tokenize(args.text)).reshape(-1)]
            tokens = [tokenizer.id_to_token(i) for i in ids]
        else:
            raise ValueError("`keras-tfm plot attention` needs `--ids` or `--text`.")
        if not ids:
            raise ValueError("`--ids`/`--text` gave no token.")
        x = np.asarray([ids], dtype="int32")
        inputs = x
        if isinstance(model.input, dict):  # e.g. BERT: token ids, zero segments, full padding mask
            inputs = {}
            for k in model.input:
                inputs[k] = x if "token" in k else (np.zeros_like(x) if "segment" in k else np.ones_like(x))
        out = plot_attention_heads(
            model, inputs, args.layer, tokens=tokens or [str(i) for i in ids], path=args.out
        )
    else:  # pragma: no cover (argparse restricts choices)
        raise ValueError(f"Unknown plot {what!r}.")
    print(out)
    return 0


def add_plot_subcommand(subparsers):
    """Registers `plot {attention,pe,similarity,lr,curves}` on an argparse subparsers object.

    The handler is set with `set_defaults(func=run_plot)`: the CLI calls
    `args.func(args)` (returns 0). Returns the `plot` parser.
    """
    plot = subparsers.add_parser(
        "plot", help="Draw lecture pictures (PNG): attention, PE, LR schedule, curves."
    )
    kinds = plot.add_subparsers(dest="plot_what", metavar="{attention,pe,similarity,lr,curves}")
    kinds.required = True

    p = kinds.add_parser("attention", help="Attention heatmaps of every head of one layer of a .keras model.")
    p.add_argument("--model", required=True, help="Saved .keras model built from TransformerBlocks.")
    p.add_argument("--layer", default="0", help="Block name (e.g. decoder_block_1) or index (default 0).")
    p.add_argument("--ids", help="Token ids, comma- or space-separated.")
    p.add_argument("--text", help="Text to tokenize with --vocabulary.")
    p.add_argument("--vocabulary", help="Tokenizer vocabulary file (keras_tfm.data.load_tokenizer).")
    p.add_argument("--out", default="attention.png", help="Output PNG.")

    for name, help_text in (
        ("pe", "Sinusoidal positional encoding heatmap."),
        ("similarity", "Position similarity PE·PEᵀ (normalised)."),
    ):
        p = kinds.add_parser(name, help=help_text)
        p.add_argument("--length", type=int, default=128, help="Number of positions (default 128).")
        p.add_argument(
            "--d-model", dest="d_model", type=int, default=128, help="Encoding width (default 128)."
        )
        p.add_argument("--out", default=f"{name}.png", help="Output PNG.")

    p = kinds.add_parser("lr", help="Learning-rate schedule curve.")
    p.add_argument("--schedule", choices=["transformer", "nanogpt", "wsd"], default="transformer")
    p.add_argument("--steps", type=int, default=20000, help="Steps to draw (default 20000).")
    p.add_argument("--d-model", dest="d_model", type=int, default=512, help="transformer: d_model (512).")
    p.add_argument("--warmup-steps", dest="warmup_steps", type=int, default=4000, help="Warmup steps (4000).")
    p.add_argument("--scale", type=float, default=1.0, help="transformer: scale (1.0).")
    p.add_argument(
        "--learning-rate", dest="learning_rate", type=float, default=6e-4, help="nanogpt/wsd: peak lr."
    )
    p.add_argument(
        "--decay-steps",
        dest="decay_steps",
        type=int,
        default=None,
        help="nanogpt: step of the floor (--steps); wsd: length of the final decay (20%% of --steps).",
    )
    p.add_argument(
        "--min-ratio", dest="min_ratio", type=float, default=0.1, help="nanogpt/wsd: floor ratio (0.1)."
    )
    p.add_argument("--out", default="lr.png", help="Output PNG.")

    p = kinds.add_parser("curves", help="Training curves from a TensorBoard log dir or a History JSON file.")
    p.add_argument("source", help="TensorBoard log directory or History .json file.")
    p.add_argument("--keys", nargs="+", default=None, help="Metrics to draw (default all).")
    p.add_argument("--out", default="curves.png", help="Output PNG.")

    plot.set_defaults(func=run_plot)
    return plot
