"""Served (SavedModel) vs in-process generation latency.

Tiny GPT (4 layers, 4 heads, d_model 128, ByteTokenizer, 263 ids), greedy,
16-token prompts → 256 new tokens, batch 1 and 8:

* in-process: `CausalLMGenerator.generate` (cached, XLA-compiled loop) on the
  Keras model, in this process;
* served: `keras_tfm.export.export_for_serving` → `tf.saved_model.load` in a
  FRESH process where importing keras / keras_tfm fails, calling the
  `generate_ids` signature (ids in, ids out) and the `generate` signature
  (strings in, strings out: tokenization + detokenization in the graph).

Each variant is warmed up (XLA compilation) and then timed `--reps` times;
the table reports the median and the minimum (the minimum is the least
disturbed by other processes on a shared machine). The served tokens are
checked equal to the in-process tokens.

    python bench/serve_latency.py [--reps 5] [--out bench/results_serve_latency.txt]
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
    return [(TEXT * 4)[7 * b: 7 * b + PROMPT_LENGTH] for b in range(batch)]


def summary(times):
    return {"median_ms": 1000 * statistics.median(times), "min_ms": 1000 * min(times)}


def served_child(path, reps):
    """Runs in a fresh process: keras and keras_tfm cannot be imported."""
    for name in ("keras", "tf_keras", "keras_tfm"):
        sys.modules[name] = None
    import numpy as np
    import tensorflow as tf

    loaded = tf.saved_model.load(path)
    results = {}
    for batch in BATCHES:
        texts = [p.encode() for p in prompts(batch)]
        ids = np.array([[b + 7 for b in t] for t in texts], np.int32)  # ByteTokenizer ids (special tokens on)
        common = dict(max_new_tokens=tf.constant(NEW_TOKENS), temperature=tf.constant(0.0), top_k=tf.constant(0),
                      top_p=tf.constant(1.0), seed=tf.constant(0))
        calls = {
            "generate_ids": lambda: loaded.signatures["generate_ids"](
                token_ids=tf.constant(ids), lengths=tf.constant([PROMPT_LENGTH] * batch, tf.int32), **common),
            "generate": lambda: loaded.signatures["generate"](prompts=tf.constant(texts), **common),
        }
        for name, call in calls.items():
            out = call()  # warmup / compile
            times = []
            for _ in range(reps):
                t = time.perf_counter()
                out = call()
                next(iter(out.values())).numpy()
                times.append(time.perf_counter() - t)
            results[f"{name}/{batch}"] = dict(summary(times))
            if name == "generate_ids":
                results[f"{name}/{batch}"]["tokens"] = out["token_ids"].numpy().tolist()
    results["keras_imported"] = any(sys.modules.get(n) is not None for n in ("keras", "keras_tfm"))
    return results


def in_process(model, reps):
    import numpy as np

    from keras_tfm.generation import CausalLMGenerator

    gen = CausalLMGenerator(model)
    results = {}
    for batch in BATCHES:
        ids = [[b + 7 for b in p.encode()] for p in prompts(batch)]
        tokens = gen.generate(ids, NEW_TOKENS)  # warmup / compile
        times = []
        for _ in range(reps):
            t = time.perf_counter()
            tokens = np.asarray(gen.generate(ids, NEW_TOKENS))
            times.append(time.perf_counter() - t)
        results[f"in_process/{batch}"] = dict(summary(times), tokens=tokens.tolist())
    return results


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--reps", type=int, default=5)
    parser.add_argument("--out", default=os.path.join(os.path.dirname(os.path.abspath(__file__)),
                                                      "results_serve_latency.txt"))
    parser.add_argument("--served-child", dest="served_child", default=None, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.served_child:
        print(json.dumps(served_child(args.served_child, args.reps)))
        return 0

    import keras

    from keras_tfm.data import ByteTokenizer
    from keras_tfm.export import export_for_serving
    from keras_tfm.models import gpt

    keras.utils.set_random_seed(0)
    tokenizer = ByteTokenizer()
    model = gpt(vocabulary_size=tokenizer.vocabulary_size, max_length=512, num_layers=4, num_heads=4, d_model=128,
                dropout=0.0)
    with tempfile.TemporaryDirectory() as tmp:
        t = time.perf_counter()
        path = export_for_serving(model, os.path.join(tmp, "gpt"), tokenizer=tokenizer,
                                  max_new_tokens_limit=NEW_TOKENS, max_prompt_length=PROMPT_LENGTH)
        export_s = time.perf_counter() - t
        local = in_process(model, args.reps)
        env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2")
        proc = subprocess.run([sys.executable, os.path.abspath(__file__), "--reps", str(args.reps),
                               "--served-child", path], capture_output=True, text=True, env=env, check=False)
        if proc.returncode:
            sys.stderr.write(proc.stderr[-4000:])
            return proc.returncode
        served = json.loads(proc.stdout.strip().split("\n")[-1])
        local_again = in_process(model, args.reps)  # drift check on a shared machine

    lines = [
        "Served (SavedModel, fresh process without keras) vs in-process generation",
        f"tiny GPT: 4 layers, 4 heads, d_model 128, vocab {tokenizer.vocabulary_size}; greedy; prompt "
        f"{PROMPT_LENGTH} -> {NEW_TOKENS} new tokens; {args.reps} timed reps after warmup; CPU "
        f"({os.cpu_count()} cores visible, machine shared with other jobs)",
        f"export_for_serving: {export_s:.1f} s; keras imported in the served process: {served['keras_imported']}",
        "",
        f"{'batch':>5}  {'variant':<24}{'median ms':>10}{'min ms':>10}{'min/in-proc':>13}{'tok/s (min)':>13}",
    ]
    for batch in BATCHES:
        base = min(local[f"in_process/{batch}"]["min_ms"], local_again[f"in_process/{batch}"]["min_ms"])
        rows = [("in-process", local[f"in_process/{batch}"]), ("in-process (again)", local_again[f"in_process/{batch}"]),
                ("served generate_ids", served[f"generate_ids/{batch}"]), ("served generate (text)",
                                                                            served[f"generate/{batch}"])]
        for name, r in rows:
            lines.append(f"{batch:>5}  {name:<24}{r['median_ms']:>10.1f}{r['min_ms']:>10.1f}"
                         f"{r['min_ms'] / base:>12.2f}x{batch * NEW_TOKENS / (r['min_ms'] / 1000):>13.0f}")
        same = served[f"generate_ids/{batch}"]["tokens"] == local[f"in_process/{batch}"]["tokens"]
        lines.append(f"{batch:>5}  served tokens == in-process tokens: {same}")
    text = "\n".join(lines) + "\n"
    print(text)
    with open(args.out, "w") as f:
        f.write(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
