"""Shared machinery of the generator classes: argument checks, prompt padding,
length buckets and the cache of compiled functions (TensorFlow: `tf.function`
with XLA; JAX: `jax.jit`; PyTorch: eager)."""

import numbers
import secrets
from collections.abc import Sequence

import keras
import numpy as np

from keras_tfm.checks import (
    SEED_MAX,
    check_bool,
    check_cache_dtype,
    check_choice,
    check_int,
    check_seed,
    check_token_id,
)
from keras_tfm.generation import beam as beam_lib
from keras_tfm.generation import cache as cache_lib
from keras_tfm.generation import compiled, decoding, samplers, sliding_window

#: Most new tokens of one generation call. Past the model's context the caches
#: slide and stay bounded, but the returned token buffer grows with
#: `max_new_tokens`; larger requests raise a ValueError (generate in pieces).
MAX_NEW_TOKENS = 1 << 20

#: Most bytes of the logits `output_scores=True` returns (batch × tokens × V float32).
MAX_SCORES_BYTES = 1 << 32


def to_id_array(name, x):
    """Converts ids (list, numpy, a tensor of any backend) to a numpy array, checking the dtype."""
    if type(x).__name__ == "RaggedTensor":
        raise TypeError(f"`{name}`: pass a list of sequences instead of a RaggedTensor.")
    if not isinstance(x, (np.ndarray, list, tuple)) and hasattr(x, "shape") and hasattr(x, "dtype"):
        x = keras.ops.convert_to_numpy(x)
    arr = np.asarray(x)
    if arr.dtype == object:
        raise TypeError(f"`{name}` must hold integer token ids; received an object array.")
    if arr.size and arr.dtype.kind not in "iu":
        raise TypeError(f"`{name}` must hold integer token ids; received dtype {arr.dtype}.")
    return arr


def pad_prompts(
    name, prompts, prompt_lengths=None, pad_id=0, vocabulary_size=None, side="left", minimum=None
):
    """Ragged or right-padded prompts → padded int32 array of bucket length.

    Args:
        prompts: a list of 1-D id sequences of any lengths, or a 2-D array
            `(batch, T)` (every row of length T unless `prompt_lengths` says
            how many leading entries of each row are real).
        prompt_lengths: optional `(batch,)` lengths for a 2-D array.
        side: "left" (decoder prompts) or "right" (encoder inputs).
        minimum: smallest bucket.

    Returns:
        `(padded (batch, bucket) int32, lengths (batch,) int32)`.
    """
    if isinstance(prompts, (list, tuple)) and (len(prompts) == 0 or not np.isscalar(prompts[0])):
        if len(prompts) == 0:
            raise ValueError(f"`{name}` is an empty batch; pass at least one sequence.")
        if prompt_lengths is not None:
            raise ValueError("`prompt_lengths` is only accepted with a 2-D array of prompts.")
        rows = [to_id_array(f"{name}[{b}]", p) for b, p in enumerate(prompts)]
        for b, r in enumerate(rows):
            if r.ndim != 1:
                raise ValueError(f"`{name}[{b}]` must be a 1-D sequence of ids; received shape {r.shape}.")
        lengths = np.array([len(r) for r in rows], dtype=np.int32)
    else:
        arr = to_id_array(name, prompts)
        if arr.ndim == 1:
            raise ValueError(
                f"`{name}` must be a batch: a 2-D array (batch, length) or a list of sequences; "
                f"received a 1-D array of shape {arr.shape}."
            )
        if arr.ndim != 2:
            raise ValueError(f"`{name}` must be 2-D (batch, length); received shape {arr.shape}.")
        if arr.shape[0] == 0:
            raise ValueError(f"`{name}` is an empty batch; pass at least one sequence.")
        if prompt_lengths is None:
            lengths = np.full((arr.shape[0],), arr.shape[1], np.int32)
        else:
            lengths = to_id_array("prompt_lengths", prompt_lengths)
            if lengths.ndim != 1:
                raise ValueError(
                    f"`prompt_lengths` must be 1-D (one length per row); received shape {lengths.shape}."
                )
            lengths = lengths.astype(np.int32)
            if lengths.shape[0] != arr.shape[0]:
                raise ValueError(
                    f"`prompt_lengths` has {lengths.shape[0]} entries for a batch of {arr.shape[0]}."
                )
            if np.any(lengths > arr.shape[1]):
                raise ValueError(f"`prompt_lengths` exceed the prompt array length {arr.shape[1]}.")
        rows = [arr[b, : lengths[b]] for b in range(arr.shape[0])]
    if np.any(lengths < 1):
        raise ValueError(
            f"Every sequence of `{name}` needs at least one token; lengths are {lengths.tolist()}."
        )
    for r in rows:
        if r.size and (r.min() < 0 or (vocabulary_size is not None and r.max() >= vocabulary_size)):
            raise ValueError(
                f"`{name}` holds ids outside [0, {vocabulary_size}): min {r.min()}, max {r.max()}."
            )
    width = cache_lib.prompt_bucket(int(lengths.max()), minimum or cache_lib.MIN_PROMPT_LENGTH)
    out = np.full((len(rows), width), pad_id, np.int32)
    for b, r in enumerate(rows):
        if side == "left":
            out[b, width - len(r) :] = r
        else:
            out[b, : len(r)] = r
    return out, lengths


