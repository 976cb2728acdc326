"""The full-stack tests' stack, the ``platform`` fixture (``tests/fullstack/stack.py``, loaded for the whole
session by ``tests/conftest.py``), reused as it is: the same stack per database backend as
``tests/fullstack`` uses (not one started again for this folder), reached through the gateway with signed
tokens."""
