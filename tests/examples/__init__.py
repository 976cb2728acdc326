"""Clients of the contract written in other languages, built and run against a real stack (the TypeScript
client in ``typescript/``, docs/clients.md "A TypeScript client")."""
