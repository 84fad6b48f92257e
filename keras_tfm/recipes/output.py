"""The folder a training run leaves behind (`keras-tfm train ... --output DIR`), and reading it back.

    DIR/model.keras              the trained model (keras.saving.load_model)
    DIR/tokenizer.vocab          its tokenizer (seq2seq: source_tokenizer.vocab, target_tokenizer.vocab),
                                 keras_tfm vocabulary files (keras_tfm.tokenizers.load_tokenizer)
    DIR/training.json            {"task", "arguments", "metrics", "seconds", "tokenizers", "labels", ...}
    DIR/saved_models/NAME/1/     with --export NAME: the TF Serving SavedModel (default signatures)

One rule for where every recipe's export goes (`export_base`): `export NAME` writes
`EXPORT_DIR/NAME/VERSION`, EXPORT_DIR being `export_dir` when given, else `OUTPUT/saved_models` with
`output`, else `saved_models` (in the working folder).

Missing parent folders of `output`, `results`, `log_dir`, `backup_dir` and `export_dir` are created
when the run writes there (`make_parents`), not before: the checks before training only ask that the
nearest existing part of each path is a writable folder. The folder is written under a temporary name
beside DIR and renamed into
place at the end, so DIR is either absent or complete: a failed or interrupted
run leaves nothing half-written. An existing DIR holding a model is replaced
only with `overwrite` (`--overwrite`). `keras-tfm export --model DIR` and `keras-tfm
evaluate --model DIR` read it back with `load_trained`. Bad values raise a
ValueError naming the option (`output`, `export_dir`, `model`, ...).
"""

import dataclasses
import datetime
import json
import math
import os
import tempfile

from keras_tfm.atomic_files import atomic_directory, write_guard
from keras_tfm.recipes.options import first_line

MODEL_FILE = "model.keras"
INFO_FILE = "training.json"
EXPORT_SUBDIR = "saved_models"
#: Vocabulary file of each tokenizer role.
TOKENIZER_FILES = {
    "tokenizer": "tokenizer.vocab",
    "source_tokenizer": "source_tokenizer.vocab",
    "target_tokenizer": "target_tokenizer.vocab",
}


# --------------------------------------------------------------------------- #
# Before training: refuse what would fail at the end.
# --------------------------------------------------------------------------- #


def holds_model(folder):
    return any(os.path.exists(os.path.join(folder, name)) for name in (MODEL_FILE, INFO_FILE))


def _check_writable_folder(argument, folder):
    if not os.path.exists(folder):
        raise ValueError(f"`{argument}`: the folder {folder!r} does not exist.")
    if not os.path.isdir(folder):
        raise ValueError(f"`{argument}`: {folder!r} is a file, not a folder.")
    if not os.access(folder, os.W_OK | os.X_OK):
        raise ValueError(f"`{argument}`: cannot write into {folder!r} (permission denied).")
    try:  # what os.access cannot see: read-only file systems, quotas
        os.rmdir(tempfile.mkdtemp(prefix=".keras-tfm-probe-", dir=folder))
    except OSError as error:
        raise ValueError(f"`{argument}`: cannot write into {folder!r} ({error.strerror}).") from None


def export_base(options):
    """The folder `options.export` goes into: `export_dir`, else `output/saved_models` with `output`, else
    `saved_models`. Every recipe follows this rule (`keras-tfm train` and `keras-tfm finetune` alike)."""
    if options.export_dir:
        return options.export_dir
    if options.output:
        return os.path.join(os.path.abspath(options.output), EXPORT_SUBDIR)
    return EXPORT_SUBDIR


def make_parents(path):
    """Creates the missing parent folders of `path` (the checks before training found them creatable)."""
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)


