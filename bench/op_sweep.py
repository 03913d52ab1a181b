"""Sweep torch's OpInfo database through leapp: every op as one node, every backend, checked by
the independent runner against eager PyTorch.

One *case* is one OpInfo (float32, CPU) with its first sample input, when that input is a
tensor. Every tensor leaf of the sample (input, args, kwargs, also inside lists) becomes an
input port ``in0``, ``in1``, ...; every tensor leaf of the result an output port ``out0``, ...
A case is traced in a session of its own, exported with one backend, and its artifact is loaded
with leapp's runner (:func:`leapp.run.model.load_model`) and compared with eager PyTorch on the
traced values and on perturbed ones. Outcomes:

- ``ok``: exported, and the artifact matches eager on both inputs;
- ``refused``: tracing or export raised a ``LeappError`` (a clear refusal);
- ``crash``: anything else raised (a raw torch / onnx / runtime exception);
- ``wrong``: the artifact ran but differs from eager (shape, dtype or values).

Tracing and export (:func:`export_case`) use only the API NVIDIA's LEAPP shares with ours
(``leapp.start``, ``annotate.input_tensors`` / ``output_tensors``, ``leapp.stop``,
``leapp.compile_graph``), so ``bench/export_coverage.py`` can run them under another ``leapp``
in another Python; checking (:func:`check_case`) always uses this repository's runner.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import queue
import shutil
import subprocess
import sys
import tempfile
import threading
import time
import traceback
import warnings
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
import torch.utils._pytree as pytree

BACKENDS = ("jit", "onnx", "pt2")
OUTCOMES = ("ok", "refused", "crash", "wrong")
NODE = "op"
RTOL, ATOL = 1e-3, 1e-4

# Ops whose values are random or uninitialized (a second eager run also catches most of them).
_UNDEFINED_VALUES = ("empty", "rand", "normal", "bernoulli", "uniform", "dropout", "multinomial")


@dataclass(frozen=True)
class Case:
    """One OpInfo with its first sample: ``tensors`` are the input ports, in order."""

    key: str
    call: Callable[..., Any]
    tensors: tuple[torch.Tensor, ...]
    spec: Any  # the pytree spec of (input, args, kwargs)
    leaves: tuple[Any, ...]  # non-tensor leaves as they are, tensor leaves as None

    def arguments(self, tensors) -> tuple[Any, tuple, dict]:
        values = iter(tensors)
        leaves = [next(values) if leaf is None else leaf for leaf in self.leaves]
        return pytree.tree_unflatten(leaves, self.spec)

    def eager(self, tensors) -> list[torch.Tensor]:
        first, args, kwargs = self.arguments([t.clone() for t in tensors])
        with torch.no_grad():
            return pytree.tree_leaves(self.call(first, *args, **kwargs))


@dataclass(frozen=True)
class Result:
    outcome: str
    detail: str = ""
    seconds: float = 0.0


def case_key(op) -> str:
    return f"{op.name}.{op.variant_test_name}" if op.variant_test_name else op.name


def all_cases(keys: set[str] | None = None) -> Iterator[Case | tuple[str, str]]:
    """Every sweepable case (a :class:`Case`), or ``(key, reason)`` for an op that is skipped.

    ``keys`` limits the sweep to those ops. Sample values are made under a seed per op, so a
    case is the same in every process and whatever ops come before it."""
    from torch.testing._internal.common_methods_invocations import op_db

    seen = set()
    for op in op_db:
        key = case_key(op)
        if key in seen or (keys is not None and key not in keys):
            continue
        seen.add(key)
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                yield _make_case(op, key)
        except _Skip as e:
            yield key, str(e)


class _Skip(Exception):  # noqa: N818 (a signal, not an error)
    pass


def _first_sample(op, seed: int):
    torch.manual_seed(seed)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            return next(iter(op.sample_inputs("cpu", torch.float32, requires_grad=False)))
        except StopIteration:
            raise _Skip("no sample input") from None
        except Exception as e:
            raise _Skip(f"no sample input ({type(e).__name__})") from e


def _make_case(op, key: str) -> Case:
    if torch.float32 not in op.supported_dtypes("cpu"):
        raise _Skip("no float32 on CPU")
    seeded = "wrapper_set_seed" in getattr(getattr(op.op, "__code__", None), "co_names", ())
    if (
        seeded
        or getattr(op, "has_nondeterministic_output", False)
        or any(word in op.name for word in _UNDEFINED_VALUES)
    ):
        raise _Skip("random or uninitialized values")
    sample = _first_sample(op, seed=0)
    if not isinstance(sample.input, torch.Tensor):
        raise _Skip("first sample input is not a tensor")
    leaves, spec = pytree.tree_flatten((sample.input, sample.args, sample.kwargs))
    tensors = tuple(leaf for leaf in leaves if isinstance(leaf, torch.Tensor))
    if any(t.layout != torch.strided or t.is_complex() for t in tensors):
        raise _Skip("sparse or complex input")
    again = _first_sample(op, seed=0)
    other, _ = pytree.tree_flatten((again.input, again.args, again.kwargs))
    if len(other) != len(leaves) or not all(map(_same, leaves, other)):
        raise _Skip("samples are not deterministic")
    case = Case(
        key=key,
        call=op.op,
        tensors=tuple(t.detach().clone() for t in tensors),
        spec=spec,
        leaves=tuple(None if isinstance(leaf, torch.Tensor) else leaf for leaf in leaves),
    )
    try:
        first = case.eager(case.tensors)
        second = case.eager(case.tensors)
    except Exception as e:
        raise _Skip(f"eager fails ({type(e).__name__})") from e
    if not first or not all(isinstance(value, torch.Tensor) for value in first):
        raise _Skip("result is not a tensor or tuple of tensors")
    if any(value.layout != torch.strided or value.dtype == torch.complex32 for value in first):
        raise _Skip("sparse or complex32 result")
    if not all(map(_same, first, second)):
        raise _Skip("eager results differ from run to run")
    return case


def _same(a: Any, b: Any) -> bool:
    if isinstance(a, torch.Tensor) and isinstance(b, torch.Tensor):
        return a.dtype == b.dtype and a.shape == b.shape and (torch.equal(a, b) or _all_nan(a, b))
    if isinstance(a, torch.Tensor) or isinstance(b, torch.Tensor):
        return False
    return a == b or (a != a and b != b)


def _all_nan(a: torch.Tensor, b: torch.Tensor) -> bool:
    if not a.dtype.is_floating_point:
        return False
    return bool(((a == b) | (a.isnan() & b.isnan())).all())


def export_case(case: Case, backend: str, directory: Path) -> Result | None:
    """Trace ``case`` as node ``op`` of pipeline ``op`` under ``directory`` and compile it with
    ``backend``. None when it compiled, else the refusal or crash."""
    import leapp
    from leapp import annotate

    names = [f"in{i}" for i in range(len(case.tensors))]
    try:
        leapp.start("op", save_path=str(directory))
        traced = annotate.input_tensors(
            NODE, dict(zip(names, map(torch.clone, case.tensors), strict=True))
        )
        if isinstance(traced, dict):
            traced = tuple(traced.values())
        elif not isinstance(traced, (tuple, list)):
            traced = (traced,)
        first, args, kwargs = case.arguments(traced)
        results = pytree.tree_leaves(case.call(first, *args, **kwargs))
        outputs = {f"out{i}": value for i, value in enumerate(results)}
        annotate.output_tensors(NODE, outputs, export_with=backend)
        leapp.stop()
        compiled = leapp.compile_graph()
        if hasattr(compiled, "values") and not all(compiled.values()):
            return Result("refused", "validation failed")
    except Exception as e:
        _abandon_session()
        return _classify(e)
    return None


def _classify(error: Exception) -> Result:
    first_line = (str(error).strip().splitlines() or [""])[0][:300]
    detail = f"{type(error).__name__}: {first_line}"
    refused = any(
        cls.__module__.split(".")[0] == "leapp" and cls.__name__ != "Exception"
        for cls in type(error).__mro__
    )
    if not refused:
        detail += " @ " + _origin(error)
    return Result("refused" if refused else "crash", detail)


def _origin(error: Exception) -> str:
    frames = traceback.extract_tb(error.__traceback__)
    return f"{Path(frames[-1].filename).name}:{frames[-1].lineno}" if frames else "?"


def _abandon_session() -> None:
    import leapp

    with contextlib.suppress(Exception):
        leapp.stop()
    session = getattr(leapp, "session", None)
    if session is not None and hasattr(session, "_active"):
        session._active = None


def check_case(case: Case, directory: Path) -> Result:
    """Load the exported node with this repository's runner and compare it with eager PyTorch
    on the traced inputs and on perturbed ones."""
    from leapp import spec as spec_module
    from leapp.run.model import load_model

    try:
        spec = spec_module.load(directory / "op" / "op.yaml", verify_checksums=False)
        model = load_model(spec, NODE)
    except Exception as e:
        return Result("crash", f"runner cannot load the export: {_classify(e).detail}")
    ports = [int(port.name.removeprefix("in")) for port in model.inputs]
    generator = torch.Generator().manual_seed(1)
    for label, tensors in (("traced", case.tensors), ("perturbed", _perturb(case, generator))):
        try:
            expected = case.eager(tensors)
        except Exception:
            continue  # the perturbed values left the op's domain
        try:
            got = model.run([tensors[i].clone() for i in ports])
        except Exception as e:
            return Result("crash", f"runner fails on the {label} input: {_classify(e).detail}")
        problem = _difference(got, expected, ties=_has_ties(tensors))
        if problem and _matches_in_double(case, tensors, got):
            problem = ""
        if problem:
            return Result("wrong", f"{label} input: {problem}")
    return Result("ok")


def _matches_in_double(case: Case, tensors, got) -> bool:
    """Whether ``got`` matches eager computed in float64 and rounded: an artifact that computes
    more exactly than eager float32 (near a pole of digamma) is not wrong."""
    if not any(t.dtype == torch.float32 for t in tensors):
        return False
    try:
        wide = case.eager([t.double() if t.dtype == torch.float32 else t for t in tensors])
    except Exception:
        return False
    if len(wide) != len(got):
        return False
    rounded = [w.to(g.dtype) if w.dtype != g.dtype else w for w, g in zip(wide, got, strict=True)]
    return not _difference(got, rounded, ties=_has_ties(tensors))


def _perturb(case: Case, generator: torch.Generator) -> tuple[torch.Tensor, ...]:
    out = []
    for tensor in case.tensors:
        if tensor.dtype.is_floating_point:
            noise = torch.randn(tensor.shape, generator=generator, dtype=tensor.dtype)
            tensor = tensor + 0.05 * noise * (tensor.abs().mean() + 0.1)
        out.append(tensor)
    return tuple(out)


def _has_ties(tensors) -> bool:
    return any(
        t.dtype.is_floating_point and t.numel() > 1 and t.unique().numel() < t.numel()
        for t in tensors
    )


def _difference(got, expected, ties: bool) -> str:
    """What differs between the artifact's and eager's results, or "". With ``ties`` (equal
    values in a floating input) integer results are not compared: sort and friends may order
    equal values either way, and both orders are right."""
    if len(got) != len(expected):
        return f"{len(got)} outputs, eager has {len(expected)}"
    for index, (a, b) in enumerate(zip(got, expected, strict=True)):
        if a.dtype != b.dtype or a.shape != b.shape:
            return f"out{index} is {a.dtype} {list(a.shape)}, eager {b.dtype} {list(b.shape)}"
        if ties and not (a.dtype.is_floating_point or a.dtype.is_complex):
            continue
        try:
            torch.testing.assert_close(a, b, rtol=RTOL, atol=ATOL, equal_nan=True)
        except AssertionError as e:
            return f"out{index}: " + " ".join(str(e).split())[:200]
    return ""


def run_case(case: Case, backend: str, directory: Path) -> Result:
    """Export ``case`` with ``backend`` under ``directory`` (this repository's leapp) and
    check the artifact."""
    logging.disable(logging.WARNING)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            refused = export_case(case, backend, directory)
            return refused if refused is not None else check_case(case, directory)
    finally:
        logging.disable(logging.NOTSET)


# --- running cases in worker processes -------------------------------------------------------
#
# A case can kill the process that runs it (ONNX Runtime raised SIGFPE on an empty tensor), so
# cases run in worker processes: ``python bench/op_sweep.py --worker MODE ROOT`` reads
# ``key backend`` lines on stdin and answers one ``@@ {json}`` line each on stdout. A worker that
# dies takes only its current case with it (a crash); a fresh one takes over.

_MARK = "@@ "


def sweep(
    keys: list[str],
    backends: tuple[str, ...] = BACKENDS,
    *,
    workers: int = 2,
    python: str = sys.executable,
    mode: str = "full",
    root: Path | None = None,
    progress: Callable[[str, str, Result], None] | None = None,
) -> dict[str, dict[str, Result]]:
    """Run every ``(key, backend)`` in ``workers`` processes of ``python``.

    ``mode`` ``"full"`` exports and checks in the worker; ``"export"`` only exports, keeping
    each export under ``root/<key>/<backend>`` (``ok`` there means "compiled"); ``"check"``
    only checks such exports."""
    jobs = queue.Queue()
    for key in keys:
        for backend in backends:
            jobs.put((key, backend))
    results: dict[str, dict[str, Result]] = {key: {} for key in keys}
    lock = threading.Lock()

    def record(key: str, backend: str, result: Result) -> None:
        with lock:
            results[key][backend] = result
            if progress is not None:
                progress(key, backend, result)

    with tempfile.TemporaryDirectory(prefix="op_sweep_") as scratch:
        base = Path(root) if root is not None else Path(scratch)
        threads = [
            threading.Thread(target=_drive, args=(jobs, record, python, mode, base))
            for _ in range(max(1, workers))
        ]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
    return results


def _drive(jobs: queue.Queue, record, python: str, mode: str, root: Path) -> None:
    """Feed jobs to one worker process at a time, starting a new one when it dies."""
    worker = None
    while True:
        try:
            key, backend = jobs.get_nowait()
        except queue.Empty:
            break
        if worker is None or worker.poll() is not None:
            worker = _start_worker(python, mode, root)
        worker.stdin.write(f"{key} {backend}\n")
        worker.stdin.flush()
        started = time.perf_counter()
        answer = _read_answer(worker)
        seconds = time.perf_counter() - started
        if answer is None:
            code = worker.wait()
            died = f"the process died (exit status {code})"
            record(key, backend, Result("crash", died, seconds))
            worker = None
        else:
            record(key, backend, Result(answer["outcome"], answer["detail"], seconds))
    if worker is not None and worker.poll() is None:
        worker.stdin.close()
        worker.wait()


def _start_worker(python: str, mode: str, root: Path) -> subprocess.Popen:
    # Started in root, so that a second Python imports its own leapp, not this checkout's.
    return subprocess.Popen(
        [python, str(Path(__file__).resolve()), "--worker", mode, str(root)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
        env={**os.environ, "OMP_NUM_THREADS": "1", "PYTHONWARNINGS": "ignore"},
        cwd=str(root),
    )


def _read_answer(worker: subprocess.Popen) -> dict | None:
    for line in worker.stdout:
        if line.startswith(_MARK):
            return json.loads(line[len(_MARK) :])
    return None


def _serve(mode: str, root: Path) -> None:
    """The worker loop (see :func:`sweep`)."""
    torch.set_num_threads(1)
    with contextlib.suppress(ImportError):  # imported up front: not timed as the first case's
        import onnxruntime  # noqa: F401

        import leapp  # noqa: F401
    cases: dict[str, Case] = {}
    for line in sys.stdin:
        key, backend = line.split()
        if key not in cases:
            built = next(all_cases({key}))
            cases[key] = built if isinstance(built, Case) else None
        case = cases[key]
        # Each case starts from the same global torch state, whichever worker runs it and
        # whatever case ran there before (a case that failed inside a no_grad region of
        # torch.export can leave grad mode off, and the next case would export differently).
        torch.set_grad_enabled(True)
        if case is None:
            result = Result("skipped", "not a case here")
        else:
            result = _run_in_mode(case, backend, mode, root / key / backend)
        answer = json.dumps({"outcome": result.outcome, "detail": result.detail})
        sys.stdout.write(f"{_MARK}{answer}\n")
        sys.stdout.flush()


def _run_in_mode(case: Case, backend: str, mode: str, directory: Path) -> Result:
    if mode == "full":
        with tempfile.TemporaryDirectory(prefix="op_case_") as scratch:
            return run_case(case, backend, Path(scratch))
    logging.disable(logging.WARNING)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        if mode == "export":
            shutil.rmtree(directory, ignore_errors=True)
            directory.mkdir(parents=True)
            refused = export_case(case, backend, directory)
            return refused if refused is not None else Result("ok", "compiled")
        return check_case(case, directory)


if __name__ == "__main__" and sys.argv[1:2] == ["--worker"]:
    _serve(sys.argv[2], Path(sys.argv[3]))
