"""The TensorFlow functions a LiteRT export converts: one class per model kind.

Each class holds the model, the export's sizes and the `tf.Variable`s that keep the
key/value caches inside the LiteRT interpreter between calls, and lists its signatures
as `(name, function, input_signature)`. Shapes are static (a batch of one row, fixed
prompt widths and cache lengths): LiteRT runs them without resizing a tensor.

GPT (`W` = the export's `max_length`, `C` cache slots):

    prefill_{P} (token_ids [1, P] LEFT-padded, length [])   → logits [1, V]; caches := the prompt's
    decode (token_ids [1, 1], positions [1, 1], cache_index [], padding_mask bool [1, C])
                                                             → logits [1, V]; writes slot cache_index
    shift ()                                                 → slots []; drops the oldest W // 2 slots

The widest prefill (`P` = W) is named `prefill`. The recompute models (learned, sinusoidal,
RoPE positions) have `C` = 2W slots: a prompt of up to W tokens, then up to W new tokens
before the runner recomputes the window with a prefill; the shift models (ALiBi, relative,
none) have `C` = W + W // 2 and the `shift` signature (`generation.sliding_window`).

Seq2seq (`S` = W source tokens, `C` = W decoder slots):

    encode (source_ids [1, S] right-padded, source_length [])  → context_mask [1, S]; cross caches
                                                                 := the source's, caches := 0
    decode (token_ids, positions, cache_index, padding_mask [1, C], context_mask [1, S]) → logits

BERT classifier / sentence encoder (`T` = W tokens, any batch):

    forward (token_ids, segment_ids, padding_mask int32 [B, T]) → logits / embeddings
"""

import contextlib

import tensorflow as tf
from keras import ops

from keras_tfm.generation import cache as cache_lib
from keras_tfm.generation import sliding_window
from keras_tfm.layers.positional_encoding import PositionalEncoding, sinusoidal_table

__all__ = ["GPTSignatures", "Seq2SeqSignatures", "EncoderSignatures", "constant_sinusoids", "prefill_name"]


def prefill_name(width: int, max_length: int) -> str:
    """`prefill` for the widest prompt width, `prefill_{width}` for the others."""
    return "prefill" if width == max_length else f"prefill_{width}"


@contextlib.contextmanager
def constant_sinusoids(model, length):
    """Within this scope every `PositionalEncoding` of `model` adds rows of its table for
    positions 0 .. `length` - 1, computed once, eagerly, by `sinusoidal_table` (the layer's
    own function), instead of computing float64 angles in the traced graph: LiteRT has no
    float64 kernels. Positions are clipped to [0, length) (the layer clips at 0)."""
    layers = [layer for layer in model._flatten_layers() if isinstance(layer, PositionalEncoding)]
    for layer in layers:
        tables = {}

        def call(inputs, start_index=0, positions=None, layer=layer, tables=tables):
            dim = inputs.shape[-1]
            if dim not in tables:
                with tf.init_scope():
                    tables[dim] = tf.constant(
                        sinusoidal_table(ops.arange(length), dim, layer.max_wavelength, layer.layout)
                    )
            if positions is None:
                positions = tf.range(tf.shape(inputs)[1])[None, :] + tf.cast(start_index, tf.int32)
            rows = tf.gather(tables[dim], tf.clip_by_value(tf.cast(positions, tf.int32), 0, length - 1))
            return inputs + tf.cast(rows, inputs.dtype)

        layer.__dict__["call"] = call
    try:
        yield
    finally:
        for layer in layers:
            layer.__dict__.pop("call", None)


def _spec(shape, dtype, name):
    return tf.TensorSpec(shape, dtype, name=name)


def _step_specs(cache_length):
    """The inputs of one cached `decode` step: one id, its position, its cache slot and the slots'
    padding mask (True = may attend)."""
    return [
        _spec([1, 1], tf.int32, "token_ids"),
        _spec([1, 1], tf.int32, "positions"),
        _spec([], tf.int32, "cache_index"),
        _spec([1, cache_length], tf.bool, "padding_mask"),
    ]


def _assign(variables, values, outputs):
    """`outputs` after every `variable.assign(value)`."""
    updates = [variable.assign(value) for variable, value in zip(variables, values)]
    with tf.control_dependencies(updates):
        return {name: tf.identity(value) for name, value in outputs.items()}


def _cache_variables(model, length, prefix="cache"):
    return [
        tf.Variable(cache, trainable=False, name=f"{prefix}_{i:02d}")
        for i, cache in enumerate(model.init_caches(1, length))
    ]


