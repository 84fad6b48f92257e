"""In-graph tokenizer throughput on SST-2 (sentences/s, batch 1,024) and agreement with HuggingFace.

Workload: every SST-2 sentence of ../shared/data/sst2_sentence_level (train + dev + test, 9,613
lines), cut into batches of `--batch-size` (1,024) strings. Each in-graph tokenizer runs as one
`tf.function` with a `[None]` string signature (traced once before timing); the reported figure
is the median over `--reps` passes over the whole corpus.

WordPiece rows (the all-MiniLM-L6-v2 / bert-base-uncased vocabulary from ../shared/data):
  keras_tfm  WordPieceTokenizer.from_pretrained  core TF ops only (exports to a stock TF Serving)
  keras_hub  WordPieceTokenizer(vocab.txt, lowercase, strip_accents)  tensorflow-text ops
  hf         tokenizers.Tokenizer("tokenizer.json").encode_batch  Rust, all cores (reference)
BPE rows (a 1,000-token byte-level BPE trained with `tokenizers` on the same text):
  keras_tfm  BytePairTokenizer.from_pretrained  core TF ops only
  keras_hub  BytePairTokenizer(vocabulary, merges)  tensorflow-text ops
  hf         tokenizers.ByteLevelBPETokenizer.encode_batch

"per CPU-s" divides by the process CPU time (all threads) instead of the wall time: on a shared
machine it is the steadier figure; HuggingFace uses every core, the TF rows TF's thread pools.
"agree" is the share of sentences whose ids equal HuggingFace's (without [CLS]/[SEP] for the
rows that do not add them); "ratio" is the row's sentences/s over HuggingFace's.

Usage:  python bench/pretrained_tokenizers.py [--data DIR] [--batch-size 1024] [--reps 3]
                                              [--no-hub] [--limit N]
                                              [--output bench/results_pretrained_tokenizers.txt]
`tokenizer_rows(...)` returns the rows for bench/pretrained.py.
"""

import argparse
import os
import platform
import sys
import tempfile
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
os.environ.setdefault("KERAS_BACKEND", "tensorflow")

import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402

from keras_tfm.tokenizers import BytePairTokenizer, WordPieceTokenizer

HERE = os.path.dirname(os.path.abspath(__file__))
DATA = os.path.join(HERE, "..", "..", "shared", "data")


def read_sst2(data_dir):
    texts = []
    for split in ("train", "dev", "test"):
        with open(
            os.path.join(data_dir, "sst2_sentence_level", f"stsa.binary.{split}"), encoding="utf-8"
        ) as f:
            texts += [line.split(" ", 1)[1] for line in f.read().split("\n") if line]
    return texts


def _median_pass(run, reps):
    """(median wall seconds, median process CPU seconds) of one pass, after a warm-up pass."""
    run()  # warm-up (tracing)
    times, cpu = [], []
    for _ in range(reps):
        start, start_cpu = time.perf_counter(), time.process_time()
        run()
        times.append(time.perf_counter() - start)
        cpu.append(time.process_time() - start_cpu)
    return float(np.median(times)), float(np.median(cpu))


def _graph_rows(name, fn, texts, batch_size, reps):
    """(name, sentences/s, ids as lists) of a string -> ragged ids function run in a tf.function."""
    encode = tf.function(fn, input_signature=[tf.TensorSpec([None], tf.string)])
    batches = [tf.constant(texts[i : i + batch_size]) for i in range(0, len(texts), batch_size)]

    def run():
        return [encode(b) for b in batches]

    seconds, cpu = _median_pass(run, reps)
    ids = [row for out in run() for row in out.to_list()]
    return name, len(texts) / seconds, len(texts) / cpu, ids


def _hf_row(name, encode_batch, texts, batch_size, reps):
    def run():
        out = []
        for i in range(0, len(texts), batch_size):
            out += encode_batch(texts[i : i + batch_size])
        return out

    seconds, cpu = _median_pass(run, reps)
    return name, len(texts) / seconds, len(texts) / cpu, [e.ids for e in run()]


def _agreement(ids, reference, strip):
    if strip:
        reference = [r[1:-1] for r in reference]
    return sum(a == b for a, b in zip(ids, reference)) / len(reference)


