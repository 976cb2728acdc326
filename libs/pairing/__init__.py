"""Pure quick-match pairing for SkillClassics.

:mod:`libs.pairing.queue` pairs :class:`Seeker` values of the same pool by rating, with a window that
widens the longer a seeker waits (50 points, +10 a second, at most 400), longest waiting first. No I/O,
no clock: the caller passes ``now_ms`` in integer milliseconds.
"""

from libs.pairing.queue import BASE_WINDOW, MAX_WINDOW, WIDEN_PER_SECOND, Seeker, compatible, pair, window

__all__ = ["BASE_WINDOW", "MAX_WINDOW", "WIDEN_PER_SECOND", "Seeker", "compatible", "pair", "window"]
