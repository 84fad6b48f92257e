"""Readers for the tokenizer files of a HuggingFace-layout checkpoint directory.

`vocab.txt` (WordPiece, one token per line, id = line number),
`tokenizer_config.json` / `special_tokens_map.json` (options and special
tokens), `tokenizer.json` (the fast tokenizer: model, normalizer, added
tokens), `vocab.json` + `merges.txt` (byte-level BPE). Every error names the
file and the field.
"""

import json
import os

from keras_tfm.tokenizers.tokenizer_json_fields import check_gpt2_byte_level

#: `tokenizer_class` values of byte-level BPE tokenizers whose pre-tokenizer is not GPT-2's.
OTHER_BYTE_LEVEL_CLASSES = ("Qwen2Tokenizer", "Qwen2TokenizerFast")


def checkpoint_file(path, name, required=True):
    """`path/name` if it exists; None if not and not `required` (else FileNotFoundError)."""
    if not isinstance(path, (str, os.PathLike)):
        raise TypeError(f"`path` must be a directory path (str or os.PathLike); received {path!r}.")
    path = os.fspath(path)
    if not os.path.isdir(path):
        raise FileNotFoundError(f"`path`: no such checkpoint directory: {path!r}.")
    file = os.path.join(path, name)
    if os.path.isfile(file):
        return file
    if required:
        raise FileNotFoundError(f"`path` {path!r} has no {name}.")
    return None


def read_text(file):
    """The text of `file` (UTF-8; a byte-order mark at the start is dropped, as editors on Windows
    write one)."""
    try:
        with open(file, encoding="utf-8-sig") as handle:
            return handle.read()
    except UnicodeDecodeError as error:
        raise ValueError(f"{file!r} is not UTF-8 text ({error}).") from error


def read_json(file, required_type=dict):
    try:
        value = json.loads(read_text(file))
    except json.JSONDecodeError as error:
        raise ValueError(f"{file!r} is not valid JSON: {error}.") from error
    except RecursionError:  # json's decoder recurses once per level of nesting
        raise ValueError(f"{file!r} is not readable JSON: nested too deeply.") from None
    if not isinstance(value, required_type):
        raise ValueError(f"{file!r} must hold a JSON {required_type.__name__}; found {type(value).__name__}.")
    return value


def read_vocab_txt(file):
    """Tokens of a WordPiece `vocab.txt`, in id order (trailing newline and `\\r` tolerated)."""
    lines = read_text(file).split("\n")
    if lines and lines[-1] == "":
        lines.pop()
    tokens = [line[:-1] if line.endswith("\r") else line for line in lines]
    if not tokens:
        raise ValueError(f"{file!r} holds no tokens.")
    return tokens


def token_content(value):
    """A special token from a config: a str or a {"content": str, ...} dict (AddedToken)."""
    if isinstance(value, dict):
        value = value.get("content")
    return value if isinstance(value, str) and value else None


#: Options that must be JSON true / false (a string "false" would read as True); None allowed
#: where HuggingFace gives None a meaning.
BOOLEAN_OPTIONS = {
    "do_lower_case": False,
    "tokenize_chinese_chars": False,
    "strip_accents": True,
    "clean_up_tokenization_spaces": False,
    "add_prefix_space": True,  # null (transformers 5): what tokenizer.json says
}


def check_boolean_option(file, key, value):
    """`value` unless `key` is a boolean option and `value` is not a bool (TypeError naming both)."""
    if key in BOOLEAN_OPTIONS and not isinstance(value, bool):
        if value is None and BOOLEAN_OPTIONS[key]:
            return value
        raise TypeError(f"{file}: `{key}` must be true or false; found {value!r} ({type(value).__name__}).")
    return value


def read_tokenizer_options(path, sources=None):
    """Merged options of `tokenizer_config.json` and `special_tokens_map.json` (absent files: {});
    `sources`, when given, is filled with {option: file it came from}."""
    options = {}
    for name in ("tokenizer_config.json", "special_tokens_map.json"):
        file = checkpoint_file(path, name, required=False)
        if file is not None:
            for key, value in read_json(file).items():
                if key not in options:
                    options[key] = check_boolean_option(file, key, value)
                    if sources is not None:
                        sources[key] = file
    return options


def special_tokens_from_options(options, roles, vocabulary, file_hint):
    """{role: token} for the roles whose `<role>_token` option names a token of `vocabulary`."""
    index = set(vocabulary)
    special = {}
    for role in roles:
        token = token_content(options.get(f"{role}_token"))
        if token is None:
            continue
        if token not in index:
            raise ValueError(f"{file_hint}: `{role}_token` {token!r} is not in the vocabulary.")
        special[role] = token
    return special


