"""What the tiers share: the platform fixtures, the live-process helpers, the fault tap."""
