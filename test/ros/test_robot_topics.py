"""The robot example over real DDS, against a simulated robot's own topic names.

examples/robot_policy.py runs as its live ROS graph (one process per node, and composed), its
topics remapped with plain ROS remap rules to /joint_states, /imu/data, /cmd_vel and
/leg_controller/commands, the policy's targets sent in a forward controller's joint order (a
``ports.joint_targets.order`` parameter). A probe plays the robot: JointState with the joints
shuffled (and a joint the policy does not use), Imu, Twist; the commands must equal eager
PyTorch's. Bad messages are counted and dropped. The processes graph runs with the default
``on_nonfinite: drop``, the composed one with ``publish``. The nodes keep their deployed QoS:
the robot's messages go once each, on hops matched both ways, and "no command" is checked once
the nodes' statuses count the messages taken.
"""

from __future__ import annotations

import array
import collections
import random

import pytest
import torch
import yaml
from support.robot import eager_targets, export_robot
from support.ros import exited, ros_graph

from leapp_ros.run.deployment import Deployment, GraphOptions
from leapp_ros.run.processes import load_plan, plan_processes

pytestmark = pytest.mark.ros

NAMESPACE = "/robot_policy"
CONTROLLER = ["hip_l", "hip_r", "knee_l", "knee_r", "ankle_l", "ankle_r"]
REMAPS = (
    "preprocess/joint_states:=/joint_states",
    "preprocess/imu:=/imu/data",
    "preprocess/cmd_vel:=/cmd_vel",
    "policy/joint_targets:=/leg_controller/commands",
)


@pytest.fixture(scope="module")
def robot(tmp_path_factory):
    return export_robot(tmp_path_factory.mktemp("robot"))


def _params(path, on_nonfinite):
    document = {
        "/**": {"ros__parameters": {"on_nonfinite": on_nonfinite}},
        f"{NAMESPACE}/policy": {
            "ros__parameters": {"ports": {"joint_targets": {"order": CONTROLLER}}}
        },
    }
    path.write_text(yaml.safe_dump(document), encoding="utf-8")
    return path


@pytest.fixture(scope="module", params=[Deployment.PROCESSES, Deployment.COMPOSED], ids=str)
def live(request, robot, tmp_path_factory):
    from geometry_msgs.msg import Twist
    from sensor_msgs.msg import Imu, JointState
    from std_msgs.msg import Float64MultiArray

    composed = request.param is Deployment.COMPOSED
    tmp = tmp_path_factory.mktemp("robot_run")
    params = _params(tmp / "params.yaml", "publish" if composed else "drop")
    plan = load_plan(robot.path, params_file=params)
    options = GraphOptions(request.param, params_file=params, remaps=REMAPS)
    processes = plan_processes(plan, options)
    starts = [(process.module, process.argv()[3:]) for process in processes]
    with ros_graph(tmp, starts) as (probe, running, _):
        robot_side = {
            "joints": probe.publisher("/joint_states", JointState),
            "imu": probe.publisher("/imu/data", Imu),
            "twist": probe.publisher("/cmd_vel", Twist),
        }
        commands = probe.subscribe("/leg_controller/commands", Float64MultiArray)
        status = probe.wait_connected(NAMESPACE, ["preprocess", "policy"], check=exited(running))
        yield _Robot(robot, probe, robot_side, commands, status, composed, running)


