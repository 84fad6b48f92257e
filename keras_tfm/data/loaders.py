"""Dataset loaders returning `tf.data.Dataset`s of strings, string pairs or (text, label).

Two kinds:

* TFDS builders (`load_tiny_shakespeare`, `load_ted_hrlr`, `load_glue_sst2`).
  These never touch the network unless `download=True`. To prepare a dataset
  offline, pass `manual_dir`: a folder holding the exact file TFDS would
  download (`input.txt` for tiny_shakespeare, `qi18naacl-dataset.tar.gz` for
  ted_hrlr_translate, `SST-2.zip` for glue/sst2). tensorflow-datasets 4.9.10
  looks in `DownloadConfig(manual_dir=...)` for a file named like the 4th
  column of the builder's `checksums.tsv` *before* downloading, checks its
  size and sha256 against that file, and prepares the dataset from it;
  nothing is written into `manual_dir`. Once prepared (under `data_dir`,
  default `~/tensorflow_datasets`) later calls need neither.
* Local files (`load_text_file`, `load_tiny_shakespeare_file`,
  `load_tab_pairs`, `load_aligned_files`, `load_label_sentence_lines`). Paths
  are checked when the function is called (FileNotFoundError naming the
  path), and line formats are validated up front by default (ValueError with
  `path:line`). Files ending in `.gz` are read as gzip. Every local file is
  read once in Python when the function is called (`resources.read_text_file`),
  whatever `validate` says: an empty file, a truncated or non-gzip `.gz`, bytes
  that are not UTF-8 and binary files raise a ValueError naming the file
  instead of loading partial or garbled data later inside tf.data.
"""

import os
import re
import sys

import tensorflow as tf

from keras_tfm.resources import check_file, read_text_file

TINY_SHAKESPEARE_SPLITS = ("train", "validation", "test")
TED_HRLR_PAIRS = (
    "az_to_en",
    "aztr_to_en",
    "be_to_en",
    "beru_to_en",
    "es_to_pt",
    "fr_to_pt",
    "gl_to_en",
    "glpt_to_en",
    "he_to_pt",
    "it_to_pt",
    "pt_to_en",
    "ru_to_en",
    "ru_to_pt",
    "tr_to_en",
)


# --------------------------------------------------------------------------- #
# TFDS.
# --------------------------------------------------------------------------- #


def _ensure_importlib_resources():
    """Lets tensorflow-datasets 4.9.10 prepare datasets on Python >= 3.11 without the `importlib_resources` backport.

    `DatasetBuilder.code_path` (run by every `download_and_prepare`) uses
    `importlib_resources.abc.Traversable`, but tensorflow-datasets declares the
    backport only for Python < 3.9, so a fresh install fails with
    `ModuleNotFoundError: No module named 'importlib_resources'`. The standard
    library's `importlib.resources` has the same `abc.Traversable` from 3.11
    on, so it is registered under the backport's name when the backport is
    missing. Installing `importlib_resources` makes this a no-op.
    """
    try:
        import importlib_resources  # noqa: F401  (only checks that the backport is installed)
    except ImportError:
        import importlib.resources

        try:
            import importlib.resources.abc  # noqa: F401  (Python >= 3.11)
        except ImportError:
            return
        sys.modules.setdefault("importlib_resources", importlib.resources)


def _import_tfds():
    _ensure_importlib_resources()
    import tensorflow_datasets as tfds

    return tfds


def _tfds_builder(name, data_dir, manual_dir, download, expected_files):
    """Returns a prepared TFDS builder, preparing it from `manual_dir` (or the network) if needed."""
    if data_dir is not None:
        data_dir = os.fspath(data_dir)
    if not isinstance(download, bool):
        raise TypeError(f"`download` must be a bool; received {download!r}.")
    tfds = _import_tfds()
    builder = tfds.builder(name, data_dir=data_dir)
    if builder.is_prepared():
        return builder
    download_config = None
    if manual_dir is not None:
        manual_dir = os.fspath(manual_dir)
        if not os.path.isdir(manual_dir):
            raise FileNotFoundError(f"`manual_dir`: no such directory: {manual_dir!r}.")
        missing = [f for f in expected_files if not os.path.isfile(os.path.join(manual_dir, f))]
        if missing:
            raise FileNotFoundError(
                f"`manual_dir` {manual_dir!r} must hold {missing}: the file(s) TFDS downloads for {name!r}, "
                f"with their original names (their size and sha256 are checked)."
            )
        download_config = tfds.download.DownloadConfig(manual_dir=manual_dir)
    elif not download:
        raise FileNotFoundError(
            f"TFDS dataset {name!r} is not prepared in {builder.data_dir!r} and download=False. Pass "
            f"manual_dir=<folder holding {list(expected_files)}> to prepare it offline, or download=True."
        )
    builder.download_and_prepare(download_config=download_config)
    return builder


