"""Flags of `keras-tfm`, each defined once: the argparse types, the flags every training recipe shares,
and `add_options`, which turns a recipe's options dataclass into flags.

A recipe's options dataclass (`keras_tfm.recipes.GPTOptions`, ...) holds the defaults; this module holds
how the command line spells and explains each option: `Flag(group, help, type=...)` per field name.
`add_options` adds one flag per field, `--max-length` for `max_length`, with the field's default (a field
without one is a required flag), and refuses a field without a `Flag`. `options_from(args, options_class)` gives the keyword arguments back.
"""

import argparse
import dataclasses
import math

from keras_tfm.cli.usage import flag

# --------------------------------------------------------------------------- #
# argparse types: `add_argument("--max-length", type=positive_int)` makes argparse report
# "argument --max-length: must be a positive int; received '0'" (exit status 2).
# --------------------------------------------------------------------------- #


def _convert(convert, text, what):
    try:
        return convert(text)
    except (TypeError, ValueError):
        raise argparse.ArgumentTypeError(f"must be {what}; received {text!r}") from None


def positive_int(text):
    value = _convert(int, text, "a positive int")
    if value <= 0:
        raise argparse.ArgumentTypeError(f"must be a positive int; received {text!r}")
    return value


def non_negative_int(text):
    value = _convert(int, text, "an int >= 0")
    if value < 0:
        raise argparse.ArgumentTypeError(f"must be an int >= 0; received {text!r}")
    return value


def positive_float(text):
    value = _convert(float, text, "a finite number > 0")
    if not (math.isfinite(value) and value > 0):
        raise argparse.ArgumentTypeError(f"must be a finite number > 0; received {text!r}")
    return value


def non_negative_float(text):
    value = _convert(float, text, "a finite number >= 0")
    if not (math.isfinite(value) and value >= 0):
        raise argparse.ArgumentTypeError(f"must be a finite number >= 0; received {text!r}")
    return value


def rate(text):
    value = _convert(float, text, "a number in [0, 1)")
    if not 0.0 <= value < 1.0:
        raise argparse.ArgumentTypeError(f"must be a number in [0, 1); received {text!r}")
    return value


def seed(text):
    """A random seed: an int in [0, `keras_tfm.checks.SEED_MAX`]."""
    from keras_tfm.checks import SEED_MAX

    value = _convert(int, text, f"a seed in [0, {SEED_MAX}]")
    if not 0 <= value <= SEED_MAX:
        raise argparse.ArgumentTypeError(f"must be a seed in [0, {SEED_MAX}]; received {text!r}")
    return value


def comma_list(text):
    """ "neg,pos" → ["neg", "pos"]."""
    items = [item.strip() for item in text.split(",")]
    if not all(items):
        raise argparse.ArgumentTypeError(f"must be comma-separated names; received {text!r}")
    return items


# --------------------------------------------------------------------------- #
# Flags.
# --------------------------------------------------------------------------- #

#: The help sections of a recipe's flags, in this order.
GROUPS = ("data", "model", "optimizer", "stages", "evaluation", "training", "output")


@dataclasses.dataclass(frozen=True)
class Flag:
    """How the command line spells and explains one option.

    Attributes:
        group: the help section (`GROUPS`).
        help: one line; "(default: ...)" is added unless `show_default` is False or the default is None.
        type: the argparse type (None: a string).
        choices: the allowed values.
        metavar: the value's name in the help.
        action: "store_true" or argparse.BooleanOptionalAction for a bool.
        show_default: add "(default: ...)" to the help.
    """

    group: str
    help: str = ""
    type: object = None
    choices: tuple | None = None
    metavar: str | None = None
    action: object = None
    show_default: bool = True