def tokenizer_rows(data_dir=DATA, batch_size=1024, reps=3, hub=True, limit=None):
    """[(row name, sentences/s, sentences per CPU-second, agreement with HuggingFace)] for WordPiece and
    BPE (`limit`: the first N sentences only)."""
    import tokenizers

    texts = read_sst2(data_dir)[:limit]
    checkpoint = os.path.join(data_dir, "all-MiniLM-L6-v2")
    rows = []
    # WordPiece.
    reference = tokenizers.Tokenizer.from_file(os.path.join(checkpoint, "tokenizer.json"))
    reference.no_padding()
    reference.no_truncation()
    hf = _hf_row("wordpiece  hf tokenizers (Rust)", reference.encode_batch, texts, batch_size, reps)
    ours = WordPieceTokenizer.from_pretrained(checkpoint)
    results = [_graph_rows("wordpiece  keras_tfm (core TF)", ours.tokenize, texts, batch_size, reps)]
    if hub:
        import keras_hub

        hub_tok = keras_hub.tokenizers.WordPieceTokenizer(
            vocabulary=os.path.join(checkpoint, "vocab.txt"), lowercase=True, strip_accents=True
        )
        results.append(
            _graph_rows("wordpiece  keras_hub (tf-text)", hub_tok.tokenize, texts, batch_size, reps)
        )
    for name, rate, cpu_rate, ids in results:
        rows.append((name, rate, cpu_rate, _agreement(ids, hf[3], strip="keras_hub" in name)))
    rows.append((*hf[:3], 1.0))
    # Byte-level BPE trained on the same text.
    bpe = tokenizers.ByteLevelBPETokenizer()
    bpe.train_from_iterator(
        texts, vocab_size=1000, min_frequency=2, special_tokens=["<|endoftext|>"], show_progress=False
    )
    with tempfile.TemporaryDirectory() as directory:
        bpe.save_model(directory)
        ours = BytePairTokenizer.from_pretrained(directory)
    hf = _hf_row("bpe        hf tokenizers (Rust)", bpe.encode_batch, texts, batch_size, reps)
    results = [_graph_rows("bpe        keras_tfm (core TF)", ours.tokenize, texts, batch_size, reps)]
    if hub:
        vocabulary = {token: i for i, token in enumerate(ours.get_vocabulary())}
        merges = [m for m in ours.get_config()["merges"]]
        hub_bpe = keras_hub.tokenizers.BytePairTokenizer(vocabulary=vocabulary, merges=merges)
        results.append(
            _graph_rows("bpe        keras_hub (tf-text)", hub_bpe.tokenize, texts, batch_size, reps)
        )
    for name, rate, cpu_rate, ids in results:
        rows.append((name, rate, cpu_rate, _agreement(ids, hf[3], strip=False)))
    rows.append((*hf[:3], 1.0))
    return rows


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--data", default=DATA)
    parser.add_argument("--batch-size", type=int, default=1024)
    parser.add_argument("--reps", type=int, default=3)
    parser.add_argument("--no-hub", action="store_true", help="skip the KerasHub rows")
    parser.add_argument("--limit", type=int, default=None, help="only the first N sentences (a quick check)")
    parser.add_argument("--output", help="also write the table to this file")
    args = parser.parse_args(argv)
    if not os.path.isdir(args.data):
        sys.exit(f"data folder {os.path.abspath(args.data)} is absent")
    rows = tokenizer_rows(args.data, args.batch_size, args.reps, hub=not args.no_hub, limit=args.limit)
    count = len(read_sst2(args.data)[: args.limit])
    lines = [
        f"# SST-2, {count:,} sentences, batch {args.batch_size}, median of {args.reps}; "
        f"{platform.processor() or platform.machine()}, {os.cpu_count()} CPUs, TF {tf.__version__}",
        f"{'tokenizer':40s} {'sentences/s':>12s} {'per CPU-s':>10s} {'agree':>7s} {'ratio':>6s}",
    ]
    # ratio: sentences/s over the HuggingFace row that closes the row's group.
    hf_rates = [next(r[1] for r in rows[i:] if " hf " in r[0]) for i in range(len(rows))]
    lines += [
        f"{name:40s} {rate:12,.0f} {cpu:10,.0f} {agree:7.1%} {rate / hf:6.2f}"
        for (name, rate, cpu, agree), hf in zip(rows, hf_rates)
    ]
    text = "\n".join(lines)
    print(text)
    if args.output:
        with open(args.output + ".tmp", "w", encoding="utf-8") as f:
            f.write(text + "\n")
        os.replace(args.output + ".tmp", args.output)


if __name__ == "__main__":
    main()
