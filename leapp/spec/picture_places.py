"""The places of everything in the pipeline picture, in picture units: what
:mod:`leapp.spec.picture_layout` computes and :mod:`leapp.spec.picture_scene` draws.

Every place is a frozen value (a rectangle, a measured label, a node's box, a port, a tag, a
legend entry); :class:`Layout` collects them for one spec, with the routes of its edges.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from leapp.spec.picture_routes import Route

__all__ = [
    "ARROW",
    "DOT",
    "Label",
    "Layout",
    "LegendItem",
    "NodePlace",
    "PortPlace",
    "Rect",
    "TagPlace",
]

DOT = 4.5  # radius of a port's dot, centred on the box's border
ARROW = 9.0  # length of an arrowhead


@dataclass(frozen=True)
class Rect:
    x: float
    y: float
    width: float
    height: float

    @property
    def right(self) -> float:
        return self.x + self.width

    @property
    def bottom(self) -> float:
        return self.y + self.height

    def intersects(self, other: Rect) -> bool:
        """Whether the two share more than an edge."""
        return (
            self.x < other.right
            and other.x < self.right
            and self.y < other.bottom
            and other.y < self.bottom
        )


@dataclass(frozen=True)
class Label:
    """One run of text in one style, its left end at ``x`` on the line ``baseline``."""

    text: str
    style: str  # a key of leapp.spec.picture_fonts.STYLES
    x: float
    baseline: float
    width: float
    ascent: float
    descent: float

    @property
    def rect(self) -> Rect:
        return Rect(self.x, self.baseline - self.ascent, self.width, self.ascent + self.descent)


@dataclass(frozen=True)
class PortPlace:
    key: str  # "node/port"
    side: str  # "input" | "output"
    x: float  # on the box's border: the centre of its dot
    y: float  # the row's centre
    name: Label
    detail: Label  # dtype and shape


@dataclass(frozen=True)
class NodePlace:
    node: str
    column: int
    rect: Rect
    header_bottom: float  # the header (name and backend badge) spans rect.y to here
    name: Label
    backend: Label
    badge: Rect  # the backend's badge


@dataclass(frozen=True)
class TagPlace:
    """A pipeline input or output: a labelled tag and the arrow between it and its port."""

    key: str
    kind: str  # "input" | "output"
    rect: Rect
    label: Label
    arrow: tuple[float, float, float]  # (from x, to x, y): the arrow's tip is at "to x"


@dataclass(frozen=True)
class LegendItem:
    kind: str
    label: Label
    sample: Rect  # where the sample line (or the tag around the label) lies


@dataclass
class Layout:
    """Everything's place in the picture of one spec."""

    width: float = 0.0
    height: float = 0.0
    texts: list[Label] = field(default_factory=list)  # title and subtitle
    legend: list[LegendItem] = field(default_factory=list)
    nodes: dict[str, NodePlace] = field(default_factory=dict)
    ports: dict[tuple[str, str], PortPlace] = field(default_factory=dict)  # (side, key)
    port_kind: dict[tuple[str, str], str] = field(default_factory=dict)  # dot colours
    tags: list[TagPlace] = field(default_factory=list)
    routes: list[Route] = field(default_factory=list)

    def labels(self) -> list[Label]:
        """Every text of the picture."""
        found = [*self.texts, *(item.label for item in self.legend)]
        for node in self.nodes.values():
            found += [node.name, node.backend]
        for port in self.ports.values():
            found += [port.name, port.detail]
        return found + [tag.label for tag in self.tags]
