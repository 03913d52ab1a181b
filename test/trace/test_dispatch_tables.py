"""TracedTensor and TracedArray hand every call to the functions their recorders register;
importing the value's module alone (in a fresh interpreter) registers every one of them."""

from __future__ import annotations

import re
import subprocess
import sys

import pytest

CHECK = """
import dataclasses, importlib, sys
importlib.import_module(sys.argv[1])
table = getattr(importlib.import_module(sys.argv[2]), sys.argv[3])
fields = dataclasses.fields(table)
print([field.name for field in fields if getattr(table, field.name) is field.default])
"""


TABLES = {
    "leapp.trace.tensors.tensor": ("leapp.trace.tensors.tensor", "DISPATCH"),
    "leapp.trace.arrays.array": ("leapp.trace.arrays.array_calls", "ARRAY_CALLS"),
}


@pytest.mark.parametrize("module", TABLES)
def test_importing_a_traced_value_registers_its_recorders(module):
    # Only the value's module (and its table's) is imported: the package's __init__ imports
    # the recorders.
    command = [sys.executable, "-c", CHECK, module, *TABLES[module]]
    result = subprocess.run(command, capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "[]"


def test_a_table_entry_nobody_registered_says_what_to_import():
    from leapp.trace.tensors.tensor import Dispatch

    with pytest.raises(RuntimeError, match=re.escape("Import leapp.trace.tensors.recorder")):
        Dispatch().torch_call(object, (), (), {})
