"""The bad-input table (issue 11 §4): every entry is a bad input to a public API and the clear
error it must raise (exception type + a regex on the message that names the argument, flag or
file), or, marked RECOVERS, a documented recovery that the case checks itself.

Tiny models, tokenizers, files, one backup and one GPT export are built once for the module
(`env`); each case only calls the API. Run alone:

    python -m pytest tests/test_bad_input.py -q
"""

import contextlib
import functools
import gzip
import io
import json
import os
import shutil
import socket
import subprocess
import sys

import keras
import numpy as np
import pytest
import tensorflow as tf
from bad_input_table import RECOVERS, Table, interactive_sigint, run_case
from model_harness import tiny_bert_classifier, tiny_gpt

import keras_tfm
from keras_tfm import checks
from keras_tfm.data import (
    lm_windows,
    load_aligned_files,
    load_label_sentence_lines,
    load_tab_pairs,
    load_text_file,
    load_tiny_shakespeare_file,
    mlm_mask,
)
from keras_tfm.export import export_for_serving
from keras_tfm.export.exporter import build_serving
from keras_tfm.generation import Generator, beam_search, generate, samplers
from keras_tfm.layers import (
    FeedForward,
    LearnedPositionalEmbedding,
    MultiHeadSelfAttention,
    OutputHead,
    PositionalEncoding,
    RelativePositionBias,
    TokenAndPositionEmbedding,
    TokenEmbedding,
    TransformerBlock,
    dot_product_attention,
)
from keras_tfm.layers.output_head import softmax_with_temperature
from keras_tfm.losses import MaskedSparseCategoricalCrossentropy
from keras_tfm.models import gpt
from keras_tfm.tokenizers import CharTokenizer
from keras_tfm.training import AtomicBackupAndRestore, compile_for_lm, train

InvalidArgument = tf.errors.InvalidArgumentError
TEXT = "hello world, this is a tiny corpus! yes."
V = 16  # vocabulary of the tiny layer-level models
T = 8  # max_length of the tiny GPT


# --------------------------------------------------------------------------- #
# Shared objects, built once for the module (lazily: a case builds what it uses).
# --------------------------------------------------------------------------- #


