"""Reader and writer of SentencePiece `.model` files (`spiece.model`, `tokenizer.model`, Marian's `.spm`).

A `.model` file is a serialized `sentencepiece.ModelProto` (protocol buffers,
proto2). Its wire format is simple enough to read by hand, so neither
`sentencepiece` nor generated protobuf classes are needed: every field is a
varint key `(field_number << 3) | wire_type` followed by a varint (type 0), 8
bytes (type 1), a length-prefixed byte string (type 2, also nested messages)
or 4 bytes (type 5). Fields this reader does not know are skipped.
`serialize_sentencepiece_model` writes the same fields back (the pieces, then
the `TrainerSpec` and `NormalizerSpec` fields of `SentencePieceModel`), which
the `sentencepiece` library and this reader load.

Field numbers (sentencepiece_model.proto):

    ModelProto      1 pieces (SentencePiece)  2 trainer_spec  3 normalizer_spec  5 denormalizer_spec
    SentencePiece   1 piece  2 score (float)  3 type (NORMAL=1 UNKNOWN=2 CONTROL=3 USER_DEFINED=4
                    UNUSED=5 BYTE=6)
    TrainerSpec     3 model_type (UNIGRAM=1 BPE=2 WORD=3 CHAR=4)  22 split_by_whitespace
                    24 treat_whitespace_as_suffix  35 byte_fallback  40 unk_id  41 bos_id  42 eos_id
                    43 pad_id  45 unk_piece  46 bos_piece  47 eos_piece  48 pad_piece
    NormalizerSpec  1 name  2 precompiled_charsmap  3 add_dummy_prefix  4 remove_extra_whitespaces
                    5 escape_whitespaces  6 normalization_rule_tsv
"""

import dataclasses
import os
import struct

from keras_tfm.atomic_files import atomic_write_bytes
from keras_tfm.protobuf_wire import field_key, length_delimited, message_fields, varint_bytes

NORMAL, UNKNOWN, CONTROL, USER_DEFINED, UNUSED, BYTE = 1, 2, 3, 4, 5, 6
PIECE_TYPES = {1: "NORMAL", 2: "UNKNOWN", 3: "CONTROL", 4: "USER_DEFINED", 5: "UNUSED", 6: "BYTE"}
MODEL_TYPES = {1: "UNIGRAM", 2: "BPE", 3: "WORD", 4: "CHAR"}

# (field number, name, kind, default) of the scalar fields read; kind: "int", "bool", "str", "bytes".
_TRAINER_FIELDS = {
    3: ("model_type", "int", 1),
    22: ("split_by_whitespace", "bool", True),
    24: ("treat_whitespace_as_suffix", "bool", False),
    35: ("byte_fallback", "bool", False),
    40: ("unk_id", "int", 0),
    41: ("bos_id", "int", 1),
    42: ("eos_id", "int", 2),
    43: ("pad_id", "int", -1),
    45: ("unk_piece", "str", "<unk>"),
    46: ("bos_piece", "str", "<s>"),
    47: ("eos_piece", "str", "</s>"),
    48: ("pad_piece", "str", "<pad>"),
}
_NORMALIZER_FIELDS = {
    1: ("name", "str", ""),
    2: ("precompiled_charsmap", "bytes", b""),
    3: ("add_dummy_prefix", "bool", True),
    4: ("remove_extra_whitespaces", "bool", True),
    5: ("escape_whitespaces", "bool", True),
    6: ("normalization_rule_tsv", "str", ""),
}


@dataclasses.dataclass
class SentencePieceModel:
    """The parts of a SentencePiece `ModelProto` a tokenizer needs.

    Attributes:
        pieces: piece strings in id order.
        scores: their float32 scores (log probabilities for Unigram).
        types: their types (`NORMAL`, `UNKNOWN`, `CONTROL`, `USER_DEFINED`,
            `UNUSED`, `BYTE`).
        trainer: {name: value} of the `TrainerSpec` fields in `_TRAINER_FIELDS`
            (defaults filled in).
        normalizer: same for the `NormalizerSpec`.
        has_denormalizer: the model has a non-empty `denormalizer_spec` rule set.
        file: the path it was read from (for messages).
    """

    pieces: list
    scores: list
    types: list
    trainer: dict
    normalizer: dict
    has_denormalizer: bool
    file: str

    @property
    def model_type(self) -> str:
        return MODEL_TYPES.get(self.trainer["model_type"], str(self.trainer["model_type"]))


def _signed(value):
    """A proto int32 read as a varint (negative numbers are 10-byte two's complement)."""
    return value - (1 << 64) if value >= 1 << 63 else value


def _read_scalars(data, spec, where):
    values = {name: default for name, _, default in spec.values()}
    for number, wire, value in message_fields(data, where):
        if number not in spec:
            continue
        name, kind, _ = spec[number]
        expected = 2 if kind in ("str", "bytes") else 0
        if wire != expected:
            raise ValueError(f"{where}: field `{name}` has wire type {wire}, expected {expected}.")
        if kind == "int":
            value = _signed(value)
        elif kind == "bool":
            value = bool(value)
        elif kind == "str":
            value = _utf8(value, f"{where}: field `{name}`")
        values[name] = value
    return values


def _utf8(data, where):
    try:
        return bytes(data).decode("utf-8")
    except UnicodeDecodeError as error:
        raise ValueError(f"{where} is not UTF-8 ({error}).") from error


