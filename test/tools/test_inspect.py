"""``leapp-ros inspect``: the plan of an export in words (nodes, topics, QoS, edges)."""

from __future__ import annotations

import re
import sys
import xml.etree.ElementTree as ET

from support.specs import LEAPP_SEMANTIC_SPEC

from leapp import spec as spec_module
from leapp_ros.plan.pipeline import make_plan
from leapp_ros.run.processes import load_plan
from leapp_ros.tools.cli import main
from leapp_ros.tools.inspection import describe_plan, format_qos

FLOAT32 = "std_msgs/msg/Float32MultiArray"


def inspect(capsys, *args: str) -> str:
    code = main(["inspect", *args])
    captured = capsys.readouterr()
    assert code == 0, captured.err
    return captured.out


def section(text: str, title: str) -> list[str]:
    """The lines of the section headed ``title`` (up to the next blank line)."""
    lines = text.splitlines()
    start = lines.index(title) + 1
    end = lines.index("", start) if "" in lines[start:] else len(lines)
    return lines[start:end]


def row(lines: list[str], *cells: str) -> str:
    """The one line containing every cell, in order."""
    found = [line for line in lines if all(cell in line for cell in cells)]
    assert len(found) == 1, f"expected one line with {cells}, got {found} in:\n" + "\n".join(lines)
    line = found[0]
    positions = [line.index(cell) for cell in cells]
    assert positions == sorted(positions), f"cells {cells} out of order in {line!r}"
    return line


def test_inspect_prints_every_publisher_with_type_dtype_shape_and_qos(seed, capsys):
    publishers = section(inspect(capsys, str(seed.path)), "publishers")
    reliable = format_qos(make_plan(spec_module.load(seed.path)).nodes[0].outputs[0].qos)
    assert reliable == "reliable, volatile, depth 1"
    row(publishers, "/torch_pipeline/preprocess/obs", FLOAT32, "float32", "[9]", reliable)
    row(publishers, "/torch_pipeline/policy/action", FLOAT32, "float32", "[6]", reliable)
    assert len(publishers) == 3  # header and two outputs


def test_inspect_prints_every_subscription_with_kind_trigger_and_qos(seed, capsys):
    subscriptions = section(inspect(capsys, str(seed.path)), "subscriptions")
    qos = "best_effort, volatile, depth 1"
    row(subscriptions, "/torch_pipeline/preprocess/state", FLOAT32, "[6]", "external", "yes", qos)
    row(subscriptions, "/torch_pipeline/preprocess/velocity", FLOAT32, "[3]", "external", qos)
    row(subscriptions, "/torch_pipeline/preprocess/obs", FLOAT32, "policy/obs", "data_flow", qos)
    packed = "/torch_pipeline/preprocess/packed_inputs"
    row(subscriptions, packed, FLOAT32, "[9]", "preprocess/state+velocity", "as its ports", qos)
    assert len(subscriptions) == 5


def test_inspect_prints_nodes_with_backend_artifact_and_firing(seed, capsys):
    nodes = section(inspect(capsys, str(seed.path)), "nodes")
    row(nodes, "preprocess", "jit", "preprocess.pt", "inputs", "50 Hz")
    row(nodes, "policy", "onnx", "policy.onnx", "inputs", "50 Hz")


def test_inspect_lists_what_ros2_topic_list_shows_and_the_hidden_status_topic(seed, capsys):
    listing = section(inspect(capsys, str(seed.path)), "ros2 topic list -t")
    plan = load_plan(seed.path)
    topics = sorted([*plan.topics(), *plan.packed_topics()])  # preprocess/packed_inputs too
    expected = [f"  {name} [{kind}]" for name, kind in topics]
    assert listing == expected and len(expected) == 5
    text = inspect(capsys, str(seed.path))
    assert "/torch_pipeline/_leapp/status [std_msgs/msg/String]" in text
    assert "--include-hidden-topics" in text


