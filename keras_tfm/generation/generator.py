"""Cached, compiled generation with any decoder model: `Generator`, `generate`, `beam_search`.

    generate(model, prompt_ids, max_new_tokens, sampler=None | "greedy" | "sample", ...)
    beam_search(model, prompt_ids, max_new_tokens, num_beams=4, length_penalty=None, ...)

A *decoder* is a model with this protocol (`GPT` and `Seq2Seq` implement it):

    vocabulary_size                     output vocabulary V
    max_length                          decoder positions (None: unbounded)
    position                            position scheme: the sliding window's rule
    init_caches(batch, length)          zero key/value caches, a flat list
    decode_step(ids, positions, caches, cache_index, padding_mask, context=None)
                                        → (float32 logits of the last position (B, V), caches)
    encode_context(source_ids, source_lengths)
                                        encoder–decoder models only: the decoder's per-row
                                        context (cross-attention keys and values, source mask)

`Generator(model)` holds the model and its compiled loops, one per static configuration
(sampler, cache length, ...; `trace_count` counts traces). `generate` and `beam_search` use
one generator per model (kept weakly). The loops are `decoding.decode`, `beam.beam_search_loop`
(GNMT length penalty) or `beam_hf.hf_beam_search_loop` (HuggingFace's beam search) and
`sliding_window` (past the context), compiled by `compiled` for TensorFlow (XLA), JAX
(`jax.jit`) and PyTorch; the exporters trace the same `generate_fn` / `beam_search_fn`.

Beam search style: `length_penalty_style="gnmt"` (`beam`) or `"hf"` (`beam_hf`, with
`early_stopping`); None takes the model's `generation_defaults` (a dict with those keys and
`length_penalty`, which `from_preset` of a HuggingFace checkpoint sets: "hf", the
checkpoint's `generation_config.json` values or HuggingFace's defaults α = 1,
early_stopping False), else GNMT with α = 0.6.
"""

import weakref
from collections.abc import Sequence

import keras
import numpy as np

from keras_tfm.checks import (
    check_bool,
    check_cache_dtype,
    check_int,
    check_num_beams,
    check_request_ids,
    check_sampling,
    check_token_id,
)
from keras_tfm.generation import beam as beam_lib
from keras_tfm.generation import beam_hf, compiled, decoding, prompts, samplers, sliding_window
from keras_tfm.generation import cache as cache_lib
from keras_tfm.generation import constraints as constraints_lib
from keras_tfm.generation.beam_styles import beam_options

#: Most bytes of the logits `output_scores=True` returns (batch × tokens × V float32).
MAX_SCORES_BYTES = 1 << 32

#: The end of the error for an `eos_id` outside the vocabulary.
#: `check_int` bounds of `max_new_tokens` (the limit of one call).
LIMIT = dict(
    maximum=prompts.MAX_NEW_TOKENS, maximum_name="the limit of one generation call (prompts.MAX_NEW_TOKENS)"
)

#: The protocol of a decoder model (module docstring).
DECODER_METHODS = ("init_caches", "decode_step")

#: An `eos_id` the caller did not give: the model's (`generation_config`), else none.
_UNSET = object()


def is_encoder_decoder(model: object) -> bool:
    """Whether a decoder model has an encoder (`encode_context`): a seq2seq model."""
    return callable(getattr(model, "encode_context", None))


