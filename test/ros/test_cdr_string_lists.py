"""A list of strings in raw CDR (a JointState's names) is parsed once and then recognised by
its bytes: every read still gives what rclpy's deserializer gives, whatever changed between
two messages (a name, the number of names, where the list starts), and each read's list is
the reader's own."""

from __future__ import annotations

from rclpy.serialization import deserialize_message, serialize_message
from sensor_msgs.msg import JointState

from leapp_ros.messages import cdr

FIELDS = cdr.layout(JointState)


def state(names, frame_id="base"):
    message = JointState(name=list(names))
    message.header.frame_id = frame_id
    message.position = [float(i) for i in range(len(names))]
    return message


def read_names(message) -> list[str]:
    payload = serialize_message(message)
    names = cdr.read(payload, FIELDS).name
    assert names == list(deserialize_message(payload, JointState).name)
    return names


def test_every_read_gives_the_typed_names_whatever_changed_since_the_last():
    joints = [f"joint_{i}" for i in range(12)]
    messages = [
        state(joints),
        state(joints),  # the same bytes at the same place
        state([*joints[:5], "joint_X", *joints[6:]]),  # one name changed, same length
        state(joints[:7]),  # fewer names
        state(joints, frame_id="a_longer_frame_id"),  # the list starts elsewhere
        state(joints),
        state([]),
        state(joints),
    ]
    for message in messages:
        assert read_names(message) == list(message.name)


def test_each_read_of_the_same_names_is_a_list_of_its_own():
    joints = ["hip", "knee", "ankle"]
    first = read_names(state(joints))
    first.append("changed by the reader")
    second = read_names(state(joints))
    assert second == joints and second is not first
