"""Export keras_tfm models for TF Serving, and load / query exported versions.

    export_for_serving(model, "saved_models/NAME", tokenizer=...)   → saved_models/NAME/VERSION/
    load_served(path, version=None)                                 → tf.saved_model.load(...) (no keras)
    add_export_subcommand / add_generate_subcommand                 → `keras-tfm export|generate`

See `keras_tfm.export.exporter.export_for_serving` for the signatures.
"""

from keras_tfm.backend import require_tensorflow as _require_tensorflow

_require_tensorflow("keras_tfm.export", backend_too=True)

from keras_tfm.export.cli import add_export_subcommand, add_generate_subcommand  # noqa: F401
from keras_tfm.export.client import latest_version, load_served, resolve_version_dir  # noqa: F401
from keras_tfm.export.exporter import KINDS, detect_kind, export_for_serving, list_versions  # noqa: F401
from keras_tfm.export.warmup import read_warmup_requests  # noqa: F401

__all__ = [
    "KINDS",
    "add_export_subcommand",
    "add_generate_subcommand",
    "detect_kind",
    "export_for_serving",
    "latest_version",
    "list_versions",
    "load_served",
    "read_warmup_requests",
    "resolve_version_dir",
]
