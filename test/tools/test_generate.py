"""``leapp-ros generate``: a complete ament_python package per export, regenerated safely, and
its launch_testing test, which compares every published tensor with the recorded examples
(eager PyTorch's outputs) and then with leapp.Pipeline on random ticks, and fails naming the
topic when the graph runs a perturbed weight matrix the all-zero example cannot see.

The seed export is traced once per module. The package is installed with pip into a folder
(``--target``), never into the test environment. The generated test runs with the real
``launch_testing`` (the launch stack from ``../shared/ros2-launch``, as CI has it) against the
installed package's graph; test_generated_launch_files.py evaluates the launch files with the
real launch stack, and test_ros2_workspace.py builds, tests and launches the package with
colcon and ``ros2 launch``.
"""

from __future__ import annotations

import configparser
import os
import py_compile
import shutil
import signal
import subprocess
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest
import yaml
from support.generated import install
from support.runner import Command, reserve_domain_id, ros_env
from support.weights import export_perturbed_seed

from leapp import spec as spec_module
from leapp.errors import SpecError
from leapp_ros.tools.cli import main
from leapp_ros.tools.generate import (
    MANIFEST,
    GenerateError,
    check_package_name,
    default_package_name,
    generate_package,
)

PACKAGE = "torch_pipeline_ros"
NODES = ("preprocess", "policy")
GENERATED = [
    MANIFEST,
    "README.md",
    "config/torch_pipeline.yaml",
    "export/policy.onnx",
    "export/preprocess.pt",
    "export/torch_pipeline.yaml",
    "export/torch_pipeline_examples.safetensors",
    "launch/torch_pipeline.launch.py",
    "launch/torch_pipeline_composed.launch.py",
    "launch/torch_pipeline_fused.launch.py",
    "package.xml",
    f"resource/{PACKAGE}",
    "setup.cfg",
    "setup.py",
    "test/test_torch_pipeline_topics.py",
    f"{PACKAGE}/__init__.py",
    f"{PACKAGE}/__main__.py",
]

# The generated test's methods, run as launch_testing runs them, against a graph started by the
# caller (launch_testing itself would start it from the same installed package), counting the
# ticks each replay sends. The launch descriptions are made too, each launch file found.
REPLAY = """
import importlib.util, sys
spec = importlib.util.spec_from_file_location("topics_test", sys.argv[1])
module = importlib.util.module_from_spec(spec)
spec.loader.exec_module(module)
made = list(module.generate_test_description())  # launch_testing.parametrize: one per file
assert [arguments for _, arguments in made] == [{"launch_file": f} for f in module.LAUNCH_FILES]
for make, arguments in made:
    description, _ = make()
    [include] = [e for e in description.entities if type(e).__name__ == "IncludeLaunchDescription"]
    included = include.launch_description_source.try_get_launch_description_without_context()
    assert included is not None and included.entities, arguments  # the launch file loads
counts = []
replay = module.Replay._replay
def counted(self, driven, count, *rest):
    counts.append(count)
    return replay(self, driven, count, *rest)
module.Replay._replay = counted
case = module.TestTopics("test_every_published_tensor_matches_its_reference")
case.test_every_planned_topic_exists_with_its_type()
case.test_every_published_tensor_matches_its_reference()
print("replayed", *counts, "tick(s)")
"""


@pytest.fixture(scope="module")
def package(seed, tmp_path_factory) -> Path:
    """The seed's package, generated once; tests that change it generate their own."""
    return generate_package(seed.path, tmp_path_factory.mktemp("src")).path


@pytest.fixture(scope="module")
def site(package, tmp_path_factory) -> Path:
    """The package installed with ``pip install --target`` (see support.generated)."""
    return install(package, tmp_path_factory.mktemp("pip") / "site")


def python(code: str, *args: str, path: list[Path], env=None, timeout=60):
    """``code`` run to its end in a fresh interpreter with ``path`` first on sys.path, outside
    the repository."""
    environment = {**os.environ, **(env or {})}
    environment["PYTHONPATH"] = os.pathsep.join(str(p) for p in path)
    return subprocess.run(
        [sys.executable, "-c", code, *args],
        env=environment,
        cwd=path[0],
        capture_output=True,
        text=True,
        timeout=timeout,
    )