def read_wordpiece_json(file):
    """(vocabulary, options) from the WordPiece model and BertNormalizer of a `tokenizer.json`."""
    data = read_json(file)
    model = data.get("model") or {}
    if model.get("type") != "WordPiece":
        raise ValueError(f"{file!r}: `model.type` is {model.get('type')!r}, not 'WordPiece'.")
    vocab = model.get("vocab")
    if not isinstance(vocab, dict) or not vocab:
        raise ValueError(f"{file!r}: `model.vocab` must be a non-empty token -> id object.")
    vocabulary = _ordered_vocabulary(vocab, file, "model.vocab")
    options = {
        "unk_token": model.get("unk_token"),
        "suffix_indicator": model.get("continuing_subword_prefix", "##"),
        "max_input_chars_per_word": model.get("max_input_chars_per_word", 100),
    }
    cleanup = _decoder_cleanup(data)
    if cleanup is not None:
        options["decoder_cleanup"] = cleanup
    normalizer = data.get("normalizer") or {}
    if normalizer.get("type") == "BertNormalizer":
        where = f"{file} (normalizer)"
        options["do_lower_case"] = check_boolean_option(
            where, "do_lower_case", normalizer.get("lowercase", True)
        )
        options["strip_accents"] = check_boolean_option(
            where, "strip_accents", normalizer.get("strip_accents")
        )
        options["tokenize_chinese_chars"] = check_boolean_option(
            where, "tokenize_chinese_chars", normalizer.get("handle_chinese_chars", True)
        )
    return vocabulary, options


def read_wordpiece_decoder_cleanup(file):
    """The `cleanup` flag of a `tokenizer.json`'s WordPiece decoder; None without one."""
    return _decoder_cleanup(read_json(file))


def _decoder_cleanup(data):
    decoder = data.get("decoder") or {}
    if decoder.get("type") != "WordPiece":
        return None
    return bool(decoder.get("cleanup", True))


def read_bpe_files(path):
    """(vocabulary, merges) of a byte-level BPE: `vocab.json` + `merges.txt`, else `tokenizer.json`.

    A `tokenizer.json` beside them must describe GPT-2's byte-level BPE (model BPE without byte
    fallback, no normalizer, the ByteLevel pre-tokenizer with its regex, a ByteLevel decoder), and
    `tokenizer_config.json` must not name a byte-level tokenizer with another pre-tokenizer (Qwen2):
    a ValueError names the field otherwise.
    """
    vocab_file = checkpoint_file(path, "vocab.json", required=False)
    merges_file = checkpoint_file(path, "merges.txt", required=False)
    json_file = checkpoint_file(path, "tokenizer.json", required=False)
    if json_file is not None:
        # Refuse a tokenizer.json that is not GPT-2's byte-level BPE (Llama, Qwen2, ...), naming the field.
        check_gpt2_byte_level(read_json(json_file), json_file)
    tokenizer_class = read_tokenizer_options(path).get("tokenizer_class")
    if tokenizer_class in OTHER_BYTE_LEVEL_CLASSES:
        raise ValueError(
            f"`path` {os.fspath(path)!r}: tokenizer_config.json's `tokenizer_class` {tokenizer_class!r} "
            "pre-tokenizes differently from GPT-2; read it with keras_tfm.tokenizers.load_tokenizer_json."
        )
    if vocab_file and merges_file:
        vocabulary = _ordered_vocabulary(read_json(vocab_file), vocab_file, "vocab")
        merges, seen = [], {}
        for number, line in enumerate(read_text(merges_file).split("\n"), start=1):
            line = line.rstrip("\r")
            if not line or (number == 1 and line.startswith("#version")):
                continue
            parts = line.split(" ")
            if len(parts) != 2:
                raise ValueError(
                    f"{merges_file!r}, line {number}: expected two tokens separated by a space; found {line!r}."
                )
            if line in seen:
                raise ValueError(
                    f"{merges_file}, line {number}: duplicate merge {line!r} (also on line {seen[line]}); "
                    "each pair may be merged once (its line is its rank)."
                )
            seen[line] = number
            merges.append(line)
        return vocabulary, merges
    if json_file is None:
        raise FileNotFoundError(
            f"`path` {os.fspath(path)!r} has neither vocab.json + merges.txt nor tokenizer.json."
        )
    model = read_json(json_file).get("model") or {}
    vocabulary = _ordered_vocabulary(model.get("vocab") or {}, json_file, "model.vocab")
    merges = [m if isinstance(m, str) else " ".join(m) for m in model.get("merges") or []]
    return vocabulary, merges


def _ordered_vocabulary(vocab, file, field):
    """Token list in id order from a {token: id} object whose ids are exactly 0..n-1."""
    if not isinstance(vocab, dict) or not vocab:
        raise ValueError(f"{file!r}: `{field}` must be a non-empty token -> id object.")
    tokens = [None] * len(vocab)
    for token, token_id in vocab.items():
        if isinstance(token_id, bool) or not isinstance(token_id, int) or not 0 <= token_id < len(vocab):
            raise ValueError(
                f"{file!r}: `{field}` id of {token!r} is {token_id!r}; ids must be 0..{len(vocab) - 1}."
            )
        if tokens[token_id] is not None:
            raise ValueError(
                f"{file!r}: `{field}` gives id {token_id} to {tokens[token_id]!r} and {token!r}."
            )
        tokens[token_id] = token
    return tokens