def load_tiny_shakespeare(
    split: str = "train",
    data_dir: str | os.PathLike | None = None,
    manual_dir: str | os.PathLike | None = None,
    download: bool = False,
) -> tf.data.Dataset:
    """Tiny Shakespeare from TFDS (`tiny_shakespeare`, 1.0.0): one string per split.

    Offline: `manual_dir` must hold char-rnn's `input.txt` (1,115,394 bytes,
    sha256 86c4e6aa...c565ed, the file TFDS downloads). This is equivalent to

        tfds.load("tiny_shakespeare", split=split, data_dir=data_dir,
                  download_and_prepare_kwargs={"download_config":
                      tfds.download.DownloadConfig(manual_dir=manual_dir)})

    TFDS splits the text 90/5/5 by characters: train 1,003,854, validation
    55,770, test 55,770 characters (`load_tiny_shakespeare_file` does the same
    from the file directly, without TFDS).

    Args:
        split: "train", "validation" or "test" (or any TFDS split string).
        data_dir: TFDS data directory (default `~/tensorflow_datasets`).
        manual_dir: folder holding `input.txt`.
        download: allow TFDS to download when not prepared and no
            `manual_dir` is given.

    Returns:
        A `tf.data.Dataset` of one scalar string: the split's text.
    """
    builder = _tfds_builder("tiny_shakespeare", data_dir, manual_dir, download, ("input.txt",))
    return builder.as_dataset(split=split).map(lambda example: example["text"])


def load_ted_hrlr(
    pair: str = "pt_to_en",
    split: str = "train",
    data_dir: str | os.PathLike | None = None,
    manual_dir: str | os.PathLike | None = None,
    download: bool = False,
) -> tf.data.Dataset:
    """TED talks translation pairs from TFDS (`ted_hrlr_translate/<pair>`; pt->en is the TF Transformer tutorial's).

    Offline: `manual_dir` must hold `qi18naacl-dataset.tar.gz` (131,005,909
    bytes), the archive TFDS downloads from phontron.com.

    Args:
        pair: one of `TED_HRLR_PAIRS`, e.g. "pt_to_en".
        split: "train", "validation" or "test".
        data_dir: TFDS data directory.
        manual_dir: folder holding the archive.
        download: allow TFDS to download when not prepared.

    Returns:
        A `tf.data.Dataset` of `(source, target)` scalar strings.
    """
    if pair not in TED_HRLR_PAIRS:
        raise ValueError(f"`pair` must be one of {list(TED_HRLR_PAIRS)}; received {pair!r}.")
    builder = _tfds_builder(
        f"ted_hrlr_translate/{pair}", data_dir, manual_dir, download, ("qi18naacl-dataset.tar.gz",)
    )
    return builder.as_dataset(split=split, as_supervised=True)


def load_glue_sst2(
    split: str = "train",
    data_dir: str | os.PathLike | None = None,
    manual_dir: str | os.PathLike | None = None,
    download: bool = False,
) -> tf.data.Dataset:
    """GLUE SST-2 from TFDS (`glue/sst2`): `(sentence, label)`; 1 = positive.

    Offline: `manual_dir` must hold GLUE's `SST-2.zip` (7,439,277 bytes).
    Note the train split is phrase-level (67,349 rows) and the test split is
    unlabelled (label -1). For the sentence-level Kim (2014) files
    `stsa.binary.*` use `load_label_sentence_lines`.

    Args:
        split: "train", "validation" or "test".
        data_dir: TFDS data directory.
        manual_dir: folder holding `SST-2.zip`.
        download: allow TFDS to download when not prepared.

    Returns:
        A `tf.data.Dataset` of `(sentence string, label int64)`.
    """
    builder = _tfds_builder("glue/sst2", data_dir, manual_dir, download, ("SST-2.zip",))
    return builder.as_dataset(split=split).map(lambda example: (example["sentence"], example["label"]))


