"""Serving endpoint of a seq2seq model: `translate` (greedy and beam search).

A checkpoint model (T5, BART, Marian) serves with its own special ids: sources padded with its
`pad_id`, decoding from its `decoder_start_id` to its `eos_id`, its forced and suppressed tokens
(`generation.constraints`) in greedy and beam decoding alike.

`num_beams` is a request input, any width in [1, max_beams]: width 1 runs the
greedy loop, a wider request runs the beam search compiled for `max_beams`
beams with the spare ones kept dead (`beam.beam_search_loop(active_beams=)`),
which is exactly a search of the requested width.
"""

import numpy as np
import tensorflow as tf

from keras_tfm.checks import check_int, check_num_beams
from keras_tfm.export.common import (
    BEAM_SIGNATURE,
    check_beams,
    check_max_new_tokens,
    check_nonempty_batch,
    longest,
    lookup,
    require,
    string_vector,
)
from keras_tfm.generation import prompts as prompts_lib
from keras_tfm.generation.generator import Generator
from keras_tfm.generation.prompts import model_pad_id
from keras_tfm.generation.text import seq2seq_ids
from keras_tfm.tokenizers.text import detokenize, sample_text


# --------------------------------------------------------------------------- seq2seq
class Seq2SeqServing:
    """`translate` endpoint: strings → strings, greedy or beam search."""

    def __init__(
        self,
        model,
        source_tokenizer,
        target_tokenizer,
        max_new_tokens_limit=None,
        max_beams=4,
        bos_id=None,
        eos_id=None,
        jit_compile=True,
    ):
        if source_tokenizer is None or target_tokenizer is None:
            raise ValueError("A seq2seq export needs a tokenizer (or a (source, target) pair of tokenizers).")
        self.model = model
        self.source_tokenizer = source_tokenizer
        self.target_tokenizer = target_tokenizer
        if bos_id is None or eos_id is None:
            start, stop = seq2seq_ids(model, target_tokenizer, "export_for_serving")
            bos_id = start if bos_id is None else bos_id
            eos_id = stop if eos_id is None else eos_id
        self.generator = Generator(model, bos_id=bos_id, jit_compile=jit_compile)
        self.pad_id = model_pad_id(model)
        a = self.model
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
        if a.max_length is None:
            raise ValueError("The seq2seq model must have a maximum length (its embeddings' max_length).")
        limit = (
            a.max_length - 1
            if max_new_tokens_limit is None
            else min(int(max_new_tokens_limit), a.max_length - 1)
        )
        if limit < 1:
            raise ValueError(f"`max_new_tokens_limit` must be >= 1; received {max_new_tokens_limit}.")
        self.max_new_tokens_limit = limit
        self.max_beams = check_int("max_beams", max_beams, minimum=1)
        check_num_beams(self.max_beams, a.vocabulary_size)
        self.bos_id = int(bos_id)
        self.eos_id = int(eos_id)
        self.jit_compile = bool(jit_compile)
        # Source width (right padding) as in the in-process `Generator`: the prompt
        # bucket of the longest source, cut to the model's source length.
        self.source_width_of_length = [
            min(prompts_lib.prompt_bucket(max(n, 1)), max(a.max_length, n)) for n in range(a.max_length + 1)
        ]
        # Decoder: the prompt is [BOS] (width 1); one cache length, enough for every request (a longer
        # cache than in process only adds masked slots: the same tokens). Loops: greedy (width 1) and,
        # with max_beams > 1, beam search of max_beams beams.
        self.cache_length = prompts_lib.cache_bucket(1 + limit)
        self._decoders = {}

    def decoder(self, width):
        """XLA-compiled greedy decoding (width 1) or beam search of `width` beams."""
        cache_length = self.cache_length
        if width not in self._decoders:
            gen, bos, eos = self.generator, self.bos_id, self.eos_id

            def run(source, source_lengths, max_new_tokens, length_penalty, num_beams):
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
                    active_beams=num_beams,
                )
                return out["sequences"][:, 0], out["lengths"][:, 0]

            with tf.init_scope():
                self._decoders[width] = tf.function(
                    run,
                    jit_compile=self.jit_compile,
                    autograph=False,
                    input_signature=[
                        tf.TensorSpec([None, None], tf.int32),
                        tf.TensorSpec([None], tf.int32),
                        tf.TensorSpec([], tf.int32),
                        tf.TensorSpec([], tf.float32),
                        tf.TensorSpec([], tf.int32),
                    ],
                ).get_concrete_function()
        return self._decoders[width]

    def endpoints(self):
        a = self.model
        src_tok, tgt_tok = self.source_tokenizer, self.target_tokenizer

        def translate(inputs, max_new_tokens, num_beams, length_penalty):
            ragged = src_tok.tokenize(string_vector("inputs", inputs))
            lengths = tf.cast(ragged.row_lengths(), tf.int32)
            long = longest(lengths)
            checks = [
                check_nonempty_batch("inputs", tf.shape(lengths)[0]),
                require(
                    tf.reduce_all(lengths >= 1),
                    "every item of `inputs` needs at least one token; lengths:",
                    lengths,
                ),
                require(
                    long <= a.max_length,
                    f"an item of `inputs` is longer than the model's maximum source length {a.max_length} "
                    "tokens; longest:",
                    long,
                ),
            ]
            checks += check_max_new_tokens(max_new_tokens, self.max_new_tokens_limit)
            checks += check_beams(num_beams, length_penalty, self.max_beams)
            with tf.control_dependencies(checks):
                # Right-padded to the same width as the in-process generator.
                width = lookup(self.source_width_of_length, long)
                # The model's pad id (0 for keras_tfm's models), as the in-process generator pads.
                source = ragged.to_tensor(default_value=self.pad_id)
                source = tf.pad(
                    source, [[0, 0], [0, width - tf.shape(source)[1]]], constant_values=self.pad_id
                )
                max_new = tf.clip_by_value(max_new_tokens, 0, self.max_new_tokens_limit)
                beams = tf.clip_by_value(num_beams, 1, self.max_beams)

            def branch(w):
                def fn():
                    tokens, out_lengths = self.decoder(w)(source, lengths, max_new, length_penalty, beams)
                    return tokens[:, :max_new], out_lengths

                return fn

            if self.max_beams > 1:
                tokens, out_lengths = tf.cond(beams > 1, branch(self.max_beams), branch(1))
            else:
                tokens, out_lengths = branch(1)()
            out_lengths = tf.minimum(out_lengths, max_new)
            return {"translations": detokenize(tgt_tok, tokens, out_lengths), "num_tokens": out_lengths}

        signature = [tf.TensorSpec([None], tf.string, name="inputs")] + list(BEAM_SIGNATURE.values())
        return [("translate", translate, signature)]

    def warmup_requests(self):
        return [
            (
                "translate",
                {
                    "inputs": np.array([sample_text(self.source_tokenizer).encode()]),
                    "max_new_tokens": np.int32(min(8, self.max_new_tokens_limit)),
                    "num_beams": np.int32(1),
                    "length_penalty": np.float32(0.6),
                },
            )
        ]
