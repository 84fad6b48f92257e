"""Cached generation for decoder-only (GPT) models."""

from keras_tfm.checks import check_token_id
from keras_tfm.generation import base, compiled, decoding
from keras_tfm.generation import cache as cache_lib
from keras_tfm.models.gpt import GPT


class CausalLMAdapter(decoding.DecoderAdapter):
    """Runs a `keras_tfm.models.GPT` with key/value caches through its
    `init_caches` and `call_with_cache` methods."""

    def __init__(self, model):
        if not isinstance(model, GPT):
            raise TypeError(
                f"`model` must be a keras_tfm GPT model (from `keras_tfm.models.gpt`); received "
                f"{type(model).__name__}."
            )
        self.model = model
        self.vocabulary_size = model.vocabulary_size
        self.max_length = model.max_length
        #: The position scheme ("learned", "sinusoidal", "rope", "alibi", "relative" or None).
        self.position = model.config.get("position")
        self.step = compiled.SharedStep(self._run, cache_lib.length_axis)

    def init_caches(self, batch_size, length):
        return self.model.init_caches(batch_size, length)

    def share_steps(self):
        self.step.shared = True

    def _run(self, ids, positions, caches, cache_index, padding_mask):
        logits, caches = self.model.call_with_cache(
            ids, caches, cache_index, positions=positions, padding_mask=padding_mask, last_only=True
        )
        return logits[:, 0, :], caches

    def forward(self, ids, positions, caches, cache_index, padding_mask, context=None):
        return self.step(ids, positions, caches, cache_index, padding_mask)


class CausalLMGenerator(base.BaseGenerator):
    """Compiled cached generation for a keras_tfm GPT model.

    Holds no state besides the model (its variables) and a cache of compiled
    `tf.function`s. The traceable entry points `generate_fn` and
    `beam_search_fn` take only tensors besides static Python options, so they
    can be wrapped in a `tf.function` with an `input_signature` for export.
    `generate(prompt_ids, max_new_tokens, ..., prompt_lengths=None)` and
    `beam_search` are `BaseGenerator`'s.

    Args:
        model: a `keras_tfm.models.GPT`.
        pad_id: id used to left-pad prompts and emitted by finished rows, in
            [0, vocabulary size).
        jit_compile: compile with XLA.
        run_eagerly: no `tf.function` at all (debugging, tests).

    Example:
        gen = CausalLMGenerator(model)
        tokens = gen.generate([[5, 6, 7], [8]], max_new_tokens=20, eos_id=2)
    """

    REQUEST_KEYS = ("prompt_lengths",)

    def __init__(
        self,
        model: GPT,
        pad_id: int = 0,
        jit_compile: bool = True,
        run_eagerly: bool = False,
        name: str | None = None,
    ):
        super().__init__(model, pad_id=pad_id, jit_compile=jit_compile, run_eagerly=run_eagerly, name=name)
        self.adapter = CausalLMAdapter(model)
        self.pad_id = check_token_id("pad_id", pad_id, self.adapter.vocabulary_size)

    def decoder_inputs(self, prompt_ids: object, prompt_lengths: object) -> tuple[object, object, None]:
        """Traceable: the prompts are the decoder prompts; no context."""
        return prompt_ids, prompt_lengths, None

    def _prepare(self, prompt_ids, max_new_tokens, sliding=False, prompt_lengths=None):
        ids, lengths = base.pad_prompts(
            "prompt_ids", prompt_ids, prompt_lengths, self.pad_id, self.adapter.vocabulary_size, side="left"
        )
        max_new_tokens, slide = base.check_max_new_tokens(
            max_new_tokens, int(lengths.max()), self.adapter.max_length, sliding=sliding
        )
        cache_length = cache_lib.call_cache_length(ids.shape[1], max_new_tokens)
        return (ids, lengths), max_new_tokens, cache_length, slide
