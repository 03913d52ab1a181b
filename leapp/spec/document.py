"""The YAML document of a spec file: :func:`read_yaml`, PyYAML's safe loader made strict.

Reading checks only what YAML itself can get wrong: the text (UTF-8, no control characters),
the syntax, keys repeated within a mapping (reported as problems, as later entries silently
replace earlier ones), values nested deeper than :data:`MAX_DEPTH`, an alias inside its own
anchor (a value containing itself), numbers and dates Python cannot hold. What the document
means is :mod:`leapp.spec.parser`'s job.
"""

from __future__ import annotations

import functools
from pathlib import Path
from typing import Any

from leapp.errors import SpecError

__all__ = ["MAX_DEPTH", "read_yaml"]

#: how deep YAML values may nest (a spec needs 8 levels; Python's stack ends near 300)
MAX_DEPTH = 100


def read_yaml(path: Path) -> tuple[dict[Any, Any], list[str]]:
    """The top-level mapping of ``path`` and the duplicate-key problems found on the way.

    Raises:
        SpecError: the file cannot be read, is not YAML (or holds values nested deeper than
            :data:`MAX_DEPTH`, an alias inside its own anchor, a number or date Python cannot
            hold), or is not a mapping.
    """
    import yaml

    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as e:
        raise SpecError(
            f"{path}: cannot read the spec ({e}); check the file exists and is UTF-8 text",
            (f"{path}: unreadable: {e}",),
        ) from e
    loader = None
    try:
        loader = _loader_class()(text)  # its reader refuses control characters at once
        data = loader.get_single_data()
    # ValueError, ArithmeticError: an integer of more than 4300 digits, a date like 2001-02-30
    except (yaml.YAMLError, ValueError, ArithmeticError, RecursionError) as e:
        raise SpecError(
            f"{path}: not valid YAML: {e}\nFix the syntax at the position shown, or re-export.",
            (f"{path}: invalid YAML: {e}",),
        ) from e
    finally:
        if loader is not None:
            loader.dispose()
    if not isinstance(data, dict):
        found = type(data).__name__
        raise SpecError(
            f"{path}: expected a YAML mapping with models, pipeline and system information, "
            f"but found {found}; is this a leapp spec?",
            (f"{path}: expected a mapping but found {found}",),
        )
    problems = [
        f"line {line}: duplicate key {key!r}; a later entry silently replaces an earlier one, "
        "keep only one"
        for line, key in loader.duplicates
    ]
    return data, problems


@functools.cache
def _loader_class() -> type:
    import yaml

    class SpecLoader(yaml.SafeLoader):
        """Safe loader that records duplicate mapping keys instead of dropping them, and
        refuses values nested deeper than MAX_DEPTH and aliases inside their own anchor (a
        value containing itself, which no walk over the spec could finish)."""

        def __init__(self, stream: str) -> None:
            super().__init__(stream)
            self.duplicates: list[tuple[int, str]] = []
            self.open_anchors: list[str | None] = []  # of the nodes being composed

        def compose_node(self, parent: Any, index: Any) -> Any:
            event = self.peek_event()
            problem = None
            if isinstance(event, yaml.AliasEvent) and event.anchor in self.open_anchors:
                problem = f"found the alias *{event.anchor} inside its own anchor"
            elif len(self.open_anchors) >= MAX_DEPTH:
                problem = f"found values nested more than {MAX_DEPTH} levels deep"
            if problem is not None:
                raise yaml.composer.ComposerError(None, None, problem, event.start_mark)
            self.open_anchors.append(getattr(event, "anchor", None))
            try:
                return super().compose_node(parent, index)
            finally:
                self.open_anchors.pop()

        def construct_mapping(self, node: Any, deep: bool = False) -> Any:
            seen: set[str] = set()
            for key_node, _ in node.value:
                if isinstance(key_node, yaml.ScalarNode):
                    if key_node.value in seen:
                        self.duplicates.append((key_node.start_mark.line + 1, key_node.value))
                    seen.add(key_node.value)
            return super().construct_mapping(node, deep=deep)

    return SpecLoader
