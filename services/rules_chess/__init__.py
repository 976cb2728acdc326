"""The chess rules service: the match runtime with the chess family (contest and FIDE rulesets)."""
