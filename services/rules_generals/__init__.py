"""The Game of the Generals rules service (``rules-generals``): the match runtime with the generals family."""
