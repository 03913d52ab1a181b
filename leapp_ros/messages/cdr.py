"""ROS 2 messages as CDR bytes: read into NumPy views and plain objects, written from arrays.

What rclpy hands a ``raw=True`` subscription, and takes from ``publisher.publish(bytes)``, is
the message serialized as the middleware sends it: OMG CDR (XCDR version 1, what every rmw
of ROS 2 writes by default). The bytes are:

- a 4-byte encapsulation header: ``00 00`` (big-endian CDR) or ``00 01`` (little-endian),
  then two option bytes (ignored on reading, zero on writing);
- the fields in declaration order, nested messages inline. Each primitive is aligned to its
  own size (1, 2, 4 or 8 bytes), counted from the end of the header; a string is a ``uint32``
  length (with the terminating NUL), its UTF-8 bytes and the NUL; a sequence a ``uint32``
  count and its elements; a fixed array its elements. Padding is written as zeros.

:func:`layout` compiles a message class's fields once (from rosidl's ``SLOT_TYPES``);
:func:`read` turns bytes into :class:`Fields` objects with the message's attribute names
(primitive arrays and sequences become NumPy views of the bytes, read-only, without a copy;
strings ``str``; sequences of strings or messages lists; a list of strings whose bytes, at the
same place, are the last one's of that field is that list again, unparsed), so code written
for rclpy's messages reads them unchanged; :func:`write` serializes anything with the message's
attributes (a Fields object, an rclpy message) little-endian. Any other encapsulation
(XCDR2, parameter lists) is :class:`UnsupportedEncodingError`, which a reader answers by
deserializing that message the typed way. A truncated or inconsistent payload is a
:class:`~leapp_ros.messages.multiarray.MessageError` saying where it broke.
"""

from __future__ import annotations

import importlib
import struct
from functools import cache
from typing import Any

import numpy as np

from leapp_ros.messages.multiarray import MessageError

__all__ = [
    "LITTLE_ENDIAN",
    "Fields",
    "Layout",
    "UnsupportedEncodingError",
    "defaults",
    "header_stamp_ns",
    "layout",
    "read",
    "write",
]

LITTLE_ENDIAN = b"\x00\x01\x00\x00"  # the encapsulation header written here
_BIG_ENDIAN = b"\x00\x00"
_HEADER = 4  # alignment counts from the end of the encapsulation header

# rosidl basic type -> struct/NumPy type character
_BASIC = {
    "boolean": "?",
    "octet": "B",
    "char": "B",
    "uint8": "B",
    "int8": "b",
    "uint16": "H",
    "int16": "h",
    "uint32": "I",
    "int32": "i",
    "uint64": "Q",
    "int64": "q",
    "float": "f",
    "double": "d",
}
_U32 = {True: struct.Struct("<I"), False: struct.Struct(">I")}
_STAMP = {True: struct.Struct("<iI"), False: struct.Struct(">iI")}


class UnsupportedEncodingError(MessageError):
    """The payload is not plain CDR (XCDR1): read it the typed way."""


class Fields:
    """A message read from CDR: one attribute per field, as the rclpy message has them."""

    def __init__(self, **fields: Any):
        self.__dict__.update(fields)

    def __repr__(self) -> str:
        inner = ", ".join(f"{name}={value!r}" for name, value in self.__dict__.items())
        return f"Fields({inner})"


# A compiled field: (name, kind, code, count, sub) where kind is one of
#   "basic" (one primitive), "array" (count primitives), "sequence" (primitives),
#   "string", "strings" (count strings, or a sequence when count is None),
#   "message" (sub is its Layout), "messages" (count messages or a sequence);
# code is the struct character of a primitive.
Layout = tuple[tuple[str, str, str, int | None, Any], ...]


