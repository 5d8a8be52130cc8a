"""Numbers as every language of the app writes them (the digits and separators stay the same in
English and Chinese, so a number reads alike on both screens)."""

from __future__ import annotations


def count(n: int) -> str:
    """A count (of tokens, bytes, parameters ...) with thousands separators: 2,362,368. Ids and
    indices (a token id, a position, a step) are written as they are."""
    return f"{int(n):,}"
