"""What the tests share: exports of the examples, eager references, graphs and processes to
drive, simulated robots. pytest puts ``test/`` on ``sys.path`` (``pythonpath`` in
pyproject.toml), so a test imports ``support.<module>``."""
