"""The ``skillclassics`` command-line client (entry point: :func:`clients.cli.main.main`)."""