#: The flags of `keras_tfm.recipes.TrainingOptions`, shared by every training recipe.
TRAINING_FLAGS = {
    "num_layers": Flag("model", "blocks", positive_int),
    "num_heads": Flag("model", "attention heads", positive_int),
    "d_model": Flag("model", "model width", positive_int),
    "d_ff": Flag("model", "feed-forward width (none: 4 x --d-model)", positive_int),
    "dropout": Flag("model", "", rate),
    "steps": Flag("training", "optimizer steps of the run", positive_int),
    "time_budget": Flag(
        "training",
        "stop training after this much time (each training stage), even before --steps; "
        "compare set-ups at equal wall time",
        positive_float,
        metavar="SECONDS",
    ),
    "budget_clock": Flag(
        "training",
        "what --time-budget counts: wall time, or this process's CPU seconds (fair on a shared machine "
        "when each run is pinned to its own core)",
        choices=("wall", "process"),
    ),
    "batch_size": Flag("training", "global batch size", positive_int),
    "eval_interval": Flag("training", "steps between evaluations = Keras epoch length", positive_int),
    "learning_rate": Flag("optimizer", "peak learning rate", positive_float),
    "seed": Flag("training", "random seed, 0 to 2**31 - 1", seed),
    "strategy": Flag(
        "training",
        "tf.distribute strategy; multi_worker reads TF_CONFIG",
        choices=("default", "mirrored", "multi_worker"),
    ),
    "cpu_devices": Flag(
        "training",
        "split the CPU into this many logical devices (to try --strategy mirrored on a CPU-only machine)",
        non_negative_int,
    ),
    "precision": Flag(
        "training",
        "Keras dtype policy; mixed_float16 adds dynamic loss scaling",
        choices=("float32", "mixed_float16", "mixed_bfloat16"),
    ),
    "jit_compile": Flag(
        "training",
        "XLA-compile the train step (default: on for gpt and bert, whose batches have one fixed shape; off "
        "for seq2seq, whose batches are padded to their longest pair; off under --strategy mirrored/multi_worker)",
        action=argparse.BooleanOptionalAction,
        show_default=False,
    ),
    "steps_per_execution": Flag("training", "batches per compiled call", positive_int),
    "grad_accum": Flag(
        "training", "gradient accumulation steps (optimizer update every N batches)", positive_int
    ),
    "log_dir": Flag("training", "TensorBoard log folder"),
    "backup_dir": Flag("training", "BackupAndRestore folder: resume after a crash"),
    "save_freq": Flag("training", "backup every N steps (none: every evaluation)", positive_int),
    "verbose": Flag(
        "training",
        "Keras fit verbosity: 1 = progress bar (the default on a terminal), 2 = one line per evaluation "
        "interval (the default when the output is not a terminal), 0 = silent",
        int,
        choices=(0, 1, 2),
        show_default=False,
    ),
    "output": Flag(
        "output",
        "write the trained model.keras, its tokenizer(s) and training.json into this new folder, its missing "
        "parents created (atomically: nothing is left behind if the run fails)",
        metavar="DIR",
        show_default=False,
    ),
    "overwrite": Flag(
        "output",
        "replace an --output folder that already holds a model",
        action="store_true",
        show_default=False,
    ),
    "export": Flag(
        "output",
        "also export a TF Serving SavedModel (default signatures): EXPORT_DIR/NAME/VERSION",
        metavar="NAME",
        show_default=False,
    ),
    "export_dir": Flag(
        "output",
        "base folder of --export (default: OUTPUT/saved_models with --output, else saved_models)",
        show_default=False,
    ),
    "results": Flag("output", "write the results as JSON here", show_default=False),
}

#: The TFDS alternative to `--data` of the recipes that read a TFDS dataset.
TFDS_FLAGS = {
    "manual_dir": Flag(
        "data", "folder holding the manual download of the TFDS dataset (offline)", show_default=False
    ),
    "tfds_data_dir": Flag("data", "TFDS data_dir (default: ~/tensorflow_datasets)", show_default=False),
}


def _help(spec, field):
    if field.default in (dataclasses.MISSING, None) or not spec.show_default or spec.action == "store_true":
        return spec.help or None
    return f"{spec.help} (default: %(default)s)" if spec.help else "(default: %(default)s)"


def add_options(parser, options_class, flags, only=None):
    """Adds a flag per field of the dataclass `options_class` to `parser`, in the sections of `GROUPS`.

    Args:
        parser: an argparse parser.
        options_class: a dataclass (`keras_tfm.recipes.GPTOptions`, ...): the defaults; a field without
            one is a required flag.
        flags: {field name: `Flag`} for every field (more are ignored).
        only: the names of the fields to add (None: all).

    Returns:
        `parser`.
    """
    fields = [f for f in dataclasses.fields(options_class) if only is None or f.name in only]
    missing = [f.name for f in fields if f.name not in flags]
    if missing:
        raise ValueError(f"`flags` has no Flag for the field(s) {missing} of {options_class.__name__}.")
    groups = {name: parser.add_argument_group(name) for name in GROUPS}
    for field in sorted(fields, key=lambda f: GROUPS.index(flags[f.name].group)):  # the usage line's order
        spec = flags[field.name]
        kwargs = {"help": _help(spec, field)}
        if spec.action is not None:
            kwargs["action"] = spec.action
        else:
            kwargs.update(type=spec.type, choices=spec.choices, metavar=spec.metavar)
        if field.default is dataclasses.MISSING:
            kwargs["required"] = True
        else:
            kwargs["default"] = field.default
        groups[spec.group].add_argument(
            flag(field.name), **{k: v for k, v in kwargs.items() if v is not None}
        )
    return parser


def options_from(args, options_class, only=None):
    """The keyword arguments of `options_class` (its fields, or those in `only`) in the parsed `args`."""
    return {
        f.name: getattr(args, f.name)
        for f in dataclasses.fields(options_class)
        if only is None or f.name in only
    }