def _read_piece(data, where):
    piece, score, kind = None, 0.0, NORMAL
    for number, wire, value in message_fields(data, where):
        if number == 1 and wire == 2:
            piece = _utf8(value, f"{where} `piece`")
        elif number == 2 and wire == 5:
            score = struct.unpack("<f", struct.pack("<I", value))[0]
        elif number == 3 and wire == 0:
            kind = value
    if not piece:
        raise ValueError(f"{where}: a piece has an empty or missing `piece` string.")
    if kind not in PIECE_TYPES:
        raise ValueError(f"{where}: piece {piece!r} has unknown `type` {kind}.")
    return piece, score, kind


def parse_sentencepiece_model(data: bytes, file: str = "<bytes>") -> SentencePieceModel:
    """Parses the bytes of a SentencePiece `.model` file.

    Args:
        data: the file's bytes.
        file: its name, for error messages.

    Returns:
        A `SentencePieceModel`.

    Raises:
        ValueError: the bytes are not a SentencePiece model (naming `file`).
    """
    pieces, scores, types = [], [], []
    trainer = normalizer = None
    has_denormalizer = False
    for number, wire, value in message_fields(bytes(data), file):
        if wire != 2:
            continue
        if number == 1:
            piece, score, kind = _read_piece(value, f"{file}: pieces[{len(pieces)}]")
            pieces.append(piece)
            scores.append(score)
            types.append(kind)
        elif number == 2:
            trainer = _read_scalars(value, _TRAINER_FIELDS, f"{file}: trainer_spec")
        elif number == 3:
            normalizer = _read_scalars(value, _NORMALIZER_FIELDS, f"{file}: normalizer_spec")
        elif number == 5:
            spec = _read_scalars(value, _NORMALIZER_FIELDS, f"{file}: denormalizer_spec")
            has_denormalizer = bool(spec["precompiled_charsmap"] or spec["normalization_rule_tsv"])
    if not pieces or trainer is None:
        raise ValueError(f"{file} is not a SentencePiece model (no `pieces` or no `trainer_spec`).")
    if normalizer is None:
        normalizer = {name: default for name, _, default in _NORMALIZER_FIELDS.values()}
    return SentencePieceModel(pieces, scores, types, trainer, normalizer, has_denormalizer, file)


def read_sentencepiece_model(path: str | os.PathLike) -> SentencePieceModel:
    """Reads and parses a SentencePiece `.model` file (see `parse_sentencepiece_model`)."""
    path = os.fspath(path)
    if not os.path.isfile(path):
        raise FileNotFoundError(f"`path`: no such SentencePiece model file: {path!r}.")
    with open(path, "rb") as handle:
        return parse_sentencepiece_model(handle.read(), path)


def _write_scalars(values, spec, where):
    out = b""
    for number, (name, kind, _) in sorted(spec.items()):
        value = values.get(name)
        if value is None:
            continue
        if kind in ("str", "bytes"):
            data = value.encode("utf-8") if kind == "str" else bytes(value)
            out += length_delimited(number, data)
        elif isinstance(value, (bool, int)):
            out += field_key(number, 0) + varint_bytes(int(value))
        else:
            raise TypeError(f"{where}: field `{name}` must be an int or bool; received {value!r}.")
    return out


def serialize_sentencepiece_model(model: SentencePieceModel) -> bytes:
    """The `.model` bytes (a `ModelProto`) of `model`: its pieces, scores and types, and
    the `TrainerSpec` / `NormalizerSpec` fields it holds (`parse_sentencepiece_model`
    reads back an equal `SentencePieceModel`, file name aside).

    Raises:
        ValueError: an empty piece, an unknown type, lists of different lengths, or a
            denormalizer (whose rules `SentencePieceModel` does not keep).
    """
    where = model.file
    if not len(model.pieces) == len(model.scores) == len(model.types):
        raise ValueError(f"{where}: `pieces`, `scores` and `types` must have the same length.")
    if model.has_denormalizer:
        raise ValueError(
            f"{where}: a model with a `denormalizer_spec` cannot be written (its rules are not kept)."
        )
    out = bytearray()
    for i, (piece, score, kind) in enumerate(zip(model.pieces, model.scores, model.types)):
        if not isinstance(piece, str) or not piece or kind not in PIECE_TYPES:
            raise ValueError(f"{where}: pieces[{i}] = ({piece!r}, {kind!r}) is not a piece and a piece type.")
        message = length_delimited(1, piece.encode("utf-8"))
        message += field_key(2, 5) + struct.pack("<f", float(score)) + field_key(3, 0) + varint_bytes(kind)
        out += length_delimited(1, message)
    out += length_delimited(2, _write_scalars(model.trainer, _TRAINER_FIELDS, f"{where}: trainer_spec"))
    out += length_delimited(
        3, _write_scalars(model.normalizer, _NORMALIZER_FIELDS, f"{where}: normalizer_spec")
    )
    return bytes(out)


def write_sentencepiece_model(model: SentencePieceModel, path: str | os.PathLike) -> None:
    """Writes `model` as a `.model` file at `path`, atomically (`serialize_sentencepiece_model`)."""
    atomic_write_bytes(os.fspath(path), serialize_sentencepiece_model(model))
