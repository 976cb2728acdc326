"""The gin rummy rules service: the match runtime with the gin family (standard, straight, Oklahoma)."""
