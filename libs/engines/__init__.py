"""The game engines: pure rules libraries, one package per game family, sharing :mod:`libs.engines.base`."""
