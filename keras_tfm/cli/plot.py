"""`keras-tfm plot {attention,pe,similarity,lr,curves}`: the pictures of `keras_tfm.analysis.plotting`."""

import os

from keras_tfm.checks import parse_int_list
from keras_tfm.cli import usage
from keras_tfm.cli.options import non_negative_int, positive_float, positive_int

#: Argument names of the plotting and schedule functions that a plot flag sets under another name.
ALIASES = {"scale": "--lr-scale", "total_steps": "--steps", "initial_learning_rate": "--learning-rate"}


def unit_interval(text):
    """A number in [0, 1] (the floor of a schedule, as a share of the peak)."""
    import argparse

    try:
        value = float(text)
    except ValueError:
        value = float("nan")
    if not 0.0 <= value <= 1.0:
        raise argparse.ArgumentTypeError(f"must be a number in [0, 1]; received {text!r}")
    return value


def _load_schedule(args):
    from keras_tfm.schedules import TransformerSchedule, WarmupStableDecay, nanogpt_schedule

    if args.schedule == "transformer":
        return TransformerSchedule(args.d_model, warmup_steps=args.warmup_steps, scale=args.lr_scale)
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
    raise usage.UsageError(
        "--schedule", f"expected 'transformer', 'nanogpt' or 'wsd'; received {args.schedule!r}"
    )


def _attention(args):
    import keras
    import numpy as np

    import keras_tfm.models  # noqa: F401  (registers the builders' layers)
    from keras_tfm.analysis.plotting import plot_attention_heads
    from keras_tfm.recipes.output import check_keras_file

    if not os.path.isfile(args.model):
        raise usage.UsageError("--model", f"{args.model!r} does not exist")
    check_keras_file("model", args.model)
    try:
        model = keras.saving.load_model(args.model, compile=False)
    except (OSError, ValueError, EOFError) as error:
        check_keras_file("model", args.model, deep=True)
        message = str(error).strip().splitlines()[0] if str(error).strip() else type(error).__name__
        raise usage.UsageError("--model", f"cannot load {args.model!r}: {message}") from None
    tokens = None
    if args.ids is not None:
        ids = parse_int_list("ids", args.ids)
    elif args.text is not None:
        if args.tokenizer is None:
            raise usage.UsageError("--text", "needs --tokenizer (a tokenizer vocabulary file); or give --ids")
        from keras_tfm.tokenizers import load_tokenizer

        try:
            tokenizer = load_tokenizer(args.tokenizer)
        except (OSError, ValueError) as error:
            raise usage.UsageError("--tokenizer", str(error).strip().splitlines()[0]) from None
        ids = [int(i) for i in np.asarray(tokenizer.tokenize(args.text)).reshape(-1)]
        tokens = [tokenizer.id_to_token(i) for i in ids]
    else:
        raise usage.UsageError(None, "`keras-tfm plot attention` needs --ids or --text")
    if not ids:
        raise usage.UsageError("--ids", "gave no token")
    flag = "--ids" if args.ids is not None else "--text"
    vocabulary_size = getattr(model, "vocabulary_size", None)
    if vocabulary_size is not None and not all(0 <= i < vocabulary_size for i in ids):
        raise usage.UsageError(
            flag, f"token ids must be in [0, {vocabulary_size}) (the model's vocabulary); received {ids}"
        )
    max_length = getattr(model, "max_length", None)
    if max_length is not None and len(ids) > max_length:
        raise usage.UsageError(flag, f"{len(ids)} tokens; the model takes at most {max_length}")
    x = np.asarray([ids], dtype="int32")
    inputs = x
    if isinstance(model.input, dict):  # e.g. BERT: token ids, zero segments, full padding mask
        inputs = {}
        for k in model.input:
            inputs[k] = x if "token" in k else (np.zeros_like(x) if "segment" in k else np.ones_like(x))
    return plot_attention_heads(
        model, inputs, args.layer, tokens=tokens or [str(i) for i in ids], path=args.output
    )


def run_plot(args):
    """Draws the requested picture and prints its path. Returns 0.

    A bad value is one line naming the flag (exit status 2): the checks of the plotting functions and of
    the schedules name their arguments, spelled here as the flags (`ALIASES`). Missing parent folders of
    `--output` are created."""
    if os.path.isdir(args.output):
        raise usage.UsageError("--output", f"{args.output!r} is a folder; expected a .png file name")
    from keras_tfm.recipes.output import check_folder_target

    # Missing parent folders are created when the picture is saved; refused here: a parent that is a file
    # or that cannot be written, before the (slow) model load.
    check_folder_target("output", os.path.dirname(os.path.abspath(args.output)))
    from keras_tfm.atomic_files import write_guard

    try:
        with write_guard(args.output):  # a full disk: one line naming --output and its filesystem
            return _draw(args)
    except usage.UsageError:
        raise
    except (ValueError, TypeError, OSError) as error:
        named = usage.from_error(error, {**args._flags, **ALIASES})
        if named is None and isinstance(error, OSError) and not isinstance(error, FileNotFoundError):
            raise
        message = str(error).strip().splitlines()[0] if str(error).strip() else type(error).__name__
        raise (named or usage.UsageError(None, message)) from None


