"""Tests of the go engine (``libs/engines/go``)."""
