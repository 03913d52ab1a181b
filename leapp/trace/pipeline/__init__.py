"""The recording of one pipeline: its node runs, where their inputs come from, states, buffers.

The top of :mod:`leapp.trace`: what :mod:`leapp.session` and :mod:`leapp.compilation` use.
"""
