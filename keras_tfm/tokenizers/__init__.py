"""Tokenizers built from TensorFlow ops only, as Keras layers.

Every tokenizer here turns strings into int32 ids with core TF ops
(`tf.strings`, `tf.lookup.StaticHashTable`, `tf.searchsorted`, `tf.gather`,
`tf.while_loop`, `tf.RaggedTensor`; no tensorflow-text), so it runs inside
`tf.data`, inside a `tf.function` with a `tf.TensorSpec([None], tf.string)`
signature, and inside a SavedModel served by a stock TF Serving binary. Each
is a `keras.layers.Layer` whose `get_config()` holds the vocabulary, so it is
saved and restored with a `.keras` model; it can also be saved on its own with
`save_vocabulary(path)` and read back with `from_vocabulary_file(path)` (or
`load_tokenizer(path)`).

One module per concept:

    base               Tokenizer: the shared API, special tokens; load_tokenizer
    batches            string inputs as [batch], fixed-id columns beside ragged ids
    sentence_pairs     `[CLS] a [SEP] b [SEP]` packing (Tokenizer.tokenize_pairs)
    vocabulary         VocabularyTokenizer: tokens <-> ids through a lookup table
    char               CharTokenizer       one id per Unicode character
    byte               ByteTokenizer       one id per byte (256 ids)
    word               WordTokenizer       lower-cased words and punctuation
    wordpiece          WordPieceTokenizer  greedy longest-match-first subwords;
                                           `from_pretrained` reads BERT's vocab.txt
    byte_pair          BytePairTokenizer   GPT-2's byte-level BPE; `from_pretrained`
                                           reads vocab.json + merges.txt
    byte_level         GPT-2's byte alphabet and pre-tokenization regex
    sentencepiece_bpe  SentencePieceBPETokenizer  Llama / Mistral BPE with byte fallback
    sentencepiece_bpe_model  SentencePieceModelBPETokenizer  the same read from a
                                           tokenizer.model, as `sentencepiece` encodes
    qwen2_bpe          Qwen2BPETokenizer   Qwen2's byte-level BPE (NFC, Qwen2's regex)
    added_tokens       added tokens cut out of the text first (their common base)
    bpe_merges         HuggingFace's BPE merge order, exactly, on integer ids
    nfc                Unicode NFC (decomposition, ordering, composition tables)
    qwen2_pieces       Qwen2's pre-tokenization regex from character classes
    tokenizer_json     load_tokenizer_json: the tokenizer a HuggingFace tokenizer.json describes
    tokenizer_json_fields  its parts, read strictly (anything else refused by name)
    unigram            UnigramTokenizer    SentencePiece Unigram (T5, Flan-T5, Marian):
                                           `from_tokenizer_json`, `from_sentencepiece_model`,
                                           `from_pretrained`, `from_marian`; load_marian_tokenizers
    unigram_lattice    Viterbi segmentation of a Unigram model
    unigram_text       added tokens, HF normalizers / pre-tokenizers / decoders, Marian decode
    unigram_files      readers of tokenizer.json, spiece.model and Marian checkpoints
    sentencepiece_model  the SentencePiece .model protobuf, read by hand
    charsmap           SentencePiece's precompiled charsmap (double-array trie) in TF ops
    precompiled_normalizer  the charsmap applied as HF `tokenizers` and as SentencePiece do
    grapheme_tables    grapheme cluster boundaries (for HF's `Precompiled` normalizer)
    bert_text          BERT's basic tokenizer (cleaning, accents, case, CJK, punctuation)
    unicode_tables     per-codepoint tables those normalisers look up
    corpus             split_words, count_words, count_characters
    wordpiece_trainer  learn_wordpiece_vocabulary
    byte_pair_trainer  learn_byte_pair_vocabulary (BytePairTokenizer.from_corpus)
    pair_merges        the greedy pair-merge loop both trainers share
    vocabulary_file    the keras_tfm vocabulary file format
    huggingface_files  readers for HuggingFace tokenizer files

    special_tokens     PAD=0, UNK, CLS, SEP, MASK, BOS, EOS = 1..6 and `SpecialTokens`

Special tokens: see `base` (fixed ids 0..6 for the tokenizers built
`from_corpus`; where a published vocabulary has them for `from_pretrained`).
"""

from keras_tfm.backend import require_tensorflow as _require_tensorflow

_require_tensorflow("keras_tfm.tokenizers")

from keras_tfm.tokenizers.base import Tokenizer, load_tokenizer
from keras_tfm.tokenizers.byte import ByteTokenizer
from keras_tfm.tokenizers.byte_pair import BytePairTokenizer
from keras_tfm.tokenizers.byte_pair_trainer import learn_byte_pair_vocabulary
from keras_tfm.tokenizers.char import CharTokenizer
from keras_tfm.tokenizers.corpus import count_characters, count_words, split_words
from keras_tfm.tokenizers.qwen2_bpe import Qwen2BPETokenizer
from keras_tfm.tokenizers.sentencepiece_bpe import SentencePieceBPETokenizer
from keras_tfm.tokenizers.sentencepiece_bpe_model import SentencePieceModelBPETokenizer
from keras_tfm.tokenizers.special_tokens import (
    BOS,
    CLS,
    EOS,
    MASK,
    NUM_SPECIAL_TOKENS,
    PAD,
    SEP,
    SPECIAL_TOKEN_ROLES,
    SPECIAL_TOKENS,
    UNK,
    SpecialTokens,
)
from keras_tfm.tokenizers.tokenizer_json import load_tokenizer_json
from keras_tfm.tokenizers.unigram import UnigramTokenizer, load_marian_tokenizers
from keras_tfm.tokenizers.vocabulary import VocabularyTokenizer
from keras_tfm.tokenizers.vocabulary_file import VOCABULARY_FILE_FORMAT
from keras_tfm.tokenizers.word import WordTokenizer
from keras_tfm.tokenizers.wordpiece import WordPieceTokenizer
from keras_tfm.tokenizers.wordpiece_trainer import learn_wordpiece_vocabulary

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
    "SPECIAL_TOKEN_ROLES",
    "VOCABULARY_FILE_FORMAT",
    "Tokenizer",
    "VocabularyTokenizer",
    "CharTokenizer",
    "ByteTokenizer",
    "WordTokenizer",
    "WordPieceTokenizer",
    "BytePairTokenizer",
    "SentencePieceBPETokenizer",
    "SentencePieceModelBPETokenizer",
    "Qwen2BPETokenizer",
    "load_tokenizer_json",
    "UnigramTokenizer",
    "load_marian_tokenizers",
    "learn_wordpiece_vocabulary",
    "learn_byte_pair_vocabulary",
    "load_tokenizer",
    "split_words",
    "count_words",
    "count_characters",
]
