"""The matchmaking service: lobby tables, the quick-match queue, Elo ratings and match creation."""
