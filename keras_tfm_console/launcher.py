"""The `keras-tfm` console script: `--version` without TensorFlow, otherwise a quiet `keras_tfm.cli.main`.

`import keras_tfm` imports Keras and TensorFlow (seconds, and their start-up lines on stderr), so
`keras-tfm --version` is answered from the package metadata alone, and every other command sets the log
levels and hides the native start-up lines before `keras_tfm.cli` is imported.
"""

import sys
from collections.abc import Sequence

from keras_tfm_console import quiet_native_logs, set_log_levels


def version() -> str:
    """The installed keras-tfm version, read from the package metadata (no import of keras_tfm)."""
    from importlib import metadata

    try:
        return metadata.version("keras-tfm")
    except metadata.PackageNotFoundError:  # pragma: no cover - running from a source tree
        return "unknown"


def main(argv: Sequence[str] | None = None) -> int:
    """Runs `keras-tfm ARGS` (default: `sys.argv[1:]`); returns the exit status."""
    argv = sys.argv[1:] if argv is None else list(argv)
    if argv == ["--version"]:  # answered without importing TensorFlow
        print(f"keras-tfm {version()}")
        return 0
    set_log_levels()
    with quiet_native_logs():  # `import keras_tfm` imports Keras and TensorFlow
        from keras_tfm import cli
    return cli.main(argv)
