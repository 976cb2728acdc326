"""The gateway service: the only client-facing door (see docs/gateway.md)."""
