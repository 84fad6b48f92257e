"""Export keras_tfm models for TF Serving, and load / query exported versions.

    export_for_serving(model, "saved_models/NAME", tokenizer=...)   → saved_models/NAME/VERSION/
    load_served(path, version=None)                                 → tf.saved_model.load(...) (no keras)
    call_signature(loaded, name, **inputs)                          → numpy outputs (strings as str)
    check_saved_model_ops(version_dir)                              refuses ops our exports never emit
    export_for_litert(model, "NAME.tflite", tokenizer=...)          → a LiteRT file (`litert`)
    LiteRTGenerator("NAME.tflite").generate(...)                    → its tokens (`litert_runner`)

See `keras_tfm.export.exporter.export_for_serving` for the signatures.
"""

from keras_tfm.backend import require_tensorflow as _require_tensorflow

_require_tensorflow("keras_tfm.export", backend_too=True)

from keras_tfm.export.client import (
    call_signature,
    latest_version,
    list_versions,
    load_served,
    resolve_version_dir,
)
from keras_tfm.export.exporter import KINDS, SIGNATURES, detect_kind, export_for_serving
from keras_tfm.export.litert import export_for_litert
from keras_tfm.export.litert_encoder import LiteRTEncoder
from keras_tfm.export.litert_runner import LiteRTGenerator
from keras_tfm.export.trusted_ops import UntrustedSavedModelError, check_saved_model_ops, untrusted_ops
from keras_tfm.export.warmup import read_warmup_requests  # noqa: F401

__all__ = [
    "KINDS",
    "LiteRTEncoder",
    "LiteRTGenerator",
    "SIGNATURES",
    "UntrustedSavedModelError",
    "call_signature",
    "check_saved_model_ops",
    "detect_kind",
    "export_for_litert",
    "export_for_serving",
    "latest_version",
    "list_versions",
    "load_served",
    "read_warmup_requests",
    "resolve_version_dir",
    "untrusted_ops",
]
