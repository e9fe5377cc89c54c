"""Bridges from other training libraries to Rollout Lab's external runs (rolloutlab_client.client): trl."""
