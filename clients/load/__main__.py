"""``python -m clients.load [OPTIONS]``: the load-testing harness (``skillclassics load``)."""

import sys

from clients.load.cli import main

sys.exit(main())