def check_output_options(options):
    """Checks `output`, `overwrite`, `export`, `export_dir` (and `results`, `log_dir`, `backup_dir` when
    the options have them) before any training: each is, or can be created as, what the run writes
    (missing parents are created at the end, `make_parents`).

    Raises:
        ValueError: naming the option (`keras-tfm` reports it as the flag, exit status 2).
    """
    output = options.output
    if output:
        path = os.path.abspath(output)
        check_folder_target("output", os.path.dirname(path))
        if os.path.exists(path):
            if not os.path.isdir(path):
                raise ValueError(f"`output`: {output!r} is a file, not a folder.")
            if not os.access(path, os.R_OK | os.X_OK):
                raise ValueError(f"`output`: cannot read the folder {output!r} (permission denied).")
            if not options.overwrite:
                if holds_model(path):
                    raise ValueError(
                        f"`output`: {output!r} already holds a model; replacing it needs `overwrite`."
                    )
                if os.listdir(path):
                    raise ValueError(
                        f"`output`: {output!r} is not empty; choose a new folder, or replace it with `overwrite`."
                    )
    for argument in ("log_dir", "backup_dir"):
        if getattr(options, argument, None):
            check_folder_target(argument, getattr(options, argument))
    results = getattr(options, "results", None)
    if results:
        if os.path.isdir(results):
            raise ValueError(f"`results`: {results!r} is a folder; expected a file name.")
        check_folder_target("results", os.path.dirname(os.path.abspath(results)))
    if options.export and (options.export_dir or not output):  # else inside the new `output` folder
        check_export_target("export_dir", export_base(options), options.export)


def check_export_target(argument, export_dir, name):
    """Checks that the export `export_dir/name/VERSION` can be written (before any training or loading):
    every existing part of the path is a folder and the nearest existing one is writable.

    Raises:
        ValueError: naming `argument` (or `export` when `export_dir/name` is a file).
    """
    base = check_folder_target(argument, export_dir)
    model_dir = os.path.join(base, name)
    if os.path.exists(model_dir) and not os.path.isdir(model_dir):
        raise ValueError(f"`export`: {os.path.join(export_dir, name)!r} is a file, not a folder.")


def check_folder_target(argument, folder):
    """Checks that `folder` is, or can be created as, a writable folder: not a file, below no file, its
    nearest existing part writable. Returns its absolute path.

    Raises:
        ValueError: naming `argument`.
    """
    base = os.path.abspath(folder)
    if os.path.exists(base) and not os.path.isdir(base):
        raise ValueError(f"`{argument}`: {folder!r} is a file, not a folder.")
    existing = base
    while not os.path.exists(existing):
        existing = os.path.dirname(existing)
    if not os.path.isdir(existing):
        raise ValueError(f"`{argument}`: cannot create {folder!r}: {existing!r} is a file, not a folder.")
    _check_writable_folder(argument, existing)
    return base


# --------------------------------------------------------------------------- #
# After training: write the folder.
# --------------------------------------------------------------------------- #


def _jsonable(value):
    if isinstance(value, bool) or value is None or isinstance(value, str):
        return value
    if isinstance(value, int):
        return value
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, dict):
        out = {str(k): _jsonable(v) for k, v in value.items()}
        return {k: v for k, v in out.items() if v is not _SKIP}
    if isinstance(value, (list, tuple)):
        return [v for v in (_jsonable(v) for v in value) if v is not _SKIP]
    try:  # numpy scalars
        return _jsonable(value.item())
    except (AttributeError, ValueError):
        return _SKIP


_SKIP = object()


def training_info(task, options, results, tokenizers, labels=None):
    """The training.json record: task, options ("arguments"), final metrics, time."""
    arguments = _jsonable(dataclasses.asdict(options))
    metrics = {
        k: v
        for k, v in _jsonable(results).items()
        if not k.endswith("seconds") and k not in ("history", "examples", "model", "tokenizer")
    }
    seconds = {k: v for k, v in _jsonable(results).items() if k.endswith("seconds")}
    from keras_tfm import __version__

    info = {
        "format": "keras_tfm.training_output",
        "task": task,
        "created": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        "keras_tfm_version": __version__,
        "arguments": arguments,
        "metrics": metrics,
        "seconds": seconds,
        "tokenizers": {role: TOKENIZER_FILES[role] for role in tokenizers},
    }
    if labels is not None:
        info["labels"] = list(labels)
    return info


