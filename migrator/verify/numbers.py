"""The numbers in a line of output, and when two printed numbers agree.

A line is split into its template (the text with each number replaced by `{}`) and its
numbers. Numbers that change from run to run whatever the training does are marked volatile
and never compared: durations and rates (`3.2s`, `12 it/s`, after `time`/`took`/`eta`),
memory sizes, dates and clock times, addresses. Digits inside words (`fc1`, `conv2d`) and
version strings (`2.13.0`) are text.

Two printed numbers agree within the losses' tolerances (atol + rtol·|original|) plus one
unit of the last digit printed: a value printed with 3 decimals moves by 0.001 when rounding
differences of 1e-7 cross a rounding boundary.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass

UNITS = r"s|ms|us|µs|ns|sec|secs|min|mins|h|hrs|it/s|s/it|[KMGT]i?B"
NUMBER = re.compile(
    rf"(?<![\w.])[-+]?(?:\d+\.\d*|\.\d+|\d+)(?:[eE][-+]?\d+)?(?=(?:{UNITS})?(?!\w))(?!\.\d)"
    r"|(?<![\w.])[-+]?(?i:nan|inf)(?!\w)",
)
CLOCK = re.compile(
    r"\d{4}-\d{2}-\d{2}(?:[T ]\d{1,2}:\d{2}(?::\d{2}(?:[.,]\d+)?)?)?"
    r"|\b\d{1,2}:\d{2}(?::\d{2}(?:[.,]\d+)?)?\b|0x[0-9a-fA-F]+"
)
# HF Accelerate's logger prefixes each message on N processes; the original has no such prefix
RANK_PREFIX = re.compile(r"\[RANK \d+\] ")
UNIT_AFTER = re.compile(
    r"\s?(?:s|sec|secs|seconds?|ms|us|µs|ns|min|mins|minutes?|h|hrs?|hours?|it/s|s/it|"
    r"samples/s|img/s|ex/s|/s|[KMGT]i?B|bytes)(?!\w)",
)
VOLATILE_BEFORE = re.compile(
    r"(?:time|took|elapsed|eta|duration|speed|throughput|memory|mem|seconds?|secs?|pid|"
    r"seed|date)\W{0,3}$",
    re.IGNORECASE,
)
PLACEHOLDER = "{}"


@dataclass
class Line:
    text: str
    template: str
    numbers: list[float]
    printed: list[str]  # each number as printed
    volatile: list[bool]
    step: int = 0  # optimizer steps made when it was shown


def parse_line(text: str, step: int = 0) -> Line:
    text = RANK_PREFIX.sub("", text)
    masked = CLOCK.sub(lambda m: "#" * len(m.group()), text)
    template, numbers, printed, volatile, last = [], [], [], [], 0
    for match in NUMBER.finditer(masked):
        token = text[match.start() : match.end()]
        template.append(masked[last : match.start()])
        template.append(PLACEHOLDER)
        last = match.end()
        numbers.append(float(token))
        printed.append(token)
        volatile.append(
            bool(UNIT_AFTER.match(masked, match.end()))
            or bool(VOLATILE_BEFORE.search(masked[: match.start()]))
        )
    template.append(masked[last:])
    return Line(text, "".join(template).strip(), numbers, printed, volatile, step)


def last_digit(printed: str) -> float:
    """The value of one unit in the last digit printed: 0.001 for `0.734`, 1 for `42`."""
    mantissa, _, exponent = printed.lower().partition("e")
    decimals = len(mantissa.split(".", 1)[1]) if "." in mantissa else 0
    try:
        scale = int(exponent) if exponent else 0
    except ValueError:
        scale = 0
    return 10.0 ** (scale - decimals)


def agree(original: float, migrated: float, printed: tuple[str, str], rtol, atol) -> bool:
    if math.isnan(original) or math.isnan(migrated):
        return math.isnan(original) and math.isnan(migrated)
    if math.isinf(original) or math.isinf(migrated):
        return original == migrated
    unit = max(last_digit(printed[0]), last_digit(printed[1]))
    return abs(migrated - original) <= atol + rtol * abs(original) + unit


def show(line: Line, index: int) -> str:
    """The line with its index-th number left out: `epoch 3: test accuracy …`."""
    count, out = 0, []
    for piece in re.split(r"(\{\})", line.template):
        if piece == PLACEHOLDER:
            out.append("…" if count == index else line.printed[count])
            count += 1
        else:
            out.append(piece)
    text = "".join(out).strip()
    return text if len(text) <= 100 else text[:97] + "..."
