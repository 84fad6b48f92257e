"""README demo: a short character-GPT run on Tiny Shakespeare, a sample, an export, a served sample.

    python examples/demo.py --data ../shared/data/tiny_shakespeare/input.txt
    python examples/demo.py --data input.txt --output runs/demo     # also keep model.keras + tokenizer
    python examples/demo.py                 # TFDS downloads tiny_shakespeare (internet)

It trains nanoGPT's 4-layer CPU model for `--steps` (600 by default: a minute or two on two CPU
cores), prints the validation loss and a 300-character sample, exports the model for TF Serving
(`--export NAME`, default gpt_shakespeare, under `--export-dir`, default saved_models; `--no-export`
skips it) and generates from the reloaded SavedModel with TensorFlow only, as a TF Serving client
would. Same options as `keras-tfm train gpt`.
"""

import sys

import keras_tfm_console

keras_tfm_console.quiet_tensorflow()  # before keras_tfm imports TensorFlow: no start-up lines

from keras_tfm import recipes  # noqa: E402
from keras_tfm.cli import options, train, usage  # noqa: E402


def build_parser():
    """`keras-tfm train gpt`'s flags with a short run's defaults, and --no-export."""
    parser = train.recipe_parser("gpt", prog="demo.py", description=__doc__)
    parser.add_argument("--no-export", action="store_true", help="skip the export step")
    parser.set_defaults(
        steps=600, eval_interval=200, lr_decay_steps=None, sample_tokens=300, export="gpt_shakespeare"
    )
    return usage.set_handler(parser, run_demo, start_devices=False)


def generate_from_export(path, prompt, max_new_tokens, seed=0):
    """Samples from the SavedModel at `path` (a version folder) through its `generate` signature."""
    from keras_tfm.export import client

    out = client.call_signature(
        client.load_served(path),
        "generate",
        prompts=[prompt.encode("utf-8")],
        max_new_tokens=max_new_tokens,
        temperature=0.8,
        top_k=200,
        top_p=1.0,
        seed=seed,
    )
    text = out["completions"][0]
    print("---------- sample from the exported SavedModel ----------")
    print(prompt + text)
    return text


def run_demo(args):
    """Trains with `recipes.train_gpt`, then samples from the exported SavedModel."""
    gpt_options = options.options_from(args, recipes.GPTOptions)
    if args.no_export:
        gpt_options["export"] = None
    results = recipes.train_gpt(**gpt_options)
    if results.get("export_path"):
        prompt = "\n"
        # The served `generate` keeps prompt + new tokens within the model's context.
        generate_from_export(results["export_path"], prompt, min(60, args.max_length - len(prompt)))
    return 0


def main(argv=None):
    return usage.run(build_parser().parse_args(argv))


if __name__ == "__main__":
    sys.exit(main())
