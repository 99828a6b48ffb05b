"""Numbers in printed lines: templates, what is never compared, printed precision."""

from __future__ import annotations

import math

import pytest

from migrator.verify.numbers import agree, last_digit, parse_line, show


def test_a_line_splits_into_its_template_and_numbers():
    line = parse_line("epoch 3: test accuracy 0.734, loss 1.2e-03")
    assert line.template == "epoch {}: test accuracy {}, loss {}"
    assert line.numbers == [3.0, 0.734, 0.0012]
    assert line.printed == ["3", "0.734", "1.2e-03"]


@pytest.mark.parametrize(
    "text",
    ["fc1.weight shape 4", "conv2d layer", "torch 2.13.0 ready", "address 0x7f3a2b"],
)
def test_digits_inside_words_versions_and_addresses_are_text(text):
    line = parse_line(text)
    assert line.numbers == ([4.0] if "shape" in text else [])


def test_durations_rates_and_clock_times_are_never_compared():
    line = parse_line("2024-05-01 12:33:01,206 epoch 1 took 3.2s (12 it/s), eta 40, loss 0.5")
    compared = [n for n, volatile in zip(line.numbers, line.volatile) if not volatile]
    assert compared == [1.0, 0.5]
    assert (
        parse_line("2024-06-02 08:01:59,999 epoch 1").template
        == parse_line("2024-05-01 12:33:01,206 epoch 1").template
    )


def test_hf_accelerates_rank_prefix_is_not_part_of_the_line():
    assert parse_line("INFO [RANK 0] epoch 2: loss 0.1").template == "INFO epoch {}: loss {}"


def test_nan_and_inf_are_numbers():
    assert [math.isnan(v) or math.isinf(v) for v in parse_line("loss nan grad inf").numbers] == [
        True,
        True,
    ]


def test_one_unit_of_the_last_printed_digit_is_rounding():
    assert last_digit("0.734") == pytest.approx(1e-3)
    assert last_digit("42") == 1
    assert last_digit("1.25e-05") == pytest.approx(1e-7)
    assert agree(0.734, 0.735, ("0.734", "0.735"), 1e-5, 1e-6)
    assert not agree(0.734, 0.736, ("0.734", "0.736"), 1e-5, 1e-6)
    assert not agree(0.734, 1.468, ("0.734", "1.468"), 1e-5, 1e-6)


def test_show_leaves_the_compared_number_out():
    assert show(parse_line("epoch 3: test accuracy 0.734"), 1) == "epoch 3: test accuracy …"
