"""The command-line options the recipes share, each defined once.

One vocabulary for every recipe: `--data`, `--d-model`, `--num-layers`,
`--num-heads`, `--d-ff`, `--dropout`, `--steps`, `--batch-size`, ...; the
older spellings (`--n-embd`, `--n-layer`, `--n-head`, `--data-dir`) still work
as hidden aliases that print a deprecation note. Nothing here imports
TensorFlow: building the parser stays fast.
"""

import argparse
import sys

from keras_tfm.checks import check_positive_int, positive_float_arg, positive_int_arg, rate_arg


class UsageError(ValueError):
    """A bad command-line value, reported as one line naming `flag`, exit status 2."""

    def __init__(self, flag, message):
        super().__init__(f"{flag}: {message}")
        self.flag = flag


def default_text(help_text):
    return f"{help_text} (default: %(default)s)" if help_text else "(default: %(default)s)"


class _DeprecatedAlias(argparse.Action):
    """Stores into the new option's `dest` and notes the new spelling on stderr."""

    def __init__(self, option_strings, dest, new_flag=None, **kwargs):
        self.new_flag = new_flag
        super().__init__(option_strings, dest, **kwargs)

    def __call__(self, parser, namespace, values, option_string=None):
        print(f"note: {option_string} is deprecated; use {self.new_flag}", file=sys.stderr)
        setattr(namespace, self.dest, values)


def add_alias(parser, old, new_flag, dest, type=None):
    """A hidden, deprecated spelling `old` of option `new_flag` (same `dest`)."""
    parser.add_argument(
        old,
        dest=dest,
        type=type,
        action=_DeprecatedAlias,
        new_flag=new_flag,
        default=argparse.SUPPRESS,
        help=argparse.SUPPRESS,
    )


def add_model_arguments(parser, num_layers, num_heads, d_model, d_ff, dropout, title="model", layers_help=""):
    """`--num-layers --num-heads --d-model --d-ff --dropout`; returns the group (recipes add to it).

    `d_ff=None` means 4 × d_model.
    """
    m = parser.add_argument_group(title)
    m.add_argument("--num-layers", type=positive_int_arg, default=num_layers, help=default_text(layers_help))
    m.add_argument(
        "--num-heads", type=positive_int_arg, default=num_heads, help=default_text("attention heads")
    )
    m.add_argument("--d-model", type=positive_int_arg, default=d_model, help=default_text("model width"))
    m.add_argument(
        "--d-ff",
        type=positive_int_arg,
        default=d_ff,
        help=default_text("feed-forward width" + (", None = 4 x d-model" if d_ff is None else "")),
    )
    m.add_argument("--dropout", type=rate_arg, default=dropout, help=default_text(""))
    return m


def model_sizes(args):
    """The builder keyword arguments of `add_model_arguments`' options."""
    return {name: getattr(args, name) for name in ("num_layers", "num_heads", "d_model", "d_ff", "dropout")}


#: Model layout options: flag → (builder keyword, choices or argument type, help).
LAYOUT_FLAGS = {
    "--position": (
        "position",
        ("learned", "sinusoidal", "rope", "alibi", "relative"),
        "position scheme (learned: GPT-2; rope: Llama)",
    ),
    "--norm": ("norm", ("layer", "rms"), "LayerNorm (GPT-2) or RMSNorm (Llama)"),
    "--activation": (
        "activation",
        ("gelu", "gelu_tanh", "relu", "silu", "swiglu", "geglu"),
        "feed-forward activation; swiglu/geglu are gated (three matrices, Llama: swiglu)",
    ),
    "--kv-heads": (
        "num_key_value_heads",
        positive_int_arg,
        "key/value heads: grouped-query attention, 1 = multi-query (must divide --num-heads)",
    ),
}


def add_layout_arguments(group, defaults):
    """`--position --norm --activation --kv-heads` (`LAYOUT_FLAGS`) in `group`.

    Args:
        defaults: {builder keyword: the recipe's value}, shown in the help;
            a flag that is not given stays None, so a `--preset` keeps its own.
    """
    for flag_name, (keyword, kind, help_text) in LAYOUT_FLAGS.items():
        typed = {"type": kind} if callable(kind) else {"choices": kind}
        default = defaults.get(keyword, "--num-heads" if keyword == "num_key_value_heads" else None)
        shown = f"{help_text} (default: the preset's, else {default})"
        metavar = "N" if callable(kind) else None
        group.add_argument(flag_name, dest=keyword, default=None, metavar=metavar, help=shown, **typed)


def layout_options(args, defaults):
    """Builder keywords of the layout flags: the given ones, and `defaults` for
    the others when no `--preset` is given (a preset keeps its own layout)."""
    given = {keyword: getattr(args, keyword) for keyword, _, _ in LAYOUT_FLAGS.values()}
    given = {k: v for k, v in given.items() if v is not None}
    kv_heads, heads = given.get("num_key_value_heads"), getattr(args, "num_heads", None)
    if kv_heads is not None and heads is not None and heads % kv_heads:
        raise UsageError("--kv-heads", f"must divide --num-heads ({heads}); received {kv_heads}")
    if getattr(args, "preset", None) is None:
        given = {**defaults, **given}
    return given


