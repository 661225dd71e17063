"""Names from files reach the terminal with bidirectional-text controls escaped as control characters are: a
right-to-left override (U+202E) in a graph's name was printed raw and reversed the rest of the line on screen."""

from gplace.cli import _encodable, _escaped

BIDI = ["\u202e", "\u202a", "\u2066", "\u2069", "\u200f", "\u061c", "\u2028"]


def test_bidi_controls_and_line_separators_are_escaped():
    for char in BIDI:
        assert char not in _escaped(f"g{char}x") and char not in _encodable(f"g{char}x")
    assert _escaped("g\u202ex") == "g\\u202ex"


def test_right_to_left_letters_are_kept():
    assert _escaped("שלום مرحبا") == "שלום مرحبا"
