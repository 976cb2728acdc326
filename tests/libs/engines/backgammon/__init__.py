"""Tests of the backgammon engine (``libs/engines/backgammon``)."""
