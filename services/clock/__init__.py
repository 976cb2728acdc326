"""The clock service: a durable deadline scheduler with millisecond resolution."""