def run_python(code: str, *args: str, path: list[Path], env=None, timeout=60) -> str:
    """:func:`python`, which must succeed; its output."""
    done = python(code, *args, path=path, env=env, timeout=timeout)
    assert done.returncode == 0, done.stdout + done.stderr
    return done.stdout


def tree(root: Path) -> dict[str, bytes]:
    return {
        p.relative_to(root).as_posix(): p.read_bytes()
        for p in sorted(root.rglob("*"))
        if p.is_file()
    }


def test_generated_package_has_every_file_of_an_ament_python_package(package):
    assert sorted(tree(package)) == sorted(GENERATED)
    assert package.name == PACKAGE


def test_generating_twice_gives_byte_identical_trees(seed, package, tmp_path):
    again = generate_package(seed.path, tmp_path)
    assert tree(again.path) == tree(package)
    in_place = generate_package(seed.path, tmp_path)
    assert in_place.written == () and len(in_place.unchanged) == len(GENERATED) - 1


def test_package_xml_is_format_3_with_the_run_and_test_dependencies(package):
    root = ET.parse(package / "package.xml").getroot()
    assert root.get("format") == "3" and root.findtext("name") == PACKAGE
    exec_depends = {e.text for e in root.findall("exec_depend")}
    assert {"leapp_ros", "rclpy", "std_msgs", "launch", "launch_ros"} <= exec_depends
    test_depends = {e.text for e in root.findall("test_depend")}
    assert test_depends == {"launch_testing", "launch_testing_ros", "python3-pytest"}
    assert root.findtext("export/build_type") == "ament_python"


def test_setup_cfg_puts_executables_under_lib_package(package):
    config = configparser.ConfigParser()
    config.read(package / "setup.cfg")
    assert config["develop"]["script_dir"] == f"$base/lib/{PACKAGE}"
    assert config["install"]["install_scripts"] == f"$base/lib/{PACKAGE}"


# The test dependencies a setup.py declares, as colcon reads them to pick its test runner.
TEST_EXTRAS = """
from setuptools import setup  # noqa: F401 (distutils on Python 3.12)
from distutils.core import run_setup
print(sorted(run_setup("setup.py", stop_after="init").extras_require.get("test", [])))
"""


@pytest.mark.parametrize("which", ["generated", "leapp_ros"])
def test_setup_py_declares_pytest_so_colcon_test_runs_pytest(package, which):
    folder = package if which == "generated" else Path(__file__).resolve().parents[2]
    listed = run_python(TEST_EXTRAS, path=[folder])
    assert "pytest" in listed, listed


def test_pip_install_puts_every_share_file_and_the_ament_marker_under_the_prefix(package, site):
    assert (site / "share/ament_index/resource_index/packages" / PACKAGE).is_file()
    share = site / "share" / PACKAGE
    for path in GENERATED:
        if path.split("/")[0] in ("export", "launch", "config") or path == "package.xml":
            assert (share / path).read_bytes() == (package / path).read_bytes(), path
    assert (site / PACKAGE / "__init__.py").is_file()


def test_installed_package_finds_its_export_and_the_spec_loads_with_checksums(site):
    code = f"""
import {PACKAGE} as package, leapp.spec
from ament_index_python.packages import get_package_share_directory
spec = leapp.spec.load(package.spec_path(), verify_checksums=True)
assert package.share_directory() == get_package_share_directory("{PACKAGE}")
print(spec.name, [m.name for m in spec.models], package.params_path())
"""
    out = run_python(code, path=[site], env={"AMENT_PREFIX_PATH": str(site)})
    assert out.split()[0] == "torch_pipeline" and str(site / "share" / PACKAGE) in out


def test_generated_python_files_compile(package, tmp_path):
    sources = sorted(package.rglob("*.py"))
    assert len(sources) == 7
    for index, source in enumerate(sources):
        py_compile.compile(str(source), cfile=str(tmp_path / f"{index}.pyc"), doraise=True)


