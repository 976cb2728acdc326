"""The project's one compiled part: backgammon's C legal-play generator (``libs/engines/backgammon/_native``).

Everything else about the package is in pyproject.toml; setuptools reads this file for the extension, so
``pip install .`` (the container image) builds it, and ``make setup`` builds it in place:

    .venv/bin/python setup.py build_ext --inplace

Optional: where it cannot be compiled (no C compiler), the install goes on without it,
``libs.engines.backgammon.native.available`` is False and the pure-Python generator is used (the same
plays, about ten times slower on the worst doubles positions).
"""

from __future__ import annotations

from setuptools import Extension, setup  # type: ignore[import-untyped]

setup(
    ext_modules=[
        Extension(
            "libs.engines.backgammon._native",
            ["libs/engines/backgammon/_native.c"],
            extra_compile_args=["-O2"],
            optional=True,
        )
    ],
)
