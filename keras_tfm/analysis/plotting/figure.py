"""The canvas every lecture picture is drawn on: a matplotlib Figure (Agg, no pyplot state) saved as PNG."""

import os
import secrets
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from matplotlib.figure import Figure

PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"


def new_figure(figsize: tuple[float, float]) -> "Figure":
    """A matplotlib Figure on its own Agg canvas (no pyplot state), 100 dpi."""
    try:
        from matplotlib.backends.backend_agg import FigureCanvasAgg
        from matplotlib.figure import Figure
    except ImportError as e:  # pragma: no cover
        raise ImportError("Plotting needs matplotlib: `pip install keras-tfm[plot]`.") from e
    fig = Figure(figsize=figsize, dpi=100)
    FigureCanvasAgg(fig)
    return fig


def save_png(fig: "Figure", path: str | os.PathLike) -> str:
    """Writes `fig` as a PNG to `path` (parent folders created) atomically; returns the path.

    The PNG is written to a temporary name in the same folder and moved into
    place with `os.replace`, so `path` never holds a partial picture.
    """
    if path is None or str(path) == "":
        raise ValueError("`path` must be a file path ending in .png; received an empty path.")
    path = os.fspath(path)
    directory = os.path.dirname(path)
    if directory:
        os.makedirs(directory, exist_ok=True)
    # An ordinary open (not mkstemp) so the file gets the usual permissions.
    temp = os.path.join(directory, f".tmp-{os.getpid()}-{secrets.token_hex(4)}-{os.path.basename(path)}")
    try:
        fig.savefig(temp, format="png", bbox_inches="tight")
        os.replace(temp, path)
    except BaseException:
        if os.path.exists(temp):
            os.remove(temp)
        raise
    return path
