"""What a game family plugs into the match runtime: its engine and the codecs around it.

The runtime never looks inside a family's options, actions or views: it stores them as JSON through
these codecs and sends them as the family's own protobuf messages.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

from skillclassics.rules.v1 import rules_pb2

from libs.engines.base import Engine

if TYPE_CHECKING:
    from libs.match.model import MatchRecord

JsonObject = Mapping[str, Any]


class Family(Protocol):
    """One game family as the runtime sees it."""

    name: str
    """The family's name, as in match ids (``chess``)."""
    record_format: str
    """The notation of finished games (``pgn`` for chess, ``sgf`` for go)."""
    uses_chance: bool
    """Whether the engine draws from a fairness stream (then matches need a commitment)."""
    hides_information: bool
    """Whether seats see different views (gin's hands); ``False`` (chess) lets one view serve all."""

    @property
    def engine(self) -> Engine[Any, Any, Any]:
        """The family's pure rules engine."""
        ...

    def options_from_proto(self, options: rules_pb2.MatchOptions) -> Any:
        """The engine options from the request (``InvalidOptionsError`` when unsupported)."""
        ...

    def options_to_json(self, options: Any) -> JsonObject: ...

    def options_to_proto(self, options: Any) -> rules_pb2.MatchOptions: ...

    def options_from_json(self, data: JsonObject) -> Any: ...

    def action_from_proto(self, action: rules_pb2.Action) -> Any:
        """The engine action from the request (``MalformedActionError`` when unreadable)."""
        ...

    def action_to_json(self, action: Any) -> JsonObject: ...

    def action_from_json(self, data: JsonObject) -> Any: ...

    def describe(self, state_before: Any, action: Any) -> str:
        """The action in the family's notation, as the record shows it (a SAN move in chess)."""
        ...

    def view_to_proto(self, view: Any) -> rules_pb2.View: ...

    def export_record(self, record: MatchRecord) -> str:
        """The finished (or current) game in :attr:`record_format`."""
        ...


@runtime_checkable
class SaysWhatIsAMove(Protocol):
    """A family whose actions are not all moves, and that says which are (chess: a draw offer, accept or
    claim is not a move).

    A move ends its seat's turn: it counts in the seat's moves, presses the clock and gets a clock mark.
    Any other action leaves the clock alone; if it ends the game (a draw agreed or claimed) the clock just
    stops at that instant. A family without this method counts an action as a move when it passes the
    turn or ends the game.
    """

    def is_move(self, action: Any) -> bool: ...
