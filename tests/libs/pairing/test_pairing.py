"""Quick-match pairing: windows, hand-checked pairings, properties against a brute-force reference."""

from __future__ import annotations

import random
from collections.abc import Sequence

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from libs.pairing import BASE_WINDOW, MAX_WINDOW, WIDEN_PER_SECOND, Seeker, compatible, pair, window

S = 1_000
"""One second in milliseconds."""
BLITZ = "chess:blitz-3+2"
RAPID = "chess:rapid-10+0"


def seek(player_id: str, rating: int, entered_at_ms: int = 0, pool: str = BLITZ) -> Seeker:
    return Seeker(player_id, rating, entered_at_ms, pool)


def ids(pairs: Sequence[tuple[Seeker, Seeker]]) -> list[tuple[str, str]]:
    return [(a.player_id, b.player_id) for a, b in pairs]


# --- the window ---------------------------------------------------------------------------------------


def test_the_platform_numbers() -> None:
    assert (BASE_WINDOW, WIDEN_PER_SECOND, MAX_WINDOW) == (50, 10, 400)


@pytest.mark.parametrize(
    ("waited_ms", "expected"),
    [
        (0, 50),
        (999, 50),  # whole seconds only
        (1_000, 60),
        (1_999, 60),
        (10_000, 150),
        (34_999, 390),
        (35_000, 400),
        (3_600_000, 400),
        (-5_000, 50),  # a now before the seek entered counts as no wait
    ],
)
def test_window_widens_by_whole_seconds_up_to_the_cap(waited_ms: int, expected: int) -> None:
    assert window(seek("a", 1500, entered_at_ms=100_000), 100_000 + waited_ms) == expected


def test_compatibility_needs_both_windows() -> None:
    veteran = seek("veteran", 1500, entered_at_ms=0)  # window 400 at 40 s
    newcomer = seek("newcomer", 1700, entered_at_ms=40 * S)  # window 50
    assert not compatible(veteran, newcomer, 40 * S)
    assert compatible(veteran, newcomer, 55 * S)  # newcomer's window is 200 after 15 s
    assert not compatible(veteran, newcomer, 55 * S - 1)


def test_compatibility_is_inclusive_at_the_edge() -> None:
    assert compatible(seek("a", 1500), seek("b", 1550), 0)
    assert not compatible(seek("a", 1500), seek("b", 1551), 0)


def test_compatibility_needs_the_same_pool_and_two_players() -> None:
    assert not compatible(seek("a", 1500), seek("b", 1500, pool=RAPID), 0)
    assert not compatible(seek("a", 1500), seek("a", 1500), 0)
    assert not compatible(seek("a", 1500), seek("a", 1510, entered_at_ms=5), 0)


# --- hand-checked pairings ----------------------------------------------------------------------------


def test_nobody_and_one_seeker_make_no_pair() -> None:
    assert pair([], 0) == []
    assert pair([seek("a", 1500)], 10**9) == []


def test_a_pair_appears_once_the_windows_have_widened() -> None:
    a, b = seek("a", 1500, 0), seek("b", 1620, 0)  # 120 apart: needs a window of 120, i.e. 7 s
    assert pair([a, b], 6_999) == []
    assert pair([a, b], 7_000) == [(a, b)]


def test_after_35_seconds_anyone_within_400_pairs() -> None:
    a, b = seek("a", 1100, 0), seek("b", 1500, 0)
    assert pair([a, b], 34_999) == []
    assert pair([a, b], 35_000) == [(a, b)]
    assert pair([a, seek("b", 1501, 0)], 10**9) == []


def test_different_pools_never_pair() -> None:
    a, b = seek("a", 1500, pool=BLITZ), seek("b", 1500, pool=RAPID)
    assert pair([a, b], 10**9) == []
    c, d = seek("c", 1500, pool=RAPID), seek("d", 1500, pool=BLITZ)
    assert sorted(ids(pair([a, b, c, d], 0))) == [("a", "d"), ("b", "c")]


def test_a_player_never_pairs_with_themselves() -> None:
    # The same player twice in one pool (say, from two devices), and in a second pool.
    first, second = seek("a", 1500, 0), seek("a", 1500, 1)
    assert pair([first, second], 10**9) == []
    assert pair([first, seek("a", 1500, 0, pool=RAPID)], 10**9) == []