class Generator(compiled.Module):
    """Compiled cached generation for one decoder model (GPT or seq2seq).

    The traceable entry points `generate_fn` and `beam_search_fn` take tensors
    besides static Python options, so an exporter wraps them in a `tf.function`
    with an `input_signature`. On TensorFlow a compiled call runs in a worker
    thread, so Ctrl-C interrupts a long generation at once (`compiled`).

    Args:
        model: a decoder (`GPT`, `Seq2Seq`, or a model with the module
            docstring's protocol).
        pad_id: id that left-pads prompts and that finished rows emit, in [0, V);
            None: the model's `pad_id` (a checkpoint's), else 0.
        bos_id: seq2seq: the default first decoder token (None: the model's
            `generation_config["decoder_start_id"]`, else every request passes
            `bos_id` or `decoder_prompt_ids`).
        jit_compile: TensorFlow: compile with XLA (else a graph function); a seq2seq
            model's encoder runs as a graph function either way.
        run_eagerly: no compilation at all (debugging, tests).
        name: module name.

    Example:
        gen = Generator(model)
        tokens = gen.generate([[5, 6, 7], [8]], max_new_tokens=20, eos_id=2)
    """

    def __init__(
        self,
        model: keras.Model,
        pad_id: int | None = None,
        bos_id: int | None = None,
        jit_compile: bool = True,
        run_eagerly: bool = False,
        name: str | None = None,
    ):
        super().__init__(name=name)
        missing = [m for m in DECODER_METHODS if not callable(getattr(model, m, None))]
        if missing:
            raise TypeError(
                f"`model` must be a decoder (a keras_tfm GPT or Seq2Seq, or a model with "
                f"{list(DECODER_METHODS)}); received {type(model).__name__}, which lacks {missing}."
            )
        self.model = model
        self.seq2seq = is_encoder_decoder(model)
        pad_id = prompts.model_pad_id(model) if pad_id is None else pad_id
        self.pad_id = check_token_id("pad_id", pad_id, model.vocabulary_size)
        if bos_id is None and self.seq2seq:
            bos_id = prompts.model_defaults(model).get("decoder_start_id")
        elif bos_id is not None and not self.seq2seq:
            raise TypeError(
                "`bos_id` is for encoder–decoder models; a decoder-only model starts from its prompt."
            )
        # A first decoder token is an id of the vocabulary, not the padding id of a mask_zero model.
        self._bos_minimum = 1 if decoding.padding_token(model) == 0 else 0
        if bos_id is not None:
            bos_id = check_token_id("bos_id", bos_id, model.vocabulary_size, minimum=self._bos_minimum)
        self.bos_id = bos_id
        #: The model's forced / suppressed tokens (`constraints`), the default of every request.
        self.constraints = prompts.request_constraints(model, {})
        self.jit_compile = check_bool("jit_compile", jit_compile)
        self.run_eagerly = check_bool("run_eagerly", run_eagerly)
        self.step = compiled.SharedStep(model.decode_step, cache_lib.length_axis)
        self._cache = compiled.FunctionCache()
        self.trace_count = 0

    # ------------------------------------------------------------- requests
    def _compiled(self, key, fn):
        functions = self._cache.functions
        if key not in functions:

            def traced(*args):
                self.trace_count += 1
                return fn(*args)

            jit, eager, tf = self.jit_compile, self.run_eagerly, keras.backend.backend() == "tensorflow"
            if self.seq2seq and jit and not eager and tf:
                functions[key] = compiled.compile_encoder_apart(traced, self.model.encode_context, self.model)
            else:
                functions[key] = compiled.compile_function(
                    traced, self.model, jit_compile=jit, run_eagerly=eager
                )
        return functions[key]

    # ----------------------------------------------------------- traceable
    def decoder_inputs(self, *inputs: object) -> tuple[object, object, object]:
        """Traceable: the padded inputs → `(decoder prompt ids, their lengths, context)`. GPT:
        `(prompt_ids, prompt_lengths)`, no context; seq2seq: right-padded `source_ids`, their
        lengths, LEFT-padded `decoder_prompt_ids` (usually just BOS) and theirs."""
        if not self.seq2seq:
            return inputs[0], inputs[1], None
        if isinstance(inputs[0], dict):  # encoded already (`compiled.compile_encoder_apart`)
            context, decoder_ids, decoder_lengths = inputs
            return decoder_ids, decoder_lengths, context
        source_ids, source_lengths, decoder_ids, decoder_lengths = inputs
        return decoder_ids, decoder_lengths, self.model.encode_context(source_ids, source_lengths)

    def generate_fn(
        self,
        *args: object,
        cache_length: int,
        sampler: str = "greedy",
        output_scores: bool = False,
        sliding: bool = False,
        choose: object = samplers.choose_token,
        constraints: constraints_lib.TokenConstraints | None = None,
    ) -> dict:
        """Traceable generation (inside a `tf.function`, `jax.jit`, or eagerly).

        Args:
            *args: the model's inputs (`decoder_inputs`), then the scalars
                `max_new_tokens`, `seed` int32 `(2,)`, `temperature`, `top_k`,
                `top_p` (scalars or `(batch,)`) and `eos_id` (-1: none).
            cache_length, sampler, output_scores: static options.
            sliding: go past the model's maximum length (`sliding_window`).
            choose: the sampler's token chooser (`samplers.make_selector`).
            constraints: forced / suppressed tokens (`constraints.TokenConstraints`);
                None: the model's (`generation_config`).

        Returns:
            `decoding.decode`'s dict.
        """
        *inputs, max_new_tokens, seed, temperature, top_k, top_p, eos_id = args
        ids, lengths, context = self.decoder_inputs(*inputs)
        select = samplers.make_selector(sampler, seed, temperature, top_k, top_p, choose)
        constraints = self.constraints if constraints is None else constraints
        select = constraints_lib.constrained_selector(select, constraints, max_new_tokens, lengths)
        options = dict(cache_length=cache_length, eos_id=eos_id, pad_id=self.pad_id, step=self.step)
        options["output_scores"] = output_scores
        if sliding:
            return sliding_window.decode_sliding(self.model, ids, lengths, max_new_tokens, select, **options)
        return decoding.decode(self.model, ids, lengths, max_new_tokens, select, context=context, **options)

    def beam_search_fn(
        self,
        *args: object,
        num_beams: int,
        cache_length: int,
        active_beams: object = None,
        sliding: bool = False,
        style: str | None = None,
        early_stopping: bool | str | None = None,
        processor: object = None,
        constraints: constraints_lib.TokenConstraints | None = None,
    ) -> dict:
        """Traceable beam search: the model's inputs (as in `generate_fn`), then `max_new_tokens`,
        `length_penalty`, `eos_id`; `num_beams` (K) static, `active_beams` an optional int32
        scalar in [1, K] (the width searched). `style` "gnmt" (`beam.beam_search_loop`) or "hf"
        (`beam_hf.hf_beam_search_loop`, with `early_stopping` and an optional log-prob
        `processor`); None: the model's (`beam_options`). `constraints` as in `generate_fn`
        (applied to every beam's log-probabilities, after `processor`)."""
        *inputs, max_new_tokens, length_penalty, eos_id = args
        ids, lengths, context = self.decoder_inputs(*inputs)
        options = beam_options(self.model, style, early_stopping=early_stopping)
        constraints = self.constraints if constraints is None else constraints
        constrain = constraints_lib.beam_constrain(constraints, max_new_tokens, lengths, num_beams, processor)
        common = dict(
            num_beams=num_beams, cache_length=cache_length, length_penalty=length_penalty, eos_id=eos_id
        )
        common.update(
            pad_id=self.pad_id, context=context, active_beams=active_beams, sliding=sliding, step=self.step
        )
        if options["style"] == "hf":
            early = options["early_stopping"]
            return beam_hf.hf_beam_search_loop(
                self.model, ids, lengths, max_new_tokens, early_stopping=early, processor=constrain, **common
            )
        if processor is not None:
            raise TypeError("`processor` is an option of style='hf' (HuggingFace's beam search).")
        return beam_lib.beam_search_loop(
            self.model, ids, lengths, max_new_tokens, constrain=constrain, **common
        )

    # ------------------------------------------------------------- eager API
    def generate(
        self,
        inputs: Sequence[Sequence[int]] | np.ndarray,
        max_new_tokens: int,
        sampler: str | None = None,
        temperature: float | None = None,
        top_k: int | None = None,
        top_p: float | None = None,
        seed: int | Sequence[int] | np.ndarray | None = None,
        eos_id: int | None = _UNSET,
        return_lengths: bool = False,
        output_scores: bool = False,
        **request: object,
    ) -> np.ndarray | tuple[np.ndarray, ...]:
        """Generates up to `max_new_tokens` tokens per input (see `generate`).

        Returns:
            int32 NumPy `(batch, max_new_tokens)` (`pad_id` after EOS); a tuple with the
            lengths (and the step logits) when asked.
        """
        # The plain arguments by the rules of `keras_tfm.checks`, then the ids (`prompts`).
        vocabulary = self.model.vocabulary_size
        sampler, temperature, top_k, top_p = check_sampling(
            sampler, temperature, top_k, top_p, seed, vocabulary
        )
        return_lengths = check_bool("return_lengths", return_lengths)
        output_scores = check_bool("output_scores", output_scores)
        max_new_tokens = check_int("max_new_tokens", max_new_tokens, minimum=0, **LIMIT)
        cache_dtype = check_cache_dtype("cache_dtype", getattr(self.model, "cache_dtype", None))
        check_request_ids(request, eos_id, vocabulary, self._bos_minimum, _UNSET)
        eos = prompts.request_eos(self.model, eos_id, _UNSET)  # not given: the model's
        constraints = prompts.request_constraints(self.model, request)
        arrays, cache_length, slide = prompts.prepare(self, "generate", inputs, max_new_tokens, request)
        seed = prompts.make_seed(seed)
        if output_scores:
            size = arrays[-2].shape[0] * (cache_length - arrays[-2].shape[1]) * vocabulary * 4
            if size > MAX_SCORES_BYTES:
                raise ValueError(
                    f"`output_scores`=True would return {size / 2**30:.1f} GiB of logits (batch × "
                    f"max_new_tokens × vocabulary); at most {MAX_SCORES_BYTES / 2**30:.0f} GiB: ask for "
                    "fewer tokens or no scores."
                )
        key = ("generate", sampler, cache_length, output_scores, slide, cache_dtype, constraints)
        options = dict(cache_length=cache_length, sampler=sampler, output_scores=output_scores, sliding=slide)
        options["constraints"] = constraints
        fn = self._compiled(key, lambda *a: self.generate_fn(*a, **options))
        scalars = (
            np.int32(max_new_tokens),
            seed,
            np.float32(temperature),
            np.int32(top_k),
        )
        out = compiled.call(
            fn, *arrays, *scalars, np.float32(top_p), np.int32(eos), run_eagerly=self.run_eagerly
        )
        result = (out["tokens"][:, :max_new_tokens],)
        if return_lengths:
            result += (out["lengths"],)
        if output_scores:
            result += (out["scores"][:, :max_new_tokens],)
        return result[0] if len(result) == 1 else result

    def beam_search(
        self,
        inputs: Sequence[Sequence[int]] | np.ndarray,
        max_new_tokens: int,
        num_beams: int = 4,
        length_penalty: float | None = None,
        eos_id: int | None = _UNSET,
        length_penalty_style: str | None = None,
        early_stopping: bool | str | None = None,
        **request: object,
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Beam search, GNMT or HuggingFace style (see `beam_search` and `beam_options`).

        Returns:
            `(sequences, scores, lengths)`: int32 `(batch, num_beams, max_new_tokens)` best
            first, float32 length-normalised log-probs `(batch, num_beams)`, int32 lengths.
        """
        vocabulary = self.model.vocabulary_size
        num_beams = check_num_beams(num_beams, vocabulary)
        options = beam_options(self.model, length_penalty_style, length_penalty, early_stopping)
        max_new_tokens = check_int("max_new_tokens", max_new_tokens, minimum=1, **LIMIT)
        cache_dtype = check_cache_dtype("cache_dtype", getattr(self.model, "cache_dtype", None))
        check_request_ids(request, eos_id, vocabulary, self._bos_minimum, _UNSET)
        eos = prompts.request_eos(self.model, eos_id, _UNSET)  # not given: the model's
        constraints = prompts.request_constraints(self.model, request)
        arrays, cache_length, slide = prompts.prepare(self, "beam_search", inputs, max_new_tokens, request)
        style, early = options["style"], options["early_stopping"]
        key = ("beam", num_beams, cache_length, slide, cache_dtype, style, early, constraints)
        static = dict(num_beams=num_beams, cache_length=cache_length, sliding=slide, style=style)
        static.update(early_stopping=early, constraints=constraints)
        fn = self._compiled(key, lambda *a: self.beam_search_fn(*a, **static))
        scalars = (np.int32(max_new_tokens), np.float32(options["length_penalty"]), np.int32(eos))
        out = compiled.call(fn, *arrays, *scalars, run_eagerly=self.run_eagerly)
        return out["sequences"][:, :, :max_new_tokens], out["scores"], out["lengths"]


# --------------------------------------------------------------------------- one call
_GENERATORS = weakref.WeakKeyDictionary()


def get_generator(model: keras.Model | Generator, pad_id: int | None = None) -> Generator:
    """The cached `Generator` of `model` (built on first use; a `Generator` is returned as is).

    `pad_id` None: the model's (`prompts.model_pad_id`: a checkpoint's `pad_id`, else 0), a
    generator's own; a generator built with another `pad_id`
    than the one asked for raises a ValueError (its `pad_id` is fixed when it is built).
    """
    if isinstance(model, Generator):
        if pad_id is not None and pad_id != model.pad_id:
            raise ValueError(
                f"`pad_id`={pad_id!r} differs from the generator's pad_id {model.pad_id}; build the "
                f"Generator with pad_id={pad_id!r} or pass the model itself."
            )
        return model
    pad_id = prompts.model_pad_id(model) if pad_id is None else pad_id
    generator = _GENERATORS.get(model)
    if generator is None or generator.pad_id != pad_id:
        generator = Generator(model, pad_id=pad_id)
        _GENERATORS[model] = generator
    return generator


def generate(
    model: keras.Model | Generator,
    prompt_ids: Sequence[Sequence[int]] | np.ndarray,
    max_new_tokens: int,
    pad_id: int | None = None,
    **options: object,
) -> np.ndarray | tuple[np.ndarray, ...]:
    """Cached, compiled generation with a keras_tfm GPT or seq2seq model.

    Args:
        model: a decoder model (`GPT`, `Seq2Seq`) or a `Generator`.
        prompt_ids: GPT: the prompts; seq2seq: the source sequences. A list
            of id sequences of any lengths or a 2-D int array.
        max_new_tokens: int in [0, `prompts.MAX_NEW_TOKENS`] (past the
            model's context GPT generation slides its window).
        pad_id: padding id (left-padding of prompts, finished rows), in
            [0, V); None: the model's `pad_id`, else 0 (a generator: its own).
        **options:
            sampler: None (default: "sample" when any of `temperature`,
                `top_k`, `top_p`, `seed` is given, else "greedy"), "greedy"
                (argmax; refuses the sampling options, which it would ignore)
                or "sample" (temperature, then the top-k and top-p filters).
            temperature: finite float >= 0 (default 1; below 1e-6 = greedy).
            top_k: int in [0, V] (0 = off).
            top_p: float in (0, 1] (1 = off).
            seed: int in [0, 2**31 - 1] or int32 (2,) array; same seed → same
                tokens, on every backend. None: a fresh random seed.
            eos_id: rows stop after emitting it and then emit `pad_id`; an id
                of the vocabulary, or None (no stop). Not given: the model's
                `generation_config["eos_id"]` (a checkpoint's), else none.
            forced_bos_id, forced_eos_id, suppressed_ids: token constraints
                (`keras_tfm.generation.constraints`; None turns one off); not
                given: the model's `generation_config` (a checkpoint's).
            return_lengths, output_scores: extra outputs (bools).
            GPT: `prompt_lengths` (rows of a right-padded 2-D array);
            seq2seq: `bos_id` (required unless the generator or the model's
            `generation_config` has one or `decoder_prompt_ids` are given, not with
            them), `decoder_prompt_ids`, `source_lengths`. Other keywords: TypeError.

    A compiled call answers Ctrl-C at once. Prompt ids outside [0, V) raise a
    ValueError naming `prompt_ids`. NaN logits (a diverged model) are never
    sampled inside the compiled loop (an all-NaN row yields id 0).

    Returns:
        int32 NumPy `(batch, max_new_tokens)` new tokens (and the lengths / scores asked for).
    """
    return get_generator(model, pad_id).generate(prompt_ids, max_new_tokens, **options)


def beam_search(
    model: keras.Model | Generator,
    prompt_ids: Sequence[Sequence[int]] | np.ndarray,
    max_new_tokens: int,
    num_beams: int = 4,
    pad_id: int | None = None,
    **options: object,
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Beam search for GPT or seq2seq models, in one of two styles:

    * `length_penalty_style="gnmt"`: GNMT length penalty ((5 + len) / 6)^α, candidates
      ranked by it at every step, finished beams frozen at EOS (`beam`);
    * `"hf"`: HuggingFace `generate`'s beam search, tokens and scores equal to it:
      penalty len^α on finished hypotheses only, a separate pool of K finished ones,
      `early_stopping` True / False / "never" (`beam_hf`).

    `options`: `length_penalty_style` and `length_penalty` (α in [0, 5]) and
    `early_stopping` (None: the model's `generation_defaults`, which `from_preset` of a
    HuggingFace checkpoint sets to "hf"; else "gnmt" with α 0.6), `eos_id` and the model
    kind's inputs as in `generate`; `max_new_tokens` >= 1 (zero new tokens leave nothing
    to rank), `num_beams` in [1, V], `pad_id` as in `generate` (the tokens after a beam's end).

    Returns:
        `(sequences, scores, lengths)`: int32 `(batch, num_beams, max_new_tokens)` best first,
        float32 normalised log-probs `(batch, num_beams)`, int32 lengths (EOS included).
    """
    return get_generator(model, pad_id).beam_search(
        prompt_ids, max_new_tokens, num_beams=num_beams, **options
    )