def check_max_new_tokens(max_new_tokens, longest_prompt, max_length, sliding=False, minimum=0):
    """Checks `max_new_tokens`: in [minimum, MAX_NEW_TOKENS] and against the
    model's maximum length.

    Returns:
        `(max_new_tokens, slide)`: `slide` is True when prompt + new tokens
        pass `max_length` and `sliding` allows a sliding window there (a
        prompt must still fit the model).
    """
    max_new_tokens = check_int(
        "max_new_tokens",
        max_new_tokens,
        minimum=minimum,
        maximum=MAX_NEW_TOKENS,
        maximum_name="the limit of one generation call (base.MAX_NEW_TOKENS)",
    )
    if max_length is None or longest_prompt + max_new_tokens <= max_length:
        return max_new_tokens, False
    if sliding and longest_prompt <= max_length:
        return max_new_tokens, True
    if sliding:
        raise ValueError(
            f"A prompt of {longest_prompt} tokens exceeds the model's maximum length {max_length}; pass at "
            f"most its last {max_length} tokens."
        )
    raise ValueError(
        f"`max_new_tokens`={max_new_tokens} with a prompt of {longest_prompt} tokens exceeds the model's "
        f"maximum length {max_length} (at most {max(max_length - longest_prompt, 0)} new tokens)."
    )


def make_seed(seed):
    """int / (2,) array / tensor / None → int32 numpy `(2,)`. None draws a
    fresh seed in Python (outside every compiled function)."""
    if seed is None:
        return np.array([secrets.randbits(31), secrets.randbits(31)], np.int32)
    if isinstance(seed, numbers.Integral) and not isinstance(seed, bool):
        return np.array([0, check_seed("seed", seed)], np.int32)
    arr = to_id_array("seed", seed)
    if arr.shape != (2,):
        raise ValueError(f"`seed` must be an int or an int array of shape (2,); received shape {arr.shape}.")
    if arr.min() < 0 or arr.max() > SEED_MAX:  # astype(int32) would wrap them silently
        raise ValueError(f"`seed` entries must be seeds in [0, {SEED_MAX}]; received {arr.tolist()}.")
    return arr.astype(np.int32)


def check_sampler(sampler, temperature, top_k, top_p, vocabulary_size=None):
    """Checks the sampler name and its Python arguments (see `samplers.check_sampling_args`;
    `top_k` larger than `vocabulary_size` is refused)."""
    check_choice("sampler", sampler, samplers.SAMPLERS)
    return samplers.check_sampling_args(temperature, top_k, top_p, vocabulary_size=vocabulary_size)


