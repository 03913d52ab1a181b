"""A closed loop at the robot's rates, in every deployment mode: a MuJoCo arm with a 500 Hz PD
position controller on the graph's interpolated 500 Hz targets from a 50 Hz policy, joint
states and IMU at 500 Hz (stamped, gathered ``sync: exact``) and a ``cmd_vel`` at 10 Hz as a
newest-value input, through a 0.3 s IMU dropout, a ``cmd_vel`` that stops for 1 s and the joint
states dropping to 250 Hz and then 100 Hz (``bench/rate_drive.py``: ``FAULTS``).

The graph (``bench/rate_arm.py``): ``preprocess`` fires on the JointState and Imu of one
stamp (``triggers`` the five sensor ports, ``sync: exact``; the command is a newest-value
input); ``policy`` runs on its own 50 Hz timer (the spec's ``node_frequency``) on the newest
observation, and plays ``joint_targets`` out at 500 Hz (``output_rate_hz``), in a straight
line from the last target to each result over one policy period (``interpolate: linear``: 10
targets). A fused node runs every node per tick, at one rate: its ticks come from a 50 Hz
timer and take the newest whole set of one stamp (``firing: timer`` with ``sync: exact``).
The same rule runs in a ``leapp_node`` too: one process per node once more, ``preprocess`` on
that timer and ``policy`` on each observation.

Every message is recorded both ways and checked after the run (``bench/rate_check.py``): each
``action`` is eager PyTorch on the JointState and Imu of one stamp and a command (the newest
when it ran: sent before the instant, or after it for a set that waited); else it is counted
mixed, when a JointState and an Imu of different stamps give it, or wrong. Each target is the
documented interpolation of the eager ``joint_targets`` of those inputs.
"""

from __future__ import annotations

from types import SimpleNamespace

import pytest
from rate_arm import export_rate_arm, loop_parameters
from rate_check import check_targets, identify
from rate_drive import FAULTS
from rate_loop import run_graph

from leapp_ros.testing import Deployment

pytestmark = [pytest.mark.ros, pytest.mark.slow]

STEPS = 10  # targets per policy period: 500 Hz over 50 Hz


@pytest.fixture(scope="module")
def arm_export(tmp_path_factory):
    return export_rate_arm(tmp_path_factory.mktemp("rate_arm"))


def sets_on_a_timer() -> dict:
    """The loop's parameters with the rule the other way round: ``preprocess`` on a 50 Hz
    timer taking the newest whole set of one stamp (``sync: exact``), ``policy`` on each
    observation (its targets still over the spec's 50 Hz period)."""
    document = loop_parameters()
    document["/rate_arm/preprocess"]["ros__parameters"].update(firing="timer", rate_hz=50.0)
    document["/rate_arm/policy"]["ros__parameters"]["firing"] = "inputs"
    return document


GRAPHS = [(mode, None) for mode in Deployment] + [(Deployment.PROCESSES, sets_on_a_timer)]


@pytest.fixture(
    scope="module",
    params=GRAPHS,
    ids=[f"{mode}{'' if rule is None else '-sets-on-a-timer'}" for mode, rule in GRAPHS],
)
def run(request, arm_export, tmp_path_factory):
    """The loop run through the faults once in a deployment: the record and what it proves."""
    mode, rule = request.param
    name = f"{mode}{'' if rule is None else '-sets-on-a-timer'}"
    folder = tmp_path_factory.mktemp(f"rate_loop_{name}")
    record = run_graph(arm_export.path, mode, folder, FAULTS, rule and rule())
    found = identify(record)
    targets = [value for _, value in record.targets]
    checked, problems = check_targets(found.targets, targets, STEPS)
    print(
        f"\nrate loop {name}: {len(targets)} targets, {checked} checked, "
        f"{len(record.results)} results, {len(found.mixed)} mixed, {len(found.wrong)} wrong, "
        f"lag dropped {record.lag_dropped_s:.3f} s, largest deviation "
        f"{record.largest_deviation:.3f} rad"
    )
    return SimpleNamespace(record=record, found=found, checked=checked, problems=problems)


def test_every_target_is_eager_pytorch_and_the_interpolation_of_its_inputs(run):
    targets, results = len(run.record.targets), len(run.record.results)
    assert run.problems == [], run.problems
    assert run.checked == targets, f"{run.checked} of {targets} checked"
    assert targets > results > 0, f"{targets} targets for {results} results: no ramp to check"


def test_no_result_is_computed_from_a_joint_state_and_an_imu_of_different_instants(run):
    found = run.found
    assert len(found.sets) == len(run.record.results) > 0
    assert (found.mixed, found.wrong) == ([], [])


def test_each_result_uses_an_instant_no_older_than_the_one_before(run):
    stamps = [stamp for stamp, _ in filter(None, run.found.sets)]
    assert stamps == sorted(stamps), "a result came from an older instant than the one before"


def test_the_policy_runs_on_fresh_instants_after_every_fault(run):
    record, sets = run.record, list(filter(None, run.found.sets))
    steps = [record.step_of[stamp] for stamp, _ in sets]
    dropout, stop = FAULTS.imu_dropout, FAULTS.twist_stop
    assert any(dropout[1] <= s < stop[0] for s in steps), "nothing after the IMU dropout"
    for start, end, every in FAULTS.joint_rates:  # (only stamps with both can be found)
        assert any(start <= s < end for s in steps), f"nothing with joint states at 1/{every}"
    last_before_stop = max(i for i, (s, _) in enumerate(record.twists) if s < stop[0])
    # instants well inside the stop (one late in it may meet the next command, sent before it)
    inside = range(stop[0] + 50, stop[1] - 50)
    during = {command for stamp, command in sets if record.step_of[stamp] in inside}
    assert during == {last_before_stop}, "the newest command while cmd_vel was stopped"
    assert any(record.step_of[stamp] >= FAULTS.joint_rates[-1][1] for stamp, _ in sets)
