"""Generation past the model's context: one compiled sliding-window call vs a Python loop of calls.

Model: GPT-2 layout, 4 layers, 4 heads, d_model 128, d_ff 512, vocab 65, max_length 128 (random
weights), positions "learned" (recompute path) and "alibi" (shift path). Workload: a 16-token
prompt → 1024 new tokens (8 context lengths), greedy, batch 1 and 8.

Rows:
  sliding (one call)   `generate(model, prompts, 1024)`: `keras_tfm.generation.sliding_window`
                       inside one XLA while loop (recompute or shift, by position scheme)
  chunked (old)        what `recipes.gpt.sample_text` did before: a Python loop of `generate`
                       calls, each filling the context, restarted from the last max_length // 2
                       tokens (one compiled function per prompt/cache bucket, cached)
  naive recompute      the model re-run on the whole window for every token (eager `model(...)`
                       per step, 64 tokens measured), the reference of tests/test_long_generation

Times are medians of `--reps` calls after one warm-up call (trace + XLA compile excluded).

Usage:  python bench/long_generation.py [--reps 3] [--new 1024] [--output bench/results_long_generation.txt]
"""

import argparse
import os
import platform
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
os.environ.setdefault("KERAS_BACKEND", "tensorflow")

import keras  # noqa: E402
import numpy as np  # noqa: E402

from keras_tfm.generation import generate  # noqa: E402
from keras_tfm.models import gpt  # noqa: E402

SIZES = dict(
    vocabulary_size=65, max_length=128, num_layers=4, num_heads=4, d_model=128, d_ff=512, dropout=0.0
)
PROMPT = 16


def chunked(model, prompts, count):
    """The old recipe loop: fill the context, restart from its last half, call again."""
    window = model.max_length
    contexts = [list(p) for p in prompts]
    new = [[] for _ in prompts]
    while len(new[0]) < count:
        step = min(count - len(new[0]), window - max(map(len, contexts)))
        out = generate(model, contexts, step).tolist()
        for b, ids in enumerate(out):
            new[b] += ids
            contexts[b] = (contexts[b] + ids)[-(window // 2) :]
    return new


def naive(model, prompts, count):
    """Full forward pass over every row's window per token (rows of equal length)."""
    window = model.max_length
    contexts = [list(p) for p in prompts]
    for _ in range(count):
        logits = np.asarray(model(np.array(contexts, np.int32), training=False))[:, -1]
        for b, token in enumerate(logits.argmax(-1)):
            contexts[b].append(int(token))
            if len(contexts[b]) > window:
                contexts[b] = contexts[b][-(window // 2) :]
    return contexts


def median_seconds(fn, reps):
    fn()  # trace + compile
    times = []
    for _ in range(reps):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return float(np.median(times))


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--reps", type=int, default=3)
    parser.add_argument("--new", type=int, default=1024)
    parser.add_argument("--naive-tokens", type=int, default=64)
    parser.add_argument("--output", default=None)
    args = parser.parse_args()
    lines = [
        f"# bench/long_generation.py: prompt {PROMPT} -> {args.new} new tokens, max_length "
        f"{SIZES['max_length']}, greedy; {platform.processor() or platform.machine()}, "
        f"{os.cpu_count()} CPUs; load average {os.getloadavg()[0]:.1f}",
        f"{'position':<10}{'batch':>6}{'sliding tok/s':>15}{'chunked tok/s':>15}{'naive tok/s':>13}{'same':>6}",
    ]
    print(lines[0])
    print(lines[1])
    for position in ("learned", "alibi"):
        keras.utils.set_random_seed(0)
        model = gpt(position=position, **SIZES)
        for batch in (1, 8):
            rng = np.random.default_rng(batch)
            prompts = rng.integers(1, SIZES["vocabulary_size"], (batch, PROMPT)).tolist()
            sliding = median_seconds(lambda: generate(model, prompts, args.new), args.reps)
            old = median_seconds(lambda: chunked(model, prompts, args.new), args.reps)
            naive_s = median_seconds(lambda: naive(model, prompts, args.naive_tokens), 1)
            # Before the first restart both give the same tokens.
            first = SIZES["max_length"] - PROMPT
            same = generate(model, prompts, args.new)[:, :first].tolist() == chunked(model, prompts, first)
            tokens = batch * args.new
            line = (
                f"{position:<10}{batch:>6}{tokens / sliding:>15.0f}{tokens / old:>15.0f}"
                f"{batch * args.naive_tokens / naive_s:>13.0f}{str(same):>6}"
            )
            print(line, flush=True)
            lines.append(line)
    if args.output:
        tmp = args.output + ".tmp"
        with open(tmp, "w", encoding="utf-8") as f:
            f.write("\n".join(lines) + "\n")
        os.replace(tmp, args.output)


if __name__ == "__main__":
    main()
