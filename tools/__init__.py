"""Developer tools: stub generation and drift checks."""
