"""Fuzzing the spec loader (leapp.spec.load) with hypothesis.

The rule: whatever file an export holds, loading it gives a Spec or a SpecError, never another
exception, within a bounded amount of work (Python calls, counted: no clock) and without
allocating what the spec describes (a 10**12-element shape is a number, not a buffer). A loaded
spec also survives dump and load unchanged. Files are random: YAML values of any structure,
specs built from random nodes, ports, shapes and flows with random references, valid specs
mutated (keys dropped, values replaced by random ones or deep nesting), and raw text and bytes.
Inputs that once failed are kept as explicit tests.
``bench/fuzz.py`` runs the same checks for longer.
"""

from __future__ import annotations

import contextlib
from pathlib import Path
from typing import Any

import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from support.budget import measured

from leapp import spec as spec_file
from leapp.errors import SpecError
from leapp.spec import BACKENDS, DTYPES, Spec

#: how many examples, their randomness and deadline come from the profile (test/conftest.py);
#: bench/fuzz.py runs the same checks for longer
SETTINGS = settings(
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
CALLS = 2_000_000  # the most Python calls loading one spec may make (a valid one makes ~10**4)
MEGABYTES = 100  # the most one spec may allocate while loading

# --- random YAML ---------------------------------------------------------------------------

names = st.one_of(
    st.sampled_from(["a", "b", "policy", "x", "obs", ""]),
    st.text(max_size=12),
    st.integers(-3, 3),
)
scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-5, 5),
    st.integers(),
    st.integers(-(10**400), 10**400),
    st.floats(),
    st.text(max_size=16),
    st.sampled_from(["float32", "tensor", "jit", "a/x", "b/y", "..", "/etc/passwd"]),
)
values = st.recursive(
    scalars,
    lambda children: st.one_of(
        st.lists(children, max_size=4),
        st.dictionaries(st.one_of(st.text(max_size=8), st.integers()), children, max_size=4),
    ),
    max_leaves=16,
)
shapes = st.one_of(
    st.lists(st.integers(0, 4), max_size=3),
    st.lists(st.sampled_from([-1, 0, 10**6, 10**12, 2**63, 10**30]), max_size=4),
    values,
)


@st.composite
def ports(draw) -> dict[str, Any]:
    port: dict[str, Any] = {
        "name": draw(names),
        "dtype": draw(st.one_of(st.sampled_from(DTYPES), values)),
        "shape": draw(shapes),
        "type": draw(st.one_of(st.just("tensor"), values)),
    }
    if draw(st.booleans()):
        port["kind"] = draw(st.one_of(st.sampled_from(["state/joint/position", "kp"]), values))
    if draw(st.booleans()):
        port["element_names"] = draw(
            st.one_of(
                st.lists(st.one_of(st.lists(names, max_size=5), st.none(), names), max_size=3),
                values,
            )
        )
    if draw(st.booleans()):
        port["temporal_period_ms"] = draw(
            st.one_of(st.floats(), st.integers(-(10**400), 10**400), values)
        )
    return port


@st.composite
def specs(draw) -> dict[str, Any]:
    """A spec document: random nodes, ports and parameters, flows between random (mostly
    existing) ports."""
    nodes = draw(st.lists(names, min_size=1, max_size=4, unique=True))
    models = {}
    refs: dict[str, list[str]] = {"inputs": [], "outputs": []}
    for node in nodes:
        entry = {role: draw(st.lists(ports(), max_size=3)) for role in refs}
        for role, items in entry.items():
            refs[role] += [f"{node}/{port['name']}" for port in items]
        entry["parameters"] = {
            "model_path": draw(st.one_of(st.none(), st.just(f"{node}.pt"), values)),
            "md5sum": draw(st.one_of(st.none(), st.text("0123456789abcdef", min_size=32))),
            "sha256sum": draw(st.one_of(st.none(), values)),
            "backend": draw(st.one_of(st.none(), st.sampled_from(BACKENDS), values)),
            "warp_segments": draw(st.one_of(st.just(0), values)),
        }
        models[node] = entry
    reference = {
        role: st.one_of(st.sampled_from(refs[role] or ["a/x"]), st.text(max_size=8))
        for role in refs
    }
    flow = st.dictionaries(reference["outputs"], st.lists(reference["inputs"], max_size=3))
    by_node = st.dictionaries(names, st.lists(names, max_size=3), max_size=3)
    pipeline = {
        "data_flow": draw(st.one_of(flow, values)),
        "feedback_flow": draw(st.one_of(flow, values)),
        "inputs": draw(st.one_of(by_node, values)),
        "outputs": draw(st.one_of(by_node, values)),
    }
    for key in ("examples", "initial_values", "configs"):
        if draw(st.booleans()):
            pipeline[key] = draw(values)
    return {"models": models, "pipeline": pipeline, "system information": draw(values)}


