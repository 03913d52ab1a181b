"""From recorded traces to graphs: each node's graph, and the edges between nodes.

- :mod:`leapp.graph.node_graph`: a node's graph as recorded (for reading) and as exported
  (pure, pruned, ports named);
- :mod:`leapp.graph.edges`: where every node input comes from (``data_flow``,
  ``feedback_flow``, outside the pipeline);
- :mod:`leapp.graph.listing`: graphs printed one node per line (``leapp.format_graph``).
"""
