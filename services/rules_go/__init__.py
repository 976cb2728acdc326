"""The go rules service (``rules-go``): the match runtime with the go family."""