def test_parameters_file_has_ros_parameters_for_every_node_and_no_spec_path(package):
    path = package / "config" / "torch_pipeline.yaml"
    document = yaml.safe_load(path.read_text())
    assert list(document) == [f"/torch_pipeline/{node}" for node in NODES]
    for section in document.values():
        parameters = section["ros__parameters"]
        assert parameters == {
            "firing": "inputs", "rate_hz": 0.0, "max_input_age": 0.0, "cpu_latency_us": -1
        }  # fmt: skip
    text = path.read_text()
    assert "spec_path:" not in text and "/torch_pipeline/policy/action:" in text  # QoS example
    from rclpy.parameter import parameter_dict_from_yaml_file

    parsed = parameter_dict_from_yaml_file(str(path), target_nodes=["/torch_pipeline/policy"])
    assert parsed["rate_hz"].value.double_value == 0.0
    assert parsed["firing"].value.string_value == "inputs"


# pytest as where ROS 2 comes from pip wheels alone: launch_testing cannot be imported (and
# its plugin is not loaded), whether or not the launch stack is installed here.
WITHOUT_LAUNCH_TESTING = """
import sys
import pytest
sys.modules["launch_testing"] = None
sys.exit(pytest.main(["-q", "-rs", "-p", "no:cacheprovider", *sys.argv[1:]]))
"""


