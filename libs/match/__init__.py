"""The match runtime every rules service shares: one writer per match, an append-only log committed
before anything is acknowledged, clocks, deadlines, presence, and watch streams that resume by sequence.

- :mod:`libs.match.ids`: match ids that name their family and shard.
- :mod:`libs.match.family`: what a game family plugs in (its engine and its codecs).
- :mod:`libs.match.model`: the pure part: a match record and the events that step it.
- :mod:`libs.match.store`: the log, match summaries and results in the database.
- :mod:`libs.match.deadlines`: wake-ups, from the clock service or the local event loop.
- :mod:`libs.match.actor`: one live match: its lock, its watchers, the live path.
- :mod:`libs.match.servicer` and :mod:`libs.match.service`: the generic gRPC RulesService.
"""
