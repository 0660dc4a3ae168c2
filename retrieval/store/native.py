"""Bulk rows on the wire, a column at a time: written as one ClickHouse Native block with numpy, read from Arrow.

The driver's own encoder turns every float of a vector into a Python object
and back; at 384 floats a vector that was most of a memory.set's cost. Here a
vector column is one numpy array written as it lies in memory (bench/ingest.py).
Only the column types the schema uses are encoded; anything else raises. Any Arrow answer decodes (`decode_arrow`
says how an Enum comes back).
"""

import base64
import re
from datetime import UTC, datetime, timedelta

import numpy as np
import pyarrow
import pyarrow.ipc

_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
_FIXED = {
    "UInt8": "<u1",
    "UInt16": "<u2",
    "UInt32": "<u4",
    "UInt64": "<u8",
    "Int8": "<i1",
    "Int16": "<i2",
    "Int32": "<i4",
    "Int64": "<i8",
    "Float32": "<f4",
    "Float64": "<f8",
    "Bool": "<u1",
}
_DATETIME64 = re.compile(r"^DateTime64\((\d)(?:,\s*'[^']*')?\)$")
_ENUM8 = re.compile(r"^Enum8\((.*)\)$")
_MAP = re.compile(r"^Map\((\w+),\s*(\w+)\)$")


def _varint(value: int) -> bytes:
    out = bytearray()
    while True:
        byte = value & 0x7F
        value >>= 7
        if value:
            out.append(byte | 0x80)
        else:
            out.append(byte)
            return bytes(out)


def _string(value: str | bytes) -> bytes:
    raw = value.encode() if isinstance(value, str) else value
    return _varint(len(raw)) + raw


def _strings(values) -> bytes:
    out = bytearray()
    for value in values:
        raw = value.encode() if isinstance(value, str) else value
        if len(raw) < 0x80:  # the usual case: a one-byte length
            out.append(len(raw))
        else:
            out += _varint(len(raw))
        out += raw
    return bytes(out)


def _wire_type(ch_type: str) -> str:
    """The type named in the block: LowCardinality is sent as its plain type, which the server converts."""
    match = re.match(r"^LowCardinality\((.*)\)$", ch_type)
    return _wire_type(match.group(1)) if match else ch_type


# Types whose values are encoded one after another, each on its own: a column one value fills is that value's bytes
# repeated. Not arrays, maps or nullables: their offsets and null masks come before the values.
_NESTED = ("Array(", "Map(", "Nullable(")


def encode_column(ch_type: str, values: list) -> bytes:
    ch_type = _wire_type(ch_type)
    if len(values) > 1 and not ch_type.startswith(_NESTED) and values.count(values[0]) == len(values):
        # A column one value fills (org, namespace, agent; a batch's timestamps): encoded once.
        return encode_column(ch_type, values[:1]) * len(values)
    if ch_type in _FIXED:
        return np.asarray(values, dtype=_FIXED[ch_type]).tobytes()
    if ch_type == "String":
        return _strings(values)
    if match := _DATETIME64.match(ch_type):
        scale = 10 ** int(match.group(1))
        return np.asarray([_ticks(value, scale) for value in values], dtype="<i8").tobytes()
    if match := _ENUM8.match(ch_type):
        codes = {name: int(code) for name, code in re.findall(r"'([^']*)'\s*=\s*(-?\d+)", match.group(1))}
        return np.asarray([codes[value] for value in values], dtype="<i1").tobytes()
    if ch_type.startswith("Nullable("):
        inner = ch_type[len("Nullable(") : -1]
        nulls = bytes(value is None for value in values)
        filler = _filler(inner, values)
        return nulls + encode_column(inner, [filler if value is None else value for value in values])
    if ch_type.startswith("Array("):
        inner = ch_type[len("Array(") : -1]
        if inner in _FIXED and values and isinstance(values[0], np.ndarray):
            offsets = np.cumsum([len(value) for value in values], dtype="<u8")
            flat = np.concatenate(values).astype(_FIXED[inner], copy=False) if offsets[-1] else np.zeros(0)
            return offsets.tobytes() + flat.tobytes()
        offsets = np.cumsum([len(value) for value in values], dtype="<u8")
        flat = [item for value in values for item in value]
        return offsets.tobytes() + encode_column(inner, flat)
    if match := _MAP.match(ch_type):
        key_type, value_type = match.group(1), match.group(2)
        offsets = np.cumsum([len(value) for value in values], dtype="<u8")
        pairs = [item for value in values for item in value.items()]
        return (
            offsets.tobytes()
            + encode_column(key_type, [k for k, _ in pairs])
            + encode_column(value_type, [v for _, v in pairs])
        )
    raise TypeError(f"no Native encoding for column type {ch_type}")


