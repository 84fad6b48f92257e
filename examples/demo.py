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

import argparse
import sys

import keras_tfm_console

keras_tfm_console.quiet_tensorflow()  # before keras_tfm imports TensorFlow: no start-up lines

from keras_tfm import recipes  # noqa: E402


def parse_args(argv=None):
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    recipes.add_gpt_arguments(parser)
    parser.add_argument("--no-export", action="store_true", help="skip the export step")
    # A short run: override the nanoGPT defaults that `add_gpt_arguments` sets.
    parser.set_defaults(
        steps=600, eval_interval=200, lr_decay_steps=None, sample_tokens=300, export="gpt_shakespeare"
    )
    args = parser.parse_args(argv)
    if args.no_export:
        args.export = None
    return args


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


def main(argv=None):
    args = parse_args(argv)
    try:
        results = recipes.run_gpt(args)
    except recipes.UsageError as error:
        return recipes.report_usage_error("demo.py", error)
    if results.get("export_path"):
        prompt = "\n"
        # The served `generate` keeps prompt + new tokens within the model's context.
        generate_from_export(results["export_path"], prompt, min(60, args.block_size - len(prompt)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