def _draw(args):
    from keras_tfm.analysis import plotting

    what = args.picture
    if what == "pe":
        out = plotting.plot_positional_encoding(args.length, args.d_model, args.output)
    elif what == "similarity":
        out = plotting.plot_position_similarity(args.length, args.d_model, args.output)
    elif what == "lr":
        out = plotting.plot_lr_schedule(_load_schedule(args), args.steps, args.output)
    elif what == "curves":
        out = plotting.plot_training_curves(args.history_or_logdir, args.output, keys=args.keys)
    else:
        out = _attention(args)
    print(out)
    return 0


def register(subparsers):
    """`keras-tfm plot {attention,pe,similarity,lr,curves}`."""
    plot = subparsers.add_parser(
        "plot", help="draw lecture pictures (PNG): attention, PE, LR schedule, curves"
    )
    kinds = plot.add_subparsers(dest="picture", metavar="{attention,pe,similarity,lr,curves}", required=True)
    parsers = []

    p = kinds.add_parser("attention", help="attention heatmaps of every head of one layer of a .keras model")
    p.add_argument("--model", required=True, help="saved .keras model built from TransformerBlocks")
    p.add_argument("--layer", default="0", help="block name (e.g. decoder_block_1) or index (default: 0)")
    p.add_argument("--ids", help="token ids, comma- or space-separated")
    p.add_argument("--text", help="text to tokenize with --tokenizer")
    p.add_argument("--tokenizer", help="tokenizer vocabulary file (keras_tfm.tokenizers.load_tokenizer)")
    p.add_argument("--output", default="attention.png", help="output PNG (default: %(default)s)")
    parsers.append(p)

    for name, help_text in (
        ("pe", "sinusoidal positional encoding heatmap"),
        ("similarity", "position similarity PE·PEᵀ (normalised)"),
    ):
        p = kinds.add_parser(name, help=help_text)
        p.add_argument("--length", type=int, default=128, help="number of positions (default: %(default)s)")
        p.add_argument("--d-model", type=int, default=128, help="encoding width (default: %(default)s)")
        p.add_argument("--output", default=f"{name}.png", help="output PNG (default: %(default)s)")
        parsers.append(p)

    p = kinds.add_parser("lr", help="learning-rate schedule curve")
    p.add_argument("--schedule", choices=["transformer", "nanogpt", "wsd"], default="transformer")
    p.add_argument("--steps", type=positive_int, default=20000, help="steps to draw (default: %(default)s)")
    p.add_argument("--d-model", type=int, default=512, help="transformer: d_model (default: %(default)s)")
    p.add_argument(
        "--warmup-steps", type=non_negative_int, default=4000, help="warmup steps (default: %(default)s)"
    )
    p.add_argument(
        "--lr-scale", type=positive_float, default=1.0, help="transformer: scale (default: %(default)s)"
    )
    p.add_argument(
        "--learning-rate", type=positive_float, default=6e-4, help="nanogpt/wsd: peak learning rate"
    )
    p.add_argument(
        "--decay-steps",
        type=positive_int,
        default=None,
        help="nanogpt: step of the floor (--steps); wsd: length of the final decay (20%% of --steps)",
    )
    p.add_argument(
        "--min-ratio",
        type=unit_interval,
        default=0.1,
        help="nanogpt/wsd: floor as a share of the peak, in [0, 1] (default: %(default)s)",
    )
    p.add_argument("--output", default="lr.png", help="output PNG (default: %(default)s)")
    parsers.append(p)

    p = kinds.add_parser("curves", help="training curves from a TensorBoard log dir or a History JSON file")
    p.add_argument(
        "history_or_logdir", metavar="SOURCE", help="TensorBoard log directory or History .json file"
    )
    p.add_argument("--keys", nargs="+", default=None, help="metrics to draw (default: all)")
    p.add_argument("--output", default="curves.png", help="output PNG (default: %(default)s)")
    parsers.append(p)

    for p in parsers:
        usage.set_handler(p, run_plot)
    return plot
