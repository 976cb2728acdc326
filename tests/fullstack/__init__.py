"""Full-stack tests: every service as its own process on localhost, started by the launcher ``make run``
uses (:class:`libs.launcher.Stack`), and players who reach it only through the gateway with signed tokens.

The stack starts once per database backend for the whole folder (``conftest.py``); each test uses fresh
player ids, so tests never see each other's tables, matches or ratings.
"""
