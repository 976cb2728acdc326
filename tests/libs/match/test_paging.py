"""``ListMatches``' page sizes and page tokens on their own (the service over gRPC is tested in
tests/services/rules_chess/test_list_matches.py)."""

from __future__ import annotations

import pytest

from libs.match.paging import (
    DEFAULT_PAGE_SIZE,
    MAX_PAGE_SIZE,
    PageScope,
    decode_token,
    encode_token,
    page_size,
)
from libs.runtime.errors import InvalidArgument

SCOPE = PageScope.of("chess", 0, ["waiting", "live"])


def test_page_sizes() -> None:
    assert (DEFAULT_PAGE_SIZE, MAX_PAGE_SIZE) == (100, 1_000)
    assert page_size(0) == DEFAULT_PAGE_SIZE
    assert [page_size(n) for n in (1, 99, 1_000)] == [1, 99, 1_000]
    assert page_size(1_001) == page_size(2**31 - 1) == MAX_PAGE_SIZE
    with pytest.raises(InvalidArgument, match="page_size must not be negative, got -5"):
        page_size(-5)


def test_a_token_gives_back_its_position_within_its_scope() -> None:
    token = encode_token(SCOPE, "chess.0.abc")
    assert token.isascii()
    assert "=" not in token  # fits a URL query as it is
    assert decode_token(token, SCOPE) == "chess.0.abc"
    # The filter is a set: order and repetition do not make another one.
    assert decode_token(token, PageScope.of("chess", "0", ["live", "waiting", "live"])) == "chess.0.abc"


@pytest.mark.parametrize(
    ("scope", "reason"),
    [
        (PageScope.of("chess", 0, []), "issued for statuses MATCH_STATUS_LIVE, MATCH_STATUS_WAITING, but"),
        (PageScope.of("chess", 0, ["live"]), "but this request has statuses MATCH_STATUS_LIVE: send"),
        (PageScope.of("chess", 1, ["live", "waiting"]), "issued by chess shard 0, not by this service"),
        (PageScope.of("gin", 0, ["live", "waiting"]), "(gin shard 0)"),
    ],
)
def test_a_token_is_refused_outside_its_scope(scope: PageScope, reason: str) -> None:
    with pytest.raises(InvalidArgument) as caught:
        decode_token(encode_token(SCOPE, "chess.0.abc"), scope)
    assert reason in caught.value.message


@pytest.mark.parametrize(
    "token", ["x", "????", "eyJ2IjoxfQ", encode_token(SCOPE, "chess.0.abc")[:-1], "A" * 2_000]
)
def test_anything_else_is_not_a_token(token: str) -> None:
    with pytest.raises(InvalidArgument, match="page_token is not a page token of ListMatches"):
        decode_token(token, SCOPE)
