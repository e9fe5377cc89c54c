"""The built-in tiny model's vocabulary and size, without building it (no torch: the web side reads this)."""

from __future__ import annotations

SPECIALS = ["<pad>", "<bos>", "<eos>", "<unk>"]
CHARSET = [chr(c) for c in range(32, 127)] + ["\n"]  # printable ASCII and newline
VOCAB_SIZE = len(SPECIALS) + len(CHARSET)
MAX_POSITIONS = 512


def tiny_parameters(hidden_size: int, layers: int) -> int:
    """Parameters of tiny_network: a Llama with tied embeddings, as many key/value heads as heads and an
    MLP 3x as wide; per block 4 H² of attention, 3 H·3H of MLP and two norms; one final norm."""
    h = hidden_size
    return VOCAB_SIZE * h + layers * (4 * h * h + 9 * h * h + 2 * h) + h