def export_arguments(tokenizers, labels=None):
    """`export_for_serving` keyword arguments for a model with these tokenizers (and class names)."""
    if "source_tokenizer" in tokenizers:
        tokenizer = (tokenizers["source_tokenizer"], tokenizers["target_tokenizer"])
    else:
        tokenizer = tokenizers.get("tokenizer")
    kwargs = {"tokenizer": tokenizer}
    if labels is not None:
        kwargs["label_names"] = list(labels)
    return kwargs


def export(model, base_dir, name, tokenizers, labels=None):
    """TF Serving SavedModel `base_dir/name/VERSION` with the default signatures of the model's kind;
    returns its path."""
    from keras_tfm.export.exporter import export_for_serving

    return export_for_serving(model, os.path.join(base_dir, name), **export_arguments(tokenizers, labels))


def model_bytes(model):
    """The bytes of `model`'s weights (about the size of its saved file, without the optimizer)."""
    return sum(math.prod(w.shape) * _itemsize(w.dtype) for w in model.weights)


def _itemsize(dtype):
    import numpy as np

    try:
        return np.dtype(str(dtype)).itemsize
    except TypeError:
        return 4


def save_trained(options, task, model, tokenizers, results, labels=None, log=print):
    """Writes `output` (and `export`) at the end of a recipe; returns {"output": ..., "export": ...}.

    Args:
        options: the recipe's options (`output`, `overwrite`, `export`, `export_dir`, ...).
        task: "gpt" | "bert" | "seq2seq".
        model: the trained model.
        tokenizers: {role: tokenizer}, roles from `TOKENIZER_FILES`.
        results: the recipe's results (numbers go to training.json).
        labels: class names of a classifier.
    """
    written = {}
    name, output = options.export, options.output
    path = os.path.abspath(output) if output else None
    if output:

        def refuse(path):
            if not options.overwrite and (holds_model(path) or os.listdir(path)):
                return ValueError(
                    f"`output`: {path!r} appeared during training; replacing it needs `overwrite`."
                )
            return None

        with write_guard(path):
            make_parents(path)
        with write_guard(path), atomic_directory(path, options.overwrite, refuse) as temp:
            with write_guard(os.path.join(path, MODEL_FILE), model_bytes(model)):
                model.save(os.path.join(temp, MODEL_FILE))
            for role, tokenizer in tokenizers.items():
                with write_guard(os.path.join(path, TOKENIZER_FILES[role])):
                    tokenizer.save_vocabulary(os.path.join(temp, TOKENIZER_FILES[role]))
            info = training_info(task, options, results, tokenizers, labels)
            with write_guard(os.path.join(path, INFO_FILE)):
                with open(os.path.join(temp, INFO_FILE), "w", encoding="utf-8") as f:
                    json.dump(info, f, indent=2, ensure_ascii=False)
        written["output"] = path
        log(f"saved the model, its tokenizer(s) and training.json to {path}")
    if name:
        base = export_base(options)
        try:
            with write_guard(os.path.join(os.path.abspath(base), name), model_bytes(model)):
                written["export"] = export(model, base, name, tokenizers, labels)
        except Exception as error:
            if not output:
                raise
            raise ValueError(
                f"`export`: the trained model is saved in {path!r}, but exporting it failed "
                f"({first_line(error)}); export it with `keras-tfm export --model {output} --name {name}`."
            ) from error
        log(f"exported the SavedModel to {written['export']}")
    return written


# --------------------------------------------------------------------------- #
# Reading it back.
# --------------------------------------------------------------------------- #


