"""The tick of a MultiArray: which instant its values belong to, in its first layout label.

A ``std_msgs`` MultiArray has no header. To say which instant its values are of, a message
carries a *tick* (a whole number, larger for later instants: a tick counter, or a stamp in
nanoseconds) after an ``@`` at the end of its first dimension's label::

    layout:
      dim:
      - label: dim0@1733400000123456789   # (the packed input: state@42, velocity, ...)
        size: 6
        stride: 6
      data_offset: 0
    data: [...]

Sizes, strides and data stay exactly as without a tick, so any MultiArray reader (``ros2
topic echo``, a bag, NumPy) reads the same tensor. The label is the one free-text field of a
MultiArray: ``data_offset`` tells every reader where the data starts, and a second topic beside
the data (or a message type with a header, which a ROS 2 install from pip cannot build) would
be a second message to pair with the first, the very problem ticks solve.

A node reads the tick of every MultiArray input (:func:`label_tick`) and writes the tick of the
set it ran on into every MultiArray output (:func:`tick_label`), so the values computed from one
instant carry its tick from node to node. A tensor without axes (shape ``[]``) has no label,
hence no tick. Labels without ``@<digits>`` at their end carry none.
"""

from __future__ import annotations

__all__ = ["MARK", "label_tick", "tick_label"]

MARK = "@"


def tick_label(label: str, tick: int | None) -> str:
    """``label`` carrying ``tick`` (``label`` itself for None)."""
    return label if tick is None else f"{label}{MARK}{tick}"


def label_tick(label: str) -> int | None:
    """The tick at the end of ``label`` (``dim0@42``: 42), None when it carries none."""
    at = label.rfind(MARK)
    if at < 0:
        return None
    digits = label[at + 1 :]
    if not digits.isascii() or not digits.isdigit():
        return None
    return int(digits)
