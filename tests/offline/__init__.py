"""Tier 1, offline: no database, no server. The engine, the config and what the web side computes alone.

`make test-offline` runs this tier alone; it needs nothing but the checkout's .venv.
"""
