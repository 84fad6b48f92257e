"""The attention core's contract and the registry of its implementations.

    Attention(Q, K, V) = softmax(Q Kᵀ / √d_k + B + M) V

`dot_product.dot_product_attention` computes it behind every attention layer;
`reference.py` writes it as plainly as it reads (autodiff), and every
implementation is tested against that.

Contract, shared by every implementation:
    query: `(batch, query_length, num_heads, key_dim)`
    key:   `(batch, key_length, num_heads, key_dim)`
    value: `(batch, key_length, num_heads, value_dim)`
    mask:  bool, True = may attend; rank 2 `(Tq, Tk)`, rank 3 `(B, Tq, Tk)` or
           rank 4 `(B, H, Tq, Tk)` (any axis may be 1 to broadcast; a key-padding
           mask is `(B, 1, Tk)`). M is 0 where True and a large finite negative
           float32 number where False (`masks.MASK_FILL_VALUE`).
    bias:  B, float, rank 2 `(Tq, Tk)`, rank 3 `(H, Tq, Tk)` or rank 4
           `(B, H, Tq, Tk)`; or a `ToeplitzBias` (a bias that depends only on the
           key − query offset, as ALiBi and T5 relative positions do), O(T).
    causal: bool; key j is visible to query i only if j ≤ i (query_length ==
           key_length). Implementations build this mask themselves (per block
           for the chunked one), so the layers never pass a T × T causal mask.
Scores, the mask fill and the softmax are float32 under any dtype policy; a
query whose keys are all masked gets all-zero weights and a zero output, never
NaN. The output has the value dtype.

Implementations (`attention_impl`), registered with `register_attention_impl`
in `ATTENTION_IMPLS`:
    "auto"       the default: the formula with its fast paths (one query, long
                 keys, a JAX GPU), `dot_product.py`
    "standard"   the formula alone: the full score matrix, a hand-written
                 softmax·V gradient that keeps one score-sized tensor (`dot_product.py`)
    "reference"  the formula, autodiff (`reference.py`)
    "fused"      the backend's kernel, `keras.ops.dot_product_attention` (`fused.py`)
    "chunked"    exact, O(T) memory, online softmax (`chunked.py`)
    "local"      sliding window (+ global tokens) (`local.py`)
    "linear"     kernelized, φ(Q)(φ(K)ᵀV): a different model (`linear.py`)
"""

import inspect
import math
from collections.abc import Callable
from typing import Any, NamedTuple

from keras_tfm.tensor_checks import as_bool_mask

ATTENTION_IMPLS: dict[str, Callable] = {}


def register_attention_impl(name: str) -> Callable:
    """Decorator registering an attention implementation under `name`.

    The function is called as `fn(inputs, **attention_options)`: `inputs` is an
    `AttentionInputs` (the module docstring's contract) and the options are the
    implementation's own keyword arguments. It returns `(output, weights)`:
    the `(B, Tq, H, Dv)` output in float32 or the compute dtype, and the float32
    `(B, H, Tq, Tk)` weights when `inputs.return_attention_scores`, else None.
    Implementations that cannot return weights or apply weight dropout call
    `inputs.refuse_weights(name)`.
    """

    def wrap(fn):
        ATTENTION_IMPLS[name] = fn
        return fn

    return wrap


class AttentionInputs(NamedTuple):
    """One attention call, as every registered implementation receives it.

    Fields: `query`, `key`, `value` (rank 4, module docstring layouts), `mask`
    (bool or None), `bias` (tensor, `ToeplitzBias` or None), `scale` (None:
    `1/sqrt(key_dim)`), `dropout` (callable or None) and `training` (forwarded
    to it), `return_attention_scores` and `causal` (Python bools).
    """

    query: Any
    key: Any
    value: Any
    mask: Any = None
    bias: Any = None
    scale: Any = None
    dropout: Any = None
    training: Any = None
    return_attention_scores: bool = False
    causal: bool = False

    def score_scale(self) -> Any:
        """The score scale: `scale`, or `1/sqrt(key_dim)` when it is None."""
        return 1.0 / math.sqrt(float(self.query.shape[-1])) if self.scale is None else self.scale

    def dropout_active(self) -> bool:
        """Whether weight dropout may run (a tensor-valued `training` may be True at run time)."""
        rate = getattr(self.dropout, "rate", 0.0) if self.dropout is not None else 0.0
        return bool(rate) and (self.training is not None and self.training is not False)

    def refuse_weights(self, attention_impl: str, dropout: bool = True) -> None:
        """Raises for what an implementation without a weight matrix cannot serve:
        `return_attention_scores`, and weight dropout in training (unless
        `dropout=False`, for implementations that apply it themselves)."""
        if self.return_attention_scores:
            raise ValueError(
                f"attention_impl={attention_impl!r} never materialises the attention weights, so "
                "`return_attention_scores=True` is not supported; use attention_impl='standard' "
                "(or 'auto', or 'reference') to inspect the weights."
            )
        if dropout and self.dropout_active():
            raise ValueError(
                f"attention_impl={attention_impl!r} does not support attention-weight `dropout` "
                f"(rate={self.dropout.rate}) in training; set the layer's `dropout=0.0` (or "
                "`attention_dropout=0.0` on TransformerBlock) or use attention_impl='standard' (or 'auto')."
            )


