"""Export and cold-start time: `export_for_serving` vs Keras's own `model.export()`.

Models (random weights): the tiny GPT (`gpt("tiny")`, a CharTokenizer of 41 ids), the tiny seq2seq
(`seq2seq("tiny")`, a WordTokenizer) and the tiny BERT classifier (`bert_classifier("tiny", 2)`, a
WordTokenizer). For each:

  export          `export_for_serving(model, ...)` with the kind's default signatures
                  (`--gpt-signatures all`: the GPT's beam search too), warmup records included
  keras export    `model.export(path, format="tf_saved_model")`: the forward pass alone, the peer

and, in a FRESH process where importing keras / keras_tfm fails (what TF Serving runs):

  load            `tf.saved_model.load(version folder)`
  first <sig>     the first request of each signature, in the order listed (the first `generate`
                  compiles its decoding loop); `keras first call`: the forward pass's first call.

The ratios are export / keras export and (load + first request of the first signature) / (keras load +
keras first call), all measured in this one run. A TF Serving server pays load + first request at
each new version (it replays the warmup records at load).

    python bench/export_time.py [--gpt-signatures all] [--output bench/results_export_time.txt]
"""

import argparse
import json
import os
import platform
import subprocess
import sys
import tempfile
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
os.environ.setdefault("KERAS_BACKEND", "tensorflow")

GPT_TEXT = "to be, or not to be, that is the question: whether 'tis nobler in the mind"
WORDS = "the cat sat on a mat dog ran far good bad movie".split()
#: The first request of each signature (the one that compiles its loop).
REQUESTS = {
    "generate": dict(prompts=[b"to be"], max_new_tokens=20, temperature=0.0, top_k=0, top_p=1.0, seed=0),
    "generate_ids": dict(
        token_ids=[[5, 6, 7]], lengths=[3], max_new_tokens=20, temperature=0.0, top_k=0, top_p=1.0, seed=0
    ),
    "beam_search": dict(prompts=[b"to be"], max_new_tokens=20, num_beams=2, length_penalty=0.6),
    "beam_search_ids": dict(
        token_ids=[[5, 6, 7]], lengths=[3], max_new_tokens=20, num_beams=2, length_penalty=0.6
    ),
    "serving_default": dict(token_ids=[[5, 6, 7, 8]]),
    "translate": dict(inputs=[b"the cat sat"], max_new_tokens=10, num_beams=1, length_penalty=0.6),
    "classify": dict(inputs=[b"the cat sat on the mat"]),
}


def child(spec_path):
    """Fresh process: loads each SavedModel and times its first requests; prints one JSON line."""
    for name in ("keras", "tf_keras", "keras_tfm"):
        sys.modules[name] = None
    import numpy as np
    import tensorflow as tf

    spec = json.load(open(spec_path))
    out = {}
    for row in spec:
        start = time.perf_counter()
        loaded = tf.saved_model.load(row["path"])
        times = {"load": time.perf_counter() - start}
        for name in row["signatures"]:
            fn = loaded.signatures[name]
            specs = fn.structured_input_signature[1]
            # An alias (a seq2seq's serving_default is its translate): the request with its inputs.
            request = next(
                (r for r in [REQUESTS.get(name)] + list(REQUESTS.values()) if r and set(r) == set(specs)),
                None,
            )
            if request is not None and row["kind"] != "keras":
                feed = {
                    k: tf.constant(np.array(v, specs[k].dtype.as_numpy_dtype)) for k, v in request.items()
                }
            else:  # Keras's forward pass: zeros (ones for masks) of the signature's dtypes, batch 1, length 8
                feed = {
                    k: tf.ones(
                        [1 if d is None else d for d in s.shape.as_list()[:1]] + [8] * (s.shape.rank - 1),
                        s.dtype,
                    )
                    for k, s in specs.items()
                }
            start = time.perf_counter()
            fn(**feed)
            times[name] = time.perf_counter() - start
        out[row["label"]] = times
    print(json.dumps(out))


