"""tf.data pipelines and dataset loaders (tokenizers: `keras_tfm.tokenizers`).

One module per step:

    tokenization     tokenize_dataset                  strings -> ids inside tf.data
    lm_batches       lm_windows                        next-token (x, y) windows of a token stream
    seq2seq_batches  seq2seq_pairs                     teacher-forcing batches (source, [BOS] y, y [EOS])
    padding          pad_and_batch, bucket_by_length   batches of variable-length examples
    mlm_masking      mlm_mask                          BERT's masked-language-model corruption

and, from `keras_tfm.models` (where the BERT models' text methods use them):
`encode_texts` ([CLS] … [SEP] rows), `LengthBucketedBatches` (length-bucketed batches with
dynamic padding) and `embed_texts` (a `SentenceEncoder` over a list of texts).
    dataset_common   what the pipelines share: seeds, integer checks, the finish
                     (autotuning off, a small prefetch)
    loaders          TFDS (tiny_shakespeare, ted_hrlr_translate, glue/sst2) and
                     local files (text, tab pairs, aligned files, label lines)
"""

from keras_tfm.backend import require_tensorflow as _require_tensorflow

_require_tensorflow("keras_tfm.data")

from keras_tfm.data.lm_batches import lm_windows  # noqa: E402
from keras_tfm.data.loaders import (  # noqa: E402
    TED_HRLR_PAIRS,
    load_aligned_files,
    load_glue_sst2,
    load_label_sentence_lines,
    load_tab_pairs,
    load_ted_hrlr,
    load_text_file,
    load_tiny_shakespeare,
    load_tiny_shakespeare_file,
    split_tiny_shakespeare,
)
from keras_tfm.data.mlm_masking import mlm_mask  # noqa: E402
from keras_tfm.data.padding import bucket_by_length, pad_and_batch  # noqa: E402
from keras_tfm.data.seq2seq_batches import seq2seq_pairs  # noqa: E402
from keras_tfm.data.tokenization import tokenize_dataset  # noqa: E402
from keras_tfm.models.bert_text import embed_texts, encode_texts  # noqa: E402
from keras_tfm.models.text_batches import LengthBucketedBatches  # noqa: E402

__all__ = [
    "tokenize_dataset",
    "lm_windows",
    "seq2seq_pairs",
    "pad_and_batch",
    "bucket_by_length",
    "mlm_mask",
    "embed_texts",
    "encode_texts",
    "LengthBucketedBatches",
    "load_tiny_shakespeare",
    "load_ted_hrlr",
    "load_glue_sst2",
    "TED_HRLR_PAIRS",
    "load_text_file",
    "load_tiny_shakespeare_file",
    "split_tiny_shakespeare",
    "load_tab_pairs",
    "load_aligned_files",
    "load_label_sentence_lines",
]
