"""Benchmarks: ``make bench`` prints speed and memory figures (never pass/fail timings in tests)."""
