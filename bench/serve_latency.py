"""Served (SavedModel) vs in-process generation latency.

Tiny GPT (4 layers, 4 heads, d_model 128, ByteTokenizer, 263 ids), greedy,
16-token prompts → 256 new tokens, batch 1 and 8:

* in-process: `Generator.generate` (cached, XLA-compiled loop) on the
  Keras model, in this process;
* served: `keras_tfm.export.export_for_serving` → `tf.saved_model.load` in a
  FRESH process where importing keras / keras_tfm fails, calling the
  `generate_ids` signature (ids in, ids out) and the `generate` signature
  (strings in, strings out: tokenization + detokenization in the graph).

The served process stays up and answers requests over a pipe, so the three
variants are timed interleaved, rep by rep (load from other jobs on a shared
machine hits them alike); the first rep compiles and is discarded. The table
reports the median and the minimum of `--reps` timed reps. The served tokens
are checked equal to the in-process tokens.

    python bench/serve_latency.py [--reps 10] [--output bench/results_serve_latency.txt]
"""

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

PROMPT_LENGTH = 16
NEW_TOKENS = 256
BATCHES = (1, 8)
TEXT = "To be, or not to be, that is the question: whether 'tis nobler in the mind to suffer"


def prompts(batch):
    return [(TEXT * 4)[7 * b : 7 * b + PROMPT_LENGTH] for b in range(batch)]


def summary(times):
    return {"median_ms": 1000 * statistics.median(times), "min_ms": 1000 * min(times)}