@cache
def layout(message_class: type) -> Layout:
    """The compiled fields of ``message_class`` (an rclpy message class)."""
    from rosidl_parser import definition as d

    fields = []
    for name, slot in zip(
        message_class.get_fields_and_field_types(), message_class.SLOT_TYPES, strict=True
    ):
        count: int | None = None
        item = slot
        kind = "single"
        if isinstance(slot, d.Array):
            kind, count, item = "array", slot.size, slot.value_type
        elif isinstance(slot, d.AbstractSequence):
            kind, item = "sequence", slot.value_type
        if isinstance(item, d.BasicType):
            code = _BASIC.get(item.typename)
            if code is None:
                raise MessageError(f"{message_class.__name__}.{name}: {item.typename} is not read")
            fields.append((name, "basic" if kind == "single" else kind, code, count, None))
        elif isinstance(item, d.AbstractString):
            if isinstance(item, d.AbstractWString):
                raise MessageError(f"{message_class.__name__}.{name}: wstring is not read")
            fields.append((name, "string" if kind == "single" else "strings", "", count, None))
        else:
            sub = _nested_class(item)
            many = "message" if kind == "single" else "messages"
            fields.append((name, many, "", count, (layout(sub), sub)))
    return tuple(fields)


def _nested_class(item: Any) -> type:
    module = importlib.import_module(".".join(item.namespaces))
    return getattr(module, item.name)


def read(payload: bytes, fields: Layout) -> Fields:
    """The message in ``payload`` (CDR bytes with their encapsulation header).

    Raises:
        UnsupportedEncodingError: not plain CDR.
        MessageError: the payload ends early or holds an impossible length.
    """
    little = _endianness(payload)
    try:
        message, _ = _read(payload, _HEADER, fields, little)
    except (struct.error, ValueError, UnicodeDecodeError) as e:
        raise MessageError(f"a malformed CDR payload of {len(payload)} bytes ({e})") from None
    return message


def _endianness(payload: bytes) -> bool:
    if len(payload) < _HEADER:
        raise MessageError(f"a CDR payload of {len(payload)} bytes has no encapsulation header")
    kind = payload[:2]
    if kind == LITTLE_ENDIAN[:2]:
        return True
    if kind == _BIG_ENDIAN:
        return False
    raise UnsupportedEncodingError(f"encapsulation 0x{kind.hex()} is not plain CDR")


# per string list field: where the last one began, its bytes and its strings (a robot sends
# the same joint names in every message: they are parsed once, then compared as bytes)
_LAST_STRINGS: dict[tuple[int, str], tuple[int, bytes, list[str]]] = {}


def _read(buffer: bytes, at: int, fields: Layout, little: bool) -> tuple[Fields, int]:
    u32 = _U32[little].unpack_from
    order = "<" if little else ">"
    values: dict[str, Any] = {}
    for name, kind, code, count, sub in fields:
        if kind in ("basic", "array", "sequence"):
            size = struct.calcsize(code)
            if kind == "sequence":
                count, at = _read_count(buffer, at, u32)
                if not count:  # an empty sequence is its count alone: no padding after it
                    values[name] = np.empty(0, order + code)
                    continue
            at += -(at - _HEADER) % size
            if kind == "basic":
                (values[name],) = struct.unpack_from(order + code, buffer, at)
                at += size
                continue
            end = at + size * count
            if end > len(buffer):
                raise ValueError(f"{name}: {count} elements run past the end")
            values[name] = np.frombuffer(buffer, order + code, count, at)
            at = end
        elif kind in ("string", "strings"):
            if kind == "string":
                values[name], at = _read_string(buffer, at, u32)
                continue
            key = (id(fields), name)
            last = _LAST_STRINGS.get(key)
            if last is not None and last[0] == at and buffer[at : at + len(last[1])] == last[1]:
                values[name] = last[2].copy()  # the same bytes where they were: the same names
                at += len(last[1])
                continue
            began = at
            if count is None:
                count, at = _read_count(buffer, at, u32)
            strings = []
            for _ in range(_bounded(count, buffer, at)):
                text, at = _read_string(buffer, at, u32)
                strings.append(text)
            values[name] = strings
            _LAST_STRINGS[key] = (began, bytes(buffer[began:at]), strings.copy())
        else:
            nested = sub[0]
            if kind == "message":
                values[name], at = _read(buffer, at, nested, little)
                continue
            if count is None:
                count, at = _read_count(buffer, at, u32)
            items = []
            for _ in range(_bounded(count, buffer, at)):
                item, at = _read(buffer, at, nested, little)
                items.append(item)
            values[name] = items
    return Fields(**values), at


