"""leapp.spec.order: every runtime runs a pipeline's nodes in one order, producers first."""

from __future__ import annotations

import pytest

from leapp.errors import SpecError
from leapp.spec.order import execution_order


def test_producers_run_before_their_consumers():
    needs = {"post": {"policy"}, "policy": {"preprocess"}, "preprocess": set()}
    assert execution_order(needs, pipeline="p") == ["preprocess", "policy", "post"]


def test_independent_nodes_keep_the_listed_order():
    needs = {"b": set(), "a": set(), "c": {"a"}, "d": set()}
    assert execution_order(needs, pipeline="p") == ["b", "a", "c", "d"]


def test_a_cycle_names_its_nodes_in_feeding_order_and_points_to_feedback_flow():
    needs = {"x": set(), "a": {"c"}, "b": {"a", "x"}, "c": {"b"}, "d": {"c"}}
    with pytest.raises(SpecError) as caught:
        execution_order(needs, pipeline="p")
    assert str(caught.value) == (
        "pipeline 'p': data_flow has a cycle through nodes ['a', 'b', 'c'] (a feeds b, b feeds "
        "c, c feeds a); values that go back to an earlier node belong in feedback_flow"
    )


def test_a_node_reading_its_own_output_is_a_cycle():
    with pytest.raises(SpecError, match=r"nodes \['a'\] \(a feeds a\)"):
        execution_order({"a": {"a"}}, pipeline="p")


def test_a_producer_that_is_no_node_is_named():
    with pytest.raises(SpecError, match=r"node 'a' reads outputs of \['zz'\], which are no nodes"):
        execution_order({"a": {"zz"}, "b": set()}, pipeline="p")
