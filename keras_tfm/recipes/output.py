"""The folder a training run leaves behind (`keras-tfm train ... --output DIR`), and reading it back.

    DIR/model.keras              the trained model (keras.saving.load_model)
    DIR/tokenizer.vocab          its tokenizer (seq2seq: source_tokenizer.vocab, target_tokenizer.vocab),
                                 keras_tfm vocabulary files (keras_tfm.tokenizers.load_tokenizer)
    DIR/training.json            {"task", "arguments", "metrics", "seconds", "tokenizers", "labels", ...}
    DIR/saved_models/NAME/1/     with --export NAME: the TF Serving SavedModel (every signature)

The folder is written under a temporary name beside DIR and renamed into
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
import shutil
import tempfile

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


def check_output_options(options):
    """Checks `output`, `overwrite`, `export`, `export_dir` of a recipe's options before any training.

    Raises:
        ValueError: naming the option (`keras-tfm` reports it as the flag, exit status 2).
    """
    output = options.output
    if output:
        path = os.path.abspath(output)
        _check_writable_folder("output", os.path.dirname(path))
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
    if options.export_dir and options.export:
        base = os.path.abspath(options.export_dir)
        _check_writable_folder("export_dir", base if os.path.isdir(base) else os.path.dirname(base))


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
    """TF Serving SavedModel `base_dir/name/VERSION` with every signature of the model; returns its path."""
    from keras_tfm.export.exporter import export_for_serving

    return export_for_serving(model, os.path.join(base_dir, name), **export_arguments(tokenizers, labels))


def _replace_folder(temp, path, overwrite):
    """Moves the finished folder `temp` to `path` (an old `path` is removed only with `overwrite`)."""
    if os.path.exists(path):
        if not overwrite and (holds_model(path) or os.listdir(path)):
            raise ValueError(f"`output`: {path!r} appeared during training; replacing it needs `overwrite`.")
        old = tempfile.mkdtemp(prefix=f".{os.path.basename(path)}.old-", dir=os.path.dirname(path))
        os.rmdir(old)
        os.rename(path, old)
        try:
            os.rename(temp, path)
        except BaseException:
            os.rename(old, path)
            raise
        shutil.rmtree(old, ignore_errors=True)
    else:
        os.rename(temp, path)


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
    name, output, export_dir = options.export, options.output, options.export_dir
    if output:
        path = os.path.abspath(output)
        temp = tempfile.mkdtemp(prefix=f".{os.path.basename(path)}.tmp-", dir=os.path.dirname(path))
        try:
            model.save(os.path.join(temp, MODEL_FILE))
            for role, tokenizer in tokenizers.items():
                tokenizer.save_vocabulary(os.path.join(temp, TOKENIZER_FILES[role]))
            if name and not export_dir:
                written["export"] = os.path.join(
                    path,
                    os.path.relpath(
                        export(model, os.path.join(temp, EXPORT_SUBDIR), name, tokenizers, labels), temp
                    ),
                )
            elif name:
                written["export"] = export(model, export_dir, name, tokenizers, labels)
            info = training_info(task, options, results, tokenizers, labels)
            with open(os.path.join(temp, INFO_FILE), "w", encoding="utf-8") as f:
                json.dump(info, f, indent=2, ensure_ascii=False)
            umask = os.umask(0)
            os.umask(umask)
            os.chmod(temp, 0o777 & ~umask)  # mkdtemp makes it 0700
            _replace_folder(temp, path, options.overwrite)
        except BaseException:
            shutil.rmtree(temp, ignore_errors=True)
            raise
        written["output"] = path
        log(f"saved the model, its tokenizer(s) and training.json to {path}")
    elif name:
        written["export"] = export(model, export_dir or EXPORT_SUBDIR, name, tokenizers, labels)
    if "export" in written:
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


def read_info(folder):
    path = os.path.join(folder, INFO_FILE)
    if not os.path.isfile(path):
        return {}
    with open(path, encoding="utf-8") as f:
        return json.load(f)


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

    file = model_file(argument, path)
    folder = os.path.dirname(os.path.abspath(file))
    info = read_info(folder)
    try:
        model = keras.saving.load_model(file, compile=compile)
    except (OSError, ValueError) as error:
        raise ValueError(f"`{argument}`: cannot load {file!r}: {str(error).splitlines()[0]}") from None
    return Trained(model, find_tokenizers(folder, info), info, folder)