class Trained:
    """A training output read back: `model`, `tokenizers` {role: tokenizer}, `info` (training.json or {})."""

    def __init__(self, model, tokenizers, info, folder):
        self.model = model
        self.tokenizers = tokenizers
        self.info = info
        self.folder = folder

    @property
    def task(self):
        return self.info.get("task")

    @property
    def labels(self):
        return self.info.get("labels")

    def export_arguments(self):
        return export_arguments(self.tokenizers, self.labels)


def model_file(argument, path):
    """The .keras file of `path` (a training output folder or a .keras file); errors name `argument`."""
    if os.path.isdir(path):
        candidate = os.path.join(path, MODEL_FILE)
        if not os.path.isfile(candidate):
            raise ValueError(
                f"`{argument}`: the folder {path!r} holds no {MODEL_FILE} (a recipe writes it with `output`)."
            )
        return candidate
    if not os.path.exists(path):
        raise ValueError(f"`{argument}`: no such file or folder: {path!r}.")
    return path


def check_keras_file(argument, file, deep=False):
    """Refuses a `.keras` file that is not a readable zip archive (truncated, damaged), naming the file
    and its size; `deep` also checks every member's CRC (reads the whole file)."""
    import zipfile

    if not str(file).endswith(".keras"):
        return file
    size = os.path.getsize(file)
    try:
        with zipfile.ZipFile(file) as archive:
            bad = archive.testzip() if deep else None
    except (zipfile.BadZipFile, OSError, EOFError, ValueError) as error:
        raise ValueError(
            f"`{argument}`: {file!r} is damaged or truncated ({size} bytes; not a readable .keras archive: "
            f"{first_line(error)})."
        ) from None
    if bad is not None:
        raise ValueError(
            f"`{argument}`: {file!r} is damaged ({size} bytes; its member {bad!r} fails its CRC)."
        )
    return file


def read_info(folder, argument="model"):
    """training.json of `folder` ({} when absent); a damaged one is a ValueError naming `argument`."""
    path = os.path.join(folder, INFO_FILE)
    if not os.path.isfile(path):
        return {}
    try:
        with open(path, encoding="utf-8") as f:
            info = json.load(f)
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as error:
        raise ValueError(f"`{argument}`: {path!r} is damaged or truncated ({first_line(error)}).") from None
    if not isinstance(info, dict):
        raise ValueError(f"`{argument}`: {path!r} must hold a JSON object; found {type(info).__name__}.")
    return info


def find_tokenizers(folder, info=None):
    """{role: tokenizer} of the vocabulary files in `folder` (those training.json names, else the defaults)."""
    from keras_tfm.tokenizers import load_tokenizer

    names = (info or {}).get("tokenizers") or TOKENIZER_FILES
    tokenizers = {}
    for role, filename in names.items():
        path = os.path.join(folder, filename)
        if os.path.isfile(path):
            tokenizers[role] = load_tokenizer(path)
    return tokenizers


def load_trained(path: str, argument: str = "model", compile: bool = False) -> "Trained":
    """Loads a training output folder (or a .keras file with vocabulary files beside it).

    Args:
        path: the folder (or the .keras file).
        argument: the name errors give the path.
        compile: compile the model as it was saved.

    Returns:
        `Trained`.
    """
    import keras

    import keras_tfm.models  # noqa: F401  (registers the builders' layers)

    file = check_keras_file(argument, model_file(argument, path))
    folder = os.path.dirname(os.path.abspath(file))
    info = read_info(folder, argument)
    try:
        model = keras.saving.load_model(file, compile=compile)
    except (OSError, ValueError, EOFError) as error:
        check_keras_file(argument, file, deep=True)
        raise ValueError(f"`{argument}`: cannot load {file!r}: {first_line(error)}") from None
    return Trained(model, find_tokenizers(folder, info), info, folder)