def _slots(document: Any, path: tuple = ()) -> list[tuple]:
    """The path of every value in ``document`` (dict keys and list indices)."""
    found = [path]
    if isinstance(document, dict):
        for key, value in document.items():
            found += _slots(value, (*path, key))
    elif isinstance(document, list):
        for index, value in enumerate(document):
            found += _slots(value, (*path, index))
    return found


def _nested(depth: int) -> Any:
    value: Any = 0
    for i in range(depth):
        value = [value] if i % 2 else {"k": value}
    return value


@st.composite
def mutated_specs(draw) -> Any:
    """A spec document with 1-4 values dropped or replaced (random, huge, deeply nested)."""
    document = draw(specs())
    for _ in range(draw(st.integers(1, 4))):
        slots = _slots(document)
        path = slots[draw(st.integers(0, len(slots) - 1))]
        replacement = draw(
            st.one_of(values, st.integers(10, 60).map(_nested), st.just(None), st.just(...))
        )
        if not path:
            document = {} if replacement is ... else replacement
            continue
        parent = document
        for key in path[:-1]:
            parent = parent[key]
        if replacement is ...:
            del parent[path[-1]]
        else:
            parent[path[-1]] = replacement
    return document


def as_yaml(document: Any) -> bytes:
    return yaml.safe_dump(document, allow_unicode=True, sort_keys=False).encode("utf-8")


documents = st.one_of(
    values.map(as_yaml),
    specs().map(as_yaml),
    mutated_specs().map(as_yaml),
    st.text(max_size=200).map(str.encode),
    st.binary(max_size=200),
)

# --- the rule ------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def folder(tmp_path_factory) -> Path:
    return tmp_path_factory.mktemp("fuzz_spec")


def check_load(folder: Path, text: bytes, *, verify_checksums: bool = False) -> Spec | None:
    """Load ``text`` as ``folder/pipe/pipe.yaml``: a Spec or a SpecError, within the work
    budget (:data:`CALLS`) and :data:`MEGABYTES`; a loaded spec dumps and loads back equal.
    Returns the spec, or None for a SpecError."""
    export = folder / "pipe"
    export.mkdir(exist_ok=True)
    (export / "pipe.yaml").write_bytes(text)
    with measured() as work:
        try:
            loaded = spec_file.load(export, verify_checksums=verify_checksums)
        except SpecError as e:
            assert str(e) and all(isinstance(p, str) for p in e.problems)
            loaded = None
    assert work.calls < CALLS, f"loading made {work.calls} Python calls"
    assert work.peak_bytes < MEGABYTES * 2**20, f"loading allocated {work.peak_bytes} bytes"
    if loaded is not None:  # dump writes what load reads back; text, as NaN != NaN
        assert isinstance(loaded, Spec)
        first = spec_file.dump(loaded, folder / "first" / "pipe.yaml").path
        again = spec_file.dump(spec_file.load(first, verify_checksums=False), folder / "again")
        assert again.path.read_text() == first.read_text()
    return loaded


@SETTINGS
@given(documents, st.booleans())
def test_any_file_loads_as_a_spec_or_raises_a_spec_error(folder, text, verify_checksums):
    check_load(folder, text, verify_checksums=verify_checksums)


@SETTINGS
@given(specs())
def test_a_random_spec_loads_or_raises_a_spec_error(folder, document):
    check_load(folder, as_yaml(document))


# --- inputs that once failed, and the limits -------------------------------------------------

VALID = """\
models:
  a:
    inputs:
    - {name: x, dtype: float32, shape: [3], type: tensor}
    outputs:
    - {name: y, dtype: float32, shape: [3], type: tensor}
    parameters: {model_path: null, md5sum: null, sha256sum: null, backend: null}
pipeline:
  inputs: {a: [x]}
  outputs: {a: [y]}
"""


def test_the_valid_spec_of_these_tests_loads(folder):
    assert check_load(folder, VALID.encode()) is not None


