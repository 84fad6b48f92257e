"""`keras-tfm plot {attention,pe,similarity,lr,curves}`: the plotting functions behind a subcommand."""

import os

import numpy as np

from keras_tfm.analysis.plotting.attention import plot_attention_heads
from keras_tfm.analysis.plotting.curves import plot_training_curves
from keras_tfm.analysis.plotting.learning_rate import plot_lr_schedule
from keras_tfm.analysis.plotting.positional import plot_position_similarity, plot_positional_encoding
from keras_tfm.checks import parse_int_list


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
            ids = parse_int_list("--ids", args.ids)
        elif args.text is not None:
            if args.vocabulary is None:
                raise ValueError(
                    "`--text` needs `--vocabulary` (a tokenizer vocabulary file); or give `--ids`."
                )
            from keras_tfm.tokenizers import load_tokenizer

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
    p.add_argument("--vocabulary", help="Tokenizer vocabulary file (keras_tfm.tokenizers.load_tokenizer).")
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
