"""A node joins only messages of one tick, however they interleave: the rule of
:mod:`leapp_ros.node.input_sets`, on a join's data path driven message by message (no DDS:
each case is one exact order of arrival, which a live graph under load produces only now and
then; ``test_coherent_sets.py`` runs it live).

The node ``d`` has two data-flow triggers, ``u`` and ``v``; a message is ``(value, tick)``.
"""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np

from leapp_ros.node.data_path import NodeData
from leapp_ros.node.input_sets import TICK_DEPTH, InputSets
from leapp_ros.plan.pipeline import InputPlan, NodePlan

F32 = "std_msgs/msg/Float32MultiArray"


def port(name, source):
    return InputPlan(name, "data_flow", source, F32, "float32", (1,), source=source)


class Join:
    """``d``'s data path with one callback per trigger; ``fired`` holds ``(u, v, tick)`` of
    every run, ``skipped`` what kept a set from running (as the node's ``_fire_on_inputs``)."""

    def __init__(self, newest_v: bool = False):
        inputs = (port("u", "b/u"), port("v", "c/v"))
        plan = NodePlan("d", None, inputs, ())  # type: ignore[arg-type]
        self.data = NodeData(plan=plan, call=lambda values: [], values=[None, None])
        triggers = frozenset({0} if newest_v else {0, 1})
        newest = {1: (self.data, 1)} if newest_v else {}
        self.sets = InputSets(triggers, newest)
        self.fired: list[tuple[float, float, int | None]] = []
        self.skipped: list = []
        self.warnings: list[str] = []
        self.callbacks = {
            name: self._callback(index, name) for index, name in enumerate(("u", "v"))
        }

    def _callback(self, index, name):
        reader = SimpleNamespace(indices=[index], topic=name, resolved=f"/p/{name}")
        return self.data.input_callback(
            reader,
            lambda message: [np.array([message[0]], np.float32)],
            keys=[index],
            sets=self.sets,
            fire=self._fire,
            warn=lambda key, text: self.warnings.append(text),
            check_nonfinite=True,
            tick_of=lambda message: message[1],
        )

    def _fire(self, now):
        unusable = self.sets.unusable(now)
        self.sets.reset()  # as the node does before it runs, or skips
        if unusable is not None:
            self.skipped.append(unusable)
            return
        u, v = (float(value[0]) for value in self.data.values)
        self.fired.append((u, v, self.sets.tick()))

    def send(self, *messages):
        for name, value, tick in messages:
            self.callbacks[name]((value, tick))


def test_a_join_pairs_the_messages_of_one_tick_however_they_interleave():
    join = Join()
    join.send(("u", 1.0, 1), ("u", 2.0, 2), ("v", 10.0, 1), ("v", 20.0, 2))
    assert join.fired == [(1.0, 10.0, 1), (2.0, 20.0, 2)]


def test_messages_of_different_ticks_are_never_joined():
    join = Join()
    join.send(("u", 1.0, 1), ("v", 20.0, 2))
    assert join.fired == [] and "different instants" in join.warnings[-1]
    join.send(("u", 2.0, 2))
    assert join.fired == [(2.0, 20.0, 2)]


def test_a_branch_up_to_tick_depth_messages_ahead_still_pairs():
    join = Join()
    join.send(*(("u", float(tick), tick) for tick in range(TICK_DEPTH)))
    join.send(("v", -1.0, 0))
    assert join.fired == [(0.0, -1.0, 0)]


def test_a_tick_of_a_rejected_message_is_never_joined():
    join = Join()
    join.send(("u", float("nan"), 1), ("v", 10.0, 1))  # NaN: the instant is spoilt
    assert join.fired == [] and join.data.incomplete_sets == 1
    join.send(("u", 2.0, 2), ("v", 20.0, 2))
    assert join.fired == [(2.0, 20.0, 2)]


def test_partners_without_ticks_are_gathered_by_arrival():
    join = Join()
    join.send(("u", 1.0, 5), ("v", 10.0, None))
    assert join.fired == [(1.0, 10.0, 5)], "the run carries the tick it has"
    join.send(("u", 2.0, None), ("u", 3.0, None), ("v", 30.0, None))
    assert join.fired[-1] == (3.0, 30.0, None), "the newest message of each, as before"


def test_a_newest_value_input_is_used_whatever_its_tick():
    join = Join(newest_v=True)
    join.send(("v", 10.0, 7), ("u", 1.0, 1), ("u", 2.0, 2))
    assert join.fired == [(1.0, 10.0, 1), (2.0, 10.0, 2)] and join.skipped == []


def test_a_newest_value_input_that_never_came_makes_the_run_unusable():
    join = Join(newest_v=True)
    join.send(("u", 1.0, 1))
    (unusable,) = join.skipped
    assert unusable.missing and join.fired == []
    assert unusable.describe() == "node 'd': newest-value input 'v' has not arrived yet"
