"""Serving signatures of exported models: tokenization, validation and
generation inside the graph.

Every endpoint is built from three parts:

1. *request validation* with `tf.debugging.Assert` (a failed check raises
   `InvalidArgumentError` whose message names the input), placed in the plain
   graph, outside every XLA-compiled function (asserts inside
   `jit_compile=True` are dropped). The compute depends on the checks through
   control dependencies, so a bad request never starts a decoding loop;
2. *tokenization / detokenization* with the keras_tfm tokenizer's TF ops;
3. the *compiled decoding loop* (`keras_tfm.generation.decoding.decode` /
   `beam.beam_search_loop`), one XLA function per static configuration:

   * GPT: one function per (prompt width P, cache length L) that the
     in-process generator can pick for a request within the export's limits
     (P = `prompt_bucket(longest prompt)`, L = `cache_bucket(P +
     max_new_tokens)`); the request picks its function in the graph (a table
     lookup and `tf.switch_case`), so it runs exactly the in-process shapes
     and cache segments and returns the same tokens.
   * seq2seq: one function per (beam width, cache length); `num_beams` is a
     request input and must be one of the exported `beam_widths` (width 1 =
     greedy decoding). Source lengths stay dynamic (XLA compiles each padded
     length once, as in process).

Sampling parameters are request tensors: temperature 0 selects greedy
decoding inside the compiled loop (a `tf.cond`, no recompilation), otherwise
stateless temperature / top-k / top-p sampling from `seed` (the same seed
gives the same tokens, as `generate(..., seed=int)` in process).
"""

import numpy as np
import tensorflow as tf

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
)
from keras_tfm.generation import beam as beam_lib
from keras_tfm.generation import cache as cache_lib
from keras_tfm.generation import decoding, samplers
from keras_tfm.generation.causal_lm import CausalLMGenerator
from keras_tfm.generation.seq2seq_generator import Seq2SeqGenerator

MASK_TOKEN = SPECIAL_TOKENS[MASK]
FILL_MASK_TOP_K = 5

SAMPLING_SIGNATURE = {
    "max_new_tokens": tf.TensorSpec([], tf.int32, name="max_new_tokens"),
    "temperature": tf.TensorSpec([], tf.float32, name="temperature"),
    "top_k": tf.TensorSpec([], tf.int32, name="top_k"),
    "top_p": tf.TensorSpec([], tf.float32, name="top_p"),
    "seed": tf.TensorSpec([], tf.int32, name="seed"),
}


# --------------------------------------------------------------------------- helpers
def _assert(condition, *message):
    """`tf.debugging.Assert` returning the op (for control dependencies)."""
    return tf.debugging.Assert(condition, list(message), summarize=8)


def check_nonempty_batch(name, batch_size):
    return _assert(batch_size > 0, f"`{name}` is an empty batch; send at least one item.")


def check_sampling(max_new_tokens, temperature, top_k, top_p, max_new_tokens_limit):
    """Asserts on the sampling inputs (all scalars)."""
    return [
        _assert(max_new_tokens >= 0, "`max_new_tokens` must be >= 0; received:", max_new_tokens),
        _assert(
            max_new_tokens <= max_new_tokens_limit,
            f"`max_new_tokens` must be <= {max_new_tokens_limit} (max_new_tokens_limit of the export); received:",
            max_new_tokens,
        ),
        _assert(
            tf.logical_and(temperature >= 0.0, tf.math.is_finite(temperature)),
            "`temperature` must be a finite float >= 0 (0 = greedy); received:",
            temperature,
        ),
        _assert(top_k >= 0, "`top_k` must be >= 0 (0 disables it); received:", top_k),
        _assert(
            tf.logical_and(top_p > 0.0, top_p <= 1.0),
            "`top_p` must be in (0, 1] (1 disables it); received:",
            top_p,
        ),
    ]


def longest(lengths):
    """Largest length, 0 for an empty batch."""
    return tf.reduce_max(tf.concat([tf.cast(lengths, tf.int32), [0]], axis=0))


def lookup(table, *indices):
    """`table[i][j]...` of a Python (nested) list, with int32 tensor indices
    clipped to the table's range (the requests were validated before)."""
    table = tf.constant(table, tf.int32)
    index = [tf.clip_by_value(tf.cast(i, tf.int32), 0, table.shape[d] - 1) for d, i in enumerate(indices)]
    return tf.gather_nd(table, tf.stack(index))


