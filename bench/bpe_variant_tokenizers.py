"""Throughput of the tokenizer.json BPE tokenizers (Llama / Mistral SentencePiece BPE, Qwen2) against
HuggingFace `tokenizers` on the same lines, and their agreement (issue 35 §5).

Tokenizers: the fixtures of tests/fixtures/tokenizers (made by make_bpe_fixtures.py, 1,000-token
vocabularies trained on ../shared/data): `llama_bpe` (Prepend/Replace normalizer, byte fallback,
"<s>" added) and `qwen2_bpe` (NFC, Qwen2's regex, byte-level); `sp_bpe_llama`, a 2,000-piece
Llama-style SentencePiece BPE `tokenizer.model` (make_sentencepiece_bpe_fixtures.py) read on its own
by `SentencePieceModelBPETokenizer`, against `tokenizers` on the tokenizer.json that `save_pretrained`
writes for it (the same ids) and, where installed, the `sentencepiece` library itself (C++, its own
threads); `--all` adds the two Metaspace forms.
Workload: Anki English and Spanish sentences, Multi30k German and tiny-shakespeare lines from
../shared/data, interleaved, `--lines` of them (default 12,000), in batches of `--batch-size`
(1,024). keras_tfm runs as one `tf.function` with a `[None]` string signature (traced before
timing); HuggingFace as `Tokenizer.encode_batch` (Rust, all cores). The figure is the median over
`--reps` passes, after a warm-up pass. "per CPU-s" divides by process CPU time (all threads), the
steadier figure on a shared machine. "ratio" is keras_tfm's sentences/s over HuggingFace's (on the
sentencepiece row: over sentencepiece's).

Usage:  python bench/bpe_variant_tokenizers.py [--data DIR] [--lines 12000] [--batch-size 1024]
                                                [--reps 3] [--all] [--output FILE]
"""

import argparse
import gzip
import lzma
import os
import platform
import sys
import tempfile

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
os.environ.setdefault("KERAS_BACKEND", "tensorflow")

import tensorflow as tf  # noqa: E402
from pretrained_tokenizers import _agreement, _graph_rows, _hf_row, _median_pass  # noqa: E402

from keras_tfm.checkpoints.tokenizer_files import save_tokenizer  # noqa: E402
from keras_tfm.tokenizers import SentencePieceModelBPETokenizer, load_tokenizer_json  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
DATA = os.path.join(HERE, "..", "..", "shared", "data")
FIXTURES = os.path.join(HERE, "..", "tests", "fixtures", "tokenizers")


