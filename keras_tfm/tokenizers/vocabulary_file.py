"""The keras_tfm vocabulary file: a JSON header line, then one JSON string per token.

    {"format": "keras_tfm.vocabulary", "class_name": "WordPieceTokenizer", "config": {...}}
    "[PAD]"
    "[UNK]"
    ...

Written by `Tokenizer.save_vocabulary` (atomically: temporary name, then
`os.replace`), read by `Tokenizer.from_vocabulary_file` (and `load_tokenizer`).
"""

import json
import os
import tempfile

VOCABULARY_FILE_FORMAT = "keras_tfm.vocabulary"


def write_vocabulary_file(path, class_name, config, tokens):
    """Writes the header and `tokens` to `path` atomically."""
    path = os.fspath(path)
    directory = os.path.dirname(os.path.abspath(path))
    os.makedirs(directory, exist_ok=True)
    header = {"format": VOCABULARY_FILE_FORMAT, "class_name": class_name, "config": config}
    fd, temp_path = tempfile.mkstemp(prefix=".vocabulary-", suffix=".tmp", dir=directory)
    try:
        with os.fdopen(fd, "w", encoding="utf-8", newline="\n") as file:
            file.write(json.dumps(header, ensure_ascii=False) + "\n")
            for token in tokens:
                file.write(json.dumps(token, ensure_ascii=False) + "\n")
        os.replace(temp_path, path)
    except BaseException:
        if os.path.exists(temp_path):
            os.remove(temp_path)
        raise


def read_vocabulary_file(path):
    """Returns `(class_name, config, tokens)` of a file written by `write_vocabulary_file`."""
    path = os.fspath(path)
    if not os.path.isfile(path):
        raise FileNotFoundError(f"`path`: no such vocabulary file: {path!r}.")
    try:
        with open(path, encoding="utf-8") as file:
            lines = file.read().split("\n")
    except UnicodeDecodeError as error:
        raise ValueError(f"`path` {path!r} is not a keras_tfm vocabulary file (not UTF-8 text).") from error
    if lines and lines[-1] == "":
        lines.pop()
    try:
        header = json.loads(lines[0]) if lines else None
    except json.JSONDecodeError:
        header = None
    if not isinstance(header, dict) or header.get("format") != VOCABULARY_FILE_FORMAT:
        raise ValueError(f"`path` {path!r} is not a keras_tfm vocabulary file (bad header line).")
    tokens = []
    for number, line in enumerate(lines[1:], start=2):
        try:
            token = json.loads(line)
        except json.JSONDecodeError as error:
            raise ValueError(f"`path` {path!r}, line {number}: not a JSON string: {line!r}.") from error
        if not isinstance(token, str):
            raise ValueError(f"`path` {path!r}, line {number}: not a JSON string: {line!r}.")
        tokens.append(token)
    return header.get("class_name"), dict(header.get("config", {})), tokens
