"""keras_tfm.data: tokenizers, tf.data pipelines and dataset loaders.

special_tokens  PAD=0, UNK, CLS, SEP, MASK, BOS, EOS = 1..6 and `SpecialTokens`
tokenizers      CharTokenizer, ByteTokenizer, WordTokenizer, WordPieceTokenizer,
                BytePairTokenizer (core TF ops only; Keras layers; SavedModel-exportable;
                `from_pretrained` for BERT's vocab.txt and GPT-2's vocab.json + merges.txt)
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
from keras_tfm.data.special_tokens import (
    BOS,
    CLS,
    EOS,
    MASK,
    NUM_SPECIAL_TOKENS,
    PAD,
    SEP,
    SPECIAL_TOKENS,
    UNK,
    SpecialTokens,
)
from keras_tfm.data.tokenizers import (
    SPECIAL_TOKEN_ROLES,
    VOCABULARY_FILE_FORMAT,
    BytePairTokenizer,
    ByteTokenizer,
    CharTokenizer,
    Tokenizer,
    VocabularyTokenizer,
    WordPieceTokenizer,
    WordTokenizer,
    count_characters,
    count_words,
    learn_wordpiece_vocabulary,
    load_tokenizer,
    split_words,
)
from keras_tfm.data.tokenizers import __all__ as _TOKENIZERS

__all__ = [
    "BOS",
    "CLS",
    "EOS",
    "MASK",
    "NUM_SPECIAL_TOKENS",
    "PAD",
    "SEP",
    "SPECIAL_TOKENS",
    "UNK",
    "SpecialTokens",
    *_TOKENIZERS,
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