def _read_count(buffer: bytes, at: int, u32: Any) -> tuple[int, int]:
    """A sequence's element count (a ``uint32`` aligned to 4) and where its elements start."""
    at += -(at - _HEADER) % 4
    (count,) = u32(buffer, at)
    return count, at + 4


def _bounded(count: int, buffer: bytes, at: int) -> int:
    if count > len(buffer) - at:  # every element takes at least a byte
        raise ValueError(f"a count of {count} at byte {at} runs past the end")
    return count


def _read_string(buffer: bytes, at: int, u32: Any) -> tuple[str, int]:
    at += -(at - _HEADER) % 4
    (length,) = u32(buffer, at)
    at += 4
    end = at + length
    if length == 0 or end > len(buffer) or buffer[end - 1] != 0:
        raise ValueError(f"a string of length {length} at byte {at} is not terminated")
    return buffer[at : end - 1].decode("utf-8"), end


def write(message: Any, fields: Layout, little: bool = True) -> bytes:
    """``message`` (anything with the fields' attributes: an rclpy message, :class:`Fields`,
    arrays for primitive arrays and sequences) as CDR bytes, little-endian unless ``little``
    is False (what a big-endian host sends)."""
    out = bytearray(LITTLE_ENDIAN if little else _BIG_ENDIAN + b"\0\0")
    _write(out, message, fields, "<" if little else ">")
    return bytes(out)


def _pad(out: bytearray, size: int) -> None:
    out += bytes(-(len(out) - _HEADER) % size)


def _write(out: bytearray, message: Any, fields: Layout, order: str) -> None:
    pack = _U32[order == "<"].pack
    for name, kind, code, count, sub in fields:
        value = getattr(message, name)
        if kind in ("basic", "array", "sequence"):
            size = struct.calcsize(code)
            if kind == "basic":
                _pad(out, size)
                out += struct.pack(order + code, value)
                continue
            data = np.ascontiguousarray(value, order + code).reshape(-1)
            if kind == "array" and data.size != count:
                raise MessageError(f"field {name} takes {count} values, got {data.size}")
            if kind == "sequence":
                _pad(out, 4)
                out += pack(data.size)
            if data.size:
                _pad(out, size)
                out += data.tobytes()
        elif kind in ("string", "strings"):
            texts = [value] if kind == "string" else list(value)
            if kind == "strings" and count is None:
                _pad(out, 4)
                out += pack(len(texts))
            for text in texts:
                encoded = str(text).encode("utf-8")
                _pad(out, 4)
                out += pack(len(encoded) + 1)
                out += encoded + b"\0"
        else:
            nested, _ = sub
            items = [value] if kind == "message" else list(value)
            if kind == "messages" and count is None:
                _pad(out, 4)
                out += pack(len(items))
            for item in items:
                _write(out, item, nested, order)


def defaults(fields: Layout) -> Fields:
    """A message of ``fields`` with every field at its default (zeros, empty strings and
    sequences), to fill in and :func:`write`."""
    values: dict[str, Any] = {}
    for name, kind, code, count, sub in fields:
        if kind == "basic":
            values[name] = False if code == "?" else 0
        elif kind in ("array", "sequence"):
            values[name] = np.zeros(count or 0, "<" + code)
        elif kind == "string":
            values[name] = ""
        elif kind == "message":
            values[name] = defaults(sub[0])
        elif kind == "strings":
            values[name] = [""] * (count or 0)
        else:
            values[name] = [defaults(sub[0]) for _ in range(count or 0)]
    return Fields(**values)


def header_stamp_ns(payload: bytes) -> int | None:
    """The ``header.stamp`` of a message whose first field is a ``std_msgs/Header``, in
    nanoseconds (None for a payload too short to hold one)."""
    if len(payload) < _HEADER + 8:
        return None
    try:
        little = _endianness(payload)
    except MessageError:
        return None
    sec, nanosec = _STAMP[little].unpack_from(payload, _HEADER)
    return sec * 1_000_000_000 + nanosec
