"""The canvas every lecture picture is drawn on: a matplotlib Figure (Agg, no pyplot state) saved as PNG."""

import os

PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"


def new_figure(figsize):
    """A matplotlib Figure on its own Agg canvas (no pyplot state), 100 dpi."""
    try:
        from matplotlib.backends.backend_agg import FigureCanvasAgg
        from matplotlib.figure import Figure
    except ImportError as e:  # pragma: no cover
        raise ImportError("Plotting needs matplotlib: `pip install keras-tfm[plot]`.") from e
    fig = Figure(figsize=figsize, dpi=100)
    FigureCanvasAgg(fig)
    return fig


def save_png(fig, path):
    """Writes `fig` as a PNG to `path` (parent folders created); returns the path."""
    if path is None or str(path) == "":
        raise ValueError("`path` must be a file path ending in .png; received an empty path.")
    path = os.fspath(path)
    directory = os.path.dirname(path)
    if directory:
        os.makedirs(directory, exist_ok=True)
    fig.savefig(path, format="png", bbox_inches="tight")
    return path
