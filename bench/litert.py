"""LiteRT runner vs in-process XLA `generate` vs the TF SavedModel signature, at batch 1.

Models:
* the lab GPT (`examples/gpt_shakespeare.py` settings: 4 layers, 4 heads, d_model 128, context 64,
  Tiny Shakespeare's 65 characters, learned positions, exact GELU, no biases), trained for
  `--train-steps` steps with the lab recipe (`keras_tfm.recipes.train_gpt`; 0 = random weights);
* the tiny seq2seq (`keras_tfm.models.seq2seq("tiny")`, random weights).

For each: in process (`generation.generate`, XLA), the SavedModel (`export_for_serving` +
`load_served`; GPT `generate_ids`, seq2seq `translate`) and the LiteRT runner (float32 and int8
files of `export_for_litert`). Columns: file size; load (the SavedModel: `tf.saved_model.load`;
LiteRT: `LiteRTGenerator(path)`, digest check, interpreter and tokenizer); first token (the first
call after load asking for one new token: the SavedModel's XLA compile included, as a server's cold
start; in process: a warm call); per token ((t(N new) − t(1 new)) / (N − 1), warm, the fastest
of `--reps` for each). Greedy tokens of the three must be equal (float32 files), and the int8 file's top-1
agreement with float32 is measured on the validation text (teacher forcing over 64-character
windows, the lab GPT only). Goals: LiteRT load + first token ≤ SavedModel load + first request;
LiteRT per token ≤ 2× in-process XLA; int8 agreement ≥ 99 %, int8 file ≤ 30 % of float32.

    python bench/litert.py --data ../shared/data/tiny_shakespeare/input.txt [--train-steps 300] [--designs]
    python bench/litert.py --data ../shared/data/tiny_shakespeare/input.txt --model runs/gpt   # trained
    python bench/litert.py --train-steps 0 --new-tokens 16 --reps 2 --windows 2     # a smoke run
"""

import argparse
import os
import tempfile
import time

import numpy as np

LAB = dict(num_layers=4, num_heads=4, d_model=128, max_length=64, position="learned")


def timed(fn, reps=1):
    """`(fastest of reps seconds, output)` (the minimum: the other jobs of a shared machine only add)."""
    times = []
    for _ in range(reps):
        start = time.perf_counter()
        out = fn()
        times.append(time.perf_counter() - start)
    return min(times), out


def folder_bytes(path):
    if os.path.isfile(path):
        return os.path.getsize(path)
    return sum(os.path.getsize(os.path.join(d, f)) for d, _, files in os.walk(path) for f in files)


def lab_gpt(args):
    """The lab GPT and its validation ids (random weights and a synthetic text without --data)."""
    import keras

    from keras_tfm import models
    from keras_tfm.recipes.gpt import NANOGPT_LAYOUT, load_shakespeare_text, train_gpt
    from keras_tfm.tokenizers import CharTokenizer

    if args.data is None:
        text = "".join(chr(32 + (i * 7919) % 65) for i in range(20000))
        tokenizer = CharTokenizer.from_corpus(text, special_tokens=False)
        keras.utils.set_random_seed(0)
        model = models.gpt(vocabulary_size=tokenizer.vocabulary_size, **{**LAB, **NANOGPT_LAYOUT})
        return model, tokenizer, tokenizer(text[-5000:]).numpy()
    _, val_text = load_shakespeare_text(args.data, None, None)
    if args.model is not None:  # a `keras-tfm train gpt --output DIR` folder
        from keras_tfm.recipes import load_trained

        trained = load_trained(args.model)
        model, tokenizer = trained.model, trained.tokenizers["tokenizer"]
    elif args.train_steps == 0:
        tokenizer = CharTokenizer.from_corpus(open(args.data, encoding="utf-8").read(), special_tokens=False)
        model = models.gpt(vocabulary_size=tokenizer.vocabulary_size, **{**LAB, **NANOGPT_LAYOUT})
    else:
        results = train_gpt(data=args.data, steps=args.train_steps, eval_iters=2, verbose=0, sample_tokens=0)
        model, tokenizer = results["model"], results["tokenizer"]
    return model, tokenizer, tokenizer(val_text).numpy()


