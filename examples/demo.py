"""README demo: a short character-GPT run on Tiny Shakespeare, a sample, then (when available) export.

    python examples/demo.py --data ../shared/data/tiny_shakespeare/input.txt
    python examples/demo.py                 # TFDS downloads tiny_shakespeare (internet)

It trains nanoGPT's 4-layer CPU model for `--steps` (600 by default: a minute or two on two CPU
cores), prints the validation loss and a 300-character sample, and ends with the export step:
`export_and_generate` (below) saves the model for TF Serving under `saved_models/` with
`keras_tfm.export.export_for_serving` and generates from the reloaded SavedModel. That step is
skipped with a message while `keras_tfm.export` does not exist.
"""

import argparse
import os
import sys

from keras_tfm import recipes


def parse_args(argv=None):
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    recipes.add_gpt_arguments(parser)
    parser.add_argument(
        "--export-dir",
        default=os.path.join("saved_models", "gpt_shakespeare"),
        help="where the SavedModel goes (default: %(default)s)",
    )
    parser.add_argument("--no-export", action="store_true", help="skip the export step")
    # A short run: override the nanoGPT defaults that `add_gpt_arguments` sets.
    parser.set_defaults(steps=600, eval_interval=200, lr_decay_steps=None, sample_tokens=300)
    return parser.parse_args(argv)


# --------------------------------------------------------------------------- #
# EXPORT STEP (TF Serving). Owned by the export module: keep this function's
# name and arguments; `keras_tfm.export.export_for_serving` does the work.
# --------------------------------------------------------------------------- #
def export_and_generate(model, tokenizer, export_dir, prompt="\n", max_new_tokens=60, seed=0):
    """Exports `model` (+ tokenizer) to `export_dir/VERSION` and generates from the reloaded SavedModel.

    The reload and the `generate` call use TensorFlow only (`keras_tfm.export.client`), as a
    TF Serving client would.

    Returns:
        The generated text, or None when `keras_tfm.export` is not available.
    """
    try:
        from keras_tfm.export import client
        from keras_tfm.export.exporter import export_for_serving
    except ImportError:
        print("[export] keras_tfm.export is not available: skipping the SavedModel export.", flush=True)
        return None
    # The model's context is its max_length: at most max_length - 1 new tokens from a short prompt.
    max_new_tokens = min(max_new_tokens, model.get_layer("embedding").max_length - len(prompt))
    path = export_for_serving(model, export_dir, tokenizer=tokenizer, max_prompt_length=8)
    print(f"[export] SavedModel written to {path}", flush=True)
    loaded = client.load_served(path)
    out = client.call_signature(
        loaded,
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
    results = recipes.run_gpt(args)
    if not args.no_export:
        export_and_generate(results["model"], results["tokenizer"], args.export_dir)
    return 0


if __name__ == "__main__":
    sys.exit(main())
