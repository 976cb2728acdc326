"""``python -m clients.cli``: run the ``skillclassics`` command line."""

from clients.cli.main import main

raise SystemExit(main())
