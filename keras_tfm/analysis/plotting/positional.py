"""The sinusoidal positional encoding table and the similarity of its positions, as pictures."""

import os

import numpy as np

from keras_tfm.analysis.plotting.figure import new_figure, save_png
from keras_tfm.checks import check_positive_int
from keras_tfm.resources import check_allocation


def _pe_table(length, d_model, max_wavelength=10000.0):
    from keras_tfm.layers.positional_encoding import sinusoidal_table

    length = check_positive_int("length", length)
    d_model = check_positive_int("d_model", d_model)
    check_allocation(
        f"`length`={length} × `d_model`={d_model} (the positional encoding table, computed in float64)",
        length * d_model * 8 * 2,
    )
    return np.asarray(sinusoidal_table(np.arange(length, dtype="float32"), d_model, max_wavelength))


def plot_positional_encoding(
    length: int,
    d_model: int,
    path: str | os.PathLike = "positional_encoding.png",
    max_wavelength: float = 10000.0,
) -> str:
    """Heatmap of the sinusoidal encoding PE (positions × channels), plus a few channel curves."""
    table = _pe_table(length, d_model, max_wavelength)
    fig = new_figure((10, 6))
    ax, ax2 = fig.subplots(2, 1, gridspec_kw={"height_ratios": [3, 1.4]})
    image = ax.imshow(table, cmap="RdBu", vmin=-1, vmax=1, aspect="auto", interpolation="nearest")
    ax.set_xlabel("channel i (even: sin, odd: cos)")
    ax.set_ylabel("position p")
    ax.set_title(f"Sinusoidal positional encoding (length={length}, d_model={d_model})")
    fig.colorbar(image, ax=ax)
    for i in sorted({0, 2, min(8, d_model - 1), min(d_model // 2, d_model - 1)}):
        ax2.plot(table[:, i], label=f"channel {i}")
    ax2.set_xlabel("position p")
    ax2.legend(fontsize=7, loc="upper right")
    return save_png(fig, path)


def position_similarity(length: int, d_model: int, max_wavelength: float = 10000.0) -> np.ndarray:
    """Cosine similarity matrix of positions, PE·PEᵀ with unit-norm rows (T, T)."""
    length = check_positive_int("length", length)
    check_allocation(f"`length`={length} (the {length} × {length} similarity matrix)", length * length * 8)
    table = _pe_table(length, d_model, max_wavelength).astype(np.float64)
    table /= np.maximum(np.linalg.norm(table, axis=1, keepdims=True), 1e-12)
    return table @ table.T


def plot_position_similarity(
    length: int,
    d_model: int,
    path: str | os.PathLike = "position_similarity.png",
    max_wavelength: float = 10000.0,
) -> str:
    """Heatmap of the normalised similarity PE·PEᵀ between positions, and one of its rows."""
    sim = position_similarity(length, d_model, max_wavelength)
    fig = new_figure((10, 5))
    ax, ax2 = fig.subplots(1, 2, gridspec_kw={"width_ratios": [1.1, 1]})
    image = ax.imshow(sim, cmap="viridis", vmin=min(0.0, float(sim.min())), vmax=1.0, interpolation="nearest")
    ax.set_xlabel("position q")
    ax.set_ylabel("position p")
    ax.set_title(f"cos(PE_p, PE_q) (d_model={d_model})")
    fig.colorbar(image, ax=ax, shrink=0.8)
    p = length // 2
    ax2.plot(np.arange(length), sim[p])
    ax2.axvline(p, color="grey", linestyle=":")
    ax2.set_xlabel("position q")
    ax2.set_title(f"similarity to position {p}: depends on |p − q| only")
    return save_png(fig, path)