def test_inspect_namespace_option_moves_every_topic(seed, capsys):
    text = inspect(capsys, str(seed.path), "--namespace", "robot1/brain")
    assert "namespace:      /robot1/brain" in text
    assert "/robot1/brain/policy/action [std_msgs/msg/Float32MultiArray]" in text
    assert "/torch_pipeline/" not in text.replace(str(seed.path), "")


def test_inspect_columns_are_aligned(seed, capsys):
    for title in ("nodes", "publishers", "subscriptions"):
        lines = section(inspect(capsys, str(seed.path)), title)
        header = lines[0]
        starts = [
            i for i in range(2, len(header)) if header[i - 2 : i] == "  " and header[i] != " "
        ]
        assert len(starts) == len(re.split(r" {2,}", header.strip()))
        for line in lines[1:]:
            for start in starts[1:]:
                assert line[start - 2 : start] == "  " and line[start] != " ", (title, line)


def test_inspect_shows_feedback_and_state_edges_with_their_initial_values(tmp_path):
    path = tmp_path / "sem_graph.yaml"
    path.write_text(LEAPP_SEMANTIC_SPEC)
    text = describe_plan(make_plan(spec_module.load(path, verify_checksums=False)))
    edges = section(text, "feedback and state")
    row(edges, "policy/h -> policy/h", "state", "inside the node (no topic)")
    assert "initial values from sem_graph_initial_values.safetensors" in edges[-1]
    subscriptions = section(text, "subscriptions")
    assert not [line for line in subscriptions if "policy/h" in line]  # state has no topic
    row(section(text, "publishers"), "/sem_graph/policy/h", FLOAT32)  # still published


def test_inspect_of_a_missing_export_exits_2_and_says_why(tmp_path, capsys):
    assert main(["inspect", str(tmp_path / "nowhere")]) == 2
    assert "no such export folder" in capsys.readouterr().err


def test_describe_plan_can_leave_out_the_spec_path(seed):
    plan = load_plan(seed.path)
    assert str(plan.spec_path) in describe_plan(plan)
    assert str(seed.path) not in describe_plan(plan, show_spec_path=False)


def test_inspect_picture_draws_the_png_and_svg_into_the_folder_given(seed, tmp_path, capsys):
    from PIL import Image

    out = inspect(capsys, str(seed.path), "--picture", str(tmp_path / "pictures"))
    assert section(out, "publishers")  # the plan is printed as without --picture
    png, svg = (
        tmp_path / "pictures" / "torch_pipeline.png",
        tmp_path / "pictures" / "torch_pipeline.svg",
    )
    with Image.open(png) as image:
        assert image.format == "PNG" and image.width > 400
    written = {t.text for t in ET.parse(svg).getroot().iter("{http://www.w3.org/2000/svg}text")}
    assert {"preprocess", "policy", "obs", "action"} <= written


def test_inspect_picture_without_a_path_draws_into_the_current_folder(
    seed, tmp_path, monkeypatch, capsys
):
    monkeypatch.chdir(tmp_path)
    inspect(capsys, str(seed.path), "--picture")
    assert (tmp_path / "torch_pipeline.png").is_file()
    assert (tmp_path / "torch_pipeline.svg").is_file()


def test_inspect_picture_with_a_png_path_writes_the_svg_beside_it(seed, tmp_path, capsys):
    inspect(capsys, str(seed.path), "--picture", str(tmp_path / "graph.png"))
    assert sorted(p.name for p in tmp_path.iterdir()) == ["graph.png", "graph.svg"]


def test_inspect_picture_without_pillow_exits_2_naming_what_to_install(
    seed, tmp_path, monkeypatch, capsys
):
    monkeypatch.setitem(sys.modules, "PIL", None)  # `import PIL` raises ImportError
    assert main(["inspect", str(seed.path), "--picture", str(tmp_path)]) == 2
    captured = capsys.readouterr()
    assert "pip install 'leapp_ros[picture]'" in captured.err
    assert captured.out == "" and not list(tmp_path.iterdir())
