"""Files of a HuggingFace-layout checkpoint directory: `config.json`, the
weights in safetensors (one `model.safetensors`, or shards listed in
`model.safetensors.index.json`) and small JSON side files.

Read with the `safetensors` package's NumPy API (no PyTorch). Every problem
with a file is a `CheckpointError` (a `ValueError`) naming the file and what
is wrong with it; a missing file is also a `FileNotFoundError`.

    read_json(directory, name)              dict from directory/name
    ConfigReader(config, path)              typed config.json fields (errors name the field)
    read_weights(directory)                 {name: np.ndarray}, {name: file}
    write_weights(directory, tensors, ...)  model.safetensors (+ shards, index)
    checkpoint_directory(path, overwrite)   write a directory under a temporary name, then
                                            rename it into place (`keras_tfm.atomic_files`)
"""

import json
import math
import os

import numpy as np

from keras_tfm.atomic_files import atomic_directory

CONFIG_FILE = "config.json"
WEIGHTS_FILE = "model.safetensors"
WEIGHTS_INDEX_FILE = "model.safetensors.index.json"


class CheckpointError(ValueError):
    """A checkpoint file is missing, unreadable or inconsistent."""


class MissingCheckpointFile(CheckpointError, FileNotFoundError):
    """A file the checkpoint needs does not exist (a `ValueError` and a `FileNotFoundError`)."""


def check_directory(path):
    """`path` as a str; a `MissingCheckpointFile` when it is not a directory."""
    if not isinstance(path, (str, os.PathLike)):
        raise TypeError(f"`path` must be a checkpoint directory (str or os.PathLike); received {path!r}.")
    path = os.fspath(path)
    if not os.path.isdir(path):
        what = "is a file" if os.path.exists(path) else "does not exist"
        raise MissingCheckpointFile(
            f"Checkpoint directory {path!r} {what}; expected a directory holding {CONFIG_FILE} and "
            f"{WEIGHTS_FILE} (HuggingFace layout)."
        )
    return path


def read_json(directory, name, required=True):
    """The JSON object in `directory/name` (None if absent and not `required`)."""
    path = os.path.join(directory, name)
    if not os.path.isfile(path):
        if not required:
            return None
        raise MissingCheckpointFile(f"{path}: no such file (the checkpoint needs {name}).")
    try:
        with open(path, encoding="utf-8") as f:
            value = json.load(f)
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as error:
        raise CheckpointError(f"{path}: not a readable JSON file ({error}).") from None
    except RecursionError:  # json's decoder recurses once per level of nesting
        raise CheckpointError(f"{path}: not a readable JSON file (nested too deeply).") from None
    if not isinstance(value, dict):
        raise CheckpointError(f"{path}: expected a JSON object; found {type(value).__name__}.")
    return value


_MISSING = object()


def _is_number(value):
    return isinstance(value, (int, float)) and not isinstance(value, bool)


class ConfigReader:
    """Typed access to config.json fields; errors name the file and the field."""

    def __init__(self, config, path, prefix=""):
        self.config, self.path, self.prefix = config, path, prefix

    def error(self, field, expected):
        return CheckpointError(
            f"{self.path}: field {self.prefix + field!r} = {self.config.get(field)!r}: {expected}."
        )

    def nested(self, field):
        """A reader of the JSON object `field` (fields named `field.name` in errors; {} when absent)."""
        value = self.config.get(field)
        if value is None:
            value = {}
        if not isinstance(value, dict):
            raise self.error(field, "expected a JSON object")
        return ConfigReader(value, self.path, f"{self.prefix}{field}.")

    def get(self, field, default=None):
        return self.config.get(field, default)

    def _value(self, field, default):
        value = self.config.get(field, default)
        if value is _MISSING:
            raise CheckpointError(f"{self.path}: required field {field!r} is missing.")
        return value

    def positive_int(self, field, default=_MISSING):
        value = self._value(field, default)
        if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
            raise self.error(field, "expected a positive integer")
        return value

    def positive_float(self, field, default=_MISSING):
        value = self._value(field, default)
        if not _is_number(value) or not math.isfinite(value) or value <= 0:
            raise self.error(field, "expected a finite positive number")
        return float(value)

    def rate(self, field, default=_MISSING):
        value = self._value(field, default)
        if not _is_number(value) or not 0 <= value < 1:  # NaN fails the range test too
            raise self.error(field, "expected a finite number in [0, 1)")
        return float(value)

    def boolean(self, field, default=_MISSING):
        value = self._value(field, default)
        if not isinstance(value, bool):
            raise self.error(field, "expected true or false")
        return value

    def choice(self, field, choices, default=_MISSING):
        value = self._value(field, default)
        if value not in choices:
            raise self.error(field, f"expected one of {list(choices)}")
        return value


