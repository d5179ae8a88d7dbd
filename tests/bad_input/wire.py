"""Hand-built protobuf bytes: what a generated client refuses to send (invalid UTF-8, nesting
far past the parser's limit) still reaches a server from any other client."""

from __future__ import annotations


def varint(value: int) -> bytes:
    out = bytearray()
    while True:
        low, value = value & 0x7F, value >> 7
        out.append(low | 0x80 if value else low)
        if not value:
            return bytes(out)


def length_delimited(field_number: int, payload: bytes) -> bytes:
    return varint(field_number << 3 | 2) + varint(len(payload)) + payload


def nested_struct(depth: int) -> bytes:
    """A google.protobuf.Struct ``{"a": {"a": ... {}}}`` nested ``depth`` levels deep."""
    struct = b""
    for _ in range(depth):
        value = length_delimited(5, struct)  # Value.struct_value
        entry = length_delimited(1, b"a") + length_delimited(2, value)  # map key, value
        struct = length_delimited(1, entry)  # Struct.fields
    return struct


INVALID_UTF8 = b"L-\xff\xfe1"
