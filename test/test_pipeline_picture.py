"""compile_graph(visualize=True) writes <name>.png next to <name>.yaml: a valid PNG (read back
here byte by byte) that shows every node, its ports, the pipeline inputs and outputs, and the
data, feedback and state edges in their own colours, laid out in columns by data-flow depth."""

from __future__ import annotations

import dataclasses
import itertools
import logging
import string
import struct
import zlib

import numpy as np
import pytest
import torch

import leapp
from leapp import annotate
from leapp import spec as spec_module
from leapp.spec.glyphs import glyph
from leapp.spec.picture import COLORS, draw_pipeline, write_picture
from leapp.spec.raster import encode_png
from leapp.spec.schema import ModelParameters, ModelSpec, PipelineSpec, Spec, TensorSpec


# ------------------------------------------------------------------------------ a PNG reader
def read_png(data: bytes) -> np.ndarray:
    """The pixels of an 8-bit RGB PNG, checking every byte the way a strict reader would."""
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    chunks, position = [], 8
    while position < len(data):
        (length,) = struct.unpack(">I", data[position : position + 4])
        kind = data[position + 4 : position + 8]
        body = data[position + 8 : position + 8 + length]
        (crc,) = struct.unpack(">I", data[position + 8 + length : position + 12 + length])
        assert crc == zlib.crc32(kind + body) & 0xFFFFFFFF, f"bad CRC in {kind!r}"
        chunks.append((kind, body))
        position += 12 + length
    assert position == len(data)
    assert chunks[0][0] == b"IHDR" and chunks[-1] == (b"IEND", b"")
    width, height, depth, color, *methods = struct.unpack(">IIBBBBB", chunks[0][1])
    assert (depth, color, methods) == (8, 2, [0, 0, 0])  # 8-bit RGB, no interlace
    raw = zlib.decompress(b"".join(body for kind, body in chunks if kind == b"IDAT"))
    assert len(raw) == height * (1 + width * 3)
    rows = np.frombuffer(raw, dtype=np.uint8).reshape(height, 1 + width * 3)
    assert (rows[:, 0] == 0).all()  # filter type None on every row: the bytes are the pixels
    return rows[:, 1:].reshape(height, width, 3)


def has(pixels: np.ndarray, color) -> bool:
    return bool((pixels == np.array(color, dtype=np.uint8)).all(axis=-1).any())


# -------------------------------------------------------------------- a three-node pipeline
def encode(state, last_action):
    state, last_action = annotate.input_tensors(
        "encode", {"state": state, "last_action": last_action}
    )
    features = torch.cat([state, last_action * 0.5])
    annotate.output_tensors("encode", {"features": features}, export_with="jit")
    return features


def act(features, h):
    features = annotate.input_tensors("act", {"features": features})
    h = annotate.state_tensors("act", {"h": h})
    h_next = torch.tanh(features[:2] + h)
    action = h_next * 2.0
    h_next = annotate.update_state("act", {"h": h_next})
    annotate.output_tensors("act", {"action": action}, export_with="jit")
    return action, h_next


def monitor(features, action):
    features, action = annotate.input_tensors("monitor", {"features": features, "action": action})
    energy = features.pow(2).sum(-1, keepdim=True) + action.abs().sum(-1, keepdim=True)
    annotate.output_tensors("monitor", {"energy": energy}, export_with="jit")
    return energy


def run_ticks(tmp_path, ticks=3, **compile_options):
    leapp.start("loop", save_path=tmp_path)
    action, h = torch.zeros(2), torch.zeros(2)
    with torch.no_grad():
        for _ in range(ticks):
            features = encode(torch.randn(3), action)
            action, h = act(features, h)
            monitor(features, action)
    leapp.stop()
    return leapp.compile_graph(**compile_options)


