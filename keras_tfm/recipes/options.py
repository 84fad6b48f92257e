"""The options every training recipe takes, defined once: `TrainingOptions`.

Each recipe extends it (`GPTOptions`, `BertOptions`, `Seq2SeqOptions`) with its own options and its
defaults for the model size and the step counts. Values are checked where they are stored
(`__post_init__`): a bad one raises a ValueError or TypeError naming the option, which `keras-tfm`
reports as its flag (`max_length` ↔ `--max-length`). Nothing here imports TensorFlow.
"""

import dataclasses

from keras_tfm.checks import (
    check_bool,
    check_choice,
    check_float,
    check_non_negative_int,
    check_positive_int,
    check_rate,
    check_seed,
)

STRATEGIES = ("default", "mirrored", "multi_worker")
PRECISIONS = ("float32", "mixed_float16", "mixed_bfloat16")
BUDGET_CLOCKS = ("wall", "process")
VERBOSITIES = (0, 1, 2)


@dataclasses.dataclass(kw_only=True)
class TrainingOptions:
    """Options shared by every training recipe (keyword-only; a recipe's class sets the sizes).

    Attributes:
        num_layers, num_heads, d_model: the model's size (builder arguments).
        d_ff: feed-forward width; None = 4 × d_model.
        dropout: dropout rate in [0, 1).
        steps: optimizer steps of the run.
        time_budget: stop training after this many seconds (each stage), even before `steps`; None = no
            limit. `steps` still sets the learning-rate schedule.
        budget_clock: what `time_budget` counts: "wall" time, or this "process"'s CPU seconds.
        batch_size: global batch size.
        eval_interval: steps between evaluations (the Keras epoch length).
        seed: random seed (data order, initialisation, dropout).
        strategy: tf.distribute strategy: "default", "mirrored" or "multi_worker" (reads TF_CONFIG).
        cpu_devices: split the CPU into this many logical devices (0 or 1: no split).
        precision: Keras dtype policy: "float32", "mixed_float16" (with loss scaling) or "mixed_bfloat16".
        jit_compile: XLA-compile the train step; None = the recipe's choice.
        steps_per_execution: batches per compiled call.
        grad_accum: gradient accumulation steps (one optimizer update every `grad_accum` batches).
        log_dir: TensorBoard log folder.
        backup_dir: BackupAndRestore folder: a rerun resumes after a crash.
        save_freq: back up every this many steps; None = at every evaluation.
        verbose: Keras fit verbosity (0, 1 or 2); None = 1 on a terminal, else 2.
        output: write the trained model, its tokenizer(s) and training.json into this new folder
            (atomically: nothing is left behind when the run fails).
        overwrite: replace an `output` folder that already holds a model.
        export: also export a TF Serving SavedModel named this: `export_dir/export/VERSION`.
        export_dir: base folder of `export`; None = `output/saved_models` with `output`, else saved_models.
        results: write the results as JSON to this file.
    """

    num_layers: int
    num_heads: int
    d_model: int
    d_ff: int | None = None
    dropout: float = 0.0
    steps: int | None
    time_budget: float | None = None
    budget_clock: str = "wall"
    batch_size: int
    eval_interval: int
    seed: int = 1337
    strategy: str = "default"
    cpu_devices: int = 0
    precision: str = "float32"
    jit_compile: bool | None = None
    steps_per_execution: int = 1
    grad_accum: int = 1
    log_dir: str | None = None
    backup_dir: str | None = None
    save_freq: int | None = None
    verbose: int | None = None
    output: str | None = None
    overwrite: bool = False
    export: str | None = None
    export_dir: str | None = None
    results: str | None = None

    def __post_init__(self):
        for name in ("num_layers", "num_heads", "d_model", "batch_size", "eval_interval"):
            check_positive_int(name, getattr(self, name))
        for name in ("d_ff", "steps", "save_freq"):
            check_positive_int(name, getattr(self, name), allow_none=True)
        for name in ("steps_per_execution", "grad_accum"):
            check_positive_int(name, getattr(self, name))
        check_rate("dropout", self.dropout)
        check_float("time_budget", self.time_budget, low=0.0, low_open=True, allow_none=True)
        check_choice("budget_clock", self.budget_clock, BUDGET_CLOCKS)
        check_seed("seed", self.seed)
        check_choice("strategy", self.strategy, STRATEGIES)
        check_non_negative_int("cpu_devices", self.cpu_devices)
        check_choice("precision", self.precision, PRECISIONS)
        if self.jit_compile is not None:
            check_bool("jit_compile", self.jit_compile)
        check_bool("overwrite", self.overwrite)
        if self.verbose is not None and self.verbose not in VERBOSITIES:
            raise ValueError(f"`verbose` must be 0, 1, 2 or None; received {self.verbose!r}.")
        check_export_name(self.export)

    def model_sizes(self):
        """The builder keyword arguments of the model's size."""
        return {
            name: getattr(self, name) for name in ("num_layers", "num_heads", "d_model", "d_ff", "dropout")
        }


def check_export_name(export):
    """`export` (a SavedModel's name) is None or a plain folder name."""
    if export is not None and (
        not isinstance(export, str) or export in ("", ".", "..") or "/" in export or "\\" in export
    ):
        raise ValueError(f"`export` must be a plain folder name (the model's name); received {export!r}.")
    return export


def check_data_source(options):
    """`data` and `manual_dir` (a TFDS manual download) are alternatives: at most one is given."""
    if options.data is not None and options.manual_dir is not None:
        raise ValueError(
            f"`data` ({options.data!r}) and `manual_dir` ({options.manual_dir!r}) are alternatives; give one."
        )


def first_line(error):
    """The first line of an exception's message (TensorFlow's errors run over many lines)."""
    return str(error).strip().splitlines()[0] if str(error).strip() else type(error).__name__


def argument_error(argument, error):
    """A ValueError naming `argument` with the first line of `error` (a loader's error about its file)."""
    return ValueError(f"`{argument}`: {first_line(error)}")