def read_lines(data_dir, count):
    """`count` lines alternating Anki English, Anki Spanish, Multi30k German and tiny-shakespeare."""
    with open(os.path.join(data_dir, "spa_eng_anki", "spa-eng", "spa.txt"), encoding="utf-8") as f:
        pairs = [line.split("\t")[:2] for line in f.read().split("\n") if "\t" in line]
    with gzip.open(os.path.join(data_dir, "multi30k_task1_raw", "train.de.gz"), "rt", encoding="utf-8") as f:
        german = [line for line in f.read().split("\n") if line]
    with open(os.path.join(data_dir, "tiny_shakespeare", "input.txt"), encoding="utf-8") as f:
        shakespeare = [line for line in f.read().split("\n") if line]
    sources = [[p[0] for p in pairs], [p[1] for p in pairs], german, shakespeare]
    lines = []
    for i in range(count):
        source = sources[i % len(sources)]
        lines.append(source[(i // len(sources)) % len(source)])
    return lines


def _tokenizer_model(folder):
    """The `sp_bpe_llama` fixture's tokenizer.model, decompressed into `folder`: (ours, tokenizer.json
    path written by `save_tokenizer`, the model file)."""
    model_file = os.path.join(folder, "tokenizer.model")
    with lzma.open(os.path.join(FIXTURES, "sp_bpe_llama", "tokenizer.model.xz")) as packed:
        with open(model_file, "wb") as out:
            out.write(packed.read())
    ours = SentencePieceModelBPETokenizer.from_sentencepiece_model(model_file, add_bos=False)
    save_tokenizer(ours, folder)
    return ours, os.path.join(folder, "tokenizer.json"), model_file


def _sentencepiece_row(name, model_file, texts, batch_size, reps, reference):
    """The `sentencepiece` library's row, or None where it is not installed."""
    try:
        import sentencepiece
    except ImportError:
        return None
    processor = sentencepiece.SentencePieceProcessor(model_file=model_file)

    def run():
        return [
            ids
            for i in range(0, len(texts), batch_size)
            for ids in processor.encode(texts[i : i + batch_size])
        ]

    seconds, cpu = _median_pass(run, reps)
    return name, len(texts) / seconds, len(texts) / cpu, _agreement(run(), reference, strip=False), None


def tokenizer_rows(
    data_dir=DATA, lines=12000, batch_size=1024, reps=3, names=("llama_bpe", "sp_bpe_llama", "qwen2_bpe")
):
    """[(row name, sentences/s, sentences per CPU-s, agreement, ratio to HuggingFace)]."""
    import tokenizers

    texts = read_lines(data_dir, lines)
    rows = []
    with tempfile.TemporaryDirectory() as folder:
        for name in names:
            model_file = None
            if name == "sp_bpe_llama":
                ours, tokenizer_json, model_file = _tokenizer_model(folder)
            else:
                path = os.path.join(FIXTURES, name)
                ours, tokenizer_json = load_tokenizer_json(path), os.path.join(path, "tokenizer.json")
            reference = tokenizers.Tokenizer.from_file(tokenizer_json)
            hf = _hf_row(f"{name:24s} hf tokenizers (Rust)", reference.encode_batch, texts, batch_size, reps)
            row = _graph_rows(f"{name:24s} keras_tfm (core TF)", ours.tokenize, texts, batch_size, reps)
            rows.append((*row[:3], _agreement(row[3], hf[3], strip=False), row[1] / hf[1]))
            rows.append((*hf[:3], 1.0, 1.0))
            if model_file is not None:
                spm = _sentencepiece_row(
                    f"{name:24s} sentencepiece (C++)", model_file, texts, batch_size, reps, hf[3]
                )
                if spm is not None:
                    rows.append((*spm[:4], row[1] / spm[1]))
    return rows


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--data", default=DATA)
    parser.add_argument("--lines", type=int, default=12000)
    parser.add_argument("--batch-size", type=int, default=1024)
    parser.add_argument("--reps", type=int, default=3)
    parser.add_argument("--all", action="store_true", help="also the two Metaspace SentencePiece forms")
    parser.add_argument("--output", help="also write the table to this file")
    args = parser.parse_args(argv)
    if not os.path.isdir(args.data):
        sys.exit(f"data folder {os.path.abspath(args.data)} is absent")
    names = ["llama_bpe", "sp_bpe_llama", "qwen2_bpe"]
    if args.all:
        names += ["sp_bpe_metaspace_first", "sp_bpe_metaspace_always"]
    rows = tokenizer_rows(args.data, args.lines, args.batch_size, args.reps, names)
    lines = [
        f"# {args.lines:,} lines (Anki en/es, Multi30k de, Shakespeare), batch {args.batch_size}, median of "
        f"{args.reps}; {platform.processor() or platform.machine()}, {os.cpu_count()} CPUs, TF {tf.__version__}",
        f"{'tokenizer':46s} {'sentences/s':>12s} {'per CPU-s':>10s} {'agree':>7s} {'ratio':>6s}",
    ]
    lines += [
        f"{name:46s} {rate:12,.0f} {cpu:10,.0f} {agree:7.1%} {ratio:6.2f}"
        for name, rate, cpu, agree, ratio in rows
    ]
    text = "\n".join(lines)
    print(text)
    if args.output:
        with open(args.output + ".tmp", "w", encoding="utf-8") as f:
            f.write(text + "\n")
        os.replace(args.output + ".tmp", args.output)


if __name__ == "__main__":
    main()