@pytest.fixture(scope="module")
def drawn(tmp_path_factory):
    """The compiled loop, its picture as written and the boxes drawn into it."""
    from leapp import session

    session._active = None
    compiled = run_ticks(tmp_path_factory.mktemp("export"), visualize=True)
    png = (compiled.path.parent / "loop.png").read_bytes()
    return compiled, read_png(png), draw_pipeline(compiled.spec)


# ----------------------------------------------------------------------------------- tests
def test_the_three_node_loop_has_data_feedback_and_state_edges(drawn):
    pipeline = drawn[0].spec.pipeline
    assert pipeline.data_flow == {
        "encode/features": ("act/features", "monitor/features"),
        "act/action": ("monitor/action",),
    }
    assert pipeline.feedback_flow == {"act/action": ("encode/last_action",), "act/h": ("act/h",)}


def test_visualize_writes_a_valid_png_next_to_the_yaml(drawn):
    compiled, pixels, picture = drawn
    assert (compiled.path.parent / "loop.png").is_file()
    assert compiled.path.name == "loop.yaml"
    assert pixels.shape == (picture.height, picture.width, 3)


def test_the_picture_is_drawn_from_the_spec_as_written_to_disk(drawn, tmp_path):
    compiled = drawn[0]
    loaded = spec_module.load(compiled.path.parent)
    written = write_picture(loaded, tmp_path / "again.png")
    assert written.read_bytes() == (compiled.path.parent / "loop.png").read_bytes()


def test_every_node_has_a_framed_box_with_its_name_written_in_its_header(drawn):
    _, pixels, picture = drawn
    assert set(picture.boxes) == {"encode", "act", "monitor"}
    border = np.array(COLORS["border"], dtype=np.uint8)
    for box in picture.boxes.values():
        inside = pixels[box.y : box.y + box.height, box.x : box.x + box.width]
        assert (inside[0] == border).all() and (inside[-1] == border).all()
        assert (inside[:, 0][1:-1] == border).all(axis=-1).mean() > 0.5  # port marks cut in
        header = pixels[box.y + 2 : box.header_bottom - 1, box.x + 2 : box.x + box.width - 2]
        assert has(header, COLORS["text"]), f"no name in the header of {box.node}"
        body = pixels[box.header_bottom + 1 : box.y + box.height - 2, box.x + 6 : box.x + 40]
        assert has(body, COLORS["text"]), f"no port name in {box.node}"


def test_nodes_stand_in_columns_by_data_flow_depth_ignoring_feedback(drawn):
    boxes = drawn[2].boxes
    assert {n: b.column for n, b in boxes.items()} == {"encode": 0, "act": 1, "monitor": 2}
    assert boxes["encode"].x + boxes["encode"].width < boxes["act"].x
    assert boxes["act"].x + boxes["act"].width < boxes["monitor"].x


def test_data_feedback_and_state_edges_are_drawn_in_their_own_colours(drawn):
    _, pixels, picture = drawn
    below_legend = pixels[picture.title_bottom :]
    for kind in ("data", "feedback", "state"):
        assert has(below_legend, COLORS[kind]), f"no {kind} edge drawn"
    without = draw_pipeline(_without_feedback(drawn[0].spec))
    rest = read_png(without.png)[without.title_bottom :]
    assert has(rest, COLORS["data"])
    assert not has(rest, COLORS["feedback"]) and not has(rest, COLORS["state"])


def test_state_ports_are_marked_on_both_sides_of_their_box(drawn):
    _, pixels, picture = drawn
    act_box = picture.boxes["act"]
    rows = pixels[act_box.header_bottom : act_box.y + act_box.height]
    assert has(rows[:, act_box.x], COLORS["state"])  # the input h
    assert has(rows[:, act_box.x + act_box.width - 1], COLORS["state"])  # the output h
    for other in ("encode", "monitor"):
        box = picture.boxes[other]
        assert not has(
            pixels[box.y : box.y + box.height, box.x : box.x + box.width], COLORS["state"]
        )