def generator_shapes(max_prompt_length, max_new_tokens_limit):
    """The static shapes the in-process generator would pick, for every request.

    Mirrors `CausalLMGenerator._prepare`: prompt width P =
    `cache.prompt_bucket(longest prompt)` and cache length L =
    `cache.cache_bucket(P + max(max_new_tokens, 1))`, so a served request runs
    exactly the computation (shapes, cache segments) of the in-process call
    and returns the same tokens.

    Returns:
        `(widths, configs, width_of_length, config_of)`: the prompt widths;
        the sorted distinct (P, L) pairs (one compiled loop each); the
        P-index of every prompt length 0..max_prompt_length; a table
        [P-index][max_new_tokens] → index into `configs`.
    """
    bucket = cache_lib.prompt_bucket
    widths = sorted({bucket(max(n, 1)) for n in range(max_prompt_length + 1)})
    width_of_length = [widths.index(bucket(max(n, 1))) for n in range(max_prompt_length + 1)]
    cache_of = [
        [cache_lib.cache_bucket(p + max(m, 1)) for m in range(max_new_tokens_limit + 1)] for p in widths
    ]
    configs = sorted({(p, c) for p, row in zip(widths, cache_of) for c in row})
    config_of = [[configs.index((p, c)) for c in row] for p, row in zip(widths, cache_of)]
    return widths, configs, width_of_length, config_of


def left_pad(ragged, width, pad_id):
    """`[batch, (len)]` ragged ids → `[batch, width]` LEFT-padded (len <= width)."""
    lengths = tf.cast(ragged.row_lengths(), tf.int32)
    dense = ragged.to_tensor(default_value=pad_id)
    dense = tf.pad(dense, [[0, 0], [0, width - tf.shape(dense)[1]]], constant_values=pad_id)
    index = tf.range(width, dtype=tf.int32)[None, :] - (width - lengths)[:, None]
    gathered = tf.gather(dense, tf.maximum(index, 0), batch_dims=1)
    out = tf.where(index >= 0, gathered, tf.cast(pad_id, dense.dtype))
    return tf.ensure_shape(tf.cast(out, tf.int32), [None, width])


def ragged_from_padded(ids, lengths):
    """Right-padded `[batch, T]` ids with lengths → ragged."""
    return tf.RaggedTensor.from_tensor(tf.cast(ids, tf.int32), lengths=tf.cast(lengths, tf.int64))


def make_selector(seed, temperature, top_k, top_p):
    """Token chooser for the decoding loop: greedy when temperature < 1e-6
    (decided once per call, inside the compiled loop), else stateless
    sampling with `seed` folded with the step (as `decoding.make_selector`)."""
    is_greedy = temperature < samplers.MIN_TEMPERATURE
    seed = tf.stack([tf.zeros([], tf.int32), tf.cast(seed, tf.int32)])  # = generation.base.make_seed(int)

    def select(logits, step):
        return tf.cond(
            is_greedy,
            lambda: samplers.greedy(logits),
            lambda: samplers.sample(logits, samplers.split_seed(seed, step), temperature, top_k, top_p),
        )

    return select


def special_id(tokenizer, role, default):
    """The tokenizer's id of a special token (`cls`, `sep`, `pad`, ...): where its
    vocabulary has it (a published checkpoint: [CLS]=101 in BERT), else `default`."""
    value = getattr(tokenizer, f"{role}_id", None)
    return default if value is None else int(value)


def raw_encode(tokenizer, strings):
    """Tokenizer ids WITHOUT the special tokens the tokenizer may be configured
    to add (BOS/EOS/CLS-SEP), as a ragged `[batch, (len)]`."""
    ids = tokenizer.tokenize(strings)
    if not isinstance(ids, tf.RaggedTensor):  # a tokenizer with `sequence_length` pads to it: unpad
        ids = tf.RaggedTensor.from_tensor(ids, padding=special_id(tokenizer, "pad", PAD))
    prefix = len(getattr(tokenizer, "prefix_ids", None) or ())
    suffix = len(getattr(tokenizer, "suffix_ids", None) or ())
    if prefix or suffix:
        ids = ids[:, prefix : (-suffix if suffix else None)]
    return ids


