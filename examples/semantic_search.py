"""Semantic search: rank the SST-2 dev sentences against a query with a sentence encoder.

    python examples/semantic_search.py --checkpoint ../shared/data/all-MiniLM-L6-v2 \\
        --data ../shared/data/sst2_sentence_level --query "a moving story about family"

`keras_tfm.models.sentence_encoder(CHECKPOINT)` builds the BERT encoder with the checkpoint's
pooling (all-MiniLM-L6-v2: mean over real tokens, then L2 normalisation, as its
1_Pooling/config.json and modules.json say), so the cosine similarity of two texts is the dot
product of their vectors. The corpus is embedded once (batched by length), the query ranked
against it, and the top `--top-k` sentences printed with their score and SST-2 label.
"""

import argparse
import os
import sys
import time

import keras_tfm_console

keras_tfm_console.quiet_tensorflow()  # before keras_tfm imports TensorFlow: no start-up lines


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--checkpoint", required=True, help="sentence-transformers / BERT checkpoint directory")
    p.add_argument("--data", required=True, help="folder with stsa.binary.dev")
    p.add_argument("--query", action="append", help="query text (repeatable)")
    p.add_argument("--top-k", type=int, default=5)
    p.add_argument("--max-length", type=int, default=256)
    args = p.parse_args(argv)
    corpus_file = os.path.join(args.data, "stsa.binary.dev")
    for flag, path, ok in (
        ("--checkpoint", args.checkpoint, os.path.isdir(args.checkpoint)),
        ("--data", corpus_file, os.path.isfile(corpus_file)),
    ):
        if not ok:
            print(f"error: {flag}: {path!r} not found", file=sys.stderr)
            return 2
    queries = args.query or ["a moving story about family", "boring and far too long", "funny"]

    import numpy as np

    from keras_tfm.data import embed_texts, load_label_sentence_lines
    from keras_tfm.models import sentence_encoder
    from keras_tfm.tokenizers import WordPieceTokenizer

    texts, labels = [], []
    for sentence, label in load_label_sentence_lines(corpus_file).as_numpy_iterator():
        texts.append(sentence.decode("utf-8"))
        labels.append(int(label))
    start = time.perf_counter()
    model = sentence_encoder(args.checkpoint)
    tokenizer = WordPieceTokenizer.from_pretrained(args.checkpoint)
    print(f"loaded {args.checkpoint} in {time.perf_counter() - start:.1f} s")
    start = time.perf_counter()
    corpus = embed_texts(model, tokenizer, texts, args.max_length)
    seconds = time.perf_counter() - start
    print(f"embedded {len(texts)} sentences in {seconds:.1f} s ({len(texts) / seconds:.0f} sentences/s)")
    vectors = embed_texts(model, tokenizer, queries, args.max_length)
    for query, vector in zip(queries, vectors):
        scores = corpus @ vector
        print(f"\nquery: {query}")
        for i in np.argsort(-scores)[: args.top_k]:
            sentiment = "positive" if labels[i] else "negative"
            print(f"  {scores[i]:.3f}  [{sentiment}]  {texts[i]}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
