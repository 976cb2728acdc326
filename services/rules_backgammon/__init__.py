"""The backgammon rules service: the match runtime with the backgammon family (standard, nackgammon,
hypergammon; money games and matches to N points)."""
