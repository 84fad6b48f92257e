"""The protobuf wire format, by hand: enough to read and write SentencePiece models and TF Serving
warmup records without the `protobuf` package.

A message is a run of fields, each a key `varint(number << 3 | wire type)` and a value:

    wire 0  varint        base-128 little-endian, 7 bits a byte, the high bit "more follows"
    wire 1  fixed 64 bit  8 bytes little-endian
    wire 2  length        varint(length) then that many bytes (strings, bytes, sub-messages)
    wire 5  fixed 32 bit  4 bytes little-endian
"""

import struct
from collections.abc import Iterator

__all__ = ["field_key", "length_delimited", "message_fields", "read_varint", "varint_bytes"]


def read_varint(data: bytes, pos: int, where: str) -> tuple[int, int]:
    """`(value, next position)` of the varint at `pos`; a ValueError naming `where` when it runs
    past the end or past ten bytes."""
    result = shift = 0
    while True:
        if pos >= len(data):
            raise ValueError(f"{where}: truncated protobuf (a varint runs past the end).")
        byte = data[pos]
        pos += 1
        result |= (byte & 0x7F) << shift
        if not byte & 0x80:
            return result, pos
        shift += 7
        if shift > 63:
            raise ValueError(f"{where}: malformed protobuf (a varint is longer than 10 bytes).")


def message_fields(data: bytes, where: str) -> Iterator[tuple[int, int, int | bytes]]:
    """Yields `(field number, wire type, value)` of one message: an int, or bytes for wire type 2."""
    pos = 0
    while pos < len(data):
        key, pos = read_varint(data, pos, where)
        number, wire = key >> 3, key & 7
        if wire == 0:
            value, pos = read_varint(data, pos, where)
        elif wire == 1:
            value, pos = struct.unpack_from("<Q", data, pos)[0] if pos + 8 <= len(data) else None, pos + 8
        elif wire == 2:
            length, pos = read_varint(data, pos, where)
            value, pos = data[pos : pos + length], pos + length
        elif wire == 5:
            value, pos = struct.unpack_from("<I", data, pos)[0] if pos + 4 <= len(data) else None, pos + 4
        else:
            raise ValueError(f"{where}: malformed protobuf (wire type {wire} of field {number}).")
        if pos > len(data) or value is None:
            raise ValueError(f"{where}: truncated protobuf (field {number} runs past the end).")
        yield number, wire, value


def varint_bytes(value: int) -> bytes:
    """The varint of `value` (a negative int32 is written as ten bytes of two's complement)."""
    value &= (1 << 64) - 1
    out = bytearray()
    while True:
        byte, value = value & 0x7F, value >> 7
        out.append(byte | (0x80 if value else 0))
        if not value:
            return bytes(out)


def field_key(number: int, wire: int) -> bytes:
    return varint_bytes(number << 3 | wire)


def length_delimited(number: int, data: bytes | str) -> bytes:
    """Field `number` of wire type 2 holding `data` (a str is written as UTF-8)."""
    data = data.encode("utf-8") if isinstance(data, str) else bytes(data)
    return field_key(number, 2) + varint_bytes(len(data)) + data
