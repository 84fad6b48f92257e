"""`keras-tfm embed`: sentence embeddings of a published checkpoint, one JSON line per text.

keras-tfm embed --checkpoint ../shared/data/all-MiniLM-L6-v2 "a sentence" "another one"
"""

import json
import os
import sys

from keras_tfm.cli import usage
from keras_tfm.cli.options import non_negative_int, positive_int

#: Tokens per text when --max-length is not given (capped by the checkpoint's positions).
DEFAULT_MAX_LENGTH = 256


def run_embed(args):
    """Prints {"text": ..., "embedding": [...]} for each text (the arguments, else the lines of stdin)."""
    if not os.path.isdir(args.checkpoint):
        raise usage.UsageError("--checkpoint", f"{args.checkpoint!r} is not a checkpoint directory")
    texts = list(args.texts) or [line.rstrip("\n") for line in sys.stdin if line.strip()]
    if not texts:
        raise usage.UsageError("TEXTS", "give at least one text (arguments or lines on stdin)")
    import numpy as np

    from keras_tfm.models import sentence_encoder
    from keras_tfm.models.bert_text import embed_texts
    from keras_tfm.recipes.finetune import check_bert_checkpoint
    from keras_tfm.tokenizers import WordPieceTokenizer

    check_bert_checkpoint("checkpoint", args.checkpoint)
    try:
        tokenizer = WordPieceTokenizer.from_pretrained(args.checkpoint)
    except (OSError, ValueError) as error:
        raise usage.UsageError("--checkpoint", f"cannot read the tokenizer: {error}") from None
    try:
        model = sentence_encoder(args.checkpoint)
    except ValueError as error:
        raise usage.UsageError("--checkpoint", str(error)) from None
    max_length = args.max_length
    if max_length is None:
        max_length = min(DEFAULT_MAX_LENGTH, model.max_length)
    elif max_length > model.max_length:
        raise usage.UsageError(
            "--max-length",
            f"must be at most the checkpoint's {model.max_length} positions (max_position_embeddings); "
            f"received {max_length}",
        )
    vectors = embed_texts(model, tokenizer, texts, max_length)
    bad = [i for i, vector in enumerate(vectors) if not np.isfinite(vector).all()]
    if bad:  # JSON has no NaN: refuse before printing anything
        raise usage.UsageError(
            "--checkpoint",
            f"the model gave non-finite values (NaN or inf) for {len(bad)} of {len(texts)} text(s), the first "
            f"{texts[bad[0]]!r}; its weights may be damaged",
        )
    for text, vector in zip(texts, vectors):
        values = [round(float(v), args.precision) for v in vector]
        print(json.dumps({"text": text, "embedding": values}, ensure_ascii=False, allow_nan=False))
    return 0


def register(subparsers):
    """`keras-tfm embed`."""
    p = subparsers.add_parser(
        "embed",
        help="sentence embeddings from a published checkpoint",
        description="Prints one JSON line per text: the text and its sentence embedding (pooling and "
        "normalisation as the checkpoint's 1_Pooling/config.json and modules.json say).",
    )
    p.add_argument("--checkpoint", required=True, help="checkpoint directory (e.g. all-MiniLM-L6-v2)")
    p.add_argument("texts", nargs="*", help="texts to embed (default: one per line on stdin)")
    p.add_argument(
        "--max-length",
        type=positive_int,
        default=None,
        help=f"tokens per text (default: {DEFAULT_MAX_LENGTH}, or the checkpoint's positions when fewer; at "
        "most the checkpoint's positions)",
    )
    p.add_argument(
        "--precision", type=non_negative_int, default=6, help="decimals printed (default: %(default)s)"
    )
    return usage.set_handler(p, run_embed)
