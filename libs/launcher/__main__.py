"""``python -m libs.launcher``: run the local stack (see :mod:`libs.launcher.cli`)."""

from libs.launcher.cli import main

if __name__ == "__main__":
    raise SystemExit(main())