class _Robot:
    """The probe playing the robot: sends sensor messages, receives commands."""

    def __init__(self, robot, probe, publishers, commands, status, composed, running):
        self.export, self.probe, self.publishers = robot, probe, publishers
        self.commands, self.status, self.composed = commands, status, composed
        self.running = running
        self.random = random.Random(0)
        self.sent = collections.Counter()  # messages published per topic

    def send(self, pos, vel, gyro, quat, command, *, order=None, drop_joint=None, short=False):
        from geometry_msgs.msg import Twist, Vector3
        from sensor_msgs.msg import Imu, JointState

        names = [*self.export.module.JOINTS, "head_pan"]  # a joint the policy does not use
        values = {name: i for i, name in enumerate(names)}
        order = order or names
        order = [name for name in order if name != drop_joint]
        position = [float(pos[values[n]]) if n != "head_pan" else 0.5 for n in order]
        velocity = [float(vel[values[n]]) if n != "head_pan" else 0.0 for n in order]
        joints = JointState(name=order, position=array.array("d", position))
        joints.velocity = array.array("d", velocity[:-1] if short else velocity)
        imu = Imu(angular_velocity=Vector3(x=float(gyro[0]), y=float(gyro[1]), z=float(gyro[2])))
        w, x, y, z = (float(v) for v in quat)
        imu.orientation.w, imu.orientation.x, imu.orientation.y, imu.orientation.z = w, x, y, z
        twist = Twist(linear=Vector3(x=float(command[0]), y=float(command[1])))
        twist.angular.z = float(command[2])
        for name, message in (("imu", imu), ("twist", twist), ("joints", joints)):
            self.publishers[name].publish(message)
            self.sent[self.publishers[name].topic_name] += 1

    def taken(self):
        """The statuses once the nodes took every message sent."""
        return self.probe.wait_received(NAMESPACE, self.sent)

    def step(self, inputs, **options):
        """Send ``inputs`` and return the next command (float64, controller order)."""
        before = len(self.commands)
        self.send(*inputs, **options)
        self.probe.spin_until(lambda: len(self.commands) > before, 10, "a command")
        return torch.tensor(list(self.commands[before].data), dtype=torch.float64)

    def quiet(self, inputs, **options):
        """Send ``inputs`` and check that no command comes of them: once the nodes took them,
        the policy has not run and nothing arrived; the statuses then."""
        runs = self.taken()["policy"]["runs"]
        before = len(self.commands)
        self.send(*inputs, **options)
        status = self.taken()
        assert status["policy"]["runs"] == runs, "the policy ran, expected no command"
        assert len(self.commands) == before, "a command came, expected none"
        return status

    def fresh(self):
        quat = torch.randn(4)
        return (torch.randn(6), torch.randn(6), torch.randn(3), quat / quat.norm(), torch.randn(3))

    def shuffled(self):
        names = [*self.export.module.JOINTS, "head_pan"]
        self.random.shuffle(names)
        return names


def _in_controller_order(robot, targets):
    index = {name: i for i, name in enumerate(robot.export.module.JOINTS)}
    return targets[[index[name] for name in CONTROLLER]].double()


def test_commands_match_eager_in_controller_order_whatever_the_joint_order(live):
    for _ in range(5):
        inputs = live.fresh()
        expected = _in_controller_order(live, eager_targets(live.export, *inputs))
        first = live.step(inputs, order=live.shuffled())
        second = live.step(inputs, order=live.shuffled())
        torch.testing.assert_close(first, expected, rtol=1e-5, atol=1e-5)
        torch.testing.assert_close(second, first, rtol=0, atol=0)


def test_joint_states_lacking_a_joint_or_values_are_counted_and_dropped(live):
    dropped = live.taken()["preprocess"]["dropped"]
    live.quiet(live.fresh(), drop_joint="knee_r")
    assert live.quiet(live.fresh(), short=True)["preprocess"]["dropped"] == dropped + 2
    live.step(live.fresh())  # and the node goes on


def test_a_nan_input_is_dropped_by_default_and_passes_with_publish(live):
    pos, *rest = live.fresh()
    pos[1] = float("nan")
    if live.composed:  # on_nonfinite: publish
        assert live.step((pos, *rest)).isnan().all()
        return
    assert live.quiet((pos, *rest))["preprocess"]["nonfinite_inputs"] == 1
    live.step(live.fresh())


def test_a_nan_result_is_not_published_by_default(live):
    pos, vel, gyro, _, command = live.fresh()
    zero_quaternion = torch.zeros(4)  # some IMU drivers send it before they know
    if live.composed:
        assert live.step((pos, vel, gyro, zero_quaternion, command)).isnan().all()
        return
    assert (
        live.quiet((pos, vel, gyro, zero_quaternion, command))["preprocess"]["nonfinite_outputs"]
        == 1
    )
    assert all(process.running() for process in live.running)
