"""Serving endpoints of a GPT model: `serving_default`, `generate`,
`generate_ids`, `beam_search`, `beam_search_ids`.

`max_new_tokens` may take a prompt past the model's maximum length: such a
request runs the sliding-window loop of `keras_tfm.generation.sliding_window`
(as `generate` and `beam_search` in process), compiled for the widest prompt
width; the requests that fit the context run one loop of any prompt width
(see `keras_tfm.export.signatures`).

Beam search has its own signatures rather than a `num_beams` input of
`generate`: a TF Serving request must feed every input of its signature, so
a new input would break every existing `generate` client, and the two take
different options (sampling `temperature` / `top_k` / `top_p` / `seed`
against `num_beams` / `length_penalty`, as `translate`). `num_beams` is a
request input, any width in [1, max_beams] (fixed at export): one loop per
configuration is compiled for `max_beams` beams, and a narrower request
keeps the spare beams dead, which is exactly the search of that width
(`beam.beam_search_loop(active_beams=)`); width 1 is greedy decoding.
"""

import numpy as np
import tensorflow as tf

from keras_tfm.checks import check_int, check_num_beams, check_positive_int
from keras_tfm.export.common import (
    BEAM_SIGNATURE,
    SAMPLING_SIGNATURE,
    check_beams,
    check_max_new_tokens,
    check_nonempty_batch,
    check_sampling,
    check_seed,
    choose_token,
    left_pad,
    longest,
    lookup,
    ragged_from_padded,
    require,
    served_seed,
    string_vector,
)
from keras_tfm.generation.generator import Generator
from keras_tfm.generation.prompts import cache_bucket, prompt_bucket
from keras_tfm.layers.attention.dot_product import key_length_bound
from keras_tfm.tokenizers.special_tokens import NUM_SPECIAL_TOKENS
from keras_tfm.tokenizers.text import detokenize, sample_text

#: Default `max_new_tokens_limit` of a GPT export (or the model's max_length - 1 if larger).
DEFAULT_MAX_NEW_TOKENS_LIMIT = 256


