"""Tier 2, database: the platform against a real PostgreSQL (and Redis where a test sends to it), in process.

No server, worker or browser is started here (`make test-database`).
"""
