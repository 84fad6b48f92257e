"""The tokenizer beside a `.tflite` file, and how the LiteRT runner reads it.

The export writes each tokenizer as a keras_tfm vocabulary file
(`Tokenizer.save_vocabulary`: a JSON header with the class and its options, then one
JSON string per token), which any language reads without TensorFlow. The runner turns
text into ids and back by the rule of in-process generation
(`tokenizers.text.encode` / `decode`):

    encode: prefix ids + ids of the text + suffix ids   (the tokenizer's BOS/EOS/CLS-SEP)
    decode: ids past the vocabulary → [UNK] (dropped without special tokens); special
            tokens but [UNK] dropped; the tokens joined

Without TensorFlow (plain Python, `PythonTokenizer`): `CharTokenizer` (one id per
character, unknown characters → [UNK]) and `ByteTokenizer` (one id per UTF-8 byte).
The other kinds (`WordTokenizer`, `WordPieceTokenizer`, `BytePairTokenizer`) normalise
and split text with TensorFlow string ops (Unicode tables, regular expressions), so the
runner loads them with `keras_tfm.tokenizers.load_tokenizer` (`TensorFlowTokenizer`).
"""

import os

from keras_tfm.tokenizers.special_tokens import NUM_SPECIAL_TOKENS, UNK
from keras_tfm.tokenizers.vocabulary_file import read_vocabulary_file

__all__ = ["PYTHON_KINDS", "PythonTokenizer", "TensorFlowTokenizer", "read_tokenizer"]

#: Tokenizer classes the runner reads without TensorFlow.
PYTHON_KINDS = ("CharTokenizer", "ByteTokenizer")
_ROLES = ("pad", "unk", "cls", "sep", "mask", "bos", "eos")


class PythonTokenizer:
    """A `CharTokenizer` or `ByteTokenizer` from its vocabulary file, in plain Python.

    Attributes:
        vocabulary_size, eos_id, unk_id: as the keras_tfm tokenizer's.
    """

    def __init__(self, class_name: str, config: dict, tokens: list[str]):
        self.class_name = class_name
        self.tokens = list(tokens)
        self.vocabulary_size = len(tokens)
        special = config.get("special_tokens", True)
        if isinstance(special, dict):
            index = {token: i for i, token in enumerate(tokens)}
            self.special_ids = {role: index[token] for role, token in special.items()}
        else:
            self.special_ids = {role: i for i, role in enumerate(_ROLES)} if special else {}
        self.has_special = bool(special)
        self.unk_id = self.special_ids.get("unk")
        self.eos_id = self.special_ids.get("eos")
        ids = self.special_ids
        if config.get("add_cls_sep"):
            self.prefix, self.suffix = [ids["cls"]], [ids["sep"]]
        else:
            self.prefix = [ids["bos"]] if config.get("add_bos") else []
            self.suffix = [ids["eos"]] if config.get("add_eos") else []
        self.errors = config.get("errors", "replace")
        self.offset = NUM_SPECIAL_TOKENS if special is True else 0
        self.index = {}
        for i, token in enumerate(tokens):
            self.index.setdefault(token, i)

    def _encode_one(self, text, name):
        if self.class_name == "ByteTokenizer":
            return [b + self.offset for b in text.encode("utf-8")]
        ids = []
        for character in text:
            token_id = self.index.get(character, self.unk_id)
            if token_id is None:
                raise ValueError(
                    f"`{name}` cannot be tokenized by the model's tokenizer: Input contains a token that is "
                    f"not in the vocabulary ({character!r}), and there is no [UNK] to map it to."
                )
            ids.append(token_id)
        return ids

    def encode(self, texts: list[str], name: str = "inputs", raw: bool = False) -> list[list[int]]:
        """Id lists of `texts`: prefix + text + suffix (`raw`: the text's ids alone)."""
        if raw:
            return [self._encode_one(text, name) for text in texts]
        rows = [self.prefix + self._encode_one(text, name) + self.suffix for text in texts]
        for index, row in enumerate(rows):
            if not row:
                raise ValueError(
                    f"`{name}[{index}]`={texts[index]!r} has no tokens; every text needs at least one."
                )
        return rows

    def _piece(self, token_id):
        if self.class_name == "ByteTokenizer" and token_id >= self.offset:
            return bytes([token_id - self.offset])
        return self.tokens[token_id].encode("utf-8")

    def decode(self, rows: list[list[int]]) -> list[str]:
        """Strings of id lists (special tokens but [UNK] dropped)."""
        dropped = {i for role, i in self.special_ids.items() if role != "unk"}
        size, out = self.vocabulary_size, []
        for row in rows:
            row = [i if i < size else UNK for i in row] if self.has_special else [i for i in row if i < size]
            data = b"".join(self._piece(i) for i in row if i not in dropped)
            errors = self.errors if self.errors in ("replace", "ignore") else "replace"
            out.append(data.decode("utf-8", errors=errors))
        return out


class TensorFlowTokenizer:
    """Any keras_tfm tokenizer, loaded with TensorFlow (`load_tokenizer`)."""

    def __init__(self, path: str):
        from keras_tfm.tokenizers import load_tokenizer

        self.tokenizer = load_tokenizer(path)
        self.vocabulary_size = self.tokenizer.vocabulary_size
        self.eos_id = self.tokenizer.eos_id
        self.unk_id = self.tokenizer.unk_id

    def encode(self, texts: list[str], name: str = "inputs", raw: bool = False) -> list[list[int]]:
        if raw:
            import tensorflow as tf

            from keras_tfm.tokenizers.text import raw_encode

            return raw_encode(self.tokenizer, tf.constant(list(texts), tf.string)).to_list()
        from keras_tfm.tokenizers.text import encode

        return encode(self.tokenizer, texts, name=name)

    def decode(self, rows: list[list[int]]) -> list[str]:
        from keras_tfm.tokenizers.text import decode

        return decode(self.tokenizer, rows)


def read_tokenizer(path: str) -> PythonTokenizer | TensorFlowTokenizer:
    """The tokenizer of a vocabulary file: in plain Python for `PYTHON_KINDS`, else with
    TensorFlow."""
    if not os.path.isfile(path):
        raise FileNotFoundError(f"The tokenizer file {path!r} beside the LiteRT model is missing.")
    class_name, config, tokens = read_vocabulary_file(path)
    if class_name in PYTHON_KINDS:
        return PythonTokenizer(class_name, config, tokens)
    return TensorFlowTokenizer(path)
