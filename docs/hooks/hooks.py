"""MkDocs hooks: the pages and pictures generated from the code at build time.

- ``reference/parameters.md`` from ``config/leapp_ros.yaml``;
- ``reference/cli.md`` from the ``leapp-ros`` parser and the launch file's arguments;
- ``reference/backends.md`` from the exporters' expected-coverage table;
- ``pictures/<pipeline>.png`` / ``.svg`` for every example of :mod:`pictures`.

Nothing generated is written into the source tree.
"""

from __future__ import annotations

import logging
import sys
import tempfile
from pathlib import Path

from mkdocs.structure.files import File, Files

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
sys.path.insert(0, str(HERE))

from cli_page import cli_page  # noqa: E402
from coverage_page import coverage_page  # noqa: E402
from parameters_page import parameters_page  # noqa: E402
from pictures import EXAMPLE_PIPELINES, draw  # noqa: E402

logging.getLogger("leapp").setLevel(logging.WARNING)


def on_files(files: Files, config) -> Files:
    pages = {
        "reference/parameters.md": parameters_page(ROOT / "config" / "leapp_ros.yaml"),
        "reference/cli.md": cli_page(ROOT),
        "reference/backends.md": coverage_page(
            ROOT / "test" / "export" / "op_coverage_expected.json"
        ),
    }
    for uri, text in pages.items():
        files.append(File.generated(config, uri, content=text))
    with tempfile.TemporaryDirectory() as folder:
        for name in EXAMPLE_PIPELINES:
            for path in draw(name, Path(folder)):
                files.append(File.generated(config, f"pictures/{path.name}",
                                            content=path.read_bytes()))  # fmt: skip
    return files