def build(kind):
    """(model, tokenizer) of the tiny model of `kind` (random weights, seed 0)."""
    import keras

    from keras_tfm import models
    from keras_tfm.tokenizers import CharTokenizer, WordTokenizer

    keras.utils.set_random_seed(0)
    if kind == "causal_lm":
        tokenizer = CharTokenizer.from_corpus(GPT_TEXT)
        return models.gpt("tiny", vocabulary_size=tokenizer.vocabulary_size), tokenizer
    tokenizer = WordTokenizer(WORDS)
    if kind == "seq2seq_lm":
        return models.seq2seq("tiny"), tokenizer
    return models.bert_classifier("tiny", 2), tokenizer


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--gpt-signatures", default=None, help="GPT signatures, comma-separated or 'all'")
    parser.add_argument(
        "--output",
        default=os.path.join(os.path.dirname(os.path.abspath(__file__)), "results_export_time.txt"),
    )
    parser.add_argument("--child", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child:
        return child(args.child)

    start = time.perf_counter()
    import keras  # noqa: F401

    from keras_tfm.export import export_for_serving
    from keras_tfm.export.client import load_served

    import_s = time.perf_counter() - start
    gpt_signatures = args.gpt_signatures
    if gpt_signatures and gpt_signatures != "all":
        gpt_signatures = tuple(gpt_signatures.split(","))
    root = tempfile.mkdtemp(prefix="export_time-")
    rows, spec = [], []
    for kind in ("causal_lm", "seq2seq_lm", "classifier"):
        model, tokenizer = build(kind)
        start = time.perf_counter()
        options = {"signatures": gpt_signatures} if kind == "causal_lm" and gpt_signatures else {}
        path = export_for_serving(model, os.path.join(root, kind), tokenizer=tokenizer, **options)
        export_s = time.perf_counter() - start
        start = time.perf_counter()
        model.export(os.path.join(root, f"{kind}_keras"), format="tf_saved_model", verbose=False)
        keras_s = time.perf_counter() - start
        names = sorted(load_served(path).signatures)
        order = [n for n in ("generate", "translate", "classify") if n in names]
        order += [n for n in names if n not in order]
        spec.append({"label": kind, "kind": kind, "path": path, "signatures": order})
        spec.append(
            {
                "label": f"{kind}_keras",
                "kind": "keras",
                "path": os.path.join(root, f"{kind}_keras"),
                "signatures": ["serving_default"],
            }
        )
        rows.append((kind, export_s, keras_s, order))
    spec_path = os.path.join(root, "spec.json")
    json.dump(spec, open(spec_path, "w"))
    proc = subprocess.run(
        [sys.executable, os.path.abspath(__file__), "--child", spec_path],
        capture_output=True,
        text=True,
        check=False,
    )
    if proc.returncode:
        sys.exit(proc.stderr[-3000:])
    served = json.loads(proc.stdout.strip().splitlines()[-1])

    lines = [
        f"# bench/export_time.py — {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}, {platform.processor() or platform.machine()}, "
        f"{os.cpu_count()} cores, load average {' '.join(f'{x:.2f}' for x in os.getloadavg())} (at the end)",
        f"imports (keras + keras_tfm.export): {import_s:.1f} s; GPT signatures: {gpt_signatures or 'default'}",
        "",
        "| model | export s | keras export s | ratio | load s | first request s (signature) | keras load + first call s | load + first / keras |",
        "|---|---:|---:|---:|---:|---|---:|---:|",
    ]
    for kind, export_s, keras_s, order in rows:
        times, peer = served[kind], served[f"{kind}_keras"]
        firsts = ", ".join(f"{times[n]:.2f} ({n})" for n in order)
        cold = times["load"] + times[order[0]]
        keras_cold = peer["load"] + peer["serving_default"]
        lines.append(
            f"| {kind} | {export_s:.1f} | {keras_s:.1f} | {export_s / keras_s:.1f}× | {times['load']:.2f} | {firsts} | "
            f"{peer['load']:.2f} + {peer['serving_default']:.2f} | {cold / keras_cold:.1f}× |"
        )
    text = "\n".join(lines)
    print(text)
    if args.output:
        with open(args.output, "w", encoding="utf-8") as f:
            f.write(text + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
