"""Attention heatmaps: one panel per head of one TransformerBlock for an input."""

import math
import os
from collections.abc import Sequence
from typing import Any

import keras
import numpy as np

from keras_tfm.analysis.inspection import attention_maps, transformer_blocks
from keras_tfm.analysis.plotting.figure import new_figure, save_png
from keras_tfm.checks import check_index


def resolve_layer(model: keras.Model, layer: str | int) -> str:
    """The name of the TransformerBlock `layer` (a name or an index into the blocks)."""
    names = [b.name for b in transformer_blocks(model)]
    if not names:
        raise ValueError(f"`model` {model.name!r} has no TransformerBlock layer to plot.")
    if isinstance(layer, (int, np.integer)) and not isinstance(layer, bool):
        if not -len(names) <= layer < len(names):
            raise ValueError(
                f"`layer` index {layer} is out of range: the model has {len(names)} blocks {names}."
            )
        return names[layer]
    if isinstance(layer, str) and layer.lstrip("-").isdigit():
        return resolve_layer(model, int(layer))
    if layer not in names:
        raise ValueError(f"Unknown `layer` {layer!r}; expected an index or one of {names}.")
    return layer


def _label(token):
    """Visible tick label of a token: space → ␣, newline → ↵, other control characters escaped."""
    token = str(token)
    if token == " ":
        return "\u2423"
    if token == "\n":
        return "\u21b5"
    return repr(token)[1:-1]


def plot_attention_weights(
    weights: np.ndarray,
    path: str | os.PathLike,
    tokens: Sequence[str] | None = None,
    title: str | None = None,
    query_tokens: Sequence[str] | None = None,
    max_cols: int = 4,
) -> str:
    """Heatmaps of a (H, T, S) attention array, one panel per head."""
    from matplotlib.colors import PowerNorm  # square-root colour scale: small weights stay visible

    w = np.asarray(weights, dtype=np.float32)
    if w.ndim == 2:
        w = w[None]
    if w.ndim != 3:
        raise ValueError(f"`weights` must have shape (heads, query_len, key_len); received {w.shape}.")
    heads, t, s = w.shape
    keys = None if tokens is None else [str(x) for x in tokens]
    queries = keys if query_tokens is None else [str(x) for x in query_tokens]
    for name, labels, n in (("tokens", keys, s), ("query_tokens", queries, t)):
        if labels is not None and len(labels) != n:
            raise ValueError(f"`{name}` has {len(labels)} entries but the attention has length {n}.")
    cols = min(heads, max_cols)
    rows = math.ceil(heads / cols)
    size = max(2.5, min(6.0, 0.25 * max(t, s)))
    fig = new_figure((size * cols + 0.8, size * rows + (0.6 if title else 0.2)))
    axes = fig.subplots(rows, cols, squeeze=False)
    image = None
    for h in range(rows * cols):
        ax = axes[h // cols][h % cols]
        if h >= heads:
            ax.axis("off")
            continue
        image = ax.imshow(
            w[h],
            cmap="viridis",
            norm=PowerNorm(gamma=0.5, vmin=0.0, vmax=1.0),
            aspect="auto",
            interpolation="nearest",
        )
        ax.set_title(f"head {h}", fontsize=9)
        ax.set_xlabel("key", fontsize=8)
        ax.set_ylabel("query", fontsize=8)
        if keys is not None and s <= 64:
            ax.set_xticks(range(s))
            ax.set_xticklabels([_label(k) for k in keys], rotation=90, fontsize=6)
        if queries is not None and t <= 64:
            ax.set_yticks(range(t))
            ax.set_yticklabels([_label(q) for q in queries], fontsize=6)
    fig.colorbar(image, ax=axes.ravel().tolist(), shrink=0.8)
    if title:
        fig.suptitle(title)
    return save_png(fig, path)


def plot_attention_heads(
    model: keras.Model,
    inputs: Any,
    layer: str | int,
    tokens: Sequence[str] | None = None,
    path: str | os.PathLike = "attention.png",
    example: int = 0,
    heads: Sequence[int] | None = None,
) -> str:
    """Attention heatmaps of every head of one `TransformerBlock` for an input.

    Args:
        model: a functional model built from keras_tfm `TransformerBlock`s.
        inputs: model inputs (batch of at least `example + 1`).
        layer: block name (e.g. "decoder_block_1") or index among the blocks
            (negative allowed).
        tokens: optional labels of the positions (list of str, length T).
        path: output PNG path.
        example: which example of the batch to draw.
        heads: optional list of head indices (default: all).

    Returns:
        `path`.

    Raises:
        ValueError: unknown `layer`, `example` or `heads`, or `tokens` of the wrong length.
    """
    name = resolve_layer(model, layer)
    weights = attention_maps(model, inputs)[name]
    w = weights[check_index("example", example, weights.shape[0])]
    if heads is not None:
        bad = [h for h in heads if not 0 <= h < w.shape[0]]
        if bad:
            raise ValueError(f"`heads` {bad} out of range: the layer has {w.shape[0]} heads.")
        w = w[list(heads)]
    return plot_attention_weights(w, path, tokens=tokens, title=f"{model.name} · {name} · self-attention")
