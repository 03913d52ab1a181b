"""compile_graph(visualize=True) writes <name>.png and <name>.svg next to <name>.yaml, drawn
with Pillow and as hand-written XML from one layout: every node, its ports, the pipeline inputs
and outputs, and the data, feedback and state edges in their own colours, laid out in columns
by data-flow depth, with no two texts overlapping however long the names."""

from __future__ import annotations

import dataclasses
import io
import itertools
import logging
import math
import shutil
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

import numpy as np
import pytest
import torch
from PIL import Image

import leapp
from leapp import annotate
from leapp import spec as spec_module
from leapp.errors import DependencyError, LeappError
from leapp.spec import picture_fonts, picture_png
from leapp.spec.picture import COLORS, DEFAULT_SCALE, draw_pipeline, write_picture
from leapp.spec.schema import ModelParameters, ModelSpec, PipelineSpec, Spec, TensorSpec

SVG = "{http://www.w3.org/2000/svg}"


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
    """The compiled loop, its PNG as RGB pixels, its SVG's root and its layout."""
    compiled = run_ticks(tmp_path_factory.mktemp("export"), visualize=True)
    folder = compiled.path.parent
    with Image.open(folder / "loop.png") as image:
        pixels = np.asarray(image.convert("RGB"))
    root = ET.parse(folder / "loop.svg").getroot()
    return compiled, pixels, root, draw_pipeline(compiled.spec)


def groups(root, kind: str) -> list[ET.Element]:
    """The SVG's ``<g>`` elements whose class starts with ``kind``."""
    return [g for g in root.iter(f"{SVG}g") if g.get("class", "").split()[0] == kind]


def texts(element) -> list[str]:
    return [t.text or "" for t in element.iter(f"{SVG}text")]


def hex_color(color) -> str:
    return "#{:02x}{:02x}{:02x}".format(*color)


def near(pixels: np.ndarray, color, tolerance: int = 12) -> bool:
    """Whether some pixel is within ``tolerance`` of ``color`` in every channel."""
    distance = np.abs(pixels.astype(int) - np.array(color)).max(axis=-1)
    return bool((distance <= tolerance).any())


# ----------------------------------------------------------------------------------- tests
def test_the_three_node_loop_has_data_feedback_and_state_edges(drawn):
    pipeline = drawn[0].spec.pipeline
    assert pipeline.data_flow == {
        "encode/features": ("act/features", "monitor/features"),
        "act/action": ("monitor/action",),
    }
    assert pipeline.feedback_flow == {"act/action": ("encode/last_action",), "act/h": ("act/h",)}


def test_visualize_writes_a_png_pillow_opens_of_the_layouts_size(drawn):
    compiled, pixels, _, picture = drawn
    png = compiled.path.parent / "loop.png"
    with Image.open(png) as image:
        image.verify()
    with Image.open(png) as image:
        assert image.format == "PNG" and image.mode == "RGB"
        width, height = image.size
    assert (width, height) == (
        math.ceil(picture.width * DEFAULT_SCALE),
        math.ceil(picture.height * DEFAULT_SCALE),
    )
    assert 800 < width < 6000 and 300 < height < 2000
    assert pixels.shape == (height, width, 3)


def test_png_text_is_antialiased_truetype(drawn):
    _, pixels, _, picture = drawn
    name = picture.boxes["encode"].name.rect
    s = DEFAULT_SCALE
    rows = slice(int(name.y * s), math.ceil(name.bottom * s))
    columns = slice(int(name.x * s), math.ceil(name.right * s))
    grey = np.asarray(Image.fromarray(pixels[rows, columns]).convert("L"))
    assert len(np.unique(grey)) > 2  # ink, background and the shades in between
    assert grey.min() < 80  # dark letters


def test_png_edges_are_antialiased(drawn):
    _, pixels, _, picture = drawn
    s = DEFAULT_SCALE
    left, right = picture.boxes["encode"].rect, picture.boxes["act"].rect
    gap = pixels[
        int(left.y * s) : int(left.bottom * s), int(left.right * s) + 12 : int(right.x * s)
    ]
    colours = gap.reshape(-1, 3).astype(int)
    blues = {tuple(p) for p in colours if p[2] > p[0] + 20}  # data blue and its blends
    assert len(blues) > 2