def test_generated_topic_test_skips_with_a_reason_without_launch_testing(package, tmp_path):
    test_file = shutil.copy(package / "test" / "test_torch_pipeline_topics.py", tmp_path)
    done = subprocess.run(
        [sys.executable, "-c", WITHOUT_LAUNCH_TESTING, test_file],
        env={**os.environ, "PYTEST_DISABLE_PLUGIN_AUTOLOAD": "1"},
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode in (0, 5), done.stdout + done.stderr  # 5: the only module skipped
    assert "1 skipped" in done.stdout and "launch_testing is not installed" in done.stdout


def test_generated_topic_test_never_skips_inside_a_launch_run(package):
    """launch_testing's pytest plugin (what colcon test runs) reports a test skipped inside a
    launch run as passed: the generated test skips only as a whole module, where
    launch_testing is missing (colcon test-result counts that one as skipped)."""
    source = (package / "test" / "test_torch_pipeline_topics.py").read_text()
    assert "skipTest" not in source and "SkipTest" not in source and "pytest.skip" not in source
    assert source.count("importorskip(") == 1


def replay_installed(
    site: Path, name: str, test_file: Path, graph_site: Path | None = None, **variables: str
) -> subprocess.CompletedProcess[str]:
    """Run ``python -m <name>`` from ``graph_site`` (default ``site``) and the generated test's
    replay (:data:`REPLAY`, ``site`` on its path, with the environment ``variables``) against
    it; the replay's completed process."""
    with reserve_domain_id() as domain_id:

        def env(prefix: Path) -> dict[str, str]:
            paths = {"PYTHONPATH": str(prefix), "AMENT_PREFIX_PATH": str(prefix)}
            return {**ros_env(domain_id), **paths, **variables}

        graph = Command([sys.executable, "-m", name], env(graph_site or site))
        try:
            graph.wait_for(r"graph ready", timeout_s=60)
            done = python(REPLAY, str(test_file), path=[site], env=env(site), timeout=120)
            graph.process.send_signal(signal.SIGINT)
            assert graph.wait(30) == 0, graph.output
            return done
        finally:
            graph.kill()


def replayed(done: subprocess.CompletedProcess[str]) -> str:
    """The output of a replay that passed."""
    assert done.returncode == 0, done.stdout + done.stderr
    return done.stdout


def topic_test(site: Path) -> Path:
    return site.parent / f"{site.name}_source" / "test" / "test_torch_pipeline_topics.py"


@pytest.mark.ros
@pytest.mark.launch
def test_installed_package_runs_its_graph_and_the_topic_test_replay_passes(site):
    """The recorded example, then 20 random ticks: 21 ticks in one replay."""
    assert "replayed 21 tick(s)" in replayed(replay_installed(site, PACKAGE, topic_test(site)))


@pytest.mark.ros
@pytest.mark.launch
def test_the_topic_test_fails_naming_the_topic_when_the_graph_runs_other_weights(
    seed, site, tmp_path
):
    """The package's test against the graph of the same package built from an export whose
    policy has a perturbed weight matrix and the same bias: the recorded all-zero example
    cannot tell them apart (tanh(bias)); the first random tick fails, naming the topic."""
    other = export_perturbed_seed(tmp_path / "export", seed).path
    other_site = install(generate_package(other, tmp_path / "src").path, tmp_path / "site")
    done = replay_installed(site, PACKAGE, topic_test(site), graph_site=other_site)
    assert done.returncode != 0, done.stdout
    assert "AssertionError: sample 1 (random tick 0), /torch_pipeline/policy/action: " in (
        done.stderr
    ), done.stderr
    assert "Tensor-likes are not close!" in done.stderr, done.stderr


@pytest.mark.ros
@pytest.mark.launch
def test_the_installed_topic_test_replays_a_bag_named_by_leapp_replay_bag(site, seed, tmp_path):
    import numpy as np

    from leapp_ros.bag.bag_file import BagWriter
    from leapp_ros.messages.multiarray import codec
    from leapp_ros.messages.raw_multiarray import RawArrayCodec
    from leapp_ros.run.processes import load_plan

    plan = load_plan(seed.path)
    bag = tmp_path / "bag"
    with BagWriter(bag) as writer:
        for tick in range(3):
            for port in plan.node("preprocess").inputs:
                topic = plan.resolve(port.topic)
                writer.add_topic(topic, port.message_type)
                value = np.arange(port.shape[0], dtype=np.float32) + tick
                data = RawArrayCodec(codec(port)).to_bytes(value)
                writer.write(topic, 10**9 * (tick + 1), data)
    done = replay_installed(site, PACKAGE, topic_test(site), LEAPP_REPLAY_BAG=str(bag))
    assert "replayed 3 tick(s)" in replayed(done)


@pytest.mark.ros
@pytest.mark.launch
def test_recurrent_package_carries_initial_values_and_replays_every_tick_in_order(tmp_path):
    """The 3 recorded ticks, then 20 random ones from the state the recorded ones left."""
    from support.recurrent import export_gru

    export = export_gru(tmp_path / "export", "onnx", ticks=3).path.parent
    root = generate_package(export, tmp_path / "src").path
    assert (root / "export" / "gru_initial_values.safetensors").is_file()
    assert "state kept inside the node (no topic): h" in (root / "config/gru.yaml").read_text()
    site = install(root, tmp_path / "site")
    test_file = site.parent / "site_source" / "test" / "test_gru_topics.py"
    assert "replayed 23 tick(s)" in replayed(replay_installed(site, "gru_ros", test_file))


def test_user_edit_blocks_regeneration_and_the_error_names_the_file(seed, tmp_path):
    root = generate_package(seed.path, tmp_path).path
    edited = root / "config" / "torch_pipeline.yaml"
    edited.write_text(edited.read_text().replace('firing: "inputs"', 'firing: "timer"', 1))
    with pytest.raises(GenerateError, match=r"--force") as caught:
        generate_package(seed.path, tmp_path)
    assert caught.value.files == ("config/torch_pipeline.yaml",)
    assert str(edited) in str(caught.value)
    assert 'firing: "timer"' in edited.read_text()


def test_cli_generate_refuses_edited_files_with_exit_code_2(seed, tmp_path, capsys):
    assert main(["generate", str(seed.path), "--out", str(tmp_path)]) == 0
    launch_file = tmp_path / PACKAGE / "launch" / "torch_pipeline.launch.py"
    launch_file.write_text(launch_file.read_text() + "# mine\n")
    capsys.readouterr()
    assert main(["generate", str(seed.path), "--out", str(tmp_path)]) == 2
    assert str(launch_file) in capsys.readouterr().err


def test_force_overwrites_edited_files(seed, package, tmp_path):
    root = generate_package(seed.path, tmp_path).path
    (root / "setup.py").write_text("# mine\n")
    result = generate_package(seed.path, tmp_path, force=True)
    assert result.overwritten == ("setup.py",)
    assert tree(root) == tree(package)


def test_files_the_user_added_are_never_touched(seed, tmp_path):
    root = generate_package(seed.path, tmp_path).path
    added = {root / "launch" / "mine.launch.py": "# mine\n", root / "NOTES.md": "notes\n"}
    for path, text in added.items():
        path.write_text(text)
    generate_package(seed.path, tmp_path, namespace="robot1", force=True)
    assert {path: path.read_text() for path in added} == added


def test_unchanged_generated_files_are_rewritten_silently(seed, tmp_path):
    generate_package(seed.path, tmp_path)
    result = generate_package(seed.path, tmp_path, namespace="robot1")
    assert "config/torch_pipeline.yaml" in result.written and result.overwritten == ()
    config = yaml.safe_load((result.path / "config" / "torch_pipeline.yaml").read_text())
    assert list(config) == ["/robot1/preprocess", "/robot1/policy"]


def test_files_no_longer_generated_are_removed_unless_edited(seed, tmp_path):
    renamed = shutil.copytree(seed.path, tmp_path / "export" / "walker")
    (renamed / "torch_pipeline.yaml").rename(renamed / "walker.yaml")
    root = generate_package(seed.path, tmp_path / "src").path
    (root / "launch" / "torch_pipeline_composed.launch.py").write_text("# mine\n")
    result = generate_package(renamed, tmp_path / "src", package_name=PACKAGE)
    assert "launch/torch_pipeline.launch.py" in result.removed
    assert result.kept == ("launch/torch_pipeline_composed.launch.py",)
    assert (root / "launch" / "walker.launch.py").is_file()
    assert not (root / "launch" / "torch_pipeline.launch.py").exists()


@pytest.mark.parametrize(
    "name", ["Torch_ros", "1robot", "my-robot", "my__robot", "leapp_ros", "class"]
)
def test_invalid_package_name_is_rejected(seed, tmp_path, name):
    with pytest.raises(GenerateError, match="not a valid ROS 2 package name"):
        generate_package(seed.path, tmp_path, package_name=name)
    assert not any(tmp_path.iterdir())


def test_default_package_name_is_the_pipeline_name_made_valid():
    assert default_package_name("torch_pipeline") == "torch_pipeline_ros"
    assert default_package_name("Walker-2D policy") == "walker_2d_policy_ros"
    assert default_package_name("2d") == "pipeline_2d_ros"
    assert check_package_name("robot1_policy") == "robot1_policy"


def test_export_with_a_damaged_artifact_is_not_generated(seed, tmp_path):
    damaged = shutil.copytree(seed.path, tmp_path / "export")
    with open(damaged / "policy.onnx", "ab") as handle:
        handle.write(b"\0")
    with pytest.raises(SpecError, match=r"policy\.onnx"):
        generate_package(damaged, tmp_path / "src")
    assert not (tmp_path / "src").exists()


def test_generated_export_keeps_the_spec_bytes(seed, package):
    original = spec_module.load(seed.path).path
    assert (package / "export" / "torch_pipeline.yaml").read_bytes() == original.read_bytes()


def test_export_without_examples_gives_a_package_without_them(seed, tmp_path):
    bare = shutil.copytree(seed.path, tmp_path / "export" / "torch_pipeline")
    (bare / "torch_pipeline_examples.safetensors").unlink()
    spec_file = bare / "torch_pipeline.yaml"
    lines = spec_file.read_text().splitlines(keepends=True)
    spec_file.write_text("".join(line for line in lines if "examples:" not in line))
    root = generate_package(bare, tmp_path / "src").path
    assert not (root / "export" / "torch_pipeline_examples.safetensors").exists()
    assert "examples.safetensors" not in (root / "setup.py").read_text()
    assert 'EXAMPLES_FILE = ""' in (root / PACKAGE / "__init__.py").read_text()
