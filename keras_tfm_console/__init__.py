"""A quiet console for the command line and the examples.

TensorFlow's C++ start-up lines ("oneDNN custom operations are on", "Could not
find cuda drivers", "failed call to cuInit", ...) go straight to file
descriptor 2 through absl, before absl's log is initialised, so
`TF_CPP_MIN_LOG_LEVEL` cannot hide them all, and setting it after TensorFlow is
imported does nothing. `quiet_tensorflow()` sets the log levels first and then
imports TensorFlow with descriptor 2 pointed at /dev/null; Python's own
`sys.stderr` (warnings, tracebacks, the CLI's messages) keeps writing to the
real stderr throughout.

Lines that TensorFlow's ops log while the command runs (after the import) go
through the level check: the default level, 3, hides INFO, WARNING and ERROR
lines (e.g. oneDNN's "DT_INT64 only on platforms with AVX-512", logged as an
ERROR by ops that work), so no C++ log line reaches the console; a failing op
still raises its Python exception. FATAL lines (TensorFlow aborting) still show.

A library import never changes the log level: only the `keras-tfm` command and
the example scripts call `quiet_tensorflow()`. A `TF_CPP_MIN_LOG_LEVEL` set by
the user is kept (`2` shows ERROR lines); `0` shows every TensorFlow line again.

This is a top-level package, apart from `keras_tfm`, because `import keras_tfm`
imports Keras and with it TensorFlow: the quieting has to happen before. It uses
the standard library only and imports nothing of `keras_tfm`; the `keras-tfm`
console script is `keras_tfm_console.launcher.main`.
"""

import contextlib
import io
import os
import sys
from collections.abc import Iterator

__all__ = ["DEFAULT_TF_LOG_LEVEL", "quiet_native_logs", "quiet_tensorflow", "set_log_levels"]

#: The level set when the user has not chosen one: hide TensorFlow's INFO, WARNING and ERROR lines.
DEFAULT_TF_LOG_LEVEL = "3"


def _quiet_wanted():
    return os.environ.get("TF_CPP_MIN_LOG_LEVEL", DEFAULT_TF_LOG_LEVEL) not in ("0", "")


def set_log_levels() -> None:
    """`TF_CPP_MIN_LOG_LEVEL` (unless set) for TensorFlow's C++ logs; must run before TensorFlow is imported."""
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", DEFAULT_TF_LOG_LEVEL)


@contextlib.contextmanager
def quiet_native_logs() -> Iterator[None]:
    """Sends what C++ code writes to descriptor 2 to /dev/null inside the block.

    Python's `sys.stderr` is pointed at a copy of the real descriptor for the
    duration, so Python warnings and exceptions still show. Does nothing when
    `TF_CPP_MIN_LOG_LEVEL` is 0 or descriptor 2 cannot be duplicated.
    """
    if not _quiet_wanted():
        yield
        return
    try:
        sys.stderr.flush()
        saved = os.dup(2)
    except (AttributeError, OSError, ValueError):
        yield
        return
    python_stderr, replacement = sys.stderr, None
    try:
        if python_stderr.fileno() == 2:
            replacement = os.fdopen(
                os.dup(saved), "w", buffering=1, encoding="utf-8", errors="backslashreplace", closefd=True
            )
            sys.stderr = replacement
    except (AttributeError, OSError, ValueError, io.UnsupportedOperation):
        pass  # pytest's capture object and the like: not descriptor 2, unaffected
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, 2)
    os.close(devnull)
    try:
        yield
    finally:
        os.dup2(saved, 2)
        os.close(saved)
        if replacement is not None:
            replacement.flush()
            sys.stderr = python_stderr
            replacement.close()


def quiet_tensorflow(start_devices: bool = False) -> None:
    """Sets the log levels, then imports TensorFlow and Keras without their start-up lines.

    Args:
        start_devices: also initialise the devices (their lines, e.g. "failed
            call to cuInit", come with the first op). Leave False when logical
            devices are still to be configured (`--cpu-devices`).
    """
    set_log_levels()
    with quiet_native_logs():
        import keras  # noqa: F401
        import tensorflow as tf

        if start_devices:
            tf.config.list_logical_devices()
    tf.get_logger().setLevel("ERROR")
    try:
        from absl import logging as absl_logging

        absl_logging.set_verbosity(absl_logging.ERROR)
    except ImportError:  # pragma: no cover - absl comes with TensorFlow
        pass
