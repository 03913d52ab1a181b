"""Warp calls inside a node, recorded as Warp segments: one operator call each in the graph.

Above :mod:`leapp.trace.arrays` (``wp.from_numpy`` of a traced array). Importing this package
imports neither Warp nor the recorder: :mod:`leapp.export` and :mod:`leapp.run` use its
operator (:mod:`leapp.trace.segments.warp_op`) and records
(:mod:`leapp.trace.segments.warp_segment`).
"""
