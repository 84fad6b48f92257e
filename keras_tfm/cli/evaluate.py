"""`keras-tfm evaluate --model DIR --data FILE`: the recipe's metric of a trained model on a file."""

import json

from keras_tfm import recipes
from keras_tfm.cli import usage


def run_evaluate(args):
    """Scores the training output `--model` on `--data` with its recipe's `evaluate`; prints the metrics."""
    trained = recipes.load_trained(args.model)
    if trained.task not in recipes.RECIPES:
        raise usage.UsageError(
            "--model",
            f"no training.json naming the recipe ({', '.join(recipes.RECIPES)}) in {trained.folder!r}",
        )
    metrics = recipes.RECIPES[trained.task].evaluate(trained, args.data)
    if args.json:
        print(json.dumps({"task": trained.task, **metrics}))
    else:
        for name, value in metrics.items():
            print(f"{name}: {value:.4f}" if isinstance(value, float) else f"{name}: {value}")
    return 0


def register(subparsers):
    """`keras-tfm evaluate`."""
    kinds = "; ".join(f"{name}: {recipe.metric_help}" for name, recipe in recipes.RECIPES.items())
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
    return usage.set_handler(parser, run_evaluate)
