"""A simulated arm stays up while its running graph switches policies, in every deployment
mode, and every command it gets is right.

The MuJoCo arm of :mod:`support.sim` is driven in lockstep through the graph (as in
``test_closed_loop_faults.py``: JointState and Imu each tick, the joint targets awaited and
applied, one tick per control period), with ``ports.joint_targets.blend_s`` 0.1 s (5 commands)
on top of the hold, joint limits and ``max_step`` of :func:`support.closed_loop.params_document`.
Policy A runs (120 ticks: the arm settles from its start, where most commands are limited);
then, while ticks go on, every node's ``load`` is set to B (other weights:
:mod:`support.switch_policies`), until the status says ``switched``; then to F, whose every
result is NaN, until it says ``rolled_back``.

Every command is checked on arrival (:class:`support.switch_loop.SwitchLoop`): before the
take-over eager PyTorch of the running policy after the limits; from the take-over on the
blend from the last command to eager PyTorch of the new policy (of the old one again after a
rollback), after the limits. Every tick is answered, none is wrong, the take-over is the run
the status names, and the arm stays up. ``pytest -s`` prints the take-over tick and the
commands checked.
"""

from __future__ import annotations

import pytest
import yaml
from support.closed_loop import START, params_document
from support.sim import Arm, export_arm_policy, write_arm_model
from support.switch_loop import SwitchLoop
from support.switch_policies import export_arm_variant

from leapp_ros.testing import Deployment, GraphOptions, GraphUnderTest

pytestmark = [pytest.mark.ros, pytest.mark.slow]

BLEND_S = 0.1
COMMANDS = 5  # ceil(BLEND_S * 50 Hz)
NORMAL_TICKS = 30
# Before the first switch the arm settles near the policy's pose: while it moves in from START
# most commands are step-limited or clamped, and a limited command of the old policy can equal
# the first, limited, command of the blend (the check could not tell where the take-over is).
SETTLE_TICKS = 120
LIMIT_TICKS = 500  # the most ticks a switch may take to give its outcome
UP_FRACTION = 0.9
UP_DEVIATION = 0.35


@pytest.fixture(scope="module")
def exports(tmp_path_factory):
    return {
        "A": export_arm_policy(tmp_path_factory.mktemp("a")),
        "B": export_arm_variant(tmp_path_factory.mktemp("b"), seed=11),
        "F": export_arm_variant(tmp_path_factory.mktemp("f"), seed=13, failing=True),
    }


def switch(loop: SwitchLoop, path, toward, outcome: str) -> dict:
    """Set ``load`` to ``path`` on every node while ticking until the status says
    ``outcome``; the commands blend in ``toward``. The switch record."""
    loop.expect_take_over(toward)
    answers = loop.ask(path)

    def failed() -> bool:  # a tick unanswered or a command wrong: stop at once, say so
        return bool(loop.missing or loop.wrong)

    assert loop.run_until(lambda: loop.switch_state() == outcome or failed(), LIMIT_TICKS), (
        f"no {outcome!r} within {LIMIT_TICKS} ticks: {loop.latest_status().get('policy')}"
    )
    loop.run_until(lambda: loop.taken_over() or failed(), LIMIT_TICKS)
    assert not failed(), f"missing {loop.missing}, wrong {loop.wrong[:5]}"
    assert all(answer.done() and answer.result().results[0].successful for answer in answers)
    loop.run(NORMAL_TICKS)
    assert loop.taken_over(), "no take-over among the commands"
    return loop.latest_status()["policy"]["switch"]


@pytest.fixture(scope="module", params=list(Deployment), ids=str)
def run(request, exports, tmp_path_factory):
    folder = tmp_path_factory.mktemp(f"closed_loop_switch_{request.param}")
    document = params_document()
    document["/**"]["ros__parameters"]["ports"]["joint_targets"]["blend_s"] = BLEND_S
    params = folder / "params.yaml"
    params.write_text(yaml.safe_dump(document), encoding="utf-8")
    arm = Arm(write_arm_model(folder), START)
    options = GraphOptions(request.param, params_file=params)
    with (
        open(folder / "nodes.log", "w", encoding="utf-8") as log,
        GraphUnderTest(exports["A"].path, options, output=log) as graph,
    ):
        loop = SwitchLoop(graph, exports["A"].policy, arm, COMMANDS)
        loop.run(SETTLE_TICKS)
        to_b = switch(loop, exports["B"].path, exports["B"].policy, "switched")
        b_tick, b_command = loop.takeover_tick, loop.takeover_command
        to_f = switch(loop, exports["F"].path, exports["B"].policy, "rolled_back")
        f_tick, f_command = loop.takeover_tick, loop.takeover_command
    checked = loop.commands_so_far()
    print(
        f"\n[{request.param}] closed loop: switch A -> B took over at tick {b_tick} (run "
        f"{b_command}); F rolled back at tick {f_tick} (run {f_command}); {checked} commands "
        f"checked, wrong: {len(loop.wrong)}, missing: {len(loop.missing)}"
    )
    return loop, to_b, to_f, (b_command, f_command)


def test_every_command_through_a_switch_and_a_rollback_is_eager_blended(run):
    loop, _, _, _ = run
    assert not loop.wrong, f"{len(loop.wrong)} wrong commands:\n" + "\n".join(loop.wrong[:10])
    assert not loop.missing, f"ticks without a command: {loop.missing}"
    assert loop.commands_so_far() == loop.awaited > 0


def test_the_take_over_is_the_run_the_status_names(run):
    _, to_b, to_f, (b_command, f_command) = run
    assert to_b["first_run"]["policy"] == b_command
    assert to_f["first_run"]["policy"] == f_command
    assert "NaN/inf in output(s) ['joint_targets']" in to_f["reason"]


def test_the_arm_stays_up_through_the_switches(run):
    loop = run[0]
    floor = UP_FRACTION * loop.arm.reference_tip_height()
    assert loop.lowest_tip >= floor, f"the tip fell to {loop.lowest_tip:.3f} m (< {floor:.3f})"
    assert loop.largest_deviation <= UP_DEVIATION, f"a joint {loop.largest_deviation:.3f} rad off"
