"""Bridges from other training libraries to Rollout Lab's external runs (rolloutlab.client): trl."""
