"""Attention maps and per-head statistics of models built from `TransformerBlock`s.

`attention_maps(model, inputs)` returns the self-attention weights of every
`TransformerBlock` of a model for one batch:

    {block_name: float32 (batch, heads, query_length, key_length)}

How it works: the functional graph of `model` is re-built with
`keras.models.clone_model(model, clone_function=identity, call_function=...)`:
every layer is *reused* (same weights, nothing copied) and called exactly as in
the original graph (same inputs, same keyword arguments: padding masks,
encoder context, implicit Keras masks), except that each `TransformerBlock` is
called with `return_attention_scores=True`. The weights it returns become the
outputs of an auxiliary `keras.Model` (cached per model). This is correct for
any functional graph — GPT (`decoder_block_{i}`), BERT (`encoder_block_{i}`),
encoder–decoder models (also cross-attention with `include_cross=True`) and
ViT — whatever the layers between the blocks, and it never changes the
original model's outputs. Nested functional sub-models that contain blocks are
inlined. Sequential models are run layer by layer.

Statistics (`attention_entropy`, `head_statistics`) are computed with NumPy,
over valid keys only (causal and padding masks), and over valid queries.
"""

import weakref
from collections.abc import Sequence
from typing import Any

import keras
import numpy as np

from keras_tfm.layers.transformer_block import TransformerBlock

_CACHE = weakref.WeakKeyDictionary()


class _AttentionProbe(keras.layers.Layer):
    """Calls a TransformerBlock with `return_attention_scores=True` and returns
    `(outputs, self_attention_weights[, cross_attention_weights])`."""

    def __init__(self, block, include_cross=False, **kwargs):
        super().__init__(dtype=block.dtype_policy, **kwargs)
        self.block = block
        self.include_cross = include_cross and block.cross_attention
        self.supports_masking = True
        self.built = True

    def call(
        self, inputs, context=None, context_mask=None, training=None, mask=None, inputs_mask=None, **kwargs
    ):
        # The arguments Keras fills in itself (`training`, and the implicit masks of `inputs` and
        # `context` as `mask`/`inputs_mask`/`context_mask`) are named so that it does; the others
        # (padding_mask, attention_mask) go to the block as they came.
        x, scores = self.block(
            inputs,
            context=context,
            context_mask=context_mask,
            training=training,
            mask=mask,
            inputs_mask=inputs_mask,
            return_attention_scores=True,
            **kwargs,
        )
        outputs = [x, scores["self_attention"]]
        if self.include_cross:
            outputs.append(scores["cross_attention"])
        return tuple(outputs)

    def compute_mask(self, inputs, mask=None):
        # The block output keeps the input's implicit mask (so the next block
        # sees it, as in the original graph); the weights have none.
        return (mask, None, None) if self.include_cross else (mask, None)


def transformer_blocks(model: keras.Model) -> list[TransformerBlock]:
    """The `TransformerBlock` layers of `model` (top level, then nested models), in order."""
    found = []

    def visit(layer):
        for sub in getattr(layer, "layers", []):
            if isinstance(sub, TransformerBlock):
                found.append(sub)
            elif isinstance(sub, keras.Model):
                visit(sub)

    visit(model)
    return found


def _contains_blocks(layer):
    return isinstance(layer, keras.Model) and bool(transformer_blocks(layer))


def _unique(name, names):
    if name not in names:
        return name
    k = 1
    while f"{name}_call{k}" in names:
        k += 1
    return f"{name}_call{k}"