def test_png_shows_data_feedback_and_state_edges_in_their_colours(drawn):
    _, pixels, _, picture = drawn
    below_legend = pixels[int(picture.layout.legend[0].sample.bottom * DEFAULT_SCALE) + 4 :]
    for kind in ("data", "feedback", "state", "input", "output"):
        assert near(below_legend, COLORS[kind]), f"no {kind} colour drawn"


def test_the_picture_is_drawn_from_the_spec_as_written_to_disk(drawn, tmp_path):
    folder = drawn[0].path.parent
    files = write_picture(spec_module.load(folder), tmp_path / "again.png")
    assert files.svg == tmp_path / "again.svg"
    assert files.svg.read_text() == (folder / "loop.svg").read_text()
    assert files.png.read_bytes() == (folder / "loop.png").read_bytes()


def test_svg_parses_and_names_every_node_port_and_backend(drawn):
    compiled, _, root, _ = drawn
    assert root.tag == f"{SVG}svg"
    for model in compiled.spec.models:
        (node,) = [g for g in groups(root, "node") if g.get("data-node") == model.name]
        written = texts(node)
        assert model.name in written and model.parameters.backend in written
        for port in (*model.inputs, *model.outputs):
            assert port.name in written, f"{model.name}/{port.name} not written"
            assert f"{port.dtype}[{','.join(map(str, port.shape))}]" in written


def test_svg_draws_every_edge_as_a_path_of_its_kinds_colour_with_an_arrowhead(drawn):
    compiled, _, root, _ = drawn
    expected = {(s, t, "data") for s, ts in compiled.spec.pipeline.data_flow.items() for t in ts}
    for source, targets in compiled.spec.pipeline.feedback_flow.items():
        for target in targets:
            own = source.split("/")[0] == target.split("/")[0]
            expected.add((source, target, "state" if own else "feedback"))
    edges = groups(root, "edge")
    found = {(g.get("data-source"), g.get("data-target"), g.get("data-kind")) for g in edges}
    assert found == expected
    assert {g.get("data-kind") for g in edges} == {"data", "feedback", "state"}
    for edge in edges:
        kind = edge.get("data-kind")
        (path,) = edge.iter(f"{SVG}path")
        assert path.get("stroke") == hex_color(COLORS[kind])
        assert (path.get("stroke-dasharray") is not None) == (kind != "data")
        assert "Q" in path.get("d") or kind == "data"  # rounded corners; data may run straight
        (arrow,) = edge.iter(f"{SVG}polygon")
        assert arrow.get("fill") == hex_color(COLORS[kind])


def test_svg_tags_every_pipeline_input_and_output_and_has_a_legend(drawn):
    _, _, root, _ = drawn
    tags = {(g.get("data-kind"), g.get("data-port")) for g in groups(root, "tag")}
    assert tags == {("input", "encode/state"), ("output", "monitor/energy")}
    (legend,) = groups(root, "legend")
    assert texts(legend) == [
        "data",
        "feedback (next tick)",
        "state (own feedback)",
        "pipeline input",
        "pipeline output",
    ]


def test_nodes_stand_in_columns_by_data_flow_depth_ignoring_feedback(drawn):
    boxes = drawn[3].boxes
    assert {n: b.column for n, b in boxes.items()} == {"encode": 0, "act": 1, "monitor": 2}
    assert boxes["encode"].rect.right < boxes["act"].rect.x
    assert boxes["act"].rect.right < boxes["monitor"].rect.x


def test_state_ports_are_marked_on_both_sides_of_their_box(drawn):
    _, _, root, picture = drawn
    purple = hex_color(COLORS["state"])
    for node in groups(root, "node"):
        rect = picture.boxes[node.get("data-node")].rect
        dots = {(float(c.get("cx")), c.get("fill")) for c in node.iter(f"{SVG}circle")}
        marked = {round(x) for x, fill in dots if fill == purple}
        sides = {round(rect.x), round(rect.right)}
        assert marked == (sides if node.get("data-node") == "act" else set())