# --------------------------------------------------------------------------- #
# Local files.
# --------------------------------------------------------------------------- #


_ASCII_INT = re.compile(r"[+-]?[0-9]+", re.ASCII)


def _checked_lines(name, path, compression):
    """(path as str, compression, numbered lines) after `read_text_file`'s full check of the file."""
    path = check_file(name, path)
    compression = _compression(path, compression)
    lines = read_text_file(name, path, compression).split("\n")
    if lines and lines[-1] == "":
        lines.pop()
    return path, compression, list(enumerate(lines, start=1))


def _compression(path, compression):
    if compression is None:
        return "GZIP" if path.endswith(".gz") else ""
    if compression not in ("", "GZIP", "ZLIB"):
        raise ValueError(f"`compression` must be None, '', 'GZIP' or 'ZLIB'; received {compression!r}.")
    return compression


_LINE_BATCH = 4096


def _parsed_lines(path, compression, parse=None, skip_empty=True):
    """Lines of a file, parsed `_LINE_BATCH` at a time with vectorised ops, then unbatched.

    tf.data pays a fixed cost per element for every `map`, so lines are
    batched, blank lines dropped and `parse` (`[n]` lines -> tuple of `[n]`
    tensors) applied per batch, and the result is unbatched.
    """

    def process(lines):
        if skip_empty:
            lines = tf.boolean_mask(lines, tf.strings.length(tf.strings.strip(lines)) > 0)
        return parse(lines) if parse is not None else lines

    dataset = tf.data.TextLineDataset(path, compression_type=compression).batch(_LINE_BATCH)
    return dataset.map(process, num_parallel_calls=tf.data.AUTOTUNE).unbatch()


def load_text_file(
    path: str | os.PathLike, lines: bool = False, skip_empty: bool = False, compression: str | None = None
) -> tf.data.Dataset:
    """A text file as one string, or as lines.

    Args:
        path: the file (`.gz` is decompressed).
        lines: yield one string per line (without the newline) instead of
            the whole text.
        skip_empty: with `lines`, drop blank lines.
        compression: None (from the extension), "", "GZIP" or "ZLIB".

    Returns:
        A `tf.data.Dataset` of scalar strings.
    """
    path = check_file("path", path)
    compression = _compression(path, compression)
    read_text_file("path", path, compression)
    if lines:
        if not skip_empty:
            return tf.data.TextLineDataset(path, compression_type=compression)
        return _parsed_lines(path, compression)

    def read(file_path):
        contents = tf.io.read_file(file_path)
        if compression:
            contents = tf.io.decode_compressed(contents, compression_type=compression)
        return contents

    return tf.data.Dataset.from_tensors(path).map(read)


def split_tiny_shakespeare(text: str) -> dict[str, str]:
    """TFDS's tiny_shakespeare split of a text: 90/5/5 by characters.

    Exactly TFDS's arithmetic: `i = int(len(text) * 0.9)` for train, then
    half of the rest (`int(len(rest) * 0.5)`) for validation, the remainder
    for test.

    Args:
        text: the whole corpus (str).

    Returns:
        dict with "train", "validation" and "test" strings.
    """
    i = int(len(text) * 0.9)
    train, rest = text[:i], text[i:]
    i = int(len(rest) * 0.5)
    return {"train": train, "validation": rest[:i], "test": rest[i:]}


def load_tiny_shakespeare_file(path: str | os.PathLike, split: str = "train") -> tf.data.Dataset:
    """One split of a local Tiny Shakespeare `input.txt`, split like TFDS (no TFDS needed).

    For the real 1,115,394-character file: train 1,003,854, validation
    55,770, test 55,770 characters, identical to `load_tiny_shakespeare`.

    Args:
        path: the `input.txt` file.
        split: "train", "validation" or "test".

    Returns:
        A `tf.data.Dataset` of one scalar string.
    """
    if split not in TINY_SHAKESPEARE_SPLITS:
        raise ValueError(f"`split` must be one of {list(TINY_SHAKESPEARE_SPLITS)}; received {split!r}.")
    text = read_text_file("path", path, "")  # as TFDS reads it: decoded to characters
    return tf.data.Dataset.from_tensors(tf.constant(split_tiny_shakespeare(text)[split]))


