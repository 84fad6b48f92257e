"""The `keras-tfm` command line.

    keras-tfm train gpt --data input.txt --output runs/gpt --export shakespeare
    keras-tfm train bert --data sst2/ --output runs/bert
    keras-tfm train seq2seq --data spa-eng/spa.txt --output runs/mt
    keras-tfm export --model runs/mt --name translator        # tokenizers picked up beside the model
    keras-tfm generate --model saved_models/translator --prompt "I see."
    keras-tfm evaluate --model runs/gpt --data input.txt
    keras-tfm train gpt --help

Bad values (a missing `--output` parent, an `--output` that already holds a
model, a `--model` folder without its tokenizer, ...) end with one line naming
the flag on stderr and exit status 2. TensorFlow's start-up lines are hidden
(`keras_tfm_console`; `TF_CPP_MIN_LOG_LEVEL=0` shows them) and `--version`
does not import TensorFlow.

Adding a subcommand: write a function that takes the `subparsers` object,
adds its parser and sets `func` (called with the parsed args; its return
value is the exit status), and decorate it with `@subcommand`:

    @subcommand
    def _export(subparsers):
        p = subparsers.add_parser("export", help="...")
        p.add_argument(...)
        p.set_defaults(func=run_export)

Subcommands in other modules register the same way, or define functions
named `add_<name>_subcommand(subparsers)`: every such function of a module
listed in `SUBCOMMAND_MODULES` is registered when the parser is built
(`keras_tfm.export.cli`: export, generate; `keras_tfm.analysis.plotting`: plot;
`keras_tfm.pretrained_cli`: finetune, embed).
A handler may raise `keras_tfm.recipes.UsageError(flag, message)`: it is
printed as one line and the command exits with status 2.
"""

import argparse
import importlib
import json
import sys

_REGISTRY = []

#: Modules imported by `build_parser`: their `@subcommand` functions and their
#: `add_*_subcommand(subparsers)` functions are registered (missing modules are skipped).
SUBCOMMAND_MODULES = ("keras_tfm.export.cli", "keras_tfm.analysis.plotting", "keras_tfm.pretrained_cli")


def subcommand(register):
    """Decorator: `register(subparsers)` adds one subcommand (see the module docstring)."""
    if register not in _REGISTRY:
        _REGISTRY.append(register)
    return register


def _exit_status(results):
    return 0 if results is not None else 1


@subcommand
def _train(subparsers):
    from keras_tfm import recipes

    parser = subparsers.add_parser(
        "train",
        help="train a model with a ready-made recipe",
        description="Train a model with one of the recipes of keras_tfm.recipes (the examples run the same code). "
        "With --output DIR the model, its tokenizer(s) and training.json are saved; --export NAME also writes a "
        "TF Serving SavedModel.",
    )
    tasks = parser.add_subparsers(dest="task", metavar="{" + ",".join(recipes.TASKS) + "}", required=True)
    for name, recipe in recipes.TASKS.items():
        task = tasks.add_parser(name, help=recipe.help, description=recipe.help)
        recipe.add_arguments(task)
        # Logical CPU devices (--cpu-devices) must be configured before the devices start.
        task.set_defaults(func=lambda args, run=recipe.run: _exit_status(run(args)), start_devices=False)


@subcommand
def _evaluate(subparsers):
    from keras_tfm import recipes

    kinds = "; ".join(f"{name}: {recipe.metric_help}" for name, recipe in recipes.TASKS.items())
    parser = subparsers.add_parser(
        "evaluate",
        help="score a trained model (train --output DIR) on a data file",
        description=f"Reports the recipe's metric of a trained model on a file ({kinds}).",
    )
    parser.add_argument(
        "--model", required=True, help="a folder written by `keras-tfm train ... --output DIR`"
    )
    parser.add_argument("--data", required=True, help="the file to score, in the recipe's format")
    parser.add_argument("--json", action="store_true", help="print the metrics as one JSON line")
    parser.set_defaults(func=run_evaluate)


def run_evaluate(args):
    from keras_tfm import recipes
    from keras_tfm.recipes import output

    trained = output.load_trained(args.model)
    if trained.task not in recipes.TASKS:
        raise recipes.UsageError(
            "--model",
            f"no training.json naming the recipe ({', '.join(recipes.TASKS)}) in {trained.folder!r}",
        )
    metrics = recipes.TASKS[trained.task].evaluate(trained, args)
    if args.json:
        print(json.dumps({"task": trained.task, **metrics}))
    else:
        for name, value in metrics.items():
            print(f"{name}: {value:.4f}" if isinstance(value, float) else f"{name}: {value}")
    return 0


def _import_subcommand_modules():
    for name in SUBCOMMAND_MODULES:
        try:
            module = importlib.import_module(name)
        except ModuleNotFoundError as e:
            if not name.startswith(str(e.name)):
                raise
            continue
        for attr in sorted(vars(module)):
            if attr.startswith("add_") and attr.endswith("_subcommand") and callable(getattr(module, attr)):
                subcommand(getattr(module, attr))


def _version():
    from keras_tfm import __version__

    return __version__


def build_parser():
    """The `keras-tfm` argument parser with every registered subcommand."""
    _import_subcommand_modules()
    parser = argparse.ArgumentParser(
        prog="keras-tfm",
        description="Transformers for Keras 3 / TensorFlow: training recipes and tools.",
    )
    parser.add_argument("--version", action="version", version=f"%(prog)s {_version()}")
    subparsers = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    for register in _REGISTRY:
        register(subparsers)
    return parser


def main(argv=None):
    """Runs `keras-tfm ARGS`; returns the exit status. (The console script is `keras_tfm_console.main`,
    which quiets TensorFlow's start-up before `keras_tfm` is imported and answers `--version` alone.)"""
    import keras_tfm_console as console

    argv = sys.argv[1:] if argv is None else list(argv)
    console.set_log_levels()
    with console.quiet_native_logs():  # subcommand modules may import TensorFlow
        parser = build_parser()
    args = parser.parse_args(argv)
    console.quiet_tensorflow(start_devices=getattr(args, "start_devices", True))
    from keras_tfm.recipes import UsageError, report_usage_error

    try:
        status = args.func(args)
    except UsageError as error:
        command = " ".join(str(p) for p in (parser.prog, args.command, getattr(args, "task", None)) if p)
        return report_usage_error(command, error)
    return int(status or 0)


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