def detokenize(tokenizer, ids, lengths):
    """Generated ids → strings; ids the tokenizer does not know (a model
    vocabulary larger than the tokenizer's) become `[UNK]` (or are dropped
    without special tokens)."""
    ragged = ragged_from_padded(ids, lengths)
    if getattr(tokenizer, "special_tokens", False):
        ragged = tf.ragged.map_flat_values(
            lambda v: tf.where(v < tokenizer.vocabulary_size, v, tf.constant(UNK, v.dtype)), ragged
        )
    else:
        ragged = tf.ragged.boolean_mask(
            ragged, tf.ragged.map_flat_values(tf.less, ragged, tokenizer.vocabulary_size)
        )
    return tokenizer.detokenize(ragged)


def _sample_text(tokenizer, count=4):
    """A short string made of ordinary vocabulary tokens (for warmup requests)."""
    vocabulary = tokenizer.get_vocabulary()
    start = NUM_SPECIAL_TOKENS if getattr(tokenizer, "special_tokens", False) else 0
    tokens = [t for t in vocabulary[start : start + 64] if t.isprintable() and not t.startswith("#")][:count]
    if not tokens or any(t.startswith("<0x") for t in tokens):
        return "hello"
    joiner = "" if all(len(t) == 1 for t in tokens) and type(tokenizer).__name__ == "CharTokenizer" else " "
    return joiner.join(tokens)


