"""Action notation and card text."""

from __future__ import annotations

import pytest

from libs.engines.base import MalformedActionError
from libs.engines.gin import (
    GIN,
    BigGin,
    Discard,
    Gin,
    Knock,
    Pass,
    Stock,
    Take,
    canonical_card,
    card_index,
    card_text,
    parse_action,
    rank_of,
    sort_cards,
    suit_of,
    to_card,
    value_of,
)
from tests.libs.engines.gin import CLOCKS, start


@pytest.mark.parametrize(
    ("text", "action"),
    [
        ("take", Take()),
        (" TAKE ", Take()),
        ("pass", Pass()),
        ("stock", Stock()),
        ("biggin", BigGin()),
        ("discard 7H", Discard("7H")),
        ("Discard  th", Discard("TH")),
        ("knock 10s", Knock("TS")),
        ("gin ac", Gin("AC")),
    ],
)
def test_parse_action(text: str, action: object) -> None:
    parsed = parse_action(text)
    assert parsed == action
    assert parse_action(parsed.notation) == parsed


def test_notation_is_canonical() -> None:
    assert Discard("th").notation == "discard TH"
    assert Knock("9s").notation == "knock 9S"
    assert Gin("Kd").notation == "gin KD"
    assert parse_action("discard 7H") != parse_action("knock 7H")


@pytest.mark.parametrize(
    "text",
    [
        "",
        "   ",
        "fold",
        "discard",
        "knock",
        "discard 1H",
        "discard 7X",
        "discard 7H 8H",
        "take 7H",
        "big gin",
        "gin",
    ],
)
def test_malformed_actions(text: str) -> None:
    with pytest.raises(MalformedActionError):
        parse_action(text)


def test_malformed_actions_through_the_engine() -> None:
    state = start("4C 8S 9D 9H QD 2H 3D 5D 6H 8H", "AC 2C 3C 7D 7H 7S 9S TS JS KD", "2D")
    with pytest.raises(MalformedActionError, match="needs a card"):
        GIN.apply(state, 1, "discard", CLOCKS)
    with pytest.raises(MalformedActionError, match="cannot read 'draw'"):
        GIN.apply(state, 1, "draw", CLOCKS)
    with pytest.raises(MalformedActionError, match="not a gin action"):
        GIN.apply(state, 1, 42, CLOCKS)  # type: ignore[arg-type]
    with pytest.raises(MalformedActionError):
        parse_action(7)  # type: ignore[arg-type]


def test_cards() -> None:
    assert card_index("AC") == 0
    assert card_index("KC") == 12
    assert card_index("AD") == 13
    assert card_index("KS") == 51
    assert card_index("td") == card_index("10D") == 13 + 9
    assert card_text(20) == "8D"
    assert canonical_card("qh") == "QH"
    assert [rank_of(card_index(c)) for c in ("AS", "TS", "KS")] == [1, 10, 13]
    assert [suit_of(card_index(c)) for c in ("AC", "AD", "AH", "AS")] == [0, 1, 2, 3]
    assert [value_of(card_index(c)) for c in ("AH", "2H", "9H", "TH", "JH", "QH", "KH")] == [
        1,
        2,
        9,
        10,
        10,
        10,
        10,
    ]
    assert sort_cards(["KS", "AH", "2C", "TC"]) == ("2C", "TC", "AH", "KS")
    assert to_card(5) == 5
    assert to_card("6C") == 5
    for bad in ("", "1C", "ZZ", "7", "7HH"):
        with pytest.raises(MalformedActionError):
            card_index(bad)
    with pytest.raises(MalformedActionError):
        to_card(52)
    with pytest.raises(MalformedActionError):
        to_card(True)