class Env:
    def __init__(self, root):
        self.root = root

    def path(self, name, data):
        path = os.path.join(self.root, name)
        with open(path, "wb") as f:
            f.write(data)
        return path

    @functools.cached_property
    def files(self):
        lines = "".join(f"line {i}\tlínea {i}\n" for i in range(500)).encode("utf-8")
        packed = gzip.compress(lines)
        return {
            "missing": os.path.join(self.root, "missing.txt"),
            "empty": self.path("empty.txt", b""),
            "binary": self.path("binary.txt", b"abc\x00\x01\x02def"),
            "latin1": self.path("latin1.txt", "café\tcoffee\n".encode("latin-1")),
            "truncated_gz": self.path("truncated.txt.gz", packed[: len(packed) // 3]),
            "not_gzip": self.path("plain.txt.gz", lines),
            "good_gz": self.path("good.txt.gz", packed),
            "short_gz": self.path("short.txt.gz", gzip.compress(b"one\ntwo\n")),
            "no_tab": self.path("no_tab.tsv", b"hello\thola\nno tab here\n"),
            "fullwidth": self.path("sst.txt", "1 a good film\n\uff11 a full-width label\n".encode("utf-8")),
            "no_sentence": self.path("sst2.txt", b"1 fine\n0 \n"),
        }

    @functools.cached_property
    def tokenizer(self):
        return CharTokenizer.from_corpus(TEXT)

    @functools.cached_property
    def gpt(self):
        """The tiny GPT with one layer (the cases check arguments, not depth): its export and
        decoding loops trace and compile faster."""
        return tiny_gpt(vocabulary_size=self.tokenizer.vocabulary_size, max_length=T, num_layers=1)

    @functools.cached_property
    def gpt_xla(self):
        """A second (smaller) GPT compiled with the default XLA train step (compile_for_lm), and its
        initial weights: a case restores them first, since a NaN step leaves NaN weights."""
        model = tiny_gpt(seed=None, vocabulary_size=V, max_length=T, num_layers=1, d_model=16, d_ff=16)
        compile_for_lm(model, learning_rate=1e-3)
        return model, model.get_weights()

    def xla_train_loss(self, x, y):
        model, weights = self.gpt_xla
        model.set_weights(weights)
        return model.train_on_batch(x, y, return_dict=True)["loss"]

    @functools.cached_property
    def generator(self):
        """The tiny GPT's generator, run eagerly: every argument check runs before any compilation,
        and the few tokens these cases decode need no XLA compile."""
        return Generator(self.gpt, run_eagerly=True)

    @functools.cached_property
    def attention(self):
        layer = MultiHeadSelfAttention(num_heads=2, causal=True)
        layer(np.ones((2, 4, 8), "float32"))
        return layer

    @functools.cached_property
    def embedding(self):
        layer = TokenEmbedding(V, 8)
        layer(np.zeros((1, 2), "int32"))
        return layer

    @functools.cached_property
    def positions(self):
        layer = LearnedPositionalEmbedding(4)
        layer(np.zeros((1, 4, 8), "float32"))
        return layer

    @functools.cached_property
    def export(self):
        """One GPT export (with the stale temporary folder of a killed export planted first)."""
        base = os.path.join(self.root, "saved_models", "gpt")
        dead = subprocess.Popen([sys.executable, "-c", "pass"])
        dead.wait()
        stale = os.path.join(base, f".7.tmp-{dead.pid}@{socket.gethostname()}-abc123")
        os.makedirs(os.path.join(stale, "variables"))
        path = export_for_serving(
            self.gpt,
            base,
            tokenizer=self.tokenizer,
            warmup=False,
            max_prompt_length=T,
            max_new_tokens_limit=2,
        )
        return {"path": path, "stale": stale, "loaded": tf.saved_model.load(path)}

    def serve(self, signature, **inputs):
        fn = self.export["loaded"].signatures[signature]
        return fn(**{k: tf.constant(v) if not isinstance(v, tf.Tensor) else v for k, v in inputs.items()})

    @functools.cached_property
    def classifier_serving(self):
        from keras_tfm.tokenizers import WordTokenizer

        tok = WordTokenizer.from_corpus(["the cat sat on a mat dog ran"])
        model = tiny_bert_classifier(
            seed=None, num_classes=2, vocabulary_size=tok.vocabulary_size, max_length=8
        )
        serving = build_serving(model, tok, kind="classifier")
        (name, fn, signature), *_ = serving.endpoints()
        return tf.function(fn, input_signature=signature)

    @functools.cached_property
    def backup(self):
        """A valid backup (step 4) of a tiny Dense model, and the model factory."""

        def build(width=4):
            model = keras.Sequential([keras.Input((3,)), keras.layers.Dense(width), keras.layers.Dense(1)])
            model.compile(optimizer="sgd", loss="mse")
            return model

        folder = os.path.join(self.root, "backup")
        data = tf.data.Dataset.from_tensors((tf.ones((2, 3)), tf.ones((2, 1)))).repeat()
        callback = AtomicBackupAndRestore(folder, save_freq=2, delete_checkpoint=False)
        train(build(), data, steps=4, steps_per_epoch=4, callbacks=[callback], verbose=0)
        return {"folder": folder, "build": build, "data": data}

    def backup_copy(self, name):
        folder = os.path.join(self.root, "backups", name)
        shutil.copytree(self.backup["folder"], folder)
        meta = json.load(open(os.path.join(folder, AtomicBackupAndRestore.METADATA)))
        return folder, os.path.join(folder, meta["weights"]), meta


@pytest.fixture(scope="module")
def env(tmp_path_factory):
    return Env(str(tmp_path_factory.mktemp("bad_input")))


# --------------------------------------------------------------------------- #
# The table.
# --------------------------------------------------------------------------- #

TABLE = Table()
case, simple, CASES = TABLE.case, TABLE.simple, TABLE.cases


def run_xla(fn, *args):
    return tf.function(fn, jit_compile=True)(*args)


# ---- layers: options -------------------------------------------------------- #
simple(
    "block-norm_first-string",
    TypeError,
    r"`norm_first` must be a bool.*'false'",
    lambda: TransformerBlock(32, 2, 64, norm_first="false"),
)
simple(
    "block-causal-string",
    TypeError,
    r"`causal` must be a bool.*'false'",
    lambda: TransformerBlock(32, 2, 64, causal="false"),
)
simple(
    "block-cross_attention-int",
    TypeError,
    r"`cross_attention` must be a bool",
    lambda: TransformerBlock(32, 2, 64, cross_attention=1),
)
simple(
    "attention-causal-string",
    TypeError,
    r"`causal` must be a bool",
    lambda: MultiHeadSelfAttention(2, causal="true"),
)
simple("attention-num_heads-0", ValueError, r"`num_heads`.*0", lambda: MultiHeadSelfAttention(0))
simple(
    "attention-impl-unknown",
    ValueError,
    r"attention_impl.*'flash'.*expected one of",
    lambda: MultiHeadSelfAttention(2, attention_impl="flash"),
)
simple(
    "attention-options-unknown-key",
    ValueError,
    r"`attention_options` has unknown key\(s\) \['chunk'\]; valid keys are .*query_chunk_size",
    lambda: MultiHeadSelfAttention(2, attention_impl="chunked", attention_options={"chunk": 8}),
)
simple(
    "attention-options-key-of-other-impl",
    ValueError,
    r"unknown key\(s\) \['window'\]",
    lambda: MultiHeadSelfAttention(2, attention_options={"window": 8}),
)
simple(
    "attention-options-not-dict",
    TypeError,
    r"`attention_options` must be a dict",
    lambda: MultiHeadSelfAttention(2, attention_options=[("window", 8)]),
)
simple("attention-dropout-1.5", ValueError, r"`dropout`.*1.5", lambda: MultiHeadSelfAttention(2, dropout=1.5))
simple(
    "feed_forward-use_bias-string",
    TypeError,
    r"`use_bias` must be a bool",
    lambda: FeedForward(64, use_bias="no"),
)
simple(
    "feed_forward-activation-unknown",
    ValueError,
    r"`activation`.*'swish2'",
    lambda: FeedForward(64, activation="swish2"),
)
simple("feed_forward-d_ff-0", ValueError, r"`d_ff`.*0", lambda: FeedForward(0))
simple(
    "relative_bias-bidirectional-string",
    TypeError,
    r"`bidirectional` must be a bool",
    lambda: RelativePositionBias(2, bidirectional="false"),
)
simple("embedding-vocabulary-0", ValueError, r"`vocabulary_size`.*0", lambda: TokenEmbedding(0, 8))
simple(
    "embedding-mask_zero-string",
    TypeError,
    r"`mask_zero` must be a bool",
    lambda: TokenEmbedding(V, 8, mask_zero="false"),
)
simple(
    "token_and_position-position-unknown",
    ValueError,
    r"`position`.*'rotary'",
    lambda: TokenAndPositionEmbedding(V, 8, max_length=8, position="rotary"),
)
simple(
    "token_and_position-learned-needs-max_length",
    ValueError,
    r"max_length",
    lambda: TokenAndPositionEmbedding(V, 8, position="learned"),
)
simple(
    "output_head-temperature-nan",
    ValueError,
    r"`temperature` must be a finite number.*nan",
    lambda: OutputHead(V, output="probabilities", temperature=float("nan")),
)
simple(
    "output_head-temperature-0",
    ValueError,
    r"`temperature`.*\(0.0, inf\].*0",
    lambda: OutputHead(V, output="probabilities", temperature=0.0),
)
simple(
    "output_head-temperature-string",
    TypeError,
    r"`temperature` must be a number",
    lambda: OutputHead(V, temperature="hot"),
)
simple(
    "softmax-temperature-nan",
    ValueError,
    r"`temperature` must be a finite number",
    lambda: softmax_with_temperature(np.ones((1, 4), "float32"), float("nan")),
)
simple(
    "softmax-temperature-zero-tensor",
    ValueError,
    r"`temperature` must be a finite number > 0",
    lambda: softmax_with_temperature(np.ones((1, 4), "float32"), tf.constant(0.0)),
)


@case("softmax-temperature-zero-tensor-in-tf.function", InvalidArgument, r"`temperature` must be a finite")
def _(env):
    tf.function(softmax_with_temperature)(tf.ones((1, 4)), tf.constant(0.0))


@case(
    "output_head-call-temperature-negative-tensor", ValueError, r"`temperature` must be a finite number > 0"
)
def _(env):
    OutputHead(V, output="probabilities")(np.ones((1, 2, 8), "float32"), temperature=tf.constant(-1.0))


# ---- layers: inputs ---------------------------------------------------------- #
@case("embedding-negative-id", ValueError, r"`token_ids` holds ids outside \[0, 16\).*-2")
def _(env):
    env.embedding(np.array([[1, -2, 3]]))


@case("embedding-id-equal-vocabulary", ValueError, r"`token_ids` holds ids outside \[0, 16\).*16")
def _(env):
    env.embedding(np.array([[1, 16]]))


@case("embedding-id-too-large-tf.function", InvalidArgument, r"`token_ids` holds ids outside \[0, 16\)")
def _(env):
    tf.function(env.embedding)(tf.constant([[1, 70]]))


@case("embedding-id-too-large-xla-is-nan", RECOVERS)
def _(env):
    # XLA drops assertions: the bad position's embedding is NaN (so a loss on it is NaN), never a
    # silently clamped row of the table.
    out = run_xla(env.embedding, tf.constant([[1, 70]])).numpy()
    assert np.isnan(out[0, 1]).all() and np.isfinite(out[0, 0]).all()


@case("embedding-float-ids", TypeError, r"integer token ids.*float32")
def _(env):
    env.embedding(np.array([[1.0, 2.0]], "float32"))


@case("embedding-rank-3-ids", ValueError, r"`inputs` must have rank 2")
def _(env):
    env.embedding(np.zeros((1, 2, 3), "int32"))


@case("positional_encoding-int-input", TypeError, r"`inputs` must be a float tensor.*int32")
def _(env):
    PositionalEncoding()(np.ones((1, 4, 8), "int32"))


@case("learned_positions-too-long", ValueError, r"length 6.*exceeds `max_length`=4")
def _(env):
    env.positions(np.zeros((1, 6, 8), "float32"))


@case("learned_positions-too-long-dynamic", InvalidArgument, r"`inputs` is longer than `max_length`=4")
def _(env):
    fn = tf.function(env.positions, input_signature=[tf.TensorSpec([None, None, 8])])
    fn(tf.zeros((1, 6, 8)))


@case("learned_positions-rank-2", ValueError, r"`inputs` must have rank 3")
def _(env):
    env.positions(np.zeros((1, 4), "float32"))


@case("attention-inputs-rank-2", ValueError, r"`inputs` must have rank 3")
def _(env):
    env.attention(np.ones((2, 8), "float32"))


@case(
    "mask-additive-float", TypeError, r"`padding_mask` has dtype float32; .*True = may attend.*additive == 0"
)
def _(env):
    env.attention(np.ones((2, 4, 8), "float32"), padding_mask=np.zeros((2, 4), "float32"))


@case("mask-segment-ids-1-2", ValueError, r"`padding_mask` is an int mask with values other than 0/1")
def _(env):
    env.attention(np.ones((2, 4, 8), "float32"), padding_mask=np.array([[1, 1, 2, 2]] * 2))


@case("mask-attention-additive-float", TypeError, r"`attention_mask` has dtype float32")
def _(env):
    additive = np.where(np.tril(np.ones((4, 4))) > 0, 0.0, -1e9).astype("float32")
    env.attention(np.ones((2, 4, 8), "float32"), attention_mask=additive)


@case("mask-int-0-1-accepted", RECOVERS)
def _(env):
    x = np.random.default_rng(0).normal(size=(2, 4, 8)).astype("float32")
    as_int = env.attention(x, padding_mask=np.array([[1, 1, 1, 0]] * 2))
    as_bool = env.attention(x, padding_mask=np.array([[True, True, True, False]] * 2))
    np.testing.assert_allclose(np.asarray(as_int), np.asarray(as_bool), atol=1e-6)


@case("mask-batch-mismatch", ValueError, r"`padding_mask` batch size 3 does not match the batch size 2")
def _(env):
    env.attention(np.ones((2, 4, 8), "float32"), padding_mask=np.ones((3, 4), bool))


@case(
    "mask-length-mismatch-tf.function",
    InvalidArgument,
    r"`padding_mask` \(batch, length\) sizes do not match",
)
def _(env):
    spec = [tf.TensorSpec([None, None, 8]), tf.TensorSpec([None, None], tf.bool)]
    fn = tf.function(lambda x, m: env.attention(x, padding_mask=m), input_signature=spec)
    fn(tf.ones((2, 4, 8)), tf.ones((2, 5), tf.bool))


@case("mask-rank-4-padding", ValueError, r"`padding_mask` must have rank 2")
def _(env):
    env.attention(np.ones((2, 4, 8), "float32"), padding_mask=np.ones((2, 1, 1, 4), bool))


@case("dot_product_attention-float-mask", TypeError, r"`mask` has dtype float32")
def _(env):
    q = np.ones((1, 4, 2, 4), "float32")
    dot_product_attention(q, q, q, mask=np.zeros((4, 4), "float32"))


@case("dot_product_attention-rank-3-query", ValueError, r"`query` must have rank 4")
def _(env):
    q = np.ones((1, 4, 2, 4), "float32")
    dot_product_attention(q[0], q, q)


def _cache(env):
    return env.attention.init_cache(2, 6)


@case(
    "cache_index-negative",
    ValueError,
    r"`cache_index`=-1 with 4 new positions does not fit the cache of length 6",
)
def _(env):
    env.attention(np.ones((2, 4, 8), "float32"), cache=_cache(env), cache_index=-1)


@case("cache_index-overflow", ValueError, r"`cache_index`=3 with 4 new positions does not fit")
def _(env):
    env.attention(np.ones((2, 4, 8), "float32"), cache=_cache(env), cache_index=3)


@case(
    "cache_index-overflow-tensor-tf.function", InvalidArgument, r"`cache_index` must satisfy 0 <= cache_index"
)
def _(env):
    fn = tf.function(lambda x, c, i: env.attention(x, cache=c, cache_index=i))
    fn(tf.ones((2, 4, 8)), _cache(env), tf.constant(5))


@case("cache-without-cache_index", ValueError, r"`cache_index` is required")
def _(env):
    env.attention(np.ones((2, 4, 8), "float32"), cache=_cache(env))


@case(
    "cache-rank-5-tensor",
    ValueError,
    r"`cache` must be the pair \(keys, values\) made by `init_cache`; received a single tensor of shape "
    r"\(2, 2, 6, 2, 4\) \(rank 5\)",
)
def _(env):
    env.attention(np.ones((2, 4, 8), "float32"), cache=np.zeros((2, 2, 6, 2, 4), "float32"), cache_index=0)


@case(
    "cache-pair-keys-not-transposed",
    ValueError,
    r"keys \(batch, 2 key/value heads, 4, length\) and values \(batch, 2, length, 4\); received shapes "
    r"\(2, 2, 6, 4\) and \(2, 2, 6, 4\)",
)
def _(env):
    keys = np.zeros((2, 2, 6, 4), "float32")  # (batch, heads, length, head_dim): keys are stored transposed
    env.attention(np.ones((2, 4, 8), "float32"), cache=(keys, keys), cache_index=0)


@case("init_cache-length-zero", ValueError, r"`length` must be a positive int")
def _(env):
    env.attention.init_cache(2, 0)


@case("init_cache-unbuilt", ValueError, r"`init_cache` needs a built layer")
def _(env):
    MultiHeadSelfAttention(num_heads=2).init_cache(2, 8)


# ---- builders and models ------------------------------------------------------ #
simple("gpt-preset-unknown", ValueError, r"preset.*'huge'", lambda: gpt("huge"))
simple(
    "gpt-norm_first-string",
    TypeError,
    r"`norm_first` must be a bool",
    lambda: gpt("tiny", norm_first="false"),
)
simple(
    "gpt-tie_embeddings-string",
    TypeError,
    r"`tie_embeddings` must be a bool",
    lambda: gpt("tiny", tie_embeddings="false"),
)
simple("gpt-vocabulary-0", ValueError, r"`vocabulary_size`.*0", lambda: gpt("tiny", vocabulary_size=0))
simple(
    "gpt-attention_options-unknown",
    ValueError,
    r"`attention_options` has unknown key",
    lambda: gpt("tiny", attention_impl="local", attention_options={"windw": 4}),
)


@case("gpt-negative-token-id", ValueError, r"`token_ids` holds ids outside \[0, \d+\).*-2")
def _(env):
    env.gpt(np.array([[1, -2, 3]]))


@case("gpt-token-id-too-large-predict", InvalidArgument, r"`token_ids` holds ids outside")
def _(env):
    env.gpt.predict(np.array([[1, 200, 3]]), verbose=0)


@case("gpt-sequence-longer-than-max_length", ValueError, r"length 12.*exceeds `max_length`=8")
def _(env):
    env.gpt(np.ones((1, 12), "int32"))


@case("gpt-sequence-longer-than-max_length-dynamic", InvalidArgument, r"longer than `max_length`=8")
def _(env):
    fn = tf.function(lambda ids: env.gpt(ids), input_signature=[tf.TensorSpec([None, None], tf.int32)])
    fn(tf.ones((1, 12), tf.int32))


@case("gpt-xla-train-id-out-of-vocabulary-loss-is-nan", RECOVERS)
def _(env):
    # Issue 11 §3b.1: id 70 with vocabulary 16 under the default XLA train step gave a plausible
    # loss; now the step's loss is NaN (TerminateOnNaN in `training.train` stops the run).
    x = np.random.default_rng(0).integers(1, V, (2, T)).astype("int32")
    assert np.isfinite(env.xla_train_loss(x, x))
    x[0, 3] = 70
    assert np.isnan(env.xla_train_loss(x, x))


@case("gpt-xla-train-label-minus-one-loss-is-nan", RECOVERS)
def _(env):
    x = np.random.default_rng(1).integers(1, V, (2, T)).astype("int32")
    y = x.copy()
    y[1, 2] = -1
    assert np.isnan(env.xla_train_loss(x, y))


@functools.cache
def uncompiled_gpt():
    """An uncompiled tiny GPT for the compile-option cases (each fails before `model.compile`)."""
    return tiny_gpt()


simple(
    "compile-learning_rate-negative",
    ValueError,
    r"`learning_rate`.*-0.01",
    lambda: compile_for_lm(uncompiled_gpt(), learning_rate=-1e-2),
)
simple(
    "compile-learning_rate-nan",
    ValueError,
    r"`learning_rate` must be a finite number",
    lambda: compile_for_lm(uncompiled_gpt(), learning_rate=float("nan")),
)
simple(
    "compile-learning_rate-zero",
    ValueError,
    r"`learning_rate`",
    lambda: compile_for_lm(uncompiled_gpt(), optimizer="adamw", learning_rate=0.0),
)
simple(
    "compile-optimizer-unknown",
    ValueError,
    r"Unknown `optimizer` 'adamx'; expected one of .*'adamw'.*'sgd'",
    lambda: compile_for_lm(uncompiled_gpt(), optimizer="adamx"),
)
simple(
    "compile-optimizer-not-a-name",
    TypeError,
    r"`optimizer` must be a keras Optimizer or a name",
    lambda: compile_for_lm(uncompiled_gpt(), optimizer=3),
)
simple(
    "compile-steps_per_execution-0",
    ValueError,
    r"`steps_per_execution` must be a positive int; received 0",
    lambda: compile_for_lm(uncompiled_gpt(), steps_per_execution=0),
)
simple(
    "compile-jit_compile-string",
    TypeError,
    r"`jit_compile` must be True, False, None or 'auto'",
    lambda: compile_for_lm(uncompiled_gpt(), jit_compile="yes"),
)
simple(
    "compile-label_smoothing-1.5",
    ValueError,
    r"`label_smoothing`.*1.5",
    lambda: compile_for_lm(uncompiled_gpt(), label_smoothing=1.5),
)
simple(
    "compile-vaswani-with-learning_rate",
    ValueError,
    r"`learning_rate` cannot be set",
    lambda: compile_for_lm(uncompiled_gpt(), optimizer="vaswani", learning_rate=1e-3),
)

# ---- losses ------------------------------------------------------------------- #
_LOGITS = np.zeros((1, 3, 5), "float32")
simple(
    "loss-label-equal-vocabulary",
    ValueError,
    r"`y_true` holds ids outside \[0, 5\).*5",
    lambda: MaskedSparseCategoricalCrossentropy()(np.array([[1, 2, 5]]), _LOGITS),
)
simple(
    "loss-label-negative",
    ValueError,
    r"`y_true` holds ids outside \[0, 5\).*-1",
    lambda: MaskedSparseCategoricalCrossentropy()(np.array([[1, -1, 2]]), _LOGITS),
)
simple(
    "loss-label-out-of-range-tf.function",
    InvalidArgument,
    r"`y_true` holds ids outside",
    lambda: tf.function(MaskedSparseCategoricalCrossentropy())(tf.constant([[1, 9, 2]]), _LOGITS),
)
simple(
    "loss-ignore_index-string",
    TypeError,
    r"`ignore_index` must be an int",
    lambda: MaskedSparseCategoricalCrossentropy(ignore_index="0"),
)
simple(
    "loss-reduction-unknown",
    ValueError,
    r"`reduction`.*'avg'",
    lambda: MaskedSparseCategoricalCrossentropy(reduction="avg"),
)
simple(
    "loss-from_logits-string",
    TypeError,
    r"`from_logits` must be a bool",
    lambda: MaskedSparseCategoricalCrossentropy(from_logits="true"),
)


@case("loss-label-out-of-range-xla-is-nan", RECOVERS)
def _(env):
    loss = run_xla(MaskedSparseCategoricalCrossentropy(), tf.constant([[1, 9, 2]]), tf.zeros((1, 3, 5)))
    assert np.isnan(float(loss))


@case("loss-ignored-label-may-be-out-of-range", RECOVERS)
def _(env):
    loss = MaskedSparseCategoricalCrossentropy(ignore_index=-100)(np.array([[1, -100, 2]]), _LOGITS)
    np.testing.assert_allclose(float(loss), np.log(5.0), rtol=1e-6)


# ---- generation --------------------------------------------------------------- #
def _gen(env, **kwargs):
    args = dict(max_new_tokens=2)
    args.update(kwargs)
    prompts = args.pop("prompts", [[7, 8, 9]])
    return generate(env.generator, prompts, **args)


_vocab = lambda env: env.tokenizer.vocabulary_size  # noqa: E731


@case("generate-eos_id-equal-vocabulary", ValueError, r"`eos_id`=\d+ is outside the model's vocabulary")
def _(env):
    _gen(env, eos_id=_vocab(env))


@case("generate-eos_id-negative", ValueError, r"`eos_id`")
def _(env):
    _gen(env, eos_id=-1)


@case("generate-top_k-larger-than-vocabulary", ValueError, r"`top_k`=1000 exceeds the vocabulary size")
def _(env):
    _gen(env, sampler="sample", top_k=1000)


@case("generate-top_k-equal-vocabulary-is-no-filter", RECOVERS)
def _(env):
    a = _gen(env, sampler="sample", top_k=_vocab(env), seed=3)
    b = _gen(env, sampler="sample", top_k=0, seed=3)
    np.testing.assert_array_equal(a, b)


@case("generate-temperature-nan", ValueError, r"`temperature` must be a finite number")
def _(env):
    _gen(env, sampler="sample", temperature=float("nan"))


@case("generate-temperature-negative", ValueError, r"`temperature`")
def _(env):
    _gen(env, sampler="sample", temperature=-0.5)


@case("generate-temperature-zero-is-greedy", RECOVERS)
def _(env):
    np.testing.assert_array_equal(_gen(env, sampler="sample", temperature=0.0, seed=1), _gen(env))


@case("generate-top_p-zero", ValueError, r"`top_p` must be in \(0\.0, 1\.0\]")
def _(env):
    _gen(env, sampler="sample", top_p=0.0)


@case("generate-top_p-1.5", ValueError, r"`top_p`")
def _(env):
    _gen(env, sampler="sample", top_p=1.5)


@case("generate-sampler-unknown", ValueError, r"Unknown `sampler` 'nucleus'")
def _(env):
    _gen(env, sampler="nucleus")


@case("generate-prompt-negative-id", ValueError, r"`prompt_ids` holds ids outside")
def _(env):
    _gen(env, prompts=[[7, -1]])


@case("generate-prompt-id-too-large", ValueError, r"`prompt_ids` holds ids outside")
def _(env):
    _gen(env, prompts=[[7, 999]])


@case("generate-max_new_tokens-past-the-context-slides", RECOVERS)
def _(env):
    assert _gen(env, max_new_tokens=20).shape == (1, 20)  # a sliding window (generation.sliding_window)


@case(
    "beam_search-prompt-longer-than-the-context",
    ValueError,
    r"A prompt of 9 tokens exceeds the model's maximum length 8",
)
def _(env):  # max_new_tokens past the context slides (tests/test_long_generation.py); the prompt must fit
    beam_search(env.generator, [[7] * 9], max_new_tokens=2, num_beams=2)


@case("generate-max_new_tokens-negative", ValueError, r"`max_new_tokens`")
def _(env):
    _gen(env, max_new_tokens=-1)


@case("generate-seed-wrong-shape", ValueError, r"`seed`.*shape")
def _(env):
    _gen(env, sampler="sample", seed=[1, 2, 3])


@case("beam_search-num_beams-0", ValueError, r"`num_beams`")
def _(env):
    beam_search(env.generator, [[7, 8]], max_new_tokens=2, num_beams=0)


@case("beam_search-eos_id-out-of-vocabulary", ValueError, r"`eos_id`=\d+ is outside")
def _(env):
    beam_search(env.generator, [[7, 8]], max_new_tokens=2, num_beams=2, eos_id=10_000)


simple(
    "sample-nan-logits-eager",
    ValueError,
    r"`logits` hold NaN",
    lambda: samplers.sample(np.full((1, 5), np.nan, "float32"), tf.constant([0, 1])),
)
simple(
    "greedy-nan-logits-eager",
    ValueError,
    r"`logits` hold NaN",
    lambda: samplers.greedy(np.array([[0.0, np.nan, 1.0]], "float32")),
)
simple(
    "sample-top_k-larger-than-vocabulary",
    ValueError,
    r"`top_k`=9 exceeds the vocabulary size 5",
    lambda: samplers.sample(np.zeros((1, 5), "float32"), tf.constant([0, 1]), top_k=9),
)
simple(
    "sample-logits-rank-3",
    ValueError,
    r"`logits` must have rank 2",
    lambda: samplers.greedy(np.zeros((1, 2, 5), "float32")),
)


@case("sample-nan-logits-compiled-never-returns-vocabulary-size", RECOVERS)
def _(env):
    logits = tf.constant([[np.nan] * 5, [0.0, np.nan, 2.0, np.nan, 1.0]], tf.float32)
    fn = tf.function(lambda x, s: samplers.sample(x, s, temperature=1.0), jit_compile=True)
    for seed in range(8):
        ids = fn(logits, tf.constant([0, seed])).numpy()
        assert 0 <= ids.min() and ids.max() < 5 and ids[1] in (0, 2, 4)


# ---- export ------------------------------------------------------------------- #
@case(
    "export-kind-mismatch-gpt-as-masked_lm",
    ValueError,
    r"`kind`='masked_lm' does not match .*'causal_lm' model",
)
def _(env):
    export_for_serving(env.gpt, os.path.join(env.root, "never"), tokenizer=env.tokenizer, kind="masked_lm")


@case("export-kind-unknown", ValueError, r"Unknown `kind` 'llm'")
def _(env):
    export_for_serving(env.gpt, os.path.join(env.root, "never"), tokenizer=env.tokenizer, kind="llm")


@case("export-max_prompt_length-0", ValueError, r"`max_prompt_length` must be a positive int; received 0")
def _(env):
    export_for_serving(env.gpt, os.path.join(env.root, "never"), tokenizer=env.tokenizer, max_prompt_length=0)


@case(
    "export-max_prompt_length-beyond-model", ValueError, r"`max_prompt_length`=50 exceeds the model's maximum"
)
def _(env):
    export_for_serving(
        env.gpt, os.path.join(env.root, "never"), tokenizer=env.tokenizer, max_prompt_length=50
    )


@case("export-version-0", ValueError, r"`version` must be a positive int")
def _(env):
    export_for_serving(env.gpt, os.path.join(env.root, "never"), tokenizer=env.tokenizer, version=0)


@case("export-existing-version", FileExistsError, r"already exists \(never overwritten\)")
def _(env):
    base = os.path.dirname(env.export["path"])
    export_for_serving(env.gpt, base, tokenizer=env.tokenizer, version=1, warmup=False, max_prompt_length=T)


@case("export-sigkill-leftover-removed", RECOVERS)
def _(env):
    base = os.path.dirname(env.export["path"])
    assert not os.path.exists(env.export["stale"])
    assert sorted(os.listdir(base)) == ["1"]


@case("export-temporaries-of-live-exports-kept", RECOVERS)
def _(env):
    from keras_tfm.atomic_files import remove_stale_temporaries

    base = os.path.join(env.root, "temporaries")
    live = os.path.join(base, f".2.tmp-{os.getpid()}@{socket.gethostname()}-abc")
    other_host = os.path.join(base, ".2.tmp-1@another-host.example-abc")
    for folder in (live, other_host):
        os.makedirs(folder)
    assert remove_stale_temporaries(base) == []
    assert os.path.isdir(live) and os.path.isdir(other_host)


_SAMPLING = dict(max_new_tokens=2, temperature=0.0, top_k=0, top_p=1.0, seed=0)


@case("serve-generate-rank-2-prompts", InvalidArgument, r"Shape of tensor prompts \[1,1\] is not compatible")
def _(env):
    env.serve("generate", prompts=[["hello"]], **_SAMPLING)


@case("serve-generate-empty-batch", InvalidArgument, r"`prompts` is an empty batch")
def _(env):
    env.serve("generate", prompts=tf.constant([], tf.string), **_SAMPLING)


@case("serve-generate-empty-string", InvalidArgument, r"every item of `prompts` needs at least one token")
def _(env):
    env.serve("generate", prompts=[""], **_SAMPLING)


@case("serve-generate-100k-character-prompt", InvalidArgument, r"longer than the maximum prompt length 8")
def _(env):
    env.serve("generate", prompts=["h" * 100_000], **_SAMPLING)


@case("serve-generate-int-prompts", InvalidArgument, r"expected to be a string tensor but is a int32")
def _(env):
    env.serve("generate", prompts=[1, 2], **_SAMPLING)


@case("serve-generate-non-utf8-bytes-map-to-unk", RECOVERS)
def _(env):
    out = env.serve("generate", prompts=[b"h\xff\xfe"], **_SAMPLING)
    assert out["completions"].shape == (1,) and int(out["num_tokens"][0]) == 2


@case("serve-generate-max_new_tokens-over-limit", InvalidArgument, r"`max_new_tokens` must be <= 2")
def _(env):
    env.serve("generate", prompts=["hello"], **dict(_SAMPLING, max_new_tokens=5))


@case("serve-generate-top_p-zero", InvalidArgument, r"`top_p`")
def _(env):
    env.serve("generate", prompts=["hello"], **dict(_SAMPLING, top_p=0.0))


@case("serve-generate-temperature-negative", InvalidArgument, r"`temperature`")
def _(env):
    env.serve("generate", prompts=["hello"], **dict(_SAMPLING, temperature=-1.0))


@case("serve-generate-top_k-negative", InvalidArgument, r"`top_k`")
def _(env):
    env.serve("generate", prompts=["hello"], **dict(_SAMPLING, top_k=-3))


@case(
    "serve-generate-wrong-dtype-max_new_tokens",
    InvalidArgument,
    r"expected to be a int32 tensor but is a float",
)
def _(env):
    env.serve("generate", prompts=["hello"], **dict(_SAMPLING, max_new_tokens=2.0))


@case("serve-logits-id-out-of-vocabulary", InvalidArgument, r"`token_ids` holds ids outside")
def _(env):
    env.serve("serving_default", token_ids=tf.constant([[1, 500]], tf.int32))


@case("serve-classify-long-text-says-truncated", RECOVERS)
def _(env):
    out = env.classifier_serving(tf.constant(["the cat sat " * 34_000, "the cat"]))
    assert out["truncated"].numpy().tolist() == [True, False]


@case("serve-classify-empty-batch", InvalidArgument, r"`inputs` is an empty batch")
def _(env):
    env.classifier_serving(tf.constant([], tf.string))


# ---- loaders ------------------------------------------------------------------ #
def _loader(name, fn):
    return lambda env: fn(env.files[name])


for _id, _exc, _match, _fn in [
    (
        "text-missing-file",
        FileNotFoundError,
        r"`path`: no such file: .*missing.txt",
        _loader("missing", load_text_file),
    ),
    (
        "text-directory",
        FileNotFoundError,
        r"`path`: expected a file but found a directory",
        lambda env: load_text_file(env.root),
    ),
    (
        "text-empty-file",
        ValueError,
        r"`path`: the file .*empty.txt' is empty",
        _loader("empty", load_text_file),
    ),
    (
        "text-binary-file",
        ValueError,
        r"`path`: .*binary.txt' looks binary",
        _loader("binary", load_text_file),
    ),
    (
        "text-non-utf8",
        ValueError,
        r"`path`: .*latin1.txt' is not UTF-8 text: byte b'\\xe9' at offset 3",
        _loader("latin1", load_text_file),
    ),
    (
        "text-lines-non-utf8",
        ValueError,
        r"latin1.txt' is not UTF-8",
        _loader("latin1", lambda p: load_text_file(p, lines=True)),
    ),
    (
        "text-truncated-gz",
        ValueError,
        r"`path`: the gzip file .*truncated.txt.gz' is truncated",
        _loader("truncated_gz", load_text_file),
    ),
    (
        "text-not-gzip-gz",
        ValueError,
        r"`path`: .*plain.txt.gz' is not a valid gzip file",
        _loader("not_gzip", load_text_file),
    ),
    (
        "text-compression-unknown",
        ValueError,
        r"`compression` must be None, '', 'GZIP' or 'ZLIB'",
        _loader("good_gz", lambda p: load_text_file(p, compression="BZ2")),
    ),
    ("text-path-not-a-path", TypeError, r"`path` must be a path", lambda env: load_text_file(42)),
    (
        "shakespeare-non-utf8",
        ValueError,
        r"latin1.txt' is not UTF-8",
        _loader("latin1", load_tiny_shakespeare_file),
    ),
    (
        "shakespeare-split-unknown",
        ValueError,
        r"`split` must be one of",
        _loader("good_gz", lambda p: load_tiny_shakespeare_file(p, "valid")),
    ),
    (
        "tab_pairs-line-without-tab",
        ValueError,
        r"`path` .*no_tab.tsv:2: expected at least 2 tab-separated",
        _loader("no_tab", load_tab_pairs),
    ),
    (
        "tab_pairs-truncated-gz-validate-false",
        ValueError,
        r"truncated.txt.gz' is truncated",
        _loader("truncated_gz", lambda p: load_tab_pairs(p, validate=False)),
    ),
    ("tab_pairs-non-utf8", ValueError, r"latin1.txt' is not UTF-8", _loader("latin1", load_tab_pairs)),
    (
        "tab_pairs-negative-column",
        ValueError,
        r"`source_column` must be a non-negative int",
        _loader("no_tab", lambda p: load_tab_pairs(p, source_column=-1)),
    ),
    (
        "aligned-truncated-gz-validate-false",
        ValueError,
        r"`source_path`: the gzip file .* is truncated",
        lambda env: load_aligned_files(env.files["truncated_gz"], env.files["good_gz"], validate=False),
    ),
    (
        "aligned-not-gzip-target",
        ValueError,
        r"`target_path`: .*plain.txt.gz' is not a valid gzip",
        lambda env: load_aligned_files(env.files["good_gz"], env.files["not_gzip"]),
    ),
    (
        "aligned-line-counts-differ",
        ValueError,
        r"has 500 lines but `target_path` .* has 2",
        lambda env: load_aligned_files(env.files["good_gz"], env.files["short_gz"]),
    ),
    (
        "aligned-missing-target",
        FileNotFoundError,
        r"`target_path`: no such file",
        lambda env: load_aligned_files(env.files["good_gz"], env.files["missing"]),
    ),
    (
        "sst2-full-width-digit-label",
        ValueError,
        r"sst.txt:2: expected '<integer label in ASCII digits> <sentence>'",
        _loader("fullwidth", load_label_sentence_lines),
    ),
    (
        "sst2-label-without-sentence",
        ValueError,
        r"sst2.txt:2: the line has a label but no sentence",
        _loader("no_sentence", load_label_sentence_lines),
    ),
    ("sst2-binary-file", ValueError, r"looks binary", _loader("binary", load_label_sentence_lines)),
    ("sst2-empty-file", ValueError, r"is empty", _loader("empty", load_label_sentence_lines)),
]:
    CASES.append(pytest.param(_fn, _exc, _match, id="load-" + _id))

# ---- pipelines and tokenizers -------------------------------------------------- #
simple("lm_windows-max_length-0", ValueError, r"`max_length`", lambda: lm_windows(np.arange(100), 0, 4))
simple("lm_windows-batch_size-0", ValueError, r"`batch_size`", lambda: lm_windows(np.arange(100), 8, 0))
simple("lm_windows-float-ids", TypeError, r"int", lambda: lm_windows(np.linspace(0, 1, 100), 8, 4))
simple(
    "mlm_mask-mask_rate-1.5",
    ValueError,
    r"`mask_rate`",
    lambda: mlm_mask(tf.constant([[7, 8, 9]]), 16, mask_rate=1.5),
)
simple("mlm_mask-vocabulary-0", ValueError, r"`vocabulary_size`", lambda: mlm_mask(tf.constant([[7, 8]]), 0))
simple("char_tokenizer-empty-corpus", ValueError, r"`corpus`", lambda: CharTokenizer.from_corpus([]))
simple("char_tokenizer-empty-string", ValueError, r"`corpus`", lambda: CharTokenizer.from_corpus(""))


@case("tokenizer-int-input", TypeError, r"string")
def _(env):
    env.tokenizer.tokenize(tf.constant([1, 2]))


@case("load_tokenizer-missing-file", FileNotFoundError, r"missing.vocab")
def _(env):
    keras_tfm.tokenizers.load_tokenizer(os.path.join(env.root, "missing.vocab"))


# ---- checks used by every option ------------------------------------------------ #
simple(
    "checks-bool-string",
    TypeError,
    r"`flag` must be a bool.*'False'",
    lambda: checks.check_bool("flag", "False"),
)
simple(
    "checks-float-inf",
    ValueError,
    r"`x` must be a finite number",
    lambda: checks.check_float("x", float("inf")),
)
simple(
    "checks-known-keys",
    ValueError,
    r"unknown key\(s\) \['b'\]; valid keys are \['a'\]",
    lambda: checks.check_known_keys("opts", {"b": 1}, {"a"}),
)


# ---- command line ------------------------------------------------------------- #
def _cli(*argv):
    from keras_tfm.cli import main

    err = io.StringIO()
    with contextlib.redirect_stderr(err), pytest.raises(SystemExit) as exit_info:
        main(list(argv))
    assert exit_info.value.code == 2
    raise ValueError(err.getvalue())  # the table matches argparse's message


for _id, _argv, _match in [
    (
        "max-length-0",
        ["train", "gpt", "--max-length", "0"],
        r"argument --max-length: must be a positive int; received '0'",
    ),
    ("steps-negative", ["train", "gpt", "--steps", "-5"], r"argument --steps: must be a positive int"),
    (
        "batch-size-not-a-number",
        ["train", "gpt", "--batch-size", "abc"],
        r"argument --batch-size: must be a positive int",
    ),
    (
        "learning-rate-nan",
        ["train", "gpt", "--learning-rate", "nan"],
        r"argument --learning-rate: must be a finite number > 0",
    ),
    (
        "learning-rate-negative",
        ["train", "gpt", "--learning-rate=-1e-3"],
        r"argument --learning-rate: must be a finite",
    ),
    (
        "dropout-1.5",
        ["train", "gpt", "--dropout", "1.5"],
        r"argument --dropout: must be a number in \[0, 1\)",
    ),
    ("num-heads-0", ["train", "gpt", "--num-heads", "0"], r"argument --num-heads: must be a positive int"),
    (
        "steps-per-execution-0",
        ["train", "gpt", "--steps-per-execution", "0"],
        r"argument --steps-per-execution",
    ),
    (
        "bert-max-length-0",
        ["train", "bert", "--max-length", "0"],
        r"argument --max-length: must be a positive",
    ),
    (
        "seq2seq-vocabulary-size-0",
        ["train", "seq2seq", "--vocabulary-size", "0"],
        r"argument --vocabulary-size",
    ),
    (
        "precision-unknown",
        ["train", "gpt", "--precision", "fp8"],
        r"argument --precision: invalid choice: 'fp8'",
    ),
    ("unknown-subcommand", ["serve"], r"invalid choice: 'serve'"),
]:
    CASES.append(pytest.param(lambda env, a=_argv: _cli(*a), ValueError, _match, id="cli-" + _id))


def _cli_recipe(*argv):
    """A value the recipe refuses (not argparse): one line naming the flag, exit status 2."""
    from keras_tfm.cli import main

    err = io.StringIO()
    with contextlib.redirect_stderr(err):
        status = main(list(argv))
    assert status == 2 and len(err.getvalue().strip().splitlines()) == 1
    raise ValueError(err.getvalue())


for _id, _argv, _match in [
    (
        "gpt-key-value-heads-not-dividing",
        ["train", "gpt", "--num-heads", "4", "--num-key-value-heads", "3"],
        r"keras-tfm train gpt: error: --num-key-value-heads must divide --num-heads \(4\); received 3",
    ),
    (
        "gpt-decay-fraction-0",
        ["train", "gpt", "--decay-fraction", "0"],
        r"error: --decay-fraction must be in \(0.0, 1.0\]; received 0.0",
    ),
    (
        "bert-steps-1",
        ["train", "bert", "--steps", "1"],
        r"error: --steps must be >= 2 \(one per stage\); received 1",
    ),
]:
    CASES.append(pytest.param(lambda env, a=_argv: _cli_recipe(*a), ValueError, _match, id="cli-" + _id))


# ---- resume from a backup --------------------------------------------------------- #
def _resume(env, folder, width=4, steps=8):
    model = env.backup["build"](width)
    callback = AtomicBackupAndRestore(folder, save_freq=2)
    try:
        train(model, env.backup["data"], steps=steps, steps_per_epoch=4, callbacks=[callback], verbose=0)
    finally:
        assert os.path.isdir(folder), "a backup that could not be verified must never be deleted"


@case(
    "resume-flipped-bytes-same-size",
    ValueError,
    r"backup folder .*flipped.* does not match its recorded SHA-256",
)
def _(env):
    folder, weights, _ = env.backup_copy("flipped")
    data = bytearray(open(weights, "rb").read())
    for i in range(len(data) - 600, len(data) - 100):
        data[i] ^= 0xFF
    open(weights, "wb").write(bytes(data))
    _resume(env, folder)


@case("resume-truncated-weights", ValueError, r"truncated.*SHA-256|SHA-256.*truncated")
def _(env):
    folder, weights, _ = env.backup_copy("truncated")
    data = open(weights, "rb").read()
    open(weights, "wb").write(data[: len(data) // 2])
    _resume(env, folder)


@case("resume-empty-weights", ValueError, r"empty.*SHA-256")
def _(env):
    folder, weights, _ = env.backup_copy("empty")
    open(weights, "wb").close()
    _resume(env, folder)


@case(
    "resume-bad-json-metadata",
    ValueError,
    r"backup folder .*badjson.* has an unreadable training_metadata.json",
)
def _(env):
    folder, _, _ = env.backup_copy("badjson")
    with open(os.path.join(folder, AtomicBackupAndRestore.METADATA), "w") as f:
        f.write('{"step": 4, "weights": ')
    _resume(env, folder)


@case("resume-metadata-without-checksum", ValueError, r"without \['sha256'\].*unverifiable")
def _(env):
    folder, _, meta = env.backup_copy("legacy")
    del meta["sha256"]
    with open(os.path.join(folder, AtomicBackupAndRestore.METADATA), "w") as f:
        json.dump(meta, f)
    _resume(env, folder)


@case("resume-missing-weights-file", ValueError, r"names a missing weights file")
def _(env):
    folder, weights, _ = env.backup_copy("missing")
    os.remove(weights)
    _resume(env, folder)


@case(
    "resume-other-model-size",
    ValueError,
    r"written by a different model \(weight 0 .*backup shape \(3, 4\), model shape \(3, 6\)",
)
def _(env):
    folder, _, _ = env.backup_copy("othermodel")
    _resume(env, folder, width=6)


@case(
    "resume-backup-step-beyond-steps", ValueError, r"backup in .* is at step 4, beyond `steps`=2 \(--steps\)"
)
def _(env):
    folder, _, _ = env.backup_copy("beyond")
    _resume(env, folder, steps=2)


@case("resume-valid-backup-continues", RECOVERS)
def _(env):
    folder, _, _ = env.backup_copy("valid")
    model = env.backup["build"]()
    result = train(
        model,
        env.backup["data"],
        steps=6,
        steps_per_epoch=2,
        callbacks=[AtomicBackupAndRestore(folder, save_freq=2)],
        verbose=0,
    )
    assert result.start_step == 4 and not os.path.exists(folder)  # verified, finished, then removed


# ---- issue 36: nothing ignored in silence ------------------------------------------ #
@case(
    "memory_plan-max_length-beyond-max_length",
    ValueError,
    r"`max_length`=4096 exceeds the model's max_length 1024 \('gpt2_small' has 1024 positions\)",
)
def _(env):
    from keras_tfm.models import memory_plan

    memory_plan("gpt2_small", max_length=4096)


@case("memory_plan-built-model-max_length-beyond-max_length", ValueError, r"`max_length`=9 .* 8")
def _(env):
    from keras_tfm.models import memory_plan

    memory_plan(env.gpt, max_length=T + 1)


for _seed in (-1, -2, -(2**31)):
    CASES.append(
        pytest.param(
            lambda env, s=_seed: env.serve("generate", prompts=["hello"], **dict(_SAMPLING, seed=s)),
            InvalidArgument,
            r"`seed` must be a seed in \[0, 2147483647\]; received:\] \[" + str(_seed),
            id=f"serve-generate-seed-{_seed}",
        )
    )


@case(
    "serve-generate_ids-prompt-longer-than-max_prompt_length",
    InvalidArgument,
    r"a prompt of `token_ids` is longer than the maximum prompt length 8 tokens; longest:\] \[9\]",
)
def _(env):
    ids = dict(token_ids=tf.fill([2, 9], 3), lengths=tf.constant([9, 2], tf.int32))
    env.serve("generate_ids", **ids, **_SAMPLING)


@case(
    "serve-generate_ids-seed-negative",
    InvalidArgument,
    r"`seed` must be a seed in \[0, 2147483647\]",
)
def _(env):
    ids = dict(token_ids=tf.constant([[1, 2]], tf.int32), lengths=tf.constant([2], tf.int32))
    env.serve("generate_ids", **ids, **dict(_SAMPLING, seed=-5))


@case("client-generate-int-prompts", TypeError, r"`prompts` of the 'generate' signature must be string of sh")
def _(env):
    from keras_tfm.export.client import call_signature

    call_signature(env.export["loaded"], "generate", **dict(_SAMPLING, prompts=[1, 2]))


@case(
    "client-generate-float-max_new_tokens",
    TypeError,
    r"`max_new_tokens` of the 'generate' signature must be int32 of shape \[\] \(a scalar\); received 2.5",
)
def _(env):
    from keras_tfm.export.client import call_signature

    call_signature(env.export["loaded"], "generate", **dict(_SAMPLING, prompts=["hi"], max_new_tokens=2.5))


@case(
    "client-generate-rank-1-temperature",
    ValueError,
    r"`temperature` of the 'generate' signature must be float32 of shape \[\] \(a scalar\); received shape \[1\]",
)
def _(env):
    from keras_tfm.export.client import call_signature

    call_signature(env.export["loaded"], "generate", **dict(_SAMPLING, prompts=["hi"], temperature=[1.0]))


@case(
    "client-generate-rank-2-prompts",
    ValueError,
    r"`prompts` of the 'generate' signature must be string of shape \[\?\]; received shape \[1, 1\]",
)
def _(env):
    from keras_tfm.export.client import call_signature

    call_signature(env.export["loaded"], "generate", **dict(_SAMPLING, prompts=[["hi"]]))


@case(
    "client-generate-unknown-input",
    ValueError,
    r"'generate' signature takes the inputs .*unknown: \['prompt'\]",
)
def _(env):
    from keras_tfm.export.client import call_signature

    call_signature(env.export["loaded"], "generate", **dict(_SAMPLING, prompts=["hi"], prompt=["hi"]))


class _SigintInAGcCallback(keras.callbacks.Callback):
    """Delivers SIGINT at the end of batch `at` inside a garbage-collector callback: where Python's own
    handler raises KeyboardInterrupt there, it is printed ("Exception ignored") and lost (JAX's case)."""

    def __init__(self, at):
        super().__init__()
        self.at = at

    def on_train_batch_end(self, batch, logs=None):
        import gc
        import signal

        if batch != self.at:
            return

        def deliver(phase, info):
            if phase == "start":
                signal.raise_signal(signal.SIGINT)

        gc.callbacks.append(deliver)
        try:
            gc.collect()
        finally:
            gc.callbacks.remove(deliver)


@case(
    "train-ctrl-c-in-a-gc-callback-stops-between-steps",
    KeyboardInterrupt,
    r"training stopped between two steps, after step 3 of 40; the backup in '.*sigint_backup' \(step 2\) "
    r"resumes the run",
)
def _(env):
    folder = os.path.join(env.root, "sigint_backup")
    backup = AtomicBackupAndRestore(folder, save_freq=2)
    with interactive_sigint():
        train(
            env.backup["build"](),
            env.backup["data"],
            steps=40,
            callbacks=[backup, _SigintInAGcCallback(2)],
            verbose=0,
        )


# --------------------------------------------------------------------------- #


@pytest.mark.parametrize(("fn", "exc", "match"), CASES)
def test_bad_input(env, fn, exc, match):
    run_case(env, fn, exc, match)


def test_the_table_is_large_enough():
    TABLE.assert_ids_unique()
    assert len(CASES) >= 100, len(CASES)