def test_a_player_is_paired_at_most_once_across_pools() -> None:
    # "a" seeks blitz and rapid; its longer-waiting seek (blitz) pairs, the rapid one stays out and
    # "c" stays unpaired, although c and a's rapid seek are compatible.
    a_blitz, a_rapid = seek("a", 1500, 0, BLITZ), seek("a", 1500, 1, RAPID)
    b, c = seek("b", 1500, 2, BLITZ), seek("c", 1500, 3, RAPID)
    assert pair([c, b, a_rapid, a_blitz], 10 * S) == [(a_blitz, b)]


def test_nobody_pairs_twice() -> None:
    seekers = [seek(name, 1500, entered) for entered, name in enumerate("abcde")]
    pairs = pair(seekers, 0)
    assert ids(pairs) == [("a", "b"), ("c", "d")]  # e waits for the next round


def test_the_longest_waiting_chooses_first() -> None:
    # x waited longest; y is 10 from x; z is 5 from y. x takes y (its smallest gap), z is left.
    x, y, z = seek("x", 1500, 0), seek("y", 1510, 1 * S), seek("z", 1515, 2 * S)
    assert pair([z, y, x], 3 * S) == [(x, y)]


def test_the_smallest_gap_wins_over_waiting() -> None:
    a = seek("a", 1500, 0)
    near, far = seek("near", 1490, 9 * S), seek("far", 1530, 1 * S)
    assert pair([a, far, near], 10 * S) == [(a, near)]


def test_pairs_come_longer_waiting_first_in_order_of_their_first_seeker() -> None:
    early, late = seek("zed", 1500, 0), seek("amy", 1500, 5 * S)
    other_early, other_late = seek("bob", 2000, 1 * S), seek("cat", 2000, 2 * S)
    assert pair([late, other_late, early, other_early], 6 * S) == [(early, late), (other_early, other_late)]


def test_equal_entries_are_ordered_by_player_id() -> None:
    b, a = seek("b", 1500, 7), seek("a", 1500, 7)
    assert pair([b, a], 7) == [(a, b)]


def test_ties_on_gap_go_to_the_longest_waiting_then_player_id_then_lower_rating() -> None:
    chooser = seek("m", 1500, 0)
    below, above = seek("below", 1480, 2 * S), seek("above", 1520, 1 * S)
    assert pair([chooser, below, above], 5 * S) == [(chooser, above)]  # same gap: above waited longer
    below_now = seek("below", 1480, 1 * S)
    assert pair([chooser, below_now, above], 5 * S) == [(chooser, above)]  # same wait: "above" < "below"
    same_player_low, same_player_high = seek("p", 1480, 1 * S), seek("p", 1520, 1 * S)
    assert pair([chooser, same_player_high, same_player_low], 5 * S) == [(chooser, same_player_low)]


def test_a_long_waiting_seeker_is_not_forced_onto_a_newcomer_out_of_range() -> None:
    veteran = seek("veteran", 1500, 0)  # window 400
    newcomer = seek("newcomer", 1800, 60 * S)  # window 50
    fellow = seek("fellow", 1790, 60 * S)
    assert pair([veteran, newcomer, fellow], 60 * S) == [(fellow, newcomer)]  # same wait: by player_id


def test_the_search_walks_past_incompatible_groups() -> None:
    # The veteran's nearest seekers are newcomers more than 50 points away: outside their own windows.
    # The search walks past them to the other veteran, 220 points away, within both 400-point windows.
    veteran = seek("v", 1500, 0)
    newcomers = [seek(f"n{gap}", 1500 + gap, 40 * S) for gap in (-300, -120, 60, 75, 90)]
    other_veteran = seek("w", 1720, 0)
    result = pair([other_veteran, *newcomers, veteran], 40 * S)
    assert result[0] == (veteran, other_veteran)
    assert ids(result[1:]) == [("n60", "n75")]  # then the newcomers among themselves


# --- properties against a brute-force reference -------------------------------------------------------


def reference_pair(seekers: Sequence[Seeker], now_ms: int) -> list[tuple[Seeker, Seeker]]:
    """The rules of the module documentation, in O(n²)."""
    order = sorted(seekers, key=lambda s: (s.entered_at_ms, s.player_id, s.rating, s.pool))
    taken: set[int] = set()
    used_players: set[str] = set()
    pairs = []
    for i, seeker in enumerate(order):
        if i in taken or seeker.player_id in used_players:
            continue
        taken.add(i)
        candidates = [
            j
            for j, other in enumerate(order)
            if j not in taken and other.player_id not in used_players and compatible(seeker, other, now_ms)
        ]
        if not candidates:
            continue
        best = min(candidates, key=lambda j: (abs(order[j].rating - seeker.rating), j))
        taken.add(best)
        used_players.update((seeker.player_id, order[best].player_id))
        pairs.append((seeker, order[best]))
    return pairs


