"""keras_tfm.data: tf.data pipelines and dataset loaders (tokenizers: `keras_tfm.tokenizers`).

pipelines       lm_windows, mlm_mask, seq2seq_pairs, pad_and_batch,
                bucket_by_length, tokenize_dataset
loaders         TFDS (tiny_shakespeare, ted_hrlr_translate, glue/sst2) and
                local files (text, tab pairs, aligned files, label lines)
"""

from keras_tfm.backend import require_tensorflow as _require_tensorflow

_require_tensorflow("keras_tfm.data")

from keras_tfm.data.loaders import (
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
from keras_tfm.data.mlm_masking import mlm_mask
from keras_tfm.data.pipelines import (
    bucket_by_length,
    lm_windows,
    pad_and_batch,
    seq2seq_pairs,
    tokenize_dataset,
)

__all__ = [
    "lm_windows",
    "mlm_mask",
    "seq2seq_pairs",
    "pad_and_batch",
    "bucket_by_length",
    "tokenize_dataset",
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
