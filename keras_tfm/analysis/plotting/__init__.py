"""Lecture pictures as PNG files (matplotlib, Agg canvas; no pyplot state).

* `plot_attention_heads`: one heatmap per head of one layer for an input.
* `plot_positional_encoding`: the sinusoidal table PE (positions × channels).
* `plot_position_similarity`: cosine similarity PE·PEᵀ / (d/2) of positions.
* `plot_lr_schedule`: a learning-rate schedule over training steps.
* `plot_training_curves`: curves from a `History`, a dict of lists, a
  History JSON file or a TensorBoard log directory.

Every function returns the path it wrote. matplotlib is an optional
dependency (`pip install keras-tfm[plot]`); `keras-tfm plot` draws them from the
command line (`keras_tfm.cli.plot`).

One module per picture:

    figure          new_figure, save_png (the Agg canvas), PNG_SIGNATURE
    attention       resolve_layer, plot_attention_weights, plot_attention_heads
    positional      plot_positional_encoding, position_similarity, plot_position_similarity
    learning_rate   learning_rates, plot_lr_schedule
    curves          read_tensorboard_scalars, plot_training_curves
"""

from keras_tfm.analysis.plotting.attention import plot_attention_heads, plot_attention_weights, resolve_layer
from keras_tfm.analysis.plotting.curves import plot_training_curves, read_tensorboard_scalars
from keras_tfm.analysis.plotting.figure import PNG_SIGNATURE, new_figure, save_png
from keras_tfm.analysis.plotting.learning_rate import learning_rates, plot_lr_schedule
from keras_tfm.analysis.plotting.positional import (
    plot_position_similarity,
    plot_positional_encoding,
    position_similarity,
)

__all__ = [
    "PNG_SIGNATURE",
    "learning_rates",
    "new_figure",
    "plot_attention_heads",
    "plot_attention_weights",
    "plot_lr_schedule",
    "plot_position_similarity",
    "plot_positional_encoding",
    "plot_training_curves",
    "position_similarity",
    "read_tensorboard_scalars",
    "resolve_layer",
    "save_png",
]