def _open_safetensors(path):
    from safetensors import SafetensorError, safe_open

    if not os.path.isfile(path):
        raise MissingCheckpointFile(f"{path}: no such file.")
    try:
        return safe_open(path, framework="numpy")
    except (SafetensorError, OSError, ValueError) as error:
        size = os.path.getsize(path)
        raise CheckpointError(
            f"{path}: not a valid safetensors file ({size} bytes; the file may be truncated or "
            f"corrupt): {error}."
        ) from None


def _read_file(path, names=None):
    """Tensors of one safetensors file (only `names` when given) as NumPy arrays."""
    from safetensors import SafetensorError

    handle = _open_safetensors(path)
    available = set(handle.keys())
    if names is not None:
        missing = sorted(set(names) - available)
        if missing:
            raise CheckpointError(
                f"{path}: the index lists {missing[:5]}{' ...' if len(missing) > 5 else ''} in this shard, "
                "but the file does not hold them."
            )
    tensors = {}
    for name in sorted(available if names is None else names):
        try:
            tensors[name] = np.asarray(handle.get_tensor(name))
        except (SafetensorError, OSError, ValueError, TypeError) as error:
            raise CheckpointError(f"{path}: cannot read tensor {name!r} ({error}).") from None
    return tensors


def weight_files(directory):
    """The safetensors file names of a checkpoint, from the index when there is one."""
    index_path = os.path.join(directory, WEIGHTS_INDEX_FILE)
    if os.path.isfile(os.path.join(directory, WEIGHTS_FILE)):
        return [WEIGHTS_FILE], None
    if not os.path.isfile(index_path):
        raise MissingCheckpointFile(
            f"{os.path.join(directory, WEIGHTS_FILE)}: no such file (nor a sharded "
            f"{WEIGHTS_INDEX_FILE}); only safetensors checkpoints are read (convert a PyTorch .bin "
            "checkpoint with safetensors first)."
        )
    index = read_json(directory, WEIGHTS_INDEX_FILE)
    weight_map = index.get("weight_map")
    if not isinstance(weight_map, dict) or not weight_map:
        raise CheckpointError(f"{index_path}: field 'weight_map' must be a non-empty object name → file.")
    for name, file in weight_map.items():
        if not isinstance(file, str) or os.path.basename(file) != file:
            raise CheckpointError(
                f"{index_path}: field 'weight_map' maps {name!r} to {file!r}; expected a file name in the "
                "same directory."
            )
    return sorted(set(weight_map.values())), weight_map


def read_weights(directory):
    """Reads every tensor of the checkpoint in `directory`.

    Returns:
        `(tensors, sources)`: {name: np.ndarray} and {name: file name}.

    Raises:
        CheckpointError: a missing, truncated or inconsistent file (named).
    """
    files, weight_map = weight_files(directory)
    tensors, sources = {}, {}
    for file in files:
        names = None if weight_map is None else [n for n, f in weight_map.items() if f == file]
        for name, array in _read_file(os.path.join(directory, file), names).items():
            if name in tensors:
                raise CheckpointError(
                    f"{os.path.join(directory, file)}: tensor {name!r} is also in {sources[name]}."
                )
            tensors[name], sources[name] = array, file
    return tensors, sources


