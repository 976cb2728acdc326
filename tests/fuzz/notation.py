"""What players type, for fuzzing the families' parsers: strings shaped like chess moves (UCI, SAN) and
gin rummy actions, and near misses."""

from __future__ import annotations

from hypothesis import strategies as st

from libs.engines.gin.cards import CARD_TEXT

SAN_LIKE = r"\A([NBRQK]?[a-h]?[1-8]?x?[a-h][1-8](=?[NBRQK])?|O-O(-O)?|0-0(-0)?)[+#]?\Z"
"""SAN-shaped text (a regular expression for ``st.from_regex``): pieces, files, ranks, captures,
promotions (to a king too), castling with letters or zeros, check and mate marks."""
UCI_LIKE = r"\A[a-h][1-8][a-h][1-8][qrbnkpQRBNKP]?\Z"
"""UCI-shaped text, promotion letters of any piece in either case."""
DRAW_WORDS = ("offer_draw", "accept_draw", "decline_draw", "claim_draw", "OFFER_DRAW", "draw")
GIN_WORDS = ("take", "pass", "stock", "biggin", "discard", "knock", "gin", "DISCARD", "Knock", "draw")
NOT_CARDS = ("10H", "1H", "ZZ", "th", "TH ", "AH7", "", "11C", "0S", "🂡")
"""Card-like text: some a card (``10H``, ``th``), most not."""


def gin_words() -> st.SearchStrategy[str]:
    """Gin's words with any card, something that is not a card, or none."""
    return st.builds(
        lambda word, card, sep: f"{word}{sep}{card}".strip() if card else word,
        st.sampled_from(GIN_WORDS),
        st.sampled_from(("", *CARD_TEXT, *NOT_CARDS)),
        st.sampled_from((" ", "  ", "\t", "")),
    )