def test_pipeline_inputs_and_outputs_are_tagged_beside_their_nodes(drawn):
    picture = drawn[3]
    tags = {tag.key: tag.rect for tag in picture.layout.tags}
    first, last = picture.boxes["encode"].rect, picture.boxes["monitor"].rect
    assert tags["encode/state"].right < first.x
    assert tags["monitor/energy"].x > last.right


def test_without_feedback_no_feedback_or_state_edge_is_drawn_nor_in_the_legend(drawn):
    root = ET.fromstring(draw_pipeline(_without_feedback(drawn[0].spec)).svg())
    assert {g.get("data-kind") for g in groups(root, "edge")} == {"data"}
    (legend,) = groups(root, "legend")
    assert texts(legend) == ["data", "pipeline input", "pipeline output"]


def test_long_port_names_make_room_so_no_texts_or_boxes_overlap():
    picture = draw_pipeline(_long_names())
    _assert_nothing_overlaps(picture)
    for (_, key), port in picture.layout.ports.items():
        rect = picture.boxes[key.split("/")[0]].rect
        assert rect.x < port.name.x and port.detail.rect.right < rect.right, key


def test_ten_nodes_with_twenty_ports_each_get_room_for_every_port():
    picture = draw_pipeline(_chain(nodes=10, ports=20))
    boxes = sorted(picture.boxes.values(), key=lambda b: b.column)
    assert [b.column for b in boxes] == list(range(10))
    small = draw_pipeline(_chain(nodes=2, ports=2))
    assert picture.width > 4 * small.width and picture.height > 2 * small.height
    _assert_nothing_overlaps(picture)
    with Image.open(io.BytesIO(picture.png())) as image:
        assert image.size == (math.ceil(picture.width * 2), math.ceil(picture.height * 2))


def test_a_picture_drawn_in_bands_is_the_picture_drawn_whole(monkeypatch):
    picture = draw_pipeline(_long_names())
    monkeypatch.setattr(picture_png, "BAND_PIXELS", 10**12)
    whole = picture.png()
    monkeypatch.setattr(picture_png, "BAND_PIXELS", 1)  # the fewest rows a band may have
    assert picture.png() == whole


def test_compile_graph_logs_where_it_drew_the_picture(tmp_path, caplog):
    with caplog.at_level(logging.INFO, logger="leapp"):
        compiled = run_ticks(tmp_path, ticks=2, validate=False, visualize=True)
    assert str(compiled.path.parent / "loop.png") in caplog.text
    assert str(compiled.path.parent / "loop.svg") in caplog.text


def test_without_visualize_no_picture_is_left_in_the_folder(tmp_path):
    run_ticks(tmp_path, ticks=2, validate=False, visualize=True)
    assert (tmp_path / "loop" / "loop.png").is_file() and (
        tmp_path / "loop" / "loop.svg"
    ).is_file()
    run_ticks(tmp_path, ticks=2, validate=False)
    assert not (tmp_path / "loop" / "loop.png").exists()
    assert not (tmp_path / "loop" / "loop.svg").exists()


def test_without_pillow_visualize_says_what_to_install_before_exporting(tmp_path, monkeypatch):
    monkeypatch.setitem(sys.modules, "PIL", None)  # `import PIL` raises ImportError
    with pytest.raises(DependencyError) as raised:
        run_ticks(tmp_path, ticks=2, validate=False, visualize=True)
    assert isinstance(raised.value, LeappError) and isinstance(raised.value, ImportError)
    message = str(raised.value)
    assert "Pillow" in message and "pip install 'leapp_ros[picture]'" in message
    assert not (tmp_path / "loop").exists()  # nothing exported yet
    monkeypatch.delitem(sys.modules, "PIL")
    compiled = leapp.compile_graph(validate=False, visualize=True)  # the session waited
    assert compiled.path.with_name("loop.png").is_file()


def test_without_pillow_the_svg_is_drawn_from_estimated_widths(drawn, monkeypatch):
    monkeypatch.setitem(sys.modules, "PIL", None)
    picture = draw_pipeline(_long_names())
    assert isinstance(picture.fonts, picture_fonts.EstimatedFonts)
    _assert_nothing_overlaps(picture)
    assert "very_long_input_name" in picture.svg()
    with pytest.raises(DependencyError, match="pip install"):
        picture.png()
    with pytest.raises(DependencyError, match="pip install"):
        write_picture(drawn[0].spec)