def parse_size(value):
    """`max_shard_size` as bytes: an int or a string like "500MB", "2GB", "10KiB"."""
    if isinstance(value, int) and not isinstance(value, bool) and value > 0:
        return value
    if isinstance(value, str):
        text = value.strip().upper()
        for suffix, factor in (
            ("GIB", 2**30),
            ("MIB", 2**20),
            ("KIB", 2**10),
            ("GB", 10**9),
            ("MB", 10**6),
            ("KB", 10**3),
            ("B", 1),
        ):
            if text.endswith(suffix):
                try:
                    size = int(float(text[: -len(suffix)]) * factor)
                except ValueError:
                    break
                if size > 0:
                    return size
                break
    raise ValueError(f'`max_shard_size` must be a positive int or a size like "2GB"; received {value!r}.')


def write_weights(directory, tensors, max_shard_size=None, metadata=None):
    """Writes `tensors` ({name: array}) as safetensors into `directory`.

    One `model.safetensors`, or, when the total exceeds `max_shard_size`,
    `model-0000i-of-0000n.safetensors` shards plus `model.safetensors.index.json`
    (HuggingFace's layout; tensors are never split across shards).

    Returns:
        The list of files written.
    """
    from safetensors.numpy import save_file

    metadata = {"format": "pt", **(metadata or {})}
    arrays = {name: np.ascontiguousarray(array) for name, array in tensors.items()}
    total = sum(a.nbytes for a in arrays.values())
    limit = None if max_shard_size is None else parse_size(max_shard_size)
    if limit is None or total <= limit:
        save_file(arrays, os.path.join(directory, WEIGHTS_FILE), metadata=metadata)
        return [WEIGHTS_FILE]
    shards, current, size = [], {}, 0
    for name in sorted(arrays):
        nbytes = arrays[name].nbytes
        if current and size + nbytes > limit:
            shards.append(current)
            current, size = {}, 0
        current[name] = arrays[name]
        size += nbytes
    shards.append(current)
    weight_map, files = {}, []
    for i, shard in enumerate(shards):
        file = f"model-{i + 1:05d}-of-{len(shards):05d}.safetensors"
        save_file(shard, os.path.join(directory, file), metadata=metadata)
        weight_map.update({name: file for name in shard})
        files.append(file)
    write_json(directory, WEIGHTS_INDEX_FILE, {"metadata": {"total_size": total}, "weight_map": weight_map})
    return files + [WEIGHTS_INDEX_FILE]


def write_json(directory, name, value):
    path = os.path.join(directory, name)
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w", encoding="utf-8") as f:
        json.dump(value, f, indent=2, sort_keys=True)
        f.write("\n")


def checkpoint_directory(path, overwrite=False):
    """`keras_tfm.atomic_files.atomic_directory(path, overwrite)` with the checkpoint's errors: a
    `MissingCheckpointFile` for a missing parent, a `CheckpointError` for a file at `path` or a
    non-empty `path` without `overwrite`. The context manager yields the temporary directory to fill."""
    path = os.path.abspath(os.fspath(path))
    parent = os.path.dirname(path)
    if not os.path.isdir(parent):
        raise MissingCheckpointFile(f"Cannot write {path!r}: the parent directory {parent!r} does not exist.")
    if os.path.exists(path) and not os.path.isdir(path):
        raise CheckpointError(f"Cannot write a checkpoint directory at {path!r}: it is a file.")

    def refuse(path):
        if overwrite or not os.listdir(path):
            return None
        return CheckpointError(
            f"{path!r} already exists and is not empty; pass overwrite=True to replace it."
        )

    return atomic_directory(path, overwrite=overwrite, refuse=refuse)