def add_training_arguments(
    parser, steps, batch_size, steps_per_epoch, learning_rate=None, steps_per_execution=1, steps_help=None
):
    """Options common to every recipe (step counts, distribution, precision, logs, backups)."""
    g = parser.add_argument_group("training")
    g.add_argument(
        "--steps",
        type=positive_int_arg,
        default=steps,
        help=default_text(steps_help or "optimizer steps of the run"),
    )
    g.add_argument(
        "--time-budget",
        type=positive_float_arg,
        default=None,
        metavar="SECONDS",
        help="stop training after this much time (each training stage), even before --steps; "
        "compare set-ups at equal wall time (default: none)",
    )
    g.add_argument(
        "--budget-clock",
        choices=("wall", "process"),
        default="wall",
        help=default_text(
            "what --time-budget counts: wall time, or this process's CPU seconds (fair on a shared machine "
            "when each run is pinned to its own core)"
        ),
    )
    g.add_argument(
        "--batch-size", type=positive_int_arg, default=batch_size, help=default_text("global batch size")
    )
    g.add_argument(
        "--eval-interval",
        type=positive_int_arg,
        default=steps_per_epoch,
        help=default_text("steps between evaluations = Keras epoch length"),
    )
    if learning_rate is not None:
        g.add_argument(
            "--learning-rate",
            type=positive_float_arg,
            default=learning_rate,
            help=default_text("peak learning rate"),
        )
    g.add_argument("--seed", type=int, default=1337, help=default_text("random seed"))
    g.add_argument(
        "--strategy",
        choices=("default", "mirrored", "multi_worker"),
        default="default",
        help=default_text("tf.distribute strategy; multi_worker reads TF_CONFIG"),
    )
    g.add_argument(
        "--cpu-devices",
        type=int,
        default=0,
        help="split the CPU into this many logical devices (to try --strategy mirrored on a CPU-only machine)",
    )
    g.add_argument(
        "--precision",
        choices=("float32", "mixed_float16", "mixed_bfloat16"),
        default="float32",
        help=default_text("Keras dtype policy; mixed_float16 adds dynamic loss scaling"),
    )
    # None (not given): gpt and bert pass it on to the compile helpers, whose "auto" turns XLA on
    # except under a strategy; seq2seq turns it into False.
    g.add_argument(
        "--jit-compile",
        action=argparse.BooleanOptionalAction,
        default=None,
        help="XLA-compile the train step (default: on for gpt and bert, whose batches have one fixed shape; "
        "off for seq2seq, whose batches are padded to their longest pair; off under --strategy mirrored/multi_worker)",
    )
    g.add_argument(
        "--steps-per-execution",
        type=positive_int_arg,
        default=steps_per_execution,
        help=default_text("batches per compiled call"),
    )
    g.add_argument(
        "--grad-accum",
        type=positive_int_arg,
        default=1,
        help=default_text("gradient accumulation steps (optimizer update every N batches)"),
    )
    g.add_argument("--log-dir", default=None, help="TensorBoard log folder (default: none)")
    g.add_argument(
        "--backup-dir", default=None, help="BackupAndRestore folder: resume after a crash (default: none)"
    )
    g.add_argument(
        "--save-freq",
        type=positive_int_arg,
        default=None,
        help="backup every N steps (default: every evaluation)",
    )
    g.add_argument(
        "--verbose",
        type=int,
        choices=(0, 1, 2),
        default=None,
        help="Keras fit verbosity: 1 = progress bar (the default on a terminal), 2 = one line per "
        "evaluation interval (the default when the output is not a terminal), 0 = silent",
    )
    return g


def add_output_arguments(parser, results=True):
    """`--output DIR [--overwrite] [--export NAME [--export-dir BASE]]` and `--results FILE`."""
    o = parser.add_argument_group("output")
    o.add_argument(
        "--output",
        default=None,
        metavar="DIR",
        help="write the trained model.keras, its tokenizer(s) and training.json into this new folder "
        "(atomically: nothing is left behind if the run fails)",
    )
    o.add_argument(
        "--overwrite", action="store_true", help="replace an --output folder that already holds a model"
    )
    o.add_argument(
        "--export",
        default=None,
        metavar="NAME",
        help="also export a TF Serving SavedModel with every signature: EXPORT_DIR/NAME/VERSION",
    )
    o.add_argument(
        "--export-dir",
        default=None,
        help="base folder of --export (default: OUTPUT/saved_models with --output, else saved_models)",
    )
    if results:
        o.add_argument("--results", default=None, help="write the results as JSON here")
    return o


POSITIVE_INTS = ("steps", "batch_size", "eval_interval", "steps_per_execution", "grad_accum")


def check_positive_options(args, names=POSITIVE_INTS):
    """Every option in `names` that is set is a positive int, else a UsageError naming its flag."""
    for name in names:
        value = getattr(args, name, None)
        try:
            check_positive_int(flag(name), value, allow_none=True)
        except (TypeError, ValueError) as error:
            raise UsageError(flag(name), f"must be >= 1; received {value}") from error


def add_data_arguments(parser, data_help, required=False, tfds=None):
    """`--data` (+ `--manual-dir`/`--tfds-data-dir` when `tfds` names the TFDS dataset); returns the group."""
    d = parser.add_argument_group("data")
    source = d.add_mutually_exclusive_group(required=required) if tfds else d
    source.add_argument("--data", required=required and not tfds, help=data_help)
    if tfds:
        source.add_argument("--manual-dir", help=f"folder holding the download of TFDS {tfds} (offline)")
        d.add_argument("--tfds-data-dir", default=None, help="TFDS data_dir (default ~/tensorflow_datasets)")
    return d


def flag(dest):
    """The command-line spelling of `dest`."""
    return "--" + dest.replace("_", "-")
