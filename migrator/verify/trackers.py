"""Logs and trackers a script writes, read back as lines of numbers (`numbers.Line`), so that
they are compared as its printed output is (`outputs.compare_stream`).

Read from each run's working folder (`sandbox.py`) after the runs: CSV/TSV (a column whose
header names a time is volatile), JSON (every number by its path), JSON lines, plain text
logs (`.log`, `.txt`) and TensorBoard event files (scalars: tag, step, value; the records
and the protobuf wire format are read here, without tensorboard). A file that does not
parse is left out; a file over MAX_BYTES too.
"""

from __future__ import annotations

import csv
import io
import json
import re
import struct
from pathlib import Path

from migrator.verify.numbers import PLACEHOLDER, Line, parse_line

MAX_BYTES = 5_000_000
MAX_LINES = 5000
TEXT_SUFFIXES = (".log", ".txt")
TABLE_SUFFIXES = {".csv": ",", ".tsv": "\t"}
JSON_SUFFIXES = (".json", ".jsonl")
EVENTS = "tfevents"
TIME_NAME = re.compile(r"time|elapsed|duration|date|wall|sec|speed|throughput", re.IGNORECASE)


def is_tracker(path: str) -> bool:
    name = Path(path).name.lower()
    return EVENTS in name or name.endswith(TEXT_SUFFIXES + tuple(TABLE_SUFFIXES) + JSON_SUFFIXES)


def read_tracker(path: Path) -> list[Line] | None:
    """The file's lines of numbers, or None when it cannot be read."""
    try:
        if not path.is_file() or path.stat().st_size > MAX_BYTES:
            return None
        data = path.read_bytes()
    except OSError:
        return None
    name = path.name.lower()
    try:
        if EVENTS in name:
            return _event_lines(data)
        text = data.decode("utf-8")
        suffix = path.suffix.lower()
        if suffix in TABLE_SUFFIXES:
            return _table_lines(text, TABLE_SUFFIXES[suffix])
        if suffix == ".jsonl":
            lines = []
            for raw in text.splitlines():
                if raw.strip():
                    lines.extend(_json_lines(json.loads(raw)))
            return lines[:MAX_LINES]
        if suffix == ".json":
            return _json_lines(json.loads(text))[:MAX_LINES]
        return [parse_line(raw) for raw in text.splitlines()[:MAX_LINES] if raw.strip()]
    except (ValueError, UnicodeDecodeError, struct.error, IndexError):
        return None


def _number(cell: str) -> float | None:
    try:
        return float(cell)
    except ValueError:
        return None


def _table_lines(text: str, delimiter: str) -> list[Line]:
    rows = list(csv.reader(io.StringIO(text), delimiter=delimiter))[:MAX_LINES]
    header: list[str] = []
    lines = []
    for row in rows:
        if not header and row and all(_number(cell) is None for cell in row):
            header = row
            continue
        template, numbers, printed, volatile = [], [], [], []
        for index, cell in enumerate(row):
            value = _number(cell.strip())
            if value is None:
                template.append(cell)
                continue
            template.append(PLACEHOLDER)
            numbers.append(value)
            printed.append(cell.strip())
            name = header[index] if index < len(header) else ""
            volatile.append(bool(TIME_NAME.search(name)))
        if numbers:
            lines.append(
                Line(delimiter.join(row), delimiter.join(template), numbers, printed, volatile)
            )
    return lines


def _json_lines(value, path: str = "") -> list[Line]:
    if isinstance(value, dict):
        return [line for key, item in value.items() for line in _json_lines(item, f"{path}.{key}")]
    if isinstance(value, list):
        return [line for i, item in enumerate(value) for line in _json_lines(item, f"{path}[{i}]")]
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return []
    key = path.lstrip(".")
    printed = repr(value)
    return [
        Line(
            f"{key}: {printed}",
            f"{key}: {PLACEHOLDER}",
            [float(value)],
            [printed],
            [bool(TIME_NAME.search(key.rsplit(".", 1)[-1]))],
        )
    ]


# ---- TensorBoard: TFRecord framing, Event / Summary messages ----------------------------


def _event_lines(data: bytes) -> list[Line]:
    lines, offset = [], 0
    while offset + 12 <= len(data) and len(lines) < MAX_LINES:
        (length,) = struct.unpack_from("<Q", data, offset)
        record = data[offset + 12 : offset + 12 + length]
        offset += 12 + length + 4  # length, its crc, the record, its crc
        step, values = _event(record)
        for tag, value in values:
            printed = f"{value!r}"
            lines.append(
                Line(
                    f"{tag} step {step}: {printed}",
                    f"{tag} step {step}: {{}}",
                    [value],
                    [printed],
                    [False],
                )
            )
    return lines


def _fields(data: bytes):
    """(field number, wire type, value) of a protobuf message."""
    offset = 0
    while offset < len(data):
        key, offset = _varint(data, offset)
        number, wire = key >> 3, key & 7
        if wire == 0:
            value, offset = _varint(data, offset)
        elif wire == 1:
            value, offset = data[offset : offset + 8], offset + 8
        elif wire == 2:
            size, offset = _varint(data, offset)
            value, offset = data[offset : offset + size], offset + size
        elif wire == 5:
            value, offset = data[offset : offset + 4], offset + 4
        else:
            raise ValueError(f"protobuf wire type {wire}")
        yield number, wire, value


def _varint(data: bytes, offset: int) -> tuple[int, int]:
    result, shift = 0, 0
    while True:
        byte = data[offset]
        offset += 1
        result |= (byte & 0x7F) << shift
        if not byte & 0x80:
            return result, offset
        shift += 7


def _event(record: bytes) -> tuple[int, list[tuple[str, float]]]:
    """Event: step = 2, summary = 5; Summary.value = 1; Value: tag = 1, simple_value = 2."""
    step, values = 0, []
    for number, wire, value in _fields(record):
        if number == 2 and wire == 0:
            step = value
        elif number == 5 and wire == 2:
            for field_number, field_wire, item in _fields(value):
                if field_number != 1 or field_wire != 2:
                    continue
                tag, scalar = None, None
                for part, part_wire, content in _fields(item):
                    if part == 1 and part_wire == 2:
                        tag = content.decode("utf-8", "replace")
                    elif part == 2 and part_wire == 5:
                        (scalar,) = struct.unpack("<f", content)
                if tag is not None and scalar is not None:
                    values.append((tag, float(scalar)))
    return step, values