def _ticks(value: datetime, scale: int) -> int:
    return round((_aware(value) - _EPOCH).total_seconds() * scale)


def as_stored(value: datetime | None, digits: int = 3) -> datetime | None:
    """The moment a DateTime64(digits) column keeps of `value` (what a read gives back)."""
    if value is None:
        return None
    scale = 10**digits
    return _EPOCH + timedelta(microseconds=_ticks(value, scale) * 1_000_000 // scale)


def _aware(value: datetime) -> datetime:
    return value if value.tzinfo else value.replace(tzinfo=UTC)  # naive timestamps are UTC here


def _filler(ch_type: str, values: list):
    present = next((value for value in values if value is not None), None)
    if present is not None:
        return present
    return _EPOCH if ch_type.startswith("DateTime64") else ("" if ch_type == "String" else 0)


def encode_block(columns: list[tuple[str, str, list]]) -> bytes:
    """A Native block: (name, ClickHouse type, values) per column, every column the same length."""
    rows = len(columns[0][2]) if columns else 0
    parts = [_varint(len(columns)), _varint(rows)]
    for name, ch_type, values in columns:
        parts += [_string(name), _string(_wire_type(ch_type)), encode_column(ch_type, values)]
    return b"".join(parts)


def decode_arrow(data: bytes) -> list[tuple]:
    """Rows of an ArrowStream answer, decoded a column at a time by pyarrow: float arrays as numpy arrays (each row
    its own), timestamps as UTC datetimes. An Enum comes back as its number (Arrow has none): select it as a string.

    Decoded value by value in Python, as RowBinary, a million-row mirror load spent ~45% of its time here.
    """
    table = pyarrow.ipc.open_stream(data).read_all()
    return list(zip(*(_values(column.combine_chunks()) for column in table.columns)))


def _values(column: pyarrow.Array) -> list:
    # Numbers are read from the column's buffers: pyarrow's own conversions to numpy (and to aware datetimes) import
    # pandas, which aborts the interpreter at its exit when a daemon thread (a mirror's load) imported it.
    kind = column.type
    if pyarrow.types.is_list(kind) and pyarrow.types.is_floating(kind.value_type):
        # One copy of the column, each row a view of it: a copy a row took a mirror's load ~5% of its time.
        flat = _fixed(column.values, f"<f{kind.value_type.bit_width // 8}").copy()
        offsets = _fixed(column.offsets, "<i4").tolist()
        return [flat[start:end] for start, end in zip(offsets, offsets[1:])]
    if pyarrow.types.is_timestamp(kind):
        valid = np.ones(len(column), bool)
        if column.null_count:
            bits = np.unpackbits(np.frombuffer(column.buffers()[0], np.uint8), bitorder="little")
            valid = bits[column.offset : column.offset + len(column)].astype(bool)
        ticks = np.where(valid, _fixed(column, "<i8"), 0).astype(f"datetime64[{kind.unit}]")
        moments = ticks.astype("datetime64[us]").astype(object).tolist()
        return [moment.replace(tzinfo=UTC) if ok else None for moment, ok in zip(moments, valid.tolist())]
    return column.to_pylist()


def _fixed(array: pyarrow.Array, dtype: str) -> np.ndarray:
    """A fixed-width array's values, a view of its data buffer."""
    return np.frombuffer(array.buffers()[1], dtype)[array.offset : array.offset + len(array)]


def bind_vectors(args: tuple, kwargs: dict) -> tuple[tuple, dict]:
    """A numpy parameter `{name:Array(Float32)}` travels as base64 of its float32 bytes, spliced into the statement
    as a heredoc and reinterpreted by the engine: the driver formats a list parameter float by float, many times
    slower (docs/benchmarks.md)."""
    sql, params = args[0], kwargs["parameters"]
    vectors = {name for name, value in params.items() if isinstance(value, np.ndarray)}
    if not vectors:
        return args, kwargs
    params, spliced = dict(params), 0
    for name in vectors:
        placeholder = f"{{{name}:Array(Float32)}}"
        if placeholder not in sql:
            raise ValueError(f"numpy parameter {name!r} must be bound as {placeholder}")
        sql = sql.replace(placeholder, f"reinterpret(base64Decode(${name}$), 'Array(Float32)')")
        blob = params[f"${name}$"] = base64.b64encode(np.ascontiguousarray(params.pop(name), dtype="<f4").tobytes())
        spliced += len(blob) + 2 * len(name) + 4
    settings = {**kwargs.get("settings", {}), "max_query_size": len(sql) + spliced + 262144}
    return (sql, *args[1:]), {**kwargs, "parameters": params, "settings": settings}
