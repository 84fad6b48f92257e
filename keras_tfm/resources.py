"""What an argument asks of the machine: a file to read, memory to allocate.

    check_file(name, path)                 an existing file (not a directory)
    read_text_file(name, path, ...)        its text (gzip/bz2 by extension), errors naming it
    check_allocation(what, nbytes)         refuses a size larger than the machine's memory
    as_string_tensor(name, value)          a TensorFlow string tensor (TensorFlow imported lazily)

Each error names the argument and the value; the checks of plain values are `keras_tfm.checks`.
"""

import os


def check_file(name, path):
    """Returns `path` as a str, raising FileNotFoundError when it is missing."""
    import tensorflow as tf  # lazily: the rest of this module is backend-agnostic

    if not isinstance(path, (str, os.PathLike)):
        raise TypeError(f"`{name}` must be a path (str or os.PathLike); received {path!r}.")
    path = os.fspath(path)
    if not tf.io.gfile.exists(path):
        raise FileNotFoundError(f"`{name}`: no such file: {path!r}.")
    if tf.io.gfile.isdir(path):
        raise FileNotFoundError(f"`{name}`: expected a file but found a directory: {path!r}.")
    return path


def as_string_tensor(name, value):
    """Converts `value` to a tf.string tensor, raising TypeError for any other dtype."""
    import tensorflow as tf  # lazily: the rest of this module is backend-agnostic

    if isinstance(value, tf.RaggedTensor):
        raise TypeError(f"`{name}` must be a dense string tensor; received a RaggedTensor.")
    try:
        tensor = tf.convert_to_tensor(value)
    except (TypeError, ValueError) as error:
        raise TypeError(f"`{name}` must be a string or a list of strings; received {value!r}.") from error
    if tensor.dtype != tf.string:
        raise TypeError(f"`{name}` must be a string tensor; received dtype {tensor.dtype.name}.")
    return tensor


def memory_bytes():
    """The machine's physical memory in bytes (None where the platform does not say)."""
    try:
        return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (AttributeError, OSError, ValueError):
        return None


def format_bytes(nbytes):
    """`nbytes` as "1.2 GB" (decimal units)."""
    for unit, size in (("PB", 1e15), ("TB", 1e12), ("GB", 1e9), ("MB", 1e6), ("kB", 1e3)):
        if nbytes >= size:
            return f"{nbytes / size:.1f} {unit}"
    return f"{int(nbytes)} B"


def check_allocation(what, nbytes, memory=None):
    """A ValueError when `nbytes` (an estimate made before allocating) exceeds the machine's
    physical memory, so a huge size fails with the bytes it needs instead of an out-of-memory
    error from the backend. `what` names the argument(s), e.g. "`vocabulary_size`=10**12".
    """
    memory = memory_bytes() if memory is None else memory
    if memory and nbytes > memory:
        raise ValueError(
            f"{what} needs {format_bytes(nbytes)}, more than this machine's {format_bytes(memory)} of "
            "memory; check the size."
        )


def read_text_file(name, path, compression=None):
    """The decoded text of a UTF-8 file (gzip/zlib-compressed on request), checked in full.

    Raises a ValueError naming `name` and the file for: an empty file, a
    truncated or corrupt gzip/zlib stream, bytes that are not UTF-8 (with the
    byte offset) and binary content (NUL bytes).

    Args:
        name: the argument that held the path.
        path: the file.
        compression: "", "GZIP" or "ZLIB" (None: "GZIP" for `.gz`).
    """
    import gzip
    import zlib

    import tensorflow as tf  # lazily: gfile reads local and remote paths

    path = check_file(name, path)
    if compression is None:
        compression = "GZIP" if path.endswith(".gz") else ""
    with tf.io.gfile.GFile(path, "rb") as file:
        data = file.read()
    if not data:
        raise ValueError(f"`{name}`: the file {path!r} is empty.")
    try:
        if compression == "GZIP":
            data = gzip.decompress(data)
        elif compression == "ZLIB":
            data = zlib.decompress(data)
    except EOFError:
        raise ValueError(
            f"`{name}`: the {compression.lower()} file {path!r} is truncated (the compressed stream ends early)."
        ) from None
    except (OSError, zlib.error) as error:
        raise ValueError(f"`{name}`: {path!r} is not a valid {compression.lower()} file ({error}).") from None
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as error:
        raise ValueError(
            f"`{name}`: {path!r} is not UTF-8 text: byte {data[error.start : error.start + 1]!r} at offset "
            f"{error.start} ({error.reason})."
        ) from None
    if "\x00" in text:
        raise ValueError(f"`{name}`: {path!r} looks binary (it holds NUL bytes), not text.")
    return text