# --------------------------------------------------------------------------- GPT
class GPTServing:
    """Endpoints of a GPT model: `serving_default` (logits), `generate`
    (strings) and `generate_ids` (ids)."""

    def __init__(
        self,
        model,
        tokenizer,
        max_new_tokens_limit=None,
        eos_id=None,
        pad_id=0,
        jit_compile=True,
        max_prompt_length=None,
    ):
        self.model = model
        self.tokenizer = tokenizer
        self.generator = CausalLMGenerator(model, pad_id=pad_id, jit_compile=jit_compile)
        adapter = self.generator.adapter
        self.vocabulary_size = adapter.vocabulary_size
        self.max_length = adapter.max_length
        if max_prompt_length is None:
            max_prompt_length = self.max_length
        if max_prompt_length is None:
            raise ValueError(
                "The model has no maximum length; pass `max_prompt_length` (and `max_new_tokens_limit`)."
            )
        self.max_prompt_length = int(max_prompt_length)
        if max_new_tokens_limit is None:
            if self.max_length is None:
                raise ValueError("The model has no maximum length; pass `max_new_tokens_limit`.")
            max_new_tokens_limit = self.max_length - 1
        if self.max_length is not None:
            max_new_tokens_limit = min(int(max_new_tokens_limit), self.max_length - 1)
        if max_new_tokens_limit < 1:
            raise ValueError(f"`max_new_tokens_limit` must be >= 1; received {max_new_tokens_limit}.")
        self.max_new_tokens_limit = int(max_new_tokens_limit)
        self.eos_id = -1 if eos_id is None else int(eos_id)
        self.pad_id = int(pad_id)
        self.jit_compile = bool(jit_compile)
        self.prompt_widths, self.configs, self.width_of_length, self.config_of = generator_shapes(
            self.max_prompt_length, self.max_new_tokens_limit
        )
        self._decoders = {}
        if tokenizer is not None and tokenizer.vocabulary_size > self.vocabulary_size:
            raise ValueError(
                f"The tokenizer has {tokenizer.vocabulary_size} ids but the model only {self.vocabulary_size}."
            )

    # ---- compiled pieces
    def decoder(self, p, cache_length):
        """The XLA-compiled decoding loop of prompt width `p` and cache length."""
        if (p, cache_length) not in self._decoders:
            adapter, eos, pad = self.generator.adapter, self.eos_id, self.pad_id

            def run(ids, lengths, max_new_tokens, seed, temperature, top_k, top_p):
                select = make_selector(seed, temperature, top_k, top_p)
                out = decoding.decode(
                    adapter,
                    ids,
                    lengths,
                    max_new_tokens,
                    select,
                    cache_length=cache_length,
                    eos_id=eos,
                    pad_id=pad,
                )
                return out["tokens"], out["lengths"]

            with tf.init_scope():  # trace once, eagerly: a ConcreteFunction is shared by every endpoint
                self._decoders[p, cache_length] = tf.function(
                    run,
                    jit_compile=self.jit_compile,
                    autograph=False,
                    input_signature=[
                        tf.TensorSpec([None, p], tf.int32),
                        tf.TensorSpec([None], tf.int32),
                        tf.TensorSpec([], tf.int32),
                        tf.TensorSpec([], tf.int32),
                        tf.TensorSpec([], tf.float32),
                        tf.TensorSpec([], tf.int32),
                        tf.TensorSpec([], tf.float32),
                    ],
                ).get_concrete_function()
        return self._decoders[p, cache_length]

    def generate_ragged(self, ragged, max_new_tokens, temperature, top_k, top_p, seed, name):
        """Validated generation from ragged prompt ids → (tokens [B, max_new], lengths [B])."""
        lengths = tf.cast(ragged.row_lengths(), tf.int32)
        batch = tf.shape(lengths)[0]
        long = longest(lengths)
        flat = ragged.flat_values
        checks = [
            check_nonempty_batch(name, batch),
            _assert(
                tf.reduce_all(lengths >= 1),
                f"every item of `{name}` needs at least one token; lengths:",
                lengths,
            ),
            _assert(
                long <= self.max_prompt_length,
                f"a prompt of `{name}` is longer than the maximum prompt length {self.max_prompt_length} "
                "tokens; longest:",
                long,
            ),
            _assert(
                tf.reduce_all((flat >= 0) & (flat < self.vocabulary_size)),
                f"`{name}` holds ids outside [0, {self.vocabulary_size})",
            ),
        ]
        checks += check_sampling(max_new_tokens, temperature, top_k, top_p, self.max_new_tokens_limit)
        if self.max_length is not None:
            checks.append(
                _assert(
                    long + max_new_tokens <= self.max_length,
                    f"`max_new_tokens` plus the longest prompt must fit the model's maximum length "
                    f"{self.max_length}; longest prompt and max_new_tokens:",
                    long,
                    max_new_tokens,
                )
            )
        with tf.control_dependencies(checks):
            max_new = tf.clip_by_value(max_new_tokens, 0, self.max_new_tokens_limit)
            index = lookup(self.config_of, lookup(self.width_of_length, long), max_new)

        def branch(p, cache_length):
            def fn():
                ids = left_pad(ragged, p, self.pad_id)
                decoder = self.decoder(p, cache_length)
                tokens, out_lengths = decoder(ids, lengths, max_new, seed, temperature, top_k, top_p)
                return tokens[:, :max_new], out_lengths

            return fn

        tokens, out_lengths = tf.switch_case(index, [branch(p, c) for p, c in self.configs])
        return tf.ensure_shape(tokens, [None, None]), tf.ensure_shape(out_lengths, [None])

    # ---- endpoints
    def endpoints(self):
        """List of `(name, fn, input_signature)`; the first is `serving_default`."""
        model = self.model
        needs_mask = isinstance(model.input, dict)

        def serving_default(token_ids):
            batch = tf.shape(token_ids)[0]
            checks = [
                check_nonempty_batch("token_ids", batch),
                _assert(
                    tf.reduce_all((token_ids >= 0) & (token_ids < self.vocabulary_size)),
                    f"`token_ids` holds ids outside [0, {self.vocabulary_size})",
                ),
            ]
            if self.max_length is not None:
                checks.append(
                    _assert(
                        tf.shape(token_ids)[1] <= self.max_length,
                        f"`token_ids` is longer than the model's maximum length {self.max_length}:",
                        tf.shape(token_ids)[1],
                    )
                )
            with tf.control_dependencies(checks):
                token_ids = tf.identity(token_ids)
            inputs = (
                {"token_ids": token_ids, "padding_mask": tf.ones_like(token_ids)} if needs_mask else token_ids
            )
            return {"logits": tf.cast(model(inputs, training=False), tf.float32)}

        def generate_ids(token_ids, lengths, max_new_tokens, temperature, top_k, top_p, seed):
            checks = [
                _assert(
                    tf.shape(lengths)[0] == tf.shape(token_ids)[0],
                    "`lengths` must have one entry per row of `token_ids`; sizes:",
                    tf.shape(lengths)[0],
                    tf.shape(token_ids)[0],
                ),
                _assert(
                    tf.reduce_all((lengths >= 0) & (lengths <= tf.shape(token_ids)[1])),
                    "`lengths` must be in [0, token_ids.shape[1]]; received:",
                    lengths,
                ),
            ]
            with tf.control_dependencies(checks):
                ragged = ragged_from_padded(token_ids, lengths)
            tokens, out_lengths = self.generate_ragged(
                ragged, max_new_tokens, temperature, top_k, top_p, seed, "token_ids"
            )
            return {"token_ids": tokens, "lengths": out_lengths}

        ids_signature = [
            tf.TensorSpec([None, None], tf.int32, name="token_ids"),
            tf.TensorSpec([None], tf.int32, name="lengths"),
        ] + list(SAMPLING_SIGNATURE.values())
        endpoints = [
            ("serving_default", serving_default, [tf.TensorSpec([None, None], tf.int32, name="token_ids")]),
        ]
        if self.tokenizer is not None:
            tokenizer = self.tokenizer

            def generate(prompts, max_new_tokens, temperature, top_k, top_p, seed):
                ragged = tokenizer.tokenize(prompts)
                tokens, out_lengths = self.generate_ragged(
                    ragged, max_new_tokens, temperature, top_k, top_p, seed, "prompts"
                )
                return {"completions": detokenize(tokenizer, tokens, out_lengths), "num_tokens": out_lengths}

            endpoints.append(
                (
                    "generate",
                    generate,
                    [tf.TensorSpec([None], tf.string, name="prompts")] + list(SAMPLING_SIGNATURE.values()),
                )
            )
        endpoints.append(("generate_ids", generate_ids, ids_signature))
        return endpoints

    def warmup_requests(self):
        n = min(8, self.max_new_tokens_limit)
        sampling = {
            "max_new_tokens": np.int32(n),
            "temperature": np.float32(0.0),
            "top_k": np.int32(0),
            "top_p": np.float32(1.0),
            "seed": np.int32(0),
        }
        ids = np.full((1, 4), NUM_SPECIAL_TOKENS % self.vocabulary_size, np.int32)
        requests = [("serving_default", {"token_ids": ids})]
        if self.tokenizer is not None:
            requests.append(
                ("generate", dict(sampling, prompts=np.array([_sample_text(self.tokenizer).encode()])))
            )
        requests.append(("generate_ids", dict(sampling, token_ids=ids, lengths=np.array([4], np.int32))))
        return requests