class BaseGenerator(compiled.Module):
    """Holds a model and its compiled generation functions.

    Compiled functions are cached per static configuration (sampler, bucket
    shapes, ...); `trace_count` counts Python traces (a new bucket or batch
    size traces once, later calls in the same bucket do not retrace).
    TensorFlow: `jit_compile=False` uses a plain graph `tf.function`; JAX:
    `jax.jit` whatever `jit_compile`; PyTorch: eager. `run_eagerly=True`
    runs the same code eagerly (debugging, fast tests). On TensorFlow a
    compiled call runs in a worker thread (`generation.interruptible`), so
    Ctrl-C interrupts a long generation at once; see `generation.compiled`.

    `pad_id` (and the seq2seq `bos_id`) must be ids of the model's
    vocabulary, in [0, V); the model's `cache_dtype` a float dtype.

    A subclass sets `self.adapter` (a `decoding.DecoderAdapter`) and
    implements `_prepare` (eager: request → padded numpy inputs, checked
    `max_new_tokens`, cache length) and `decoder_inputs` (traceable: those
    inputs → decoder prompts, their lengths and the adapter context), names
    the keyword arguments `_prepare` takes in `REQUEST_KEYS` and checks
    `pad_id` against the vocabulary (`checks.check_token_id`).
    """

    #: The model-specific keyword arguments of `generate` / `beam_search`.
    REQUEST_KEYS = ()

    def __init__(
        self,
        model: keras.Model,
        pad_id: int = 0,
        jit_compile: bool = True,
        run_eagerly: bool = False,
        name: str | None = None,
    ):
        super().__init__(name=name)
        self.model = model
        self.pad_id = check_int("pad_id", pad_id, minimum=0)
        self.jit_compile = bool(jit_compile)
        self.run_eagerly = bool(run_eagerly)
        self._cache = compiled.FunctionCache()
        self.trace_count = 0

    def _compiled(self, key, fn):
        functions = self._cache.functions
        if key not in functions:

            def traced(*args):
                self.trace_count += 1
                return fn(*args)

            functions[key] = compiled.compile_function(
                traced, self.model, jit_compile=self.jit_compile, run_eagerly=self.run_eagerly
            )
        return functions[key]

    def _eos(self, eos_id):
        """-1 for None; otherwise an id that must lie in the vocabulary (else no row could ever stop)."""
        if eos_id is None:
            return -1
        vocabulary_size = self.adapter.vocabulary_size
        return check_token_id(
            "eos_id", eos_id, vocabulary_size, consequence=": generation could never stop on it"
        )

    def _check_request(self, method, request):
        """Refuses keyword arguments `_prepare` does not take (naming them) and
        re-checks the model's `cache_dtype`, which the caches are built with."""
        unknown = sorted(set(request) - set(self.REQUEST_KEYS))
        if unknown:
            raise TypeError(
                f"`{method}` got unexpected keyword argument(s) {unknown}; besides its documented "
                f"arguments a {type(self).__name__} takes {list(self.REQUEST_KEYS)}."
            )
        check_cache_dtype("cache_dtype", getattr(self.model, "cache_dtype", None))

    def _call(self, fn, *args):
        """Runs a compiled function on numpy inputs (TensorFlow: so that Ctrl-C
        interrupts it); returns its outputs as numpy arrays."""
        return compiled.call(fn, *args, run_eagerly=self.run_eagerly)

    def _check_scores_size(self, inputs, cache_length):
        """`output_scores` returns batch × (cache_length − P) × V float32 logits: at most `MAX_SCORES_BYTES`."""
        prompts = inputs[-2] if len(inputs) > 2 else inputs[0]  # the decoder prompts (P columns)
        size = prompts.shape[0] * (cache_length - prompts.shape[1]) * self.adapter.vocabulary_size * 4
        if size > MAX_SCORES_BYTES:
            raise ValueError(
                f"`output_scores`=True would return {size / 2**30:.1f} GiB of logits (batch × max_new_tokens × "
                f"vocabulary); at most {MAX_SCORES_BYTES / 2**30:.0f} GiB: ask for fewer tokens or no scores."
            )

    # ----------------------------------------------------------- subclass hooks
    def _prepare(self, inputs, max_new_tokens, sliding=False, **request):
        """Eager: `(tuple of padded int32 numpy inputs, max_new_tokens,
        cache_length, slide)`; `slide`: the request passes the model's maximum
        length and `sliding` allowed a sliding window."""
        raise NotImplementedError

    def decoder_inputs(self, *inputs):
        """Traceable: the `_prepare` inputs → `(decoder prompt ids, prompt lengths, context)`."""
        raise NotImplementedError

    # ----------------------------------------------------------- traceable
    def generate_fn(self, *args, cache_length, sampler="greedy", output_scores=False, sliding=False):
        """Traceable generation (wrap it in a `tf.function`, e.g. with an
        `input_signature` for export, or `jax.jit`; eager on PyTorch).

        Args:
            *args: the model's inputs (GPT: LEFT-padded `prompt_ids` int32
                `(batch, P)` and `prompt_lengths` `(batch,)`; seq2seq:
                right-padded `source_ids` `(batch, S)`, `source_lengths`,
                LEFT-padded `decoder_prompt_ids` (usually just BOS) and their
                lengths), then the scalars `max_new_tokens`, `seed` int32
                `(2,)`, `temperature`, `top_k`, `top_p` (scalars or
                `(batch,)`) and `eos_id` (-1 = none).
            cache_length, sampler, output_scores: static options.
            sliding: go past the model's maximum length with a sliding window
                (`sliding_window.decode_sliding`; decoder-only models).

        Returns:
            `decoding.decode`'s dict.
        """
        *inputs, max_new_tokens, seed, temperature, top_k, top_p, eos_id = args
        ids, lengths, context = self.decoder_inputs(*inputs)
        select = decoding.make_selector(sampler, seed, temperature, top_k, top_p)
        options = dict(
            cache_length=cache_length, eos_id=eos_id, pad_id=self.pad_id, output_scores=output_scores
        )
        if sliding:
            return sliding_window.decode_sliding(
                self.adapter, ids, lengths, max_new_tokens, select, **options
            )
        return decoding.decode(self.adapter, ids, lengths, max_new_tokens, select, context=context, **options)

    def beam_search_fn(self, *args, num_beams, cache_length, active_beams=None, sliding=False):
        """Traceable beam search: the model's inputs (as in `generate_fn`),
        then `max_new_tokens`, `length_penalty`, `eos_id`; `num_beams` (K)
        is static, `active_beams` an optional int32 scalar in [1, K] (the
        width actually searched), `sliding` goes past the model's maximum
        length (decoder-only models); see `beam.beam_search_loop`."""
        *inputs, max_new_tokens, length_penalty, eos_id = args
        ids, lengths, context = self.decoder_inputs(*inputs)
        return beam_lib.beam_search_loop(
            self.adapter,
            ids,
            lengths,
            max_new_tokens,
            num_beams=num_beams,
            cache_length=cache_length,
            length_penalty=length_penalty,
            eos_id=eos_id,
            pad_id=self.pad_id,
            context=context,
            active_beams=active_beams,
            sliding=sliding,
        )

    # ------------------------------------------------------------- eager API
    def generate(
        self,
        inputs: Sequence[Sequence[int]] | np.ndarray,
        max_new_tokens: int,
        sampler: str = "greedy",
        temperature: float = 1.0,
        top_k: int = 0,
        top_p: float = 1.0,
        seed: int | Sequence[int] | np.ndarray | None = None,
        eos_id: int | None = None,
        return_lengths: bool = False,
        output_scores: bool = False,
        **request,
    ) -> np.ndarray | tuple[np.ndarray, ...]:
        """Generates up to `max_new_tokens` tokens per input.

        Args:
            inputs: GPT: the prompts; seq2seq: the source sequences. A list
                of id sequences (any lengths) or a 2-D int array.
            max_new_tokens: int >= 0.
            sampler: "greedy" or "sample" (stochastic: temperature, then
                the top-k and top-p filters).
            temperature, top_k, top_p: the arguments of "sample" (ignored by
                "greedy"; see `samplers.check_sampling_args`).
            seed: int or int32 `(2,)`; same seed → same output. None: random.
            eos_id: rows stop after this id (then emit `pad_id`).
            return_lengths: also return the number of new tokens per row.
            output_scores: also return the step logits `(batch, max_new, V)`
                (at most `MAX_SCORES_BYTES` of them).
            **request: GPT: `prompt_lengths` (rows of a right-padded 2-D
                array); seq2seq: `bos_id`, `source_lengths`,
                `decoder_prompt_ids` (forced decoder prefixes, BOS included;
                not together with `bos_id`). Other names raise a TypeError.

        Returns:
            int32 numpy `(batch, max_new_tokens)` (`pad_id` after EOS); or a
            tuple with lengths (and scores) when requested.
        """
        self._check_request("generate", request)
        temperature, top_k, top_p = check_sampler(
            sampler, temperature, top_k, top_p, self.adapter.vocabulary_size
        )
        eos = self._eos(eos_id)
        return_lengths = check_bool("return_lengths", return_lengths)
        output_scores = check_bool("output_scores", output_scores)
        inputs, max_new_tokens, cache_length, slide = self._prepare(
            inputs, max_new_tokens, sliding=True, **request
        )
        if output_scores:
            self._check_scores_size(inputs, cache_length)
        seed = make_seed(seed)
        key = ("generate", sampler, cache_length, bool(output_scores), slide)
        fn = self._compiled(
            key,
            lambda *a: self.generate_fn(
                *a, cache_length=cache_length, sampler=sampler, output_scores=output_scores, sliding=slide
            ),
        )
        out = self._call(
            fn,
            *inputs,
            np.int32(max_new_tokens),
            seed,
            np.float32(temperature),
            np.int32(top_k),
            np.float32(top_p),
            np.int32(eos),
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
        length_penalty: float = 0.6,
        eos_id: int | None = None,
        **request,
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Beam search with GNMT length penalty; see `keras_tfm.generation.beam_search`.

        Args:
            inputs, eos_id, **request: as in `generate` (GPT: past the
                model's maximum length every beam slides its window as
                `generate` does).
            max_new_tokens: int >= 1 (0 new tokens leave nothing to rank: a
                ValueError; `generate` accepts 0).
            num_beams: beams per input, in [1, vocabulary size].
            length_penalty: α in [0, `beam.MAX_LENGTH_PENALTY`] of
                ((5 + len) / 6)^α.

        Returns:
            `(sequences, scores, lengths)`: int32 `(batch, num_beams,
            max_new_tokens)` best first, float32 length-normalised log-probs
            `(batch, num_beams)`, int32 `(batch, num_beams)`.
        """
        self._check_request("beam_search", request)
        num_beams = beam_lib.check_num_beams(num_beams, self.adapter.vocabulary_size)
        length_penalty = beam_lib.check_length_penalty(length_penalty)
        eos = self._eos(eos_id)
        check_int("max_new_tokens", max_new_tokens, minimum=1)
        inputs, max_new_tokens, cache_length, slide = self._prepare(
            inputs, max_new_tokens, sliding=True, **request
        )
        key = ("beam", num_beams, cache_length, slide)
        fn = self._compiled(
            key,
            lambda *a: self.beam_search_fn(*a, num_beams=num_beams, cache_length=cache_length, sliding=slide),
        )
        out = self._call(
            fn,
            *inputs,
            np.int32(max_new_tokens),
            np.float32(length_penalty),
            np.int32(eos),
        )
        return out["sequences"][:, :, :max_new_tokens], out["scores"], out["lengths"]