class GPTSignatures:
    """`prefill_*`, `decode` (and `shift`) of a `GPT`; see the module docstring."""

    def __init__(self, model, max_length, prefill_lengths):
        self.model = model
        self.max_length = max_length
        self.prefill_lengths = tuple(prefill_lengths)
        self.position = model.config.get("position")
        self.shift = sliding_window.uses_shift(self.position)
        self.cache_length = max_length + (max(max_length // 2, 1) if self.shift else max_length)
        self.caches = _cache_variables(model, self.cache_length)
        self.variables = self.caches

    def metadata(self):
        return {
            "position": self.position,
            "sliding": "shift" if self.shift else "recompute",
            "prefill_lengths": list(self.prefill_lengths),
            "cache_length": self.cache_length,
        }

    def _prefill(self, width):
        model, caches, c = self.model, self.caches, self.cache_length

        def prefill(token_ids, length):
            pad = width - length
            valid = tf.range(c)[None, :] >= pad
            positions = tf.range(width)[None, :] - pad
            logits, new = model.call_with_cache(
                token_ids,
                model.init_caches(1, c),
                tf.constant(0),
                positions=positions,
                padding_mask=valid,
                last_only=True,
            )
            return _assign(caches, new, {"logits": logits[:, 0]})

        inputs = [_spec([1, width], tf.int32, "token_ids"), _spec([], tf.int32, "length")]
        return prefill_name(width, self.max_length), prefill, inputs

    def _decode(self):
        model, caches = self.model, self.caches

        def decode(token_ids, positions, cache_index, padding_mask):
            current = [variable.read_value() for variable in caches]
            logits, new = model.call_with_cache(
                token_ids,
                current,
                cache_index,
                positions=positions,
                padding_mask=padding_mask,
                last_only=True,
            )
            return _assign(caches, new, {"logits": logits[:, 0]})

        return "decode", decode, _step_specs(self.cache_length)

    def _shift(self):
        caches, shift = self.caches, max(self.max_length // 2, 1)

        def shift_caches():
            current = [variable.read_value() for variable in caches]
            return _assign(caches, cache_lib.shift_caches(current, shift), {"slots": tf.constant(shift)})

        return "shift", shift_caches, []

    def signatures(self):
        out = [self._prefill(width) for width in self.prefill_lengths] + [self._decode()]
        return out + ([self._shift()] if self.shift else [])


class Seq2SeqSignatures:
    """`encode` and `decode` of a `Seq2Seq`; see the module docstring."""

    def __init__(self, model, max_length):
        self.model = model
        self.max_length = max_length
        self.cache_length = max_length
        self.caches = _cache_variables(model, max_length)
        with tf.init_scope():
            memory = ops.zeros((1, max_length, model.d_model), model.compute_dtype)
            cross = model.compute_cross_caches(memory)
        self.cross_caches = [
            tf.Variable(c, trainable=False, name=f"cross_cache_{i:02d}") for i, c in enumerate(cross)
        ]
        self.variables = self.caches + self.cross_caches

    def metadata(self):
        return {"cache_length": self.cache_length, "mask_zero": bool(self.model.mask_zero)}

    def _encode(self):
        model, s = self.model, self.max_length

        def encode(source_ids, source_length):
            mask = tf.range(s)[None, :] < source_length
            if model.mask_zero:
                mask = tf.logical_and(mask, tf.not_equal(source_ids, 0))
            cross = model.compute_cross_caches(model.encode(source_ids, padding_mask=mask))
            zeros = [tf.zeros_like(v) for v in self.caches]
            return _assign(self.cross_caches + self.caches, cross + zeros, {"context_mask": mask})

        inputs = [_spec([1, s], tf.int32, "source_ids"), _spec([], tf.int32, "source_length")]
        return "encode", encode, inputs

    def _decode(self):
        model, caches, cross = self.model, self.caches, self.cross_caches

        def decode(token_ids, positions, cache_index, padding_mask, context_mask):
            logits, new = model.call_with_cache(
                token_ids,
                [v.read_value() for v in caches],
                cache_index,
                [v.read_value() for v in cross],
                context_mask,
                positions=positions,
                padding_mask=padding_mask,
                last_only=True,
            )
            return _assign(caches, new, {"logits": logits[:, 0]})

        inputs = _step_specs(self.cache_length) + [_spec([1, self.max_length], tf.bool, "context_mask")]
        return "decode", decode, inputs

    def signatures(self):
        return [self._encode(), self._decode()]


class EncoderSignatures:
    """`forward` of a BERT classifier (`logits`) or a sentence encoder (`embeddings`)."""

    def __init__(self, model, max_length, output):
        self.model = model
        self.max_length = max_length
        self.output = output
        self.cache_length = max_length
        self.variables = []

    def metadata(self):
        return {"output": self.output}

    def signatures(self):
        model, output = self.model, self.output

        def forward(token_ids, segment_ids, padding_mask):
            inputs = {"token_ids": token_ids, "segment_ids": segment_ids, "padding_mask": padding_mask}
            return {output: tf.cast(model(inputs, training=False), tf.float32)}

        names = ("token_ids", "segment_ids", "padding_mask")
        return [("forward", forward, [_spec([None, self.max_length], tf.int32, n) for n in names])]
