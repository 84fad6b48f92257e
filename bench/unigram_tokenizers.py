"""In-graph SentencePiece Unigram tokenizer throughput (sentences/s, batch 1,024) beside HuggingFace.

Workload: the SST-2 sentences of bench/pretrained_tokenizers.py (train + dev + test, 9,613 lines of
../shared/data/sst2_sentence_level), cut into batches of `--batch-size` strings; each in-graph
tokenizer runs as one `tf.function` with a `[None]` string signature (traced once before timing),
and the figure is the median over `--reps` passes over the whole corpus (`--limit` keeps the first N
sentences, for a quick check).

Rows (the tokenizers of tests/fixtures/tokenizers, 1,000-piece models trained on ../shared/data):
  t5 unigram   keras_tfm  UnigramTokenizer.from_pretrained(unigram_t5)  core TF ops only
  t5 unigram   hf         tokenizers.Tokenizer("tokenizer.json").encode_batch  Rust, all cores
  marian src   keras_tfm  UnigramTokenizer.from_marian(unigram_marian)  core TF, SentencePiece rules
  marian src   hf         transformers' MarianTokenizer (the sentencepiece library, one call per
                          sentence) where `transformers` is installed; else MarianTokenizer's
                          encode path by hand: `sentencepiece` pieces (batch call, its own
                          threads) mapped to ids by vocab.json, </s> appended

"per CPU-s" divides by the process CPU time (all threads); "agree" is the share of sentences whose ids
equal HuggingFace's; "ratio" is keras_tfm's sentences/s over HuggingFace's.

Usage:  python bench/unigram_tokenizers.py [--data DIR] [--batch-size 1024] [--reps 3] [--limit N]
                                           [--output bench/results_unigram_tokenizers.txt]
`unigram_rows(...)` returns the rows.
"""

import argparse
import json
import lzma
import os
import platform
import shutil
import sys
import tempfile

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
os.environ.setdefault("KERAS_BACKEND", "tensorflow")

import tensorflow as tf  # noqa: E402
from pretrained_tokenizers import DATA, _agreement, _graph_rows, _hf_row, _median_pass, read_sst2  # noqa: E402

from keras_tfm.tokenizers import UnigramTokenizer  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
FIXTURES = os.path.join(HERE, os.pardir, "tests", "fixtures", "tokenizers")


def unpack(name, target):
    """The fixture folder `name` copied to `target` with its `.xz` files decompressed."""
    source = os.path.join(FIXTURES, name)
    os.makedirs(target)
    for file in os.listdir(source):
        if file.endswith(".xz"):
            with (
                lzma.open(os.path.join(source, file)) as packed,
                open(os.path.join(target, file[:-3]), "wb") as out,
            ):
                out.write(packed.read())
        else:
            shutil.copy(os.path.join(source, file), target)
    return target


def _marian_reference(directory, texts, reps):
    """MarianTokenizer's row (or its encode path with `sentencepiece` alone), or None when neither
    transformers nor sentencepiece is installed."""
    try:
        from transformers import MarianTokenizer
    except ImportError:
        return _sentencepiece_marian(directory, texts, reps)
    tokenizer = MarianTokenizer.from_pretrained(directory)

    def run():
        return [tokenizer(text)["input_ids"] for text in texts]

    seconds, cpu = _median_pass(run, reps)
    return "marian src  hf MarianTokenizer (sentencepiece)", len(texts) / seconds, len(texts) / cpu, run()


def _sentencepiece_marian(directory, texts, reps):
    """MarianTokenizer's encode of source text without transformers: source.spm pieces, ids from
    vocab.json (`<unk>` for a piece it lacks), `</s>` appended (no `>>xx<<` codes in SST-2)."""
    try:
        import sentencepiece
    except ImportError:
        return None
    with open(os.path.join(directory, "vocab.json"), encoding="utf-8") as f:
        vocab = json.load(f)
    processor = sentencepiece.SentencePieceProcessor(model_file=os.path.join(directory, "source.spm"))
    unk, eos = vocab["<unk>"], vocab["</s>"]

    def run():
        return [
            [vocab.get(p, unk) for p in pieces] + [eos] for pieces in processor.encode(texts, out_type=str)
        ]

    seconds, cpu = _median_pass(run, reps)
    return "marian src  sentencepiece + vocab.json", len(texts) / seconds, len(texts) / cpu, run()


def unigram_rows(data_dir=DATA, batch_size=1024, reps=3, limit=None):
    """[(row name, sentences/s, sentences per CPU-s, agreement, ratio to HF)] for the T5 and Marian fixtures."""
    import tokenizers

    texts = read_sst2(data_dir)[:limit]
    rows = []
    with tempfile.TemporaryDirectory() as folder:
        t5_dir = unpack("unigram_t5", os.path.join(folder, "t5"))
        marian_dir = unpack("unigram_marian", os.path.join(folder, "marian"))
        reference = tokenizers.Tokenizer.from_file(os.path.join(t5_dir, "tokenizer.json"))
        hf = _hf_row("t5 unigram  hf tokenizers (Rust)", reference.encode_batch, texts, batch_size, reps)
        ours = _graph_rows(
            "t5 unigram  keras_tfm (core TF)",
            UnigramTokenizer.from_pretrained(t5_dir).tokenize,
            texts,
            batch_size,
            reps,
        )
        rows.append((*ours[:3], _agreement(ours[3], hf[3], strip=False), ours[1] / hf[1]))
        rows.append((*hf[:3], 1.0, 1.0))
        source = UnigramTokenizer.from_marian(marian_dir, "source")
        ours = _graph_rows("marian src  keras_tfm (core TF)", source.tokenize, texts, batch_size, reps)
        hf = _marian_reference(marian_dir, texts, reps)
        if hf is None:
            rows.append((*ours[:3], float("nan"), float("nan")))
        else:
            rows.append((*ours[:3], _agreement(ours[3], hf[3], strip=False), ours[1] / hf[1]))
            rows.append((*hf[:3], 1.0, 1.0))
    return rows


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--data", default=DATA)
    parser.add_argument("--batch-size", type=int, default=1024)
    parser.add_argument("--reps", type=int, default=3)
    parser.add_argument("--limit", type=int, default=None, help="only the first N sentences (a quick check)")
    parser.add_argument("--output", help="also write the table to this file")
    args = parser.parse_args(argv)
    if not os.path.isdir(args.data):
        sys.exit(f"data folder {os.path.abspath(args.data)} is absent")
    rows = unigram_rows(args.data, args.batch_size, args.reps, args.limit)
    count = len(read_sst2(args.data)[: args.limit])
    lines = [
        f"# SST-2, {count:,} sentences, batch {args.batch_size}, median of {args.reps}; "
        f"{platform.processor() or platform.machine()}, {os.cpu_count()} CPUs, load {os.getloadavg()[0]:.1f}, "
        f"TF {tf.__version__}",
        f"{'tokenizer':44s} {'sentences/s':>12s} {'per CPU-s':>10s} {'agree':>7s} {'ratio':>6s}",
    ]
    for name, rate, cpu, agree, ratio in rows:
        shares = f"{agree:7.1%} {ratio:6.2f}" if agree == agree else f"{'n/a':>7s} {'n/a':>6s}"
        lines.append(f"{name:44s} {rate:12,.0f} {cpu:10,.0f} {shares}")
    text = "\n".join(lines)
    print(text)
    if args.output:
        with open(args.output + ".tmp", "w", encoding="utf-8") as f:
            f.write(text + "\n")
        os.replace(args.output + ".tmp", args.output)


if __name__ == "__main__":
    main()