def attention_model(model: keras.Model, include_cross: bool = False) -> keras.Model:
    """An auxiliary `keras.Model` with the same inputs as `model` whose output is
    a dict {block_name: attention weights (B, H, T, S)} (cached per model).

    With `include_cross=True`, decoder blocks with cross-attention also give
    `"<block_name>/cross_attention"` entries (B, H, T, S_source).

    Raises:
        ValueError: `model` is not a functional model, or has no TransformerBlock.
    """
    if not isinstance(model, keras.Model):
        raise TypeError(f"`model` must be a keras.Model; received {type(model).__name__}.")
    key = bool(include_cross)
    cached = _CACHE.get(model, {})
    if key in cached:
        return cached[key]
    if not transformer_blocks(model):
        raise ValueError(
            f"`model` {model.name!r} has no TransformerBlock layer; attention maps need a model built from "
            "keras_tfm TransformerBlock layers."
        )
    if isinstance(model, keras.Sequential) or not isinstance(model, keras.Function):
        raise ValueError(
            f"`model` {model.name!r} must be a functional keras.Model (Sequential models are run layer by layer "
            "by `attention_maps`; subclassed models cannot be inspected)."
        )
    captured = {}

    def call_function(layer, *args, **kwargs):
        if isinstance(layer, TransformerBlock):
            if kwargs.get("cache") is not None:
                return layer(*args, **kwargs)
            # A probe layer (new node, new output structure) calls the block
            # with return_attention_scores=True; the block itself is never
            # called with another output structure in a graph (Keras requires
            # every node of a layer to have the structure of its first one).
            name = _unique(layer.name, captured)
            outputs = _AttentionProbe(layer, include_cross, name=f"{name}_attention_probe")(*args, **kwargs)
            captured[name] = outputs[1]
            if len(outputs) > 2:
                captured[f"{name}/cross_attention"] = outputs[2]
            return outputs[0]
        if _contains_blocks(layer) and isinstance(layer, keras.Function):
            # Inline the nested functional model so that its blocks' weights
            # are reachable from the outer inputs.
            inner_inputs = args[0] if len(args) == 1 else list(args)
            inner = keras.models.clone_model(
                layer, input_tensors=inner_inputs, clone_function=lambda op: op, call_function=call_function
            )
            return inner.outputs[0] if len(inner.outputs) == 1 else inner.outputs
        return layer(*args, **kwargs)

    clone = keras.models.clone_model(model, clone_function=lambda op: op, call_function=call_function)
    aux = keras.Model(clone.input, dict(captured), name=f"{model.name}_attention")
    cached[key] = aux
    _CACHE[model] = cached
    return aux


def _sequential_maps(model, inputs, include_cross):
    maps = {}
    x = inputs
    for layer in model.layers:
        if isinstance(layer, TransformerBlock):
            x, scores = layer(x, return_attention_scores=True, training=False)
            name = _unique(layer.name, maps)
            maps[name] = scores["self_attention"]
            if include_cross and "cross_attention" in scores:
                maps[f"{name}/cross_attention"] = scores["cross_attention"]
        else:
            x = layer(x, training=False)
    return maps


def attention_maps(model: keras.Model, inputs: Any, include_cross: bool = False) -> dict[str, np.ndarray]:
    """Self-attention weights of every `TransformerBlock` of `model` for `inputs`.

    Args:
        model: a functional (or Sequential) keras model built from keras_tfm
            `TransformerBlock` layers (GPT, BERT, seq2seq, ViT builders).
        inputs: what `model` takes (array / tensor, or dict / list for
            multi-input models). Run in inference mode (no dropout).
        include_cross: also return cross-attention weights, keyed
            `"<block>/cross_attention"`.

    Returns:
        dict {block_name: float32 NumPy array (batch, heads, query_len, key_len)},
        in block (call) order. Rows sum to 1 over the allowed keys; masked keys
        (future positions, padding) have weight 0.
    """
    if isinstance(model, keras.Sequential):
        if not transformer_blocks(model):
            raise ValueError(f"`model` {model.name!r} has no TransformerBlock layer.")
        maps = _sequential_maps(model, inputs, include_cross)
    else:
        aux = attention_model(model, include_cross=include_cross)
        maps = aux(inputs, training=False)
    return {k: np.asarray(keras.ops.convert_to_numpy(v), dtype=np.float32) for k, v in maps.items()}


def key_validity(
    weights_shape: Sequence[int], causal: bool = False, key_mask: np.ndarray | None = None
) -> np.ndarray:
    """Boolean (B, 1, T, S) mask of the keys each query may attend to.

    Args:
        weights_shape: (B, H, T, S).
        causal: query t sees keys <= t + (S - T).
        key_mask: optional (B, S) bool/int, 1 = real key (padding mask).
    """
    b, _, t, s = weights_shape
    valid = np.ones((b, 1, t, s), dtype=bool)
    if causal:
        offset = s - t
        valid &= (np.arange(s)[None, :] <= np.arange(t)[:, None] + offset)[None, None]
    if key_mask is not None:
        valid &= np.asarray(key_mask).astype(bool)[:, None, None, :]
    return valid


