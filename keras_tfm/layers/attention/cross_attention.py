"""Cross-attention: queries from one sequence, keys and values from another."""

from typing import Any

import keras
from keras import ops

from keras_tfm.layers.attention import masks as masks_lib
from keras_tfm.layers.attention.multi_head import MultiHeadAttentionBase
from keras_tfm.tensor_checks import check_rank


@keras.saving.register_keras_serializable(package="keras_tfm")
class CrossAttention(MultiHeadAttentionBase):
    """Multi-head attention of a target sequence over a source (context).

        Q = Y W^Q (target),  K = X W^K,  V = X W^V (source)
        head_h = softmax(Q_h K_hᵀ / √d_k + M) V_h
        output = Concat(head_1, …, head_H) W^O

    The source may have any length; its padding positions (from `context_mask`
    or the Keras implicit mask of `context`) are never attended. In the
    encoder–decoder this is the decoder's second sublayer.

    For decoding, `compute_cache(context)` projects the source keys and values
    once, `(batch, 2, source_length, num_heads, key_dim)`; pass it as `cache`
    on every step instead of recomputing them.

    Args:
        num_heads, key_dim, value_dim, output_dim, dropout, use_bias,
        attention_impl, attention_options, kernel_initializer, bias_initializer:
            as in `MultiHeadSelfAttention`. Position schemes act within one
            sequence and are not accepted here.

    Call arguments:
        query: `(batch, target_length, d_model)`.
        context: `(batch, source_length, d_context)`; may be None with `cache`.
        query_mask: implicit mask of `query` (propagated to the output).
        context_mask: optional bool `(batch, source_length)`, True at real tokens.
        attention_mask: optional bool `(batch, target_length, source_length)`.
        return_attention_scores: also return float32 weights
            `(batch, num_heads, target_length, source_length)`.
        training: Python bool, enables attention dropout.
        cache: optional precomputed source keys/values from `compute_cache`.

    Returns:
        `(batch, target_length, output_dim)`, and the weights if requested.
    """

    def __init__(
        self,
        num_heads: int,
        key_dim: int | None = None,
        value_dim: int | None = None,
        dropout: float = 0.0,
        use_bias: bool = True,
        **kwargs,
    ):
        if kwargs.get("position") is not None:
            raise ValueError(
                f"CrossAttention takes no `position` scheme (positions act within one sequence); "
                f"received position={kwargs['position']!r}; expected None."
            )
        kwargs.pop("position", None)
        super().__init__(
            num_heads, key_dim=key_dim, value_dim=value_dim, dropout=dropout, use_bias=use_bias, **kwargs
        )

    def build(self, query_shape, context_shape=None):
        if len(query_shape) != 3:
            raise ValueError(
                f"`query` must have rank 3 (batch, length, d_model); received shape {tuple(query_shape)}."
            )
        if context_shape is None:
            context_shape = query_shape
        if len(context_shape) != 3:
            raise ValueError(
                f"`context` must have rank 3 (batch, length, d_context); received shape {tuple(context_shape)}."
            )
        self._build_projections(query_shape, context_shape, context_shape)

    def compute_cache(self, context: Any) -> Any:
        """Source keys and values, `(batch, 2, source_length, num_heads, key_dim)`."""
        check_rank("context", context, 3)
        return ops.stack(self._project_heads(context, (self.key_dense, self.value_dense)), axis=1)

    def call(
        self,
        query: Any,
        context: Any = None,
        query_mask: Any = None,
        context_mask: Any = None,
        attention_mask: Any = None,
        return_attention_scores: bool = False,
        training: bool | None = None,
        cache: Any = None,
    ):
        check_rank("query", query, 3)
        if cache is None:
            self._check_context(query, context)
            # K = X W^K, V = X W^V from the source.
            key, value = self._project_heads(context, (self.key_dense, self.value_dense))
            source_length = context.shape[1]
            if context_mask is not None:
                context_mask = masks_lib.check_padding_mask(context_mask, context, "context_mask")
        else:  # the source keys and values of `compute_cache`
            check_rank("cache", cache, 5)
            key, value = cache[:, 0], cache[:, 1]
            source_length = cache.shape[2]
        masks_lib.check_attention_mask(attention_mask, query.shape[1], source_length)
        (q,) = self._project_heads(query, (self.query_dense,))  # Q = Y W^Q from the target
        mask = masks_lib.merge_masks(
            None if context_mask is None else ops.cast(context_mask, "bool")[:, None, :],
            attention_mask,
        )
        # heads = softmax(Q Kᵀ/√d_k + M) V
        heads, weights = self._compute_attention(q, key, value, mask, None, return_attention_scores, training)
        output = self._project_output(heads)  # Concat(head_1, …, head_H) W^O
        if return_attention_scores:
            return output, weights
        return output

    @staticmethod
    def _check_context(query: Any, context: Any) -> None:
        """`context` is given, has rank 3 and the batch size of `query`."""
        if context is None:
            raise ValueError("`context` is required unless a precomputed `cache` is given.")
        check_rank("context", context, 3)
        if query.shape[0] is not None and context.shape[0] is not None and query.shape[0] != context.shape[0]:
            raise ValueError(
                f"`query` and `context` must have the same batch size; received {query.shape[0]} and {context.shape[0]}."
            )

    def compute_mask(self, query, previous_mask=None):
        return previous_mask