# --------------------------------------------------------------------------- seq2seq
class Seq2SeqServing:
    """`translate` endpoint: strings → strings, greedy or beam search."""

    def __init__(
        self,
        model,
        source_tokenizer,
        target_tokenizer,
        max_new_tokens_limit=None,
        beam_widths=(1, 2, 4),
        bos_id=BOS,
        eos_id=EOS,
        jit_compile=True,
    ):
        if source_tokenizer is None or target_tokenizer is None:
            raise ValueError("A seq2seq export needs a tokenizer (or a (source, target) pair of tokenizers).")
        self.model = model
        self.source_tokenizer = source_tokenizer
        self.target_tokenizer = target_tokenizer
        self.generator = Seq2SeqGenerator(model, bos_id=bos_id, pad_id=0, jit_compile=jit_compile)
        a = self.generator.adapter
        self.adapter = a
        if source_tokenizer.vocabulary_size > a.source_vocabulary_size:
            raise ValueError(
                f"The source tokenizer has {source_tokenizer.vocabulary_size} ids but the model only "
                f"{a.source_vocabulary_size}."
            )
        if target_tokenizer.vocabulary_size > a.vocabulary_size:
            raise ValueError(
                f"The target tokenizer has {target_tokenizer.vocabulary_size} ids but the model only "
                f"{a.vocabulary_size}."
            )
        if a.source_max_length is None or a.max_length is None:
            raise ValueError("The seq2seq model must have a maximum length (its embeddings' max_length).")
        limit = (
            a.max_length - 1
            if max_new_tokens_limit is None
            else min(int(max_new_tokens_limit), a.max_length - 1)
        )
        if limit < 1:
            raise ValueError(f"`max_new_tokens_limit` must be >= 1; received {max_new_tokens_limit}.")
        self.max_new_tokens_limit = limit
        widths = sorted({int(w) for w in beam_widths})
        if not widths or widths[0] < 1:
            raise ValueError(f"`beam_widths` must be positive ints; received {beam_widths!r}.")
        beam_lib.check_num_beams(widths[-1], a.vocabulary_size)
        self.beam_widths = widths
        self.bos_id = int(bos_id)
        self.eos_id = -1 if eos_id is None else int(eos_id)
        self.jit_compile = bool(jit_compile)
        # Source width (right padding) as in Seq2SeqGenerator._prepare: the prompt
        # bucket of the longest source, cut to the model's source length.
        self.source_width_of_length = [
            min(cache_lib.prompt_bucket(max(n, 1)), max(a.source_max_length, n))
            for n in range(a.source_max_length + 1)
        ]
        # Decoder: the prompt is [BOS] (width 1); cache length by max_new_tokens.
        caches = [cache_lib.cache_bucket(1 + max(m, 1)) for m in range(limit + 1)]
        self.configs = [(w, c) for w in widths for c in sorted(set(caches))]
        self.config_of = [[self.configs.index((w, c)) for c in caches] for w in widths]
        self._decoders = {}

    def decoder(self, width, cache_length):
        """XLA-compiled greedy decoding (width 1) or beam search of `width` beams."""
        if (width, cache_length) not in self._decoders:
            gen, bos, eos = self.generator, self.bos_id, self.eos_id

            def run(source, source_lengths, max_new_tokens, length_penalty):
                batch = tf.shape(source)[0]
                dec = tf.fill([batch, 1], tf.constant(bos, tf.int32))
                dec_lengths = tf.ones([batch], tf.int32)
                if width == 1:
                    out = gen.generate_fn(
                        source,
                        source_lengths,
                        dec,
                        dec_lengths,
                        max_new_tokens,
                        tf.zeros([2], tf.int32),
                        0.0,
                        0,
                        1.0,
                        eos,
                        cache_length=cache_length,
                        sampler="greedy",
                    )
                    return out["tokens"], out["lengths"]
                out = gen.beam_search_fn(
                    source,
                    source_lengths,
                    dec,
                    dec_lengths,
                    max_new_tokens,
                    length_penalty,
                    eos,
                    num_beams=width,
                    cache_length=cache_length,
                )
                return out["sequences"][:, 0], out["lengths"][:, 0]

            with tf.init_scope():
                self._decoders[width, cache_length] = tf.function(
                    run,
                    jit_compile=self.jit_compile,
                    autograph=False,
                    input_signature=[
                        tf.TensorSpec([None, None], tf.int32),
                        tf.TensorSpec([None], tf.int32),
                        tf.TensorSpec([], tf.int32),
                        tf.TensorSpec([], tf.float32),
                    ],
                ).get_concrete_function()
        return self._decoders[width, cache_length]

    def endpoints(self):
        a = self.adapter
        src_tok, tgt_tok = self.source_tokenizer, self.target_tokenizer

        def translate(inputs, max_new_tokens, num_beams, length_penalty):
            ragged = src_tok.tokenize(inputs)
            lengths = tf.cast(ragged.row_lengths(), tf.int32)
            long = longest(lengths)
            widths = tf.constant(self.beam_widths, tf.int32)
            checks = [
                check_nonempty_batch("inputs", tf.shape(lengths)[0]),
                _assert(
                    tf.reduce_all(lengths >= 1),
                    "every item of `inputs` needs at least one token; lengths:",
                    lengths,
                ),
                _assert(
                    long <= a.source_max_length,
                    f"an item of `inputs` is longer than the model's maximum source length {a.source_max_length} "
                    "tokens; longest:",
                    long,
                ),
                _assert(max_new_tokens >= 0, "`max_new_tokens` must be >= 0; received:", max_new_tokens),
                _assert(
                    max_new_tokens <= self.max_new_tokens_limit,
                    f"`max_new_tokens` must be <= {self.max_new_tokens_limit} (max_new_tokens_limit of the export); "
                    "received:",
                    max_new_tokens,
                ),
                _assert(
                    tf.reduce_any(tf.equal(widths, num_beams)),
                    f"`num_beams` must be one of the exported beam widths {self.beam_widths} (1 = greedy); received:",
                    num_beams,
                ),
                _assert(
                    tf.logical_and(length_penalty >= 0.0, tf.math.is_finite(length_penalty)),
                    "`length_penalty` must be a finite float >= 0; received:",
                    length_penalty,
                ),
            ]
            with tf.control_dependencies(checks):
                # Right-padded to the same width as the in-process generator.
                width = lookup(self.source_width_of_length, long)
                source = ragged.to_tensor(default_value=PAD)
                source = tf.pad(source, [[0, 0], [0, width - tf.shape(source)[1]]])
                max_new = tf.clip_by_value(max_new_tokens, 0, self.max_new_tokens_limit)
                beam_index = tf.argmax(tf.cast(tf.equal(widths, num_beams), tf.int32), output_type=tf.int32)
                index = lookup(self.config_of, beam_index, max_new)

            def branch(w, cache_length):
                def fn():
                    tokens, out_lengths = self.decoder(w, cache_length)(
                        source, lengths, max_new, length_penalty
                    )
                    return tokens[:, :max_new], out_lengths

                return fn

            tokens, out_lengths = tf.switch_case(index, [branch(w, c) for w, c in self.configs])
            out_lengths = tf.minimum(out_lengths, max_new)
            return {"translations": detokenize(tgt_tok, tokens, out_lengths), "num_tokens": out_lengths}

        signature = [
            tf.TensorSpec([None], tf.string, name="inputs"),
            tf.TensorSpec([], tf.int32, name="max_new_tokens"),
            tf.TensorSpec([], tf.int32, name="num_beams"),
            tf.TensorSpec([], tf.float32, name="length_penalty"),
        ]
        return [("translate", translate, signature)]

    def warmup_requests(self):
        return [
            (
                "translate",
                {
                    "inputs": np.array([_sample_text(self.source_tokenizer).encode()]),
                    "max_new_tokens": np.int32(min(8, self.max_new_tokens_limit)),
                    "num_beams": np.int32(1),
                    "length_penalty": np.float32(0.6),
                },
            )
        ]