def load_tab_pairs(
    path: str | os.PathLike,
    source_column: int = 0,
    target_column: int = 1,
    validate: bool = True,
    compression: str | None = None,
) -> tf.data.Dataset:
    """Tab-separated sentence pairs, e.g. Anki/Tatoeba `spa.txt` (`English\\tSpanish[\\tattribution]`).

    Blank lines are skipped; extra columns are ignored.

    Args:
        path: the file (`.gz` is decompressed).
        source_column: column index of the source sentence.
        target_column: column index of the target sentence.
        validate: check every line up front (one Python pass) and raise
            ValueError naming `path:line` for a line with too few columns.
        compression: None (from the extension), "", "GZIP" or "ZLIB".

    Returns:
        A `tf.data.Dataset` of `(source, target)` scalar strings.
    """
    path, compression, rows = _checked_lines("path", path, compression)
    for name, value in (("source_column", source_column), ("target_column", target_column)):
        if isinstance(value, bool) or not isinstance(value, int) or value < 0:
            raise ValueError(f"`{name}` must be a non-negative int; received {value!r}.")
    needed = max(source_column, target_column) + 1
    if validate:
        for number, line in rows:
            if line.strip() and len(line.split("\t")) < needed:
                raise ValueError(
                    f"`path` {path}:{number}: expected at least {needed} tab-separated columns; received {line!r}."
                )

    def parse(lines):
        columns = tf.strings.split(lines, "\t").to_tensor(default_value="", shape=[None, needed])
        return columns[:, source_column], columns[:, target_column]

    return _parsed_lines(path, compression, parse)


def load_aligned_files(
    source_path: str | os.PathLike,
    target_path: str | os.PathLike,
    validate: bool = True,
    compression: str | None = None,
) -> tf.data.Dataset:
    """Line-aligned parallel files (Multi30k `train.en.gz` / `train.de.gz`): line i of each is a pair.

    Args:
        source_path: source-language file (`.gz` is decompressed).
        target_path: target-language file.
        validate: count the lines of both up front and raise ValueError when
            they differ.
        compression: None (from each extension), "", "GZIP" or "ZLIB".

    Returns:
        A `tf.data.Dataset` of `(source, target)` scalar strings.
    """
    source_path, source_compression, source_rows = _checked_lines("source_path", source_path, compression)
    target_path, target_compression, target_rows = _checked_lines("target_path", target_path, compression)
    source_count, target_count = len(source_rows), len(target_rows)
    if validate:
        if source_count != target_count:
            raise ValueError(
                f"`source_path` {source_path!r} has {source_count} lines but `target_path` {target_path!r} has "
                f"{target_count}; aligned files need the same number."
            )
    return tf.data.Dataset.zip(
        (
            tf.data.TextLineDataset(source_path, compression_type=source_compression),
            tf.data.TextLineDataset(target_path, compression_type=target_compression),
        )
    )


def load_label_sentence_lines(
    path: str | os.PathLike, validate: bool = True, compression: str | None = None
) -> tf.data.Dataset:
    """`<label> <sentence>` lines, e.g. SST-2 `stsa.binary.train` (`1 a gorgeous film ...`).

    The first space separates an integer label from the sentence. Blank lines
    are skipped.

    Args:
        path: the file (`.gz` is decompressed).
        validate: check every line up front (one Python pass) and raise
            ValueError naming `path:line` for a line without an integer label
            and a sentence.
        compression: None (from the extension), "", "GZIP" or "ZLIB".

    Returns:
        A `tf.data.Dataset` of `(sentence string, label int32)`.
    """
    path, compression, rows = _checked_lines("path", path, compression)
    if validate:
        for number, line in rows:
            if not line.strip():
                continue
            label, _, sentence = line.partition(" ")
            if not _ASCII_INT.fullmatch(label):  # int() also takes "１" (full-width); StringToNumber does not
                raise ValueError(
                    f"`path` {path}:{number}: expected '<integer label in ASCII digits> <sentence>'; "
                    f"received {line!r}."
                )
            if not sentence.strip():
                raise ValueError(f"`path` {path}:{number}: the line has a label but no sentence: {line!r}.")

    def parse(lines):
        parts = tf.strings.split(lines, " ", maxsplit=1).to_tensor(default_value="", shape=[None, 2])
        return parts[:, 1], tf.strings.to_number(parts[:, 0], tf.int32)

    return _parsed_lines(path, compression, parse)
