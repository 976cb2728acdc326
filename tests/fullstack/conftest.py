"""The full-stack tests' stack, the ``platform`` fixture, is in ``tests/fullstack/stack.py``: a plugin that
``tests/conftest.py`` loads for the whole session, so that the examples (``tests/examples``) run against the
same stack instead of starting one of their own."""