# --------------------------------------------------------------------------- BERT
class _BertBase:
    def __init__(self, model, tokenizer):
        if tokenizer is None:
            raise ValueError("A BERT export needs a tokenizer.")
        if not getattr(tokenizer, "special_tokens", False):
            raise ValueError("A BERT export needs a tokenizer with special tokens ([CLS], [SEP], [MASK]).")
        self.model = model
        self.tokenizer = tokenizer
        embedding = model.get_layer("embedding")
        self.vocabulary_size = int(getattr(embedding, "vocabulary_size", None) or embedding.input_dim)
        self.max_length = int(embedding.max_length)
        if tokenizer.vocabulary_size > self.vocabulary_size:
            raise ValueError(
                f"The tokenizer has {tokenizer.vocabulary_size} ids but the model only {self.vocabulary_size}."
            )

    def encode(self, ragged_text_ids, name):
        """`[CLS] ids [SEP]` truncated to the model length → model inputs dict + padded ids."""
        batch = tf.shape(ragged_text_ids.row_lengths())[0]
        with tf.control_dependencies([check_nonempty_batch(name, batch)]):
            ids = ragged_text_ids[:, : self.max_length - 2]
        rows = ids.nrows(out_type=tf.int64)
        cls_id, sep_id = special_id(self.tokenizer, "cls", CLS), special_id(self.tokenizer, "sep", SEP)
        cls = tf.RaggedTensor.from_tensor(tf.fill([rows, 1], tf.constant(cls_id, tf.int32)))
        sep = tf.RaggedTensor.from_tensor(tf.fill([rows, 1], tf.constant(sep_id, tf.int32)))
        ids = tf.concat([cls, tf.cast(ids, tf.int32), sep], axis=1)
        token_ids = ids.to_tensor(default_value=special_id(self.tokenizer, "pad", PAD))
        padding_mask = tf.cast(tf.sequence_mask(ids.row_lengths(), tf.shape(token_ids)[1]), tf.int32)
        inputs = {
            "token_ids": token_ids,
            "segment_ids": tf.zeros_like(token_ids),
            "padding_mask": padding_mask,
        }
        return inputs

    def warmup_text(self):
        return _sample_text(self.tokenizer)


