"""Tests of the game engines (``libs/engines``)."""