def test_pipeline_inputs_and_outputs_are_tagged_beside_their_nodes(drawn):
    _, pixels, picture = drawn
    first, last = picture.boxes["encode"], picture.boxes["monitor"]
    rows = slice(first.header_bottom, first.y + first.height)
    assert has(pixels[rows, : first.x], COLORS["input"])
    rows = slice(last.header_bottom, last.y + last.height)
    assert has(pixels[rows, last.x + last.width :], COLORS["output"])


def test_compile_graph_logs_where_it_drew_the_picture(tmp_path, caplog):
    with caplog.at_level(logging.INFO, logger="leapp"):
        compiled = run_ticks(tmp_path, ticks=2, validate=False, visualize=True)
    assert str(compiled.path.parent / "loop.png") in caplog.text


def test_without_visualize_no_picture_is_left_in_the_folder(tmp_path):
    run_ticks(tmp_path, ticks=2, validate=False, visualize=True)
    assert (tmp_path / "loop" / "loop.png").is_file()
    run_ticks(tmp_path, ticks=2, validate=False)
    assert not (tmp_path / "loop" / "loop.png").exists()


def test_ten_nodes_with_twenty_ports_each_get_room_for_every_port():
    picture = draw_pipeline(_chain(nodes=10, ports=20))
    read_png(picture.png)
    boxes = sorted(picture.boxes.values(), key=lambda b: b.column)
    assert [b.column for b in boxes] == list(range(10))
    small = draw_pipeline(_chain(nodes=2, ports=2))
    assert picture.width > 4 * small.width and picture.height > 2 * small.height
    for left, right in itertools.pairwise(boxes):
        assert left.x + left.width < right.x  # no two boxes overlap
    assert boxes[0].height - (boxes[0].header_bottom - boxes[0].y) >= 20 * 16  # 16 px glyphs


def test_png_encoding_keeps_every_pixel():
    pixels = np.random.default_rng(0).integers(0, 256, (7, 13, 3), dtype=np.uint8)
    assert (read_png(encode_png(pixels)) == pixels).all()


def test_every_printable_character_has_its_own_glyph():
    shapes = {glyph(c).tobytes(): c for c in string.printable[:95] if c != " "}
    assert len(shapes) == 94
    assert glyph("\N{DEGREE SIGN}").tobytes() == glyph("?").tobytes()


# ------------------------------------------------------------------------ spec-only inputs
def _without_feedback(spec: Spec) -> Spec:
    """``spec`` with every feedback input turned into a pipeline input."""
    inputs = {node: list(ports) for node, ports in spec.pipeline.inputs.items()}
    for targets in spec.pipeline.feedback_flow.values():
        for target in targets:
            node, port = target.split("/")
            inputs.setdefault(node, []).append(port)
    pipeline = dataclasses.replace(
        spec.pipeline, feedback_flow={}, inputs={n: tuple(p) for n, p in inputs.items()}
    )
    return dataclasses.replace(spec, pipeline=pipeline)


def _chain(nodes: int, ports: int) -> Spec:
    """``node_0 -> node_1 -> ...``, each feeding all its outputs to the next node's inputs."""

    def port(name: str) -> TensorSpec:
        return TensorSpec(name, "float32", (1, 3))

    names = [f"node_{i}" for i in range(nodes)]
    models = tuple(
        ModelSpec(
            name,
            tuple(port(f"in_{j}") for j in range(ports)),
            tuple(port(f"out_{j}") for j in range(ports)),
            ModelParameters(f"{name}.pt", None, None, "jit"),
        )
        for name in names
    )
    data_flow = {
        f"{a}/out_{j}": (f"{b}/in_{j}",)
        for a, b in itertools.pairwise(names)
        for j in range(ports)
    }
    pipeline = PipelineSpec(
        data_flow=data_flow,
        feedback_flow={},
        inputs={names[0]: tuple(f"in_{j}" for j in range(ports))},
        outputs={names[-1]: tuple(f"out_{j}" for j in range(ports))},
    )
    return Spec("chain", models, pipeline, {})