def served_child(path):
    """Runs in a fresh process where keras / keras_tfm cannot be imported.

    Protocol (line based, stdin → stdout): "VARIANT BATCH" runs the signature
    once and answers a JSON line {"s": seconds, "tokens": ...}; "quit" ends.
    The first call of each (variant, batch) compiles (the parent discards it).
    """
    for name in ("keras", "tf_keras", "keras_tfm"):
        sys.modules[name] = None
    import numpy as np
    import tensorflow as tf

    loaded = tf.saved_model.load(path)
    common = dict(
        max_new_tokens=tf.constant(NEW_TOKENS),
        temperature=tf.constant(0.0),
        top_k=tf.constant(0),
        top_p=tf.constant(1.0),
        seed=tf.constant(0),
    )
    keras_imported = any(sys.modules.get(n) is not None for n in ("keras", "keras_tfm"))
    print(json.dumps({"ready": True, "keras_imported": keras_imported}), flush=True)
    for line in sys.stdin:
        if line.strip() == "quit":
            break
        variant, batch = line.split()
        texts = [p.encode() for p in prompts(int(batch))]
        t = time.perf_counter()
        if variant == "generate_ids":
            ids = np.array(
                [[b + 7 for b in x] for x in texts], np.int32
            )  # ByteTokenizer ids (special tokens on)
            out = loaded.signatures["generate_ids"](
                token_ids=tf.constant(ids),
                lengths=tf.constant([PROMPT_LENGTH] * len(texts), tf.int32),
                **common,
            )
            tokens = out["token_ids"].numpy()
        else:
            out = loaded.signatures["generate"](prompts=tf.constant(texts), **common)
            tokens = out["completions"].numpy()
        elapsed = time.perf_counter() - t
        reply = {"s": elapsed}
        if variant == "generate_ids":
            reply["tokens"] = tokens.tolist()
        print(json.dumps(reply), flush=True)
    return 0


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--reps", type=int, default=10)
    parser.add_argument(
        "--output",
        default=os.path.join(os.path.dirname(os.path.abspath(__file__)), "results_serve_latency.txt"),
    )
    parser.add_argument("--served-child", dest="served_child", default=None, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.served_child:
        return served_child(args.served_child)

    import keras
    import numpy as np

    from keras_tfm.export import export_for_serving
    from keras_tfm.generation import Generator
    from keras_tfm.models import gpt
    from keras_tfm.tokenizers import ByteTokenizer

    keras.utils.set_random_seed(0)
    tokenizer = ByteTokenizer()
    model = gpt(
        vocabulary_size=tokenizer.vocabulary_size,
        max_length=512,
        num_layers=4,
        num_heads=4,
        d_model=128,
        dropout=0.0,
    )
    gen = Generator(model)
    variants = ("in_process", "generate_ids", "generate")
    times = {(v, b): [] for v in variants for b in BATCHES}
    tokens = {}
    with tempfile.TemporaryDirectory() as tmp:
        t = time.perf_counter()
        path = export_for_serving(
            model,
            os.path.join(tmp, "gpt"),
            tokenizer=tokenizer,
            max_new_tokens_limit=NEW_TOKENS,
            max_prompt_length=PROMPT_LENGTH,
        )
        export_s = time.perf_counter() - t
        env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2")
        child = subprocess.Popen(
            [sys.executable, os.path.abspath(__file__), "--served-child", path],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
            env=env,
        )
        try:
            ready = json.loads(child.stdout.readline())

            def served(variant, batch):
                child.stdin.write(f"{variant} {batch}\n")
                child.stdin.flush()
                return json.loads(child.stdout.readline())

            # Interleaved: every rep runs in-process, then both served variants,
            # so load from other jobs hits all of them alike. Rep 0 = warmup.
            for rep in range(args.reps + 1):
                for batch in BATCHES:
                    ids = [[b + 7 for b in p.encode()] for p in prompts(batch)]
                    t = time.perf_counter()
                    out = np.asarray(gen.generate(ids, NEW_TOKENS))
                    elapsed = time.perf_counter() - t
                    tokens[("in_process", batch)] = out.tolist()
                    results = {"in_process": elapsed}
                    for variant in variants[1:]:
                        reply = served(variant, batch)
                        results[variant] = reply["s"]
                        if "tokens" in reply:
                            tokens[(variant, batch)] = reply["tokens"]
                    if rep:
                        for variant, s in results.items():
                            times[(variant, batch)].append(s)
            child.stdin.write("quit\n")
            child.stdin.flush()
            child.wait(timeout=60)
        finally:
            if child.poll() is None:
                child.kill()

    names = {
        "in_process": "in-process",
        "generate_ids": "served generate_ids",
        "generate": "served generate (text)",
    }
    lines = [
        "Served (SavedModel, fresh process without keras) vs in-process generation",
        f"tiny GPT: 4 layers, 4 heads, d_model 128, vocab {tokenizer.vocabulary_size}; greedy; prompt "
        f"{PROMPT_LENGTH} -> {NEW_TOKENS} new tokens; {args.reps} timed reps after 1 warmup, the three variants "
        "interleaved rep by rep",
        f"CPU, {os.cpu_count()} cores visible, machine shared with other jobs (load average "
        f"{os.getloadavg()[0]:.1f}); ratio = served / in-process, on medians and on minima",
        f"export_for_serving: {export_s:.1f} s; keras imported in the served process: {ready['keras_imported']}",
        "",
        f"{'batch':>5}  {'variant':<24}{'median ms':>10}{'min ms':>10}{'ratio med':>11}{'ratio min':>11}"
        f"{'tok/s (med)':>13}",
    ]
    for batch in BATCHES:
        base = summary(times[("in_process", batch)])
        for variant in variants:
            r = summary(times[(variant, batch)])
            lines.append(
                f"{batch:>5}  {names[variant]:<24}{r['median_ms']:>10.1f}{r['min_ms']:>10.1f}"
                f"{r['median_ms'] / base['median_ms']:>10.2f}x{r['min_ms'] / base['min_ms']:>10.2f}x"
                f"{batch * NEW_TOKENS / (r['median_ms'] / 1000):>13.0f}"
            )
        same = tokens[("generate_ids", batch)] == tokens[("in_process", batch)]
        lines.append(f"{batch:>5}  served tokens == in-process tokens: {same}")
    text = "\n".join(lines) + "\n"
    print(text)
    with open(args.output, "w") as f:
        f.write(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
