"""The load-testing harness: ``skillclassics load`` / ``python -m clients.load`` (docs/load-testing.md).

* :mod:`clients.load.harness`: the engine (pairs of players playing real matches through the gateway,
  closed- and open-loop schedules, ramp-up, the stop) and what it measures;
* :mod:`clients.load.histogram`: the HDR-style latency histogram;
* :mod:`clients.load.procstat`: CPU and memory of the stack's service processes, from ``/proc``;
* :mod:`clients.load.report`: the table, the JSON document and the HDR latency plot;
* :mod:`clients.load.cli`: the command line (``register(subparsers)`` for ``skillclassics``);
* ``clients/load/locustfile.py``: the same players for Locust (``locust -f clients/load/locustfile.py``).
"""
