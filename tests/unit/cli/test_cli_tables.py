"""broker/cli/tables.py: columns line up, values print the same way everywhere."""
import pytest

from broker.cli.tables import cell_text, format_table


def test_columns_align_to_the_widest_cell_with_two_space_gaps():
    text = format_table(["ID", "ADDRESS"], [[1, "127.0.0.1:9092"], [10, "h:1"]])
    assert text.splitlines() == ["ID  ADDRESS", "1   127.0.0.1:9092", "10  h:1"]


def test_right_aligned_columns_pad_on_the_left():
    text = format_table(["NAME", "HW"], [["a", 5], ["b", 1234]], right=[1])
    assert text.splitlines() == ["NAME    HW", "a        5", "b     1234"]


def test_lines_carry_no_trailing_spaces():
    text = format_table(["A", "B"], [["long value", ""], ["x", None]])
    assert all(line == line.rstrip() for line in text.splitlines())


def test_no_rows_prints_the_header_only():
    assert format_table(["ID", "STATE"], []) == "ID  STATE"


def test_short_rows_are_padded_and_long_rows_refused():
    assert format_table(["A", "B"], [["x"]]).splitlines()[1] == "x"
    with pytest.raises(ValueError):
        format_table(["A"], [["x", "y"]])


def test_indent_prefixes_every_line():
    assert all(line.startswith("    ") for line in
               format_table(["A"], [["x"]], indent="    ").splitlines())


@pytest.mark.parametrize("value, text", [
    (None, "-"), (True, "yes"), (False, "no"), ([1, 2, 3], "1,2,3"), ([], "-"),
    ((4,), "4"), (0, "0"), ("OnlineReplica", "OnlineReplica"),
])
def test_cell_text(value, text):
    assert cell_text(value) == text
