"""The fairness service: committed, verifiable random streams for dice, shuffles and coin tosses."""