def agreement(runner, model, ids, windows, width):
    """Share of positions where `runner`'s top token is the Keras model's (teacher forcing)."""
    hits = total = 0
    step = max((len(ids) - width) // max(windows, 1), 1)
    for start in range(0, step * windows, step):
        window = ids[start : start + width]
        expected = np.argmax(np.asarray(model(window[None])[0]), axis=-1)
        hits += int(np.sum(np.argmax(runner.next_token_logits(window), axis=-1) == expected))
        total += len(window)
    return hits / total


def bench_gpt(args, folder, rows, lab):
    import tensorflow as tf

    from keras_tfm import generation
    from keras_tfm.export import export_for_serving, load_served
    from keras_tfm.export.litert import export_for_litert
    from keras_tfm.export.litert_runner import LiteRTGenerator

    model, tokenizer, val_ids = lab
    prompt = [int(i) for i in val_ids[:16]]
    n = args.new_tokens
    # In process (XLA): warm both lengths, then time.
    generation.generate(model, [prompt], 1), generation.generate(model, [prompt], n)
    first, _ = timed(lambda: generation.generate(model, [prompt], 1), args.reps)
    full, xla_tokens = timed(lambda: generation.generate(model, [prompt], n), args.reps)
    rows.append(("lab GPT", "in-process XLA", None, None, first, (full - first) / (n - 1)))
    # SavedModel: load, first request (compiles), then warm calls.
    sm_path = export_for_serving(model, os.path.join(folder, "sm"), tokenizer=tokenizer, warmup=False)
    load, served = timed(lambda: load_served(sm_path))
    request = dict(
        token_ids=tf.constant([prompt]),
        lengths=tf.constant([len(prompt)]),
        temperature=tf.constant(0.0),
        top_k=tf.constant(0),
        top_p=tf.constant(1.0),
        seed=tf.constant(0),
    )
    call = served.signatures["generate_ids"]
    cold, _ = timed(lambda: call(max_new_tokens=tf.constant(1), **request))
    warm1, _ = timed(lambda: call(max_new_tokens=tf.constant(1), **request), args.reps)
    call(max_new_tokens=tf.constant(n), **request)
    warm_n, out = timed(lambda: call(max_new_tokens=tf.constant(n), **request), args.reps)
    assert (out["token_ids"].numpy()[0, :n] == xla_tokens[0]).all(), "SavedModel tokens differ"
    rows.append(
        ("lab GPT", "SavedModel generate_ids", folder_bytes(sm_path), load, cold, (warm_n - warm1) / (n - 1))
    )
    sizes = {}
    for quantize in (None, "int8"):
        path = os.path.join(folder, f"gpt_{quantize or 'float32'}.tflite")
        export_seconds, _ = timed(
            lambda: export_for_litert(model, path, tokenizer=tokenizer, quantize=quantize)
        )
        sizes[quantize] = os.path.getsize(path)
        load, runner = timed(lambda: LiteRTGenerator(path))
        cold, _ = timed(lambda: runner.generate([prompt], 1))
        first, _ = timed(lambda: runner.generate([prompt], 1), args.reps)
        full, tokens = timed(lambda: runner.generate([prompt], n), args.reps)
        if quantize is None:
            assert (tokens == xla_tokens).all(), "LiteRT tokens differ from in-process generate"
        share = agreement(runner, model, val_ids, args.windows, LAB["max_length"])
        name = f"LiteRT {quantize or 'float32'} (export {export_seconds:.0f} s, top-1 vs Keras {100 * share:.2f} %)"
        rows.append(("lab GPT", name, sizes[quantize], load, cold, (full - first) / (n - 1)))
    rows.append(
        (
            "lab GPT",
            f"int8 / float32 file size: {100 * sizes['int8'] / sizes[None]:.1f} %",
            None,
            None,
            None,
            None,
        )
    )


def bench_seq2seq(args, folder, rows):
    import tensorflow as tf

    from keras_tfm import generation, models
    from keras_tfm.export import export_for_serving, load_served
    from keras_tfm.export.litert import export_for_litert
    from keras_tfm.export.litert_runner import LiteRTGenerator
    from keras_tfm.tokenizers import WordTokenizer

    model = models.seq2seq("tiny")
    words = "the cat sat on a mat dog ran far".split()
    tokenizer = WordTokenizer(words)
    source = [int(i) for i in tokenizer.tokenize("the cat sat on a mat").numpy()]
    n = min(args.new_tokens, model.max_length - 1)
    # No EOS (the model has none): every call runs all n steps. A step of this model is tens of
    # microseconds, so the per-token figures take the fastest of many repetitions.
    options, reps = dict(bos_id=5, eos_id=None), max(args.reps, 41)
    generation.generate(model, [source], 1, **options), generation.generate(model, [source], n, **options)
    first, _ = timed(lambda: generation.generate(model, [source], 1, **options), reps)
    full, xla_tokens = timed(lambda: generation.generate(model, [source], n, **options), reps)
    assert xla_tokens.shape[-1] == n, xla_tokens.shape
    rows.append(("tiny seq2seq", "in-process XLA", None, None, first, (full - first) / (n - 1)))
    sm_path = export_for_serving(model, os.path.join(folder, "s2s"), tokenizer=tokenizer, warmup=False)
    load, served = timed(lambda: load_served(sm_path))
    call = served.signatures["translate"]
    request = dict(
        inputs=tf.constant(["the cat sat on a mat"]),
        num_beams=tf.constant(1),
        length_penalty=tf.constant(0.6),
    )
    cold, _ = timed(lambda: call(max_new_tokens=tf.constant(1), **request))
    warm1, _ = timed(lambda: call(max_new_tokens=tf.constant(1), **request), reps)
    call(max_new_tokens=tf.constant(n), **request)
    warm_n, out = timed(lambda: call(max_new_tokens=tf.constant(n), **request), reps)
    made = int(out["num_tokens"].numpy()[0])  # the served signature stops at the tokenizer's EOS
    variant = "SavedModel translate" + ("" if made == n else f" ({made} tokens: it met EOS)")
    rows.append(
        ("tiny seq2seq", variant, folder_bytes(sm_path), load, cold, (warm_n - warm1) / max(made - 1, 1))
    )
    path = export_for_litert(model, os.path.join(folder, "s2s.tflite"), tokenizer=tokenizer)
    load, runner = timed(lambda: LiteRTGenerator(path))
    cold, _ = timed(lambda: runner.generate([source], 1, **options))
    first, _ = timed(lambda: runner.generate([source], 1, **options), reps)
    full, tokens = timed(lambda: runner.generate([source], n, **options), reps)
    assert (tokens == xla_tokens).all(), "LiteRT tokens differ from in-process generate"
    rows.append(
        ("tiny seq2seq", "LiteRT float32", os.path.getsize(path), load, cold, (full - first) / (n - 1))
    )


def bench_designs(args, folder, rows, lab):
    """The lab GPT's decoding step in three LiteRT designs, greedy, batch 1, a 16-token prompt and
    up to 48 new tokens (within the context):
    the caches passed in and out of every `decode` call (LiteRT-LM's layout), one signature holding
    the whole loop (`tf.while_loop`), and the export's design (caches in resource variables)."""
    import tensorflow as tf

    from keras_tfm.export.litert import export_for_litert
    from keras_tfm.export.litert_runner import LiteRTGenerator, make_interpreter

    model, tokenizer, val_ids = lab
    w = LAB["max_length"]
    c = 2 * w
    prompt = [int(i) for i in val_ids[:16]]
    n = min(args.new_tokens, w - len(prompt))  # within the context: no window restart
    specs = [
        tf.TensorSpec([1] + list(x.shape[1:]), x.dtype, name=f"cache_{i:02d}")
        for i, x in enumerate(model.init_caches(1, c))
    ]

    def prefill(token_ids, length):
        pad = w - length
        logits, caches = model.call_with_cache(
            token_ids,
            model.init_caches(1, c),
            0,
            positions=tf.range(w)[None] - pad,
            padding_mask=tf.range(c)[None] >= pad,
            last_only=True,
        )
        return logits[:, 0], caches

    def decode(token_ids, positions, cache_index, padding_mask, *caches):
        logits, caches = model.call_with_cache(
            token_ids,
            list(caches),
            cache_index,
            positions=positions,
            padding_mask=padding_mask,
            last_only=True,
        )
        return {"logits": logits[:, 0], **{f"cache_{i:02d}": x for i, x in enumerate(caches)}}

    def loop(token_ids, length):
        logits, caches = prefill(token_ids, length)
        pad = w - length

        def body(i, logits, tokens, *caches):
            token = tf.argmax(logits, -1, output_type=tf.int32)
            tokens = tf.tensor_scatter_nd_update(tokens, [[0, i]], token)
            logits, caches = model.call_with_cache(
                token[:, None],
                list(caches),
                w + i,
                positions=[[w + i - pad]],
                padding_mask=tf.range(c)[None] >= pad,
                last_only=True,
            )
            return (i + 1, logits[:, 0], tokens, *caches)

        out = tf.while_loop(lambda i, *_: i < n, body, (0, logits, tf.zeros([1, n], tf.int32), *caches))
        return {"tokens": out[2]}

    def start(token_ids, length):
        logits, caches = prefill(token_ids, length)
        return {"logits": logits, **{f"cache_{i:02d}": x for i, x in enumerate(caches)}}

    holder = tf.Module()
    holder.model_weights = [v.value for v in model.variables]
    ids_spec = [tf.TensorSpec([1, w], tf.int32, name="token_ids"), tf.TensorSpec([], tf.int32, name="length")]
    step_spec = [
        tf.TensorSpec([1, 1], tf.int32, name="token_ids"),
        tf.TensorSpec([1, 1], tf.int32, name="positions"),
        tf.TensorSpec([], tf.int32, name="cache_index"),
        tf.TensorSpec([1, c], tf.bool, name="padding_mask"),
    ]
    functions = {
        "prefill": tf.function(start, input_signature=ids_spec, autograph=False).get_concrete_function(),
        "decode": tf.function(
            decode, input_signature=step_spec + specs, autograph=False
        ).get_concrete_function(),
        "loop": tf.function(loop, input_signature=ids_spec, autograph=False).get_concrete_function(),
    }
    saved = os.path.join(folder, "designs")
    tf.saved_model.save(holder, saved, signatures=functions)
    interpreter = make_interpreter(model_content=tf.lite.TFLiteConverter.from_saved_model(saved).convert())
    pf, dc, lp = (interpreter.get_signature_runner(k) for k in ("prefill", "decode", "loop"))
    ids = np.zeros((1, w), np.int32)
    ids[0, w - len(prompt) :] = prompt
    pad, mask = w - len(prompt), (np.arange(c) >= w - len(prompt))[None]

    def passed_caches():
        out = pf(token_ids=ids, length=np.int32(len(prompt)))
        tokens = []
        for i in range(n):
            tokens.append(int(np.argmax(out.pop("logits")[0])))
            if i + 1 < n:
                step = dict(
                    token_ids=np.array([[tokens[-1]]], np.int32),
                    positions=np.array([[w + i - pad]], np.int32),
                    cache_index=np.int32(w + i),
                    padding_mask=mask,
                )
                out = dc(**step, **out)
        return tokens

    path = export_for_litert(
        model, os.path.join(folder, "designs.tflite"), tokenizer=tokenizer, prefill_lengths=[w]
    )
    runner = LiteRTGenerator(path)
    designs = {
        "caches passed in/out": passed_caches,
        "one while-loop signature": lambda: lp(token_ids=ids, length=np.int32(len(prompt)))["tokens"][
            0
        ].tolist(),
        "caches in variables (chosen)": lambda: runner.generate([prompt], n)[0].tolist(),
    }
    results = {name: fn() for name, fn in designs.items()}
    assert len({tuple(r) for r in results.values()}) == 1, "the designs chose different tokens"
    for name, fn in designs.items():
        seconds, _ = timed(fn, args.reps)
        rows.append(("lab GPT", f"design: {name}, prefill + {n} tokens", None, None, None, seconds / n))


def table(rows):
    def ms(x):
        return "" if x is None else f"{1000 * x:.2f}"

    lines = [
        "| model | variant | file bytes | load ms | first token ms | per token ms |",
        "|---|---|---:|---:|---:|---:|",
    ]
    for model, variant, size, load, first, per in rows:
        lines.append(
            f"| {model} | {variant} | {'' if size is None else f'{size:,}'} | {ms(load)} | {ms(first)} | {ms(per)} |"
        )
    return "\n".join(lines)


def goals(rows):
    by = {(r[0], r[1].split(" (")[0]): r for r in rows}
    out = []
    for model, litert, saved in (
        ("lab GPT", "LiteRT float32", "SavedModel generate_ids"),
        ("tiny seq2seq", "LiteRT float32", "SavedModel translate"),
    ):
        lr, sm, xla = by[(model, litert)], by[(model, saved)], by[(model, "in-process XLA")]
        out.append(
            f"{model}: LiteRT load + first token {1000 * (lr[3] + lr[4]):.1f} ms vs SavedModel {1000 * (sm[3] + sm[4]):.1f} ms; "
            f"per token {lr[5] / xla[5]:.2f}x in-process XLA (goal <= 2x)"
        )
    return "\n".join(out)


def main():
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument(
        "--data", default=None, help="Tiny Shakespeare input.txt (default: synthetic text, random weights)"
    )
    parser.add_argument("--train-steps", type=int, default=300)
    parser.add_argument(
        "--model", default=None, help="a trained lab GPT folder (train --output) instead of training"
    )
    parser.add_argument("--new-tokens", type=int, default=128)
    parser.add_argument("--reps", type=int, default=7)
    parser.add_argument(
        "--windows", type=int, default=40, help="64-character validation windows for the agreement"
    )
    parser.add_argument("--designs", action="store_true", help="also time the three decoding-loop designs")
    parser.add_argument("--output", default=None, help="also write the table to this file")
    args = parser.parse_args()
    rows = []
    with tempfile.TemporaryDirectory() as folder:
        lab = lab_gpt(args)
        bench_gpt(args, folder, rows, lab)
        bench_seq2seq(args, folder, rows)
        if args.designs:
            bench_designs(args, folder, rows, lab)
    text = f"{table(rows)}\n\n{goals(rows)}\nload average: {os.getloadavg()}\n"
    print(text)
    if args.output:
        with open(args.output, "w", encoding="utf-8") as f:
            f.write(text)


if __name__ == "__main__":
    main()