def implementation_options(attention_impl: str) -> set[str] | None:
    """Names of the `attention_options` that implementation `attention_impl` accepts.

    Read from the registered function's keyword arguments after `inputs`
    ("auto" also takes those of "chunked"); "causal" is always accepted (the
    layers set it). Returns None when the implementation takes arbitrary
    `**options`.
    """
    names = {"causal"}
    for param in list(inspect.signature(ATTENTION_IMPLS[attention_impl]).parameters.values())[1:]:
        if param.kind is param.VAR_KEYWORD:
            if attention_impl == "auto" and "chunked" in ATTENTION_IMPLS:
                names |= implementation_options("chunked")
                continue
            return None
        names.add(param.name)
    return names


def check_attention_impl(attention_impl: str) -> str:
    """`attention_impl` if it names a registered implementation (a ValueError otherwise)."""
    if attention_impl not in ATTENTION_IMPLS:
        raise ValueError(
            f"Unknown `attention_impl` {attention_impl!r}; expected one of {sorted(ATTENTION_IMPLS)}."
        )
    return attention_impl


def check_causal(causal: bool, query: Any, key: Any, attention_impl: str) -> None:
    """Validates the `causal` flag (a Python bool; equal static lengths)."""
    if not isinstance(causal, bool):
        raise ValueError(f"`causal` must be a bool; received {causal!r}.")
    tq, tk = query.shape[1], key.shape[1]
    if causal and tq is not None and tk is not None and tq != tk:
        raise ValueError(
            f"attention_impl={attention_impl!r} with causal=True needs query_length == key_length; "
            f"received {tq} and {tk} (pass a causal `mask` instead)."
        )


def check_inputs(
    query: Any,
    key: Any,
    value: Any,
    mask: Any,
    bias: Any,
    scale: Any,
    dropout: Any,
    training: Any,
    return_attention_scores: bool,
    causal: bool,
    attention_impl: str,
    attention_options: dict | None,
    cache_layout: bool = False,
) -> tuple[AttentionInputs, dict]:
    """The arguments of `dot_product_attention`, checked: `(AttentionInputs, options)`.

    Ranks (query, key and value rank 4; keys and values with `num_key_value_heads` heads dividing the
    query's, on axis 1 in the cache layout, else axis 2), `causal` (a bool; equal lengths),
    `attention_impl` (registered), `attention_options` (a dict), `mask` (bool or 0/1 ints).
    """
    check_attention_impl(attention_impl)
    for name, t in (("query", query), ("key", key), ("value", value)):
        if len(t.shape) != 4:
            raise ValueError(
                f"`{name}` must have rank 4 (batch, length, num_heads, dim); received shape {tuple(t.shape)}."
            )
    num_key_value_heads = key.shape[1 if cache_layout else 2]
    if (
        num_key_value_heads is not None
        and query.shape[2] is not None
        and query.shape[2] % num_key_value_heads
    ):
        raise ValueError(
            f"`key` has {num_key_value_heads} heads, which must divide the {query.shape[2]} heads of `query` "
            "(grouped-query attention)."
        )
    if not cache_layout:
        check_causal(causal, query, key, attention_impl)
    if attention_options is not None and not isinstance(attention_options, dict):
        raise TypeError(f"`attention_options` must be a dict or None; received {attention_options!r}.")
    mask = as_bool_mask("mask", mask)  # bool or 0/1 ints; float/additive masks are refused
    inputs = AttentionInputs(
        query, key, value, mask, bias, scale, dropout, training, return_attention_scores, causal
    )
    return inputs, dict(attention_options or {})