def test_a_font_folder_named_by_leapp_picture_fonts_comes_first(tmp_path, monkeypatch):
    found = picture_fonts.PillowFonts(1.0).files["mono"]
    if found is None:
        pytest.skip("no DejaVu Sans Mono on this machine to copy")
    shutil.copy(found, tmp_path / "DejaVuSans.ttf")  # a stand-in with another face
    monkeypatch.setenv("LEAPP_PICTURE_FONTS", str(tmp_path))
    monkeypatch.setattr(picture_fonts, "_font_file", picture_fonts._font_file.__wrapped__)
    assert Path(picture_fonts.PillowFonts(1.0).files["sans"]) == tmp_path / "DejaVuSans.ttf"


def test_without_any_font_file_pillows_built_in_font_draws_the_picture(monkeypatch):
    missing = {face: ("NoSuchFont.ttf",) for face in ("sans", "bold", "mono")}
    monkeypatch.setattr(picture_fonts, "FONT_FILES", missing)
    monkeypatch.setattr(picture_fonts, "_font_file", picture_fonts._font_file.__wrapped__)
    picture = draw_pipeline(_long_names())
    assert set(picture.fonts.files.values()) == {None}
    _assert_nothing_overlaps(picture)
    with Image.open(io.BytesIO(picture.png())) as image:
        assert image.format == "PNG"


def test_a_spec_without_models_is_refused():
    empty = Spec("empty", (), PipelineSpec({}, {}, {}, {}), {})
    with pytest.raises(LeappError, match="no models to draw"):
        draw_pipeline(empty)


# ------------------------------------------------------------------------ spec-only inputs
def _assert_nothing_overlaps(picture) -> None:
    """No two texts, no two boxes, no text across a box's border, no tag on a box."""
    labels = picture.layout.labels()
    for a, b in itertools.combinations(labels, 2):
        assert not a.rect.intersects(b.rect), f"{a.text!r} overlaps {b.text!r}"
    boxes = [place.rect for place in picture.boxes.values()]
    for a, b in itertools.combinations(boxes, 2):
        assert not a.intersects(b)
    for tag in picture.layout.tags:
        assert not any(tag.rect.intersects(box) for box in boxes), tag.key
    for label in labels:
        rect = label.rect
        assert rect.x >= 0 and rect.right <= picture.width and rect.bottom <= picture.height
        for box in boxes:
            inside = box.x <= rect.x and rect.right <= box.right
            assert inside or not rect.intersects(box), f"{label.text!r} crosses a border"


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


def _model(name: str, inputs: list[str], outputs: list[str], shape=(1, 3)) -> ModelSpec:
    return ModelSpec(
        name,
        tuple(TensorSpec(p, "float32", shape) for p in inputs),
        tuple(TensorSpec(p, "float32", shape) for p in outputs),
        ModelParameters(f"{name}.pt", None, None, "jit"),
    )


def _long_names() -> Spec:
    """Two sources in one column feeding a sink; long names on both sides of every box."""
    long_in, long_out = "very_long_input_name_" * 3, "an_even_longer_output_port_name_" * 3
    models = (
        _model("a_source_with_a_long_name", [long_in, "x"], [long_out, "y"], (128, 64, 3)),
        _model("b", ["x"], [long_out]),
        _model("sink", [long_in, "other_" + long_in], [long_out]),
    )
    pipeline = PipelineSpec(
        data_flow={
            f"a_source_with_a_long_name/{long_out}": (f"sink/{long_in}",),
            f"b/{long_out}": (f"sink/other_{long_in}",),
        },
        feedback_flow={"a_source_with_a_long_name/y": ("a_source_with_a_long_name/x",)},
        inputs={"a_source_with_a_long_name": (long_in,), "b": ("x",)},
        outputs={"sink": (long_out,)},
    )
    return Spec("long_names", models, pipeline, {})


def _chain(nodes: int, ports: int) -> Spec:
    """``node_0 -> node_1 -> ...``, each feeding all its outputs to the next node's inputs."""
    names = [f"node_{i}" for i in range(nodes)]
    models = tuple(
        _model(n, [f"in_{j}" for j in range(ports)], [f"out_{j}" for j in range(ports)])
        for n in names
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