# --------------------------------------------------------------------------- GPT
class GPTServing:
    """Endpoints of a GPT model: `serving_default` (logits), `generate` and
    `beam_search` (strings), `generate_ids` and `beam_search_ids` (ids)."""

    def __init__(
        self,
        model,
        tokenizer,
        max_new_tokens_limit=None,
        eos_id=None,
        pad_id=0,
        jit_compile=True,
        max_prompt_length=None,
        max_beams=4,
    ):
        self.model = model
        self.tokenizer = tokenizer
        self.generator = Generator(model, pad_id=pad_id, jit_compile=jit_compile)
        self.generator.step.shared = True  # several loops: the model step is traced and saved once
        self.vocabulary_size = model.vocabulary_size
        self.max_length = model.max_length
        if max_prompt_length is None:
            max_prompt_length = self.max_length
        if max_prompt_length is None:
            raise ValueError(
                "The model has no maximum length; pass `max_prompt_length` (and `max_new_tokens_limit`)."
            )
        self.max_prompt_length = check_positive_int("max_prompt_length", max_prompt_length)
        if self.max_length is not None and self.max_prompt_length > self.max_length:
            raise ValueError(
                f"`max_prompt_length`={self.max_prompt_length} exceeds the model's maximum length "
                f"{self.max_length}."
            )
        if max_new_tokens_limit is None:
            if self.max_length is None:
                raise ValueError("The model has no maximum length; pass `max_new_tokens_limit`.")
            max_new_tokens_limit = max(self.max_length - 1, DEFAULT_MAX_NEW_TOKENS_LIMIT)
        self.max_new_tokens_limit = check_positive_int("max_new_tokens_limit", max_new_tokens_limit)
        self.max_beams = check_int("max_beams", max_beams, minimum=1)
        check_num_beams(self.max_beams, self.vocabulary_size)
        self.eos_id = -1 if eos_id is None else int(eos_id)
        self.pad_id = int(pad_id)
        self.jit_compile = bool(jit_compile)
        # Requests that fit the context: one loop of dynamic prompt width (the in-process bucket of the
        # longest prompt, XLA compiles each width on its first request) and one cache length, enough for
        # every such request (a longer cache than in process only adds masked slots: the same tokens).
        self.prompt_widths = sorted({prompt_bucket(max(n, 1)) for n in range(self.max_prompt_length + 1)})
        self.width_of_length = [prompt_bucket(max(n, 1)) for n in range(self.max_prompt_length + 1)]
        self.fitting_limit = min(self.max_new_tokens_limit, self.max_length or self.max_new_tokens_limit)
        self.cache_length = cache_bucket(self.prompt_widths[-1] + max(self.fitting_limit, 1))
        # Past the context (prompt + max_new_tokens > max_length): one sliding-window loop
        # (generation.sliding_window) of the widest prompt width (its caches do not depend on
        # max_new_tokens, its token buffer holds the limit), the tokens of the in-process sliding loop.
        self.sliding = (
            self.max_length is not None
            and self.max_prompt_length + self.max_new_tokens_limit > self.max_length
        )
        self._decoders = {}
        if tokenizer is not None and tokenizer.vocabulary_size > self.vocabulary_size:
            raise ValueError(
                f"The tokenizer has {tokenizer.vocabulary_size} ids but the model only {self.vocabulary_size}."
            )

    # ---- compiled pieces
    def _concrete(self, key, run, scalars, width):
        """`run(ids [B, width], lengths [B], *scalars)` traced once (eagerly, outside the endpoint being
        traced) as a ConcreteFunction (XLA-compiled with `jit_compile`) shared by every endpoint;
        `width` None: any prompt width."""
        if key not in self._decoders:
            with tf.init_scope():
                self._decoders[key] = tf.function(
                    run,
                    jit_compile=self.jit_compile,
                    autograph=False,
                    input_signature=[tf.TensorSpec([None, width], tf.int32), tf.TensorSpec([None], tf.int32)]
                    + [tf.TensorSpec([], dtype) for dtype in scalars],
                ).get_concrete_function()
        return self._decoders[key]

    def _shape(self, sliding):
        """`(prompt width or None, cache length)` of the fitting loop or the sliding-window loop."""
        if sliding:
            return self.prompt_widths[-1], self.prompt_widths[-1] + self.max_new_tokens_limit
        return None, self.cache_length

    def decoder(self, sliding=False):
        """The decoding loop (`decoding.decode` for requests that fit the context, else the
        sliding-window loop); `run(ids, lengths, max_new_tokens, seed, temperature, top_k, top_p)`."""
        generator, eos = self.generator, self.eos_id
        width, cache_length = self._shape(sliding)
        choose = choose_token(self.vocabulary_size)

        def run(ids, lengths, max_new_tokens, seed, temperature, top_k, top_p):
            out = generator.generate_fn(
                ids,
                lengths,
                max_new_tokens,
                served_seed(seed),
                temperature,
                top_k,
                top_p,
                eos,
                cache_length=cache_length,
                sampler="sample",
                sliding=sliding,
                choose=choose,
            )
            return out["tokens"], out["lengths"]

        scalars = (tf.int32, tf.int32, tf.float32, tf.int32, tf.float32)
        return self._concrete(("sample", sliding), run, scalars, width)

    def beam_decoder(self, sliding=False):
        """The beam search of `max_beams` beams (the request's `num_beams` of them active), fitting or
        sliding as `decoder`; returns the best beam's tokens, length and score."""
        generator, eos, k = self.generator, self.eos_id, self.max_beams
        width, cache_length = self._shape(sliding)

        def run(ids, lengths, max_new_tokens, length_penalty, num_beams):
            out = generator.beam_search_fn(
                ids,
                lengths,
                max_new_tokens,
                length_penalty,
                eos,
                num_beams=k,
                cache_length=cache_length,
                active_beams=num_beams,
                sliding=sliding,
            )
            return out["sequences"][:, 0], out["lengths"][:, 0], out["scores"][:, 0]

        return self._concrete(("beam", sliding), run, (tf.int32, tf.float32, tf.int32), width)

    def _route(self, ragged, max_new_tokens, name, checks):
        """Validates the prompts (and `checks`) → `(ragged, lengths, max_new, slide)`: the prompts
        and lengths readable only after every check passed (so a bad request fails with its
        check's message, never inside the padding or the loop), `slide` (bool scalar) when
        prompt + max_new_tokens pass the model's maximum length."""
        lengths = tf.cast(ragged.row_lengths(), tf.int32)
        batch = tf.shape(lengths)[0]
        long = longest(lengths)
        flat = ragged.flat_values
        checks = [
            check_nonempty_batch(name, batch),
            require(
                tf.reduce_all(lengths >= 1),
                f"every item of `{name}` needs at least one token; lengths:",
                lengths,
            ),
            require(
                long <= self.max_prompt_length,
                f"a prompt of `{name}` is longer than the maximum prompt length {self.max_prompt_length} "
                "tokens; longest:",
                long,
            ),
            require(
                tf.reduce_all((flat >= 0) & (flat < self.vocabulary_size)),
                f"`{name}` holds ids outside [0, {self.vocabulary_size})",
            ),
        ] + checks
        with tf.control_dependencies(checks):
            ragged = tf.RaggedTensor.from_row_splits(
                tf.identity(flat), tf.identity(ragged.row_splits), validate=False
            )
            lengths = tf.identity(lengths)
            max_new = tf.clip_by_value(max_new_tokens, 0, self.max_new_tokens_limit)
            slide = long + max_new > self.max_length if self.sliding else tf.constant(False)
        return ragged, lengths, max_new, slide

    def _switch(self, ragged, slide, max_new, call):
        """Runs `call(ids, sliding)` (outputs: `[B, L]` tokens first) on the prompts left-padded to the
        in-process prompt width (fitting) or to the widest width (`slide`); tokens cut to `max_new`."""

        def branch(sliding):
            def fn():
                if sliding:
                    width = self.prompt_widths[-1]
                else:
                    width = lookup(self.width_of_length, longest(ragged.row_lengths()))
                tokens, *rest = call(left_pad(ragged, width, self.pad_id), sliding)
                return (tokens[:, :max_new], *rest)

            return fn

        if self.sliding:
            outputs = tf.cond(slide, branch(True), branch(False))
        else:
            outputs = branch(False)()
        return [tf.ensure_shape(outputs[0], [None, None])] + [tf.ensure_shape(o, [None]) for o in outputs[1:]]

    def generate_ragged(self, ragged, max_new_tokens, temperature, top_k, top_p, seed, name):
        """Validated generation from ragged prompt ids → (tokens [B, max_new], lengths [B])."""
        checks = check_sampling(max_new_tokens, temperature, top_k, top_p, self.max_new_tokens_limit)
        checks += check_seed(seed)
        ragged, lengths, max_new, slide = self._route(ragged, max_new_tokens, name, checks)

        def call(ids, sliding):
            return self.decoder(sliding)(ids, lengths, max_new, seed, temperature, top_k, top_p)

        tokens, out_lengths = self._switch(ragged, slide, max_new, call)
        return tokens, out_lengths

    def beam_search_ragged(self, ragged, max_new_tokens, num_beams, length_penalty, name):
        """Validated beam search from ragged prompt ids → the best beam's (tokens [B, max_new],
        lengths [B], scores [B])."""
        checks = check_max_new_tokens(max_new_tokens, self.max_new_tokens_limit)
        checks += check_beams(num_beams, length_penalty, self.max_beams)
        ragged, lengths, max_new, slide = self._route(ragged, max_new_tokens, name, checks)
        beams = tf.clip_by_value(num_beams, 1, self.max_beams)

        def call(ids, sliding):
            return self.beam_decoder(sliding)(ids, lengths, max_new, length_penalty, beams)

        tokens, out_lengths, scores = self._switch(ragged, slide, max_new, call)
        return tokens, out_lengths, scores

    # ---- endpoints
    def serving_default(self, token_ids):
        """`token_ids` int32 [B, T] → `logits` float32 [B, T, V]: the forward pass, ids and length checked."""
        batch = tf.shape(token_ids)[0]
        checks = [
            check_nonempty_batch("token_ids", batch),
            require(
                tf.reduce_all((token_ids >= 0) & (token_ids < self.vocabulary_size)),
                f"`token_ids` holds ids outside [0, {self.vocabulary_size})",
            ),
        ]
        if self.max_length is not None:
            checks.append(
                require(
                    tf.shape(token_ids)[1] <= self.max_length,
                    f"`token_ids` is longer than the model's maximum length {self.max_length}:",
                    tf.shape(token_ids)[1],
                )
            )
        with tf.control_dependencies(checks):
            token_ids = tf.identity(token_ids)
        inputs = token_ids
        if self.model.config["with_padding_mask"]:
            inputs = {"token_ids": token_ids, "padding_mask": tf.ones_like(token_ids)}
        # Longer inputs are refused above: "auto" attention need not trace its long-input path.
        with key_length_bound(self.max_length):
            return {"logits": tf.cast(self.model(inputs, training=False), tf.float32)}

    def endpoints(self):
        """List of `(name, fn, input_signature)`; the first is `serving_default`."""
        serving_default = self.serving_default

        def ragged_ids(token_ids, lengths):
            checks = [
                require(
                    tf.shape(lengths)[0] == tf.shape(token_ids)[0],
                    "`lengths` must have one entry per row of `token_ids`; sizes:",
                    tf.shape(lengths)[0],
                    tf.shape(token_ids)[0],
                ),
                require(
                    tf.reduce_all((lengths >= 0) & (lengths <= tf.shape(token_ids)[1])),
                    "`lengths` must be in [0, token_ids.shape[1]]; received:",
                    lengths,
                ),
            ]
            with tf.control_dependencies(checks):
                return ragged_from_padded(token_ids, lengths)

        def generate_ids(token_ids, lengths, max_new_tokens, temperature, top_k, top_p, seed):
            tokens, out_lengths = self.generate_ragged(
                ragged_ids(token_ids, lengths), max_new_tokens, temperature, top_k, top_p, seed, "token_ids"
            )
            return {"token_ids": tokens, "lengths": out_lengths}

        def beam_search_ids(token_ids, lengths, max_new_tokens, num_beams, length_penalty):
            tokens, out_lengths, scores = self.beam_search_ragged(
                ragged_ids(token_ids, lengths), max_new_tokens, num_beams, length_penalty, "token_ids"
            )
            return {"token_ids": tokens, "lengths": out_lengths, "scores": scores}

        ids_inputs = [
            tf.TensorSpec([None, None], tf.int32, name="token_ids"),
            tf.TensorSpec([None], tf.int32, name="lengths"),
        ]
        prompts_input = [tf.TensorSpec([None], tf.string, name="prompts")]
        endpoints = [
            ("serving_default", serving_default, [tf.TensorSpec([None, None], tf.int32, name="token_ids")]),
        ]
        if self.tokenizer is not None:
            tokenizer = self.tokenizer

            def generate(prompts, max_new_tokens, temperature, top_k, top_p, seed):
                ragged = tokenizer.tokenize(string_vector("prompts", prompts))
                tokens, out_lengths = self.generate_ragged(
                    ragged, max_new_tokens, temperature, top_k, top_p, seed, "prompts"
                )
                return {"completions": detokenize(tokenizer, tokens, out_lengths), "num_tokens": out_lengths}

            def beam_search(prompts, max_new_tokens, num_beams, length_penalty):
                ragged = tokenizer.tokenize(string_vector("prompts", prompts))
                tokens, out_lengths, scores = self.beam_search_ragged(
                    ragged, max_new_tokens, num_beams, length_penalty, "prompts"
                )
                completions = detokenize(tokenizer, tokens, out_lengths)
                return {"completions": completions, "num_tokens": out_lengths, "scores": scores}

            endpoints.append(("generate", generate, prompts_input + list(SAMPLING_SIGNATURE.values())))
            endpoints.append(("beam_search", beam_search, prompts_input + list(BEAM_SIGNATURE.values())))
        endpoints.append(("generate_ids", generate_ids, ids_inputs + list(SAMPLING_SIGNATURE.values())))
        endpoints.append(("beam_search_ids", beam_search_ids, ids_inputs + list(BEAM_SIGNATURE.values())))
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
                ("generate", dict(sampling, prompts=np.array([sample_text(self.tokenizer).encode()])))
            )
        requests.append(("generate_ids", dict(sampling, token_ids=ids, lengths=np.array([4], np.int32))))
        beams = {
            "max_new_tokens": np.int32(n),
            "num_beams": np.int32(self.max_beams),
            "length_penalty": np.float32(0.6),
        }
        requests.append(("beam_search_ids", dict(beams, token_ids=ids, lengths=np.array([4], np.int32))))
        return requests