@pytest.mark.parametrize(
    "text",
    [
        pytest.param("[" * 5000 + "]" * 5000, id="deeply-nested-lists"),
        pytest.param("a: " + "{b: " * 3000 + "1" + "}" * 3000, id="deeply-nested-mappings"),
        pytest.param(
            VALID.replace("tensor}", "tensor, extra: " + "[" * 3000 + "]" * 3000 + "}", 1),
            id="deep-extra",
        ),
    ],
)
def test_deep_nesting_is_a_spec_error(folder, text):
    with pytest.raises(SpecError, match="nested more than 100 levels deep"):
        spec_file.load(_write(folder, text))


def _write(folder: Path, text: str | bytes) -> Path:
    path = folder / "case" / "case.yaml"
    path.parent.mkdir(exist_ok=True)
    path.write_bytes(text if isinstance(text, bytes) else text.encode("utf-8"))
    return path


def test_an_alias_bomb_loads_within_the_limits(folder):
    """Nested aliases share one list each, so the file is small but a walk over it is 9**9
    long: nothing in load may walk it (a problem message shows a bounded repr)."""
    bomb = "lol0: &l0 [x, x, x, x, x, x, x, x, x]\n" + "".join(
        f"lol{i}: &l{i} [{', '.join([f'*l{i - 1}'] * 9)}]\n" for i in range(1, 10)
    )
    check_within_limits(folder, bomb + VALID.replace("shape: [3]", "shape: *l9"))
    check_within_limits(folder, bomb + VALID.replace("type: tensor}", "type: tensor, b: *l9}"))


def test_an_alias_inside_its_own_anchor_is_a_spec_error(folder):
    """A value containing itself: dump, repr or == over the spec would never end."""
    text = VALID.replace("tensor}", "tensor, loop: &r [*r]}", 1)
    with pytest.raises(SpecError, match=r"alias \*r inside its own anchor"):
        spec_file.load(_write(folder, text))


@pytest.mark.parametrize("shape", ["[1000000000000]", "[1000000, 1000000, 1000000]"])
def test_a_huge_shape_is_a_number_not_an_allocation(folder, shape):
    text = VALID.replace("shape: [3]", f"shape: {shape}")
    assert check_within_limits(folder, text) is not None


@pytest.mark.parametrize("shape", [[2**63], [2**32, 2**32], [0, 10**30]], ids=str)
def test_a_shape_beyond_int64_is_a_spec_error(folder, shape):
    text = VALID.replace("shape: [3]", f"shape: {shape}", 1)
    expected = r"inputs\[0\]\.shape: expected at most 9223372036854775807 elements"
    with pytest.raises(SpecError, match=expected):
        spec_file.load(_write(folder, text))


@pytest.mark.parametrize("period", ["1" + "0" * 400, "-1" + "0" * 400, ".inf", ".nan", "1e400"])
def test_a_temporal_period_out_of_float_range_is_a_spec_error(folder, period):
    text = VALID.replace(
        "type: tensor}\n    outputs", f"type: tensor, temporal_period_ms: {period}}}\n    outputs"
    )
    with pytest.raises(SpecError, match="temporal_period_ms: expected a positive finite number"):
        spec_file.load(_write(folder, text))


def check_within_limits(folder: Path, text: str) -> Spec | None:
    """Loading ``text`` gives a Spec or a SpecError (then None) within the work budget
    (:data:`CALLS`) and 100 MB."""
    path = _write(folder, text)
    loaded = None
    with measured() as work, contextlib.suppress(SpecError):
        loaded = spec_file.load(path, verify_checksums=False)
    assert work.calls < CALLS and work.peak_bytes < MEGABYTES * 2**20, work
    return loaded


@pytest.mark.parametrize(
    "text",
    [
        pytest.param(b"\xff\xfe\x00", id="not-utf8"),
        pytest.param(b"", id="empty"),
        pytest.param(b"\x00", id="nul"),
        pytest.param(b"models: !!python/object:os.system {}", id="python-tag"),
        pytest.param(b"? [a, b]\n: 1", id="list-key"),
        pytest.param(b"? {a: 1}\n: 1", id="mapping-key"),
        # found by fuzzing: errors raised outside yaml.YAMLError
        pytest.param(b"models: {a: \x1f}", id="control-character"),
        pytest.param(b"models: " + b"7" * 5000, id="int-of-5000-digits"),
        pytest.param(b"models: 2001-02-30", id="impossible-date"),
        pytest.param(b"models: 2001-01-01 10:00:00 +99:99", id="impossible-timezone"),
    ],
)
def test_a_file_that_is_no_spec_is_a_spec_error(folder, text):
    with pytest.raises(SpecError):
        spec_file.load(_write(folder, text))