SEEKERS = st.lists(
    st.builds(
        Seeker,
        player_id=st.sampled_from([f"p{i}" for i in range(40)]),
        rating=st.one_of(st.integers(1400, 1600), st.integers(800, 2600)),
        entered_at_ms=st.integers(0, 60 * S),
        pool=st.sampled_from((BLITZ, BLITZ, RAPID)),
    ),
    max_size=60,
)
NOW = st.integers(0, 100 * S)


def check_pairing(seekers: Sequence[Seeker], pairs: Sequence[tuple[Seeker, Seeker]], now_ms: int) -> None:
    """Every pair is compatible and longer-waiting first, nobody is paired twice, nobody left out could
    have been paired with anybody else left out."""
    players = [seeker.player_id for pair_ in pairs for seeker in pair_]
    assert len(players) == len(set(players))
    for a, b in pairs:
        assert compatible(a, b, now_ms)
        assert (a.entered_at_ms, a.player_id) <= (b.entered_at_ms, b.player_id)
    paired = set(players)
    remaining = [s for s in seekers if s.player_id not in paired]
    by_pool: dict[str, list[Seeker]] = {}
    for seeker in remaining:
        by_pool.setdefault(seeker.pool, []).append(seeker)
    for members in by_pool.values():
        members.sort(key=lambda s: s.rating)
        for i, a in enumerate(members):  # compatible seekers are at most MAX_WINDOW apart
            for b in members[i + 1 :]:
                if b.rating - a.rating > MAX_WINDOW:
                    break
                assert not compatible(a, b, now_ms), (a, b)


@given(SEEKERS, NOW)
def test_pairs_are_valid_and_maximal(seekers: list[Seeker], now_ms: int) -> None:
    check_pairing(seekers, pair(seekers, now_ms), now_ms)


@given(SEEKERS, NOW)
def test_pairing_follows_the_reference(seekers: list[Seeker], now_ms: int) -> None:
    assert pair(seekers, now_ms) == reference_pair(seekers, now_ms)


@given(SEEKERS, NOW, st.randoms(use_true_random=False))
def test_input_order_does_not_matter(seekers: list[Seeker], now_ms: int, shuffler: random.Random) -> None:
    shuffled = list(seekers)
    shuffler.shuffle(shuffled)
    assert pair(shuffled, now_ms) == pair(seekers, now_ms)
    assert pair(iter(seekers), now_ms) == pair(seekers, now_ms)  # any iterable, consumed once


@settings(max_examples=50)
@given(
    st.lists(
        st.builds(
            Seeker,
            player_id=st.uuids().map(str),
            rating=st.integers(1450, 1550),
            entered_at_ms=st.integers(0, 1_000),
            pool=st.just(BLITZ),
        ),
        min_size=2,
        max_size=80,
    ),
)
def test_a_dense_pool_pairs_everyone_but_one_at_most(seekers: list[Seeker]) -> None:
    # Everybody within 100 points, all windows 50: not everyone need pair, but what is left is spread out.
    pairs = pair(seekers, 1_000)
    check_pairing(seekers, pairs, 1_000)
    assert pairs == reference_pair(seekers, 1_000)
    assert len(seekers) - 2 * len(pairs) <= 2


# --- scale --------------------------------------------------------------------------------------------


def ten_thousand_seekers(seed: int, spread: int) -> list[Seeker]:
    rng = random.Random(seed)
    return [
        Seeker(f"player-{i:05d}", round(rng.gauss(1500, spread)), rng.randrange(0, 60 * S), BLITZ)
        for i in range(10_000)
    ]


@pytest.mark.parametrize(
    ("seed", "spread", "now_ms"), [(1, 300, 60 * S), (2, 300, 5 * S), (3, 2_000, 20 * S)]
)
def test_ten_thousand_seekers_in_one_pool(seed: int, spread: int, now_ms: int) -> None:
    seekers = ten_thousand_seekers(seed, spread)
    pairs = pair(seekers, now_ms)
    check_pairing(seekers, pairs, now_ms)
    assert len(pairs) > 4_000


def test_ten_thousand_seekers_at_one_rating_pair_in_waiting_order() -> None:
    seekers = [Seeker(f"p{i:05d}", 1500, i, BLITZ) for i in range(10_000)]
    pairs = pair(reversed(seekers), 10_000)
    assert pairs == [(seekers[i], seekers[i + 1]) for i in range(0, 10_000, 2)]