class BertClassifierServing(_BertBase):
    """`classify`: strings → class probabilities and label names."""

    def __init__(self, model, tokenizer, label_names=None):
        super().__init__(model, tokenizer)
        num_classes = int(model.output.shape[-1])
        self.binary_sigmoid = num_classes == 1
        expected = 2 if self.binary_sigmoid else num_classes
        if label_names is None:
            label_names = [f"LABEL_{i}" for i in range(expected)]
        label_names = [str(n) for n in label_names]
        if len(label_names) != expected:
            raise ValueError(
                f"`label_names` must have {expected} names for this classifier; received {label_names}."
            )
        self.label_names = label_names

    def endpoints(self):
        model, names = self.model, tf.constant(self.label_names)

        def classify(inputs):
            x = self.encode(raw_encode(self.tokenizer, inputs), "inputs")
            logits = tf.cast(model(x, training=False), tf.float32)
            if self.binary_sigmoid:
                probabilities = tf.sigmoid(logits)
                index = tf.cast(probabilities[:, 0] >= 0.5, tf.int32)
            else:
                probabilities = tf.nn.softmax(logits, axis=-1)
                index = tf.argmax(probabilities, axis=-1, output_type=tf.int32)
            return {"probabilities": probabilities, "labels": tf.gather(names, index)}

        return [("classify", classify, [tf.TensorSpec([None], tf.string, name="inputs")])]

    def warmup_requests(self):
        return [("classify", {"inputs": np.array([self.warmup_text().encode()])})]