def attention_entropy(
    weights: np.ndarray,
    causal: bool = False,
    key_mask: np.ndarray | None = None,
    query_mask: np.ndarray | None = None,
    normalize: bool = False,
) -> np.ndarray:
    """Entropy (nats) of attention rows per head, averaged over queries.

        H_q = −Σ_k p_qk log p_qk          over allowed keys k
        H_norm = H_q / log(n_q)           n_q = number of allowed keys of q

    Queries with a single allowed key (e.g. the first causal position, whose
    entropy is forced to 0) and masked queries are left out of the average.

    Args:
        weights: (B, H, T, S) attention weights (rows sum to 1).
        causal: causal attention (allowed keys j <= i).
        key_mask: optional (B, S) padding mask, 1 = real token; also used as
            the query mask when T == S and `query_mask` is None.
        query_mask: optional (B, T) mask of the queries to average over.
        normalize: return H / log(n_q) in [0, 1] (0: one-hot, "collapsed";
            1: uniform over the allowed keys).

    Returns:
        float64 NumPy array (H,): mean entropy per head.
    """
    w = np.asarray(weights, dtype=np.float64)
    if w.ndim != 4:
        raise ValueError(f"`weights` must have shape (batch, heads, query_len, key_len); received {w.shape}.")
    valid = key_validity(w.shape, causal=causal, key_mask=key_mask)
    p = np.where(valid, w, 0.0)
    ent = -np.sum(np.where(p > 0, p * np.log(np.where(p > 0, p, 1.0)), 0.0), axis=-1)  # (B, H, T)
    n = valid.sum(-1)  # (B, 1, T)
    if normalize:
        ent = ent / np.log(np.maximum(n, 2))
    use = n > 1
    if query_mask is None and key_mask is not None and w.shape[2] == w.shape[3]:
        query_mask = key_mask
    if query_mask is not None:
        use = use & np.asarray(query_mask).astype(bool)[:, None, :]
    use = np.broadcast_to(use, ent.shape)
    count = use.sum(axis=(0, 2))
    return np.where(count > 0, (ent * use).sum(axis=(0, 2)) / np.maximum(count, 1), np.nan)


def head_statistics(
    weights: np.ndarray, causal: bool = True, key_mask: np.ndarray | None = None
) -> dict[str, np.ndarray]:
    """What each head attends to, for self-attention weights (B, H, T, T).

    Returns:
        dict of float64 arrays (H,), averaged over valid queries:
          "mean_distance":   Σ_k p_qk |q − k|  (tokens)
          "entropy":         attention entropy (nats, see `attention_entropy`)
          "normalized_entropy": entropy / log(#allowed keys)
          "previous_token":  p_{q, q−1}   (queries q >= 1)
          "first_token":     p_{q, 0}     (queries q >= 1)
          "self":            p_{q, q}     (queries q >= 1)
    """
    w = np.asarray(weights, dtype=np.float64)
    if w.ndim != 4 or w.shape[2] != w.shape[3]:
        raise ValueError(
            f"`weights` must be self-attention weights (batch, heads, T, T); received {w.shape}."
        )
    b, h, t, _ = w.shape
    q = np.arange(t)
    qmask = np.ones((b, t), bool) if key_mask is None else np.asarray(key_mask).astype(bool)
    later = qmask & (q >= 1)[None, :]  # (B, T)

    def mean_over(values, mask):  # values (B, H, T), mask (B, T)
        m = np.broadcast_to(mask[:, None, :], values.shape)
        return (values * m).sum(axis=(0, 2)) / max(m.sum() / h, 1)

    distance = np.abs(q[:, None] - q[None, :]).astype(np.float64)
    stats = {
        "mean_distance": mean_over((w * distance).sum(-1), qmask),
        "entropy": attention_entropy(w, causal=causal, key_mask=key_mask),
        "normalized_entropy": attention_entropy(w, causal=causal, key_mask=key_mask, normalize=True),
    }
    if t > 1:
        prev = np.concatenate([np.zeros((b, h, 1)), w[:, :, q[1:], q[1:] - 1]], axis=-1)
        stats["previous_token"] = mean_over(prev, later)
        stats["first_token"] = mean_over(w[:, :, :, 0], later)
        stats["self"] = mean_over(w[:, :, q, q], later)
    else:
        nan = np.full((h,), np.nan)
        stats.update(previous_token=nan, first_token=nan, self=nan)
    return stats


def describe_head(stats: dict[str, np.ndarray], head: int) -> str:
    """A short label of what a head does, from `head_statistics`."""
    prev, first, selfw = stats["previous_token"][head], stats["first_token"][head], stats["self"][head]
    ne = stats["normalized_entropy"][head]
    if prev > 0.5:
        return "previous token"
    if selfw > 0.5:
        return "current token"
    if first > 0.5:
        return "first token (sink)"
    if ne > 0.9:
        return "near uniform (averaging)"
    if stats["mean_distance"][head] < 3.0:
        return "local"
    return "mixed / content-based"