class BertMaskedLMServing(_BertBase):
    """`fill_mask`: strings containing `[MASK]` → the best filled string and,
    for the first mask of each input, the top-5 tokens and probabilities
    (special tokens are never predicted)."""

    def __init__(self, model, tokenizer, top_k=FILL_MASK_TOP_K):
        super().__init__(model, tokenizer)
        # Predictions are restricted to the tokenizer's ordinary tokens.
        self.num_predictable = tokenizer.vocabulary_size
        self.top_k = min(int(top_k), self.num_predictable - NUM_SPECIAL_TOKENS)

    def encode_masked(self, strings):
        """Splits on the literal `[MASK]`, tokenizes the pieces and joins them
        with the MASK id (tokenizers would otherwise split `[MASK]` as text)."""
        pieces = tf.strings.split(strings, sep=MASK_TOKEN)  # [B, (n_pieces)]
        flat_ids = raw_encode(self.tokenizer, pieces.flat_values)  # [P, (t)]
        n = tf.cast(pieces.row_lengths(), tf.int32)
        num_pieces = tf.shape(pieces.flat_values)[0]
        # A MASK after every piece but the last of its row.
        piece_row_end = tf.cast(pieces.row_splits[1:], tf.int32) - 1
        is_last = tf.scatter_nd(piece_row_end[:, None], tf.ones_like(piece_row_end), [num_pieces]) > 0
        mask_counts = tf.cast(tf.logical_not(is_last), tf.int64)
        masks = tf.RaggedTensor.from_row_lengths(
            tf.fill([tf.reduce_sum(mask_counts)], tf.constant(MASK, tf.int32)), mask_counts
        )
        joined = tf.concat([tf.cast(flat_ids, tf.int32), masks], axis=1)  # [P, (t + 0/1)]
        per_row = tf.RaggedTensor.from_row_splits(joined, pieces.row_splits)
        return per_row.merge_dims(1, 2), n - 1

    def endpoints(self):
        model, tokenizer = self.model, self.tokenizer
        vocab_strings = tf.constant(tokenizer.get_vocabulary())

        def fill_mask(inputs):
            ids, num_masks = self.encode_masked(inputs)
            with tf.control_dependencies(
                [
                    _assert(
                        tf.reduce_all(num_masks >= 1),
                        f"every item of `inputs` must contain {MASK_TOKEN}; masks per item:",
                        num_masks,
                    ),
                ]
            ):
                ids = tf.identity(ids)
            x = self.encode(ids, "inputs")
            token_ids = x["token_ids"]
            logits = tf.cast(model(x, training=False), tf.float32)
            ids_range = tf.range(self.vocabulary_size)
            ordinary = (ids_range >= NUM_SPECIAL_TOKENS) & (ids_range < self.num_predictable)
            logits = tf.where(ordinary[None, None, :], logits, samplers.MASK_VALUE)
            best = tf.argmax(logits, axis=-1, output_type=tf.int32)
            is_mask = tf.equal(token_ids, MASK)
            filled_ids = tf.where(is_mask, best, token_ids)
            lengths = tf.reduce_sum(x["padding_mask"], axis=1)
            filled = tokenizer.detokenize(tf.RaggedTensor.from_tensor(filled_ids, lengths=lengths))
            first = tf.argmax(tf.cast(is_mask, tf.int32), axis=1, output_type=tf.int32)
            first_logits = tf.gather(logits, first, batch_dims=1)
            top = tf.math.top_k(tf.nn.softmax(first_logits, axis=-1), k=self.top_k)
            return {
                "filled": filled,
                "top_tokens": tf.gather(vocab_strings, top.indices),
                "top_probabilities": top.values,
            }

        return [("fill_mask", fill_mask, [tf.TensorSpec([None], tf.string, name="inputs")])]

    def warmup_requests(self):
        return [("fill_mask", {"inputs": np.array([f"{self.warmup_text()} {MASK_TOKEN}".encode()])})]
