"""The diagnosis as typed objects, built from the document ``tcpdx diagnose --json`` prints.

Each object keeps the part of the document it was built from: ``to_dict()`` gives it back
unchanged, so ``Diagnosis.to_dict()`` is exactly the command's JSON.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass, field
from typing import Any, Optional


def _doc_field() -> Any:
    return field(default_factory=dict, repr=False, compare=False)


class _FromDoc:
    """Shared ``to_dict``: the document the object was built from (a deep copy)."""

    _doc: dict[str, Any]

    def to_dict(self) -> dict[str, Any]:
        """The object as the command's JSON has it (a copy: changing it changes nothing)."""
        return copy.deepcopy(self._doc)


@dataclass(frozen=True)
class Evidence(_FromDoc):
    """A frame that shows a finding, and what it shows (``role``)."""

    frame: int
    role: str
    _doc: dict[str, Any] = _doc_field()

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> Evidence:
        return cls(frame=d["frame"], role=d["role"], _doc=d)


@dataclass(frozen=True)
class Episode(_FromDoc):
    """One occurrence of a finding: start (seconds since the first frame) and length."""

    start_s: float
    duration_s: float
    _doc: dict[str, Any] = _doc_field()

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> Episode:
        return cls(start_s=d["start_s"], duration_s=d["duration_s"], _doc=d)


@dataclass(frozen=True)
class Cost(_FromDoc):
    """What a finding cost: seconds, their share of the connection, and the goodput the
    connection would have had without it (bits/s; None when not estimated)."""

    seconds: float
    share: float
    goodput_without_bps: Optional[float]
    _doc: dict[str, Any] = _doc_field()

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> Cost:
        return cls(
            seconds=d["seconds"],
            share=d["share"],
            goodput_without_bps=d.get("goodput_without_bps"),
            _doc=d,
        )


@dataclass(frozen=True)
class Finding(_FromDoc):
    """One diagnosed problem: its kind (e.g. ``rto-stall``), severity, connection
    (``stream`` is Wireshark's ``tcp.stream``, None for a capture-wide finding), cost, the
    evidence frames with their roles, a Wireshark display filter selecting them, an
    explanation and recommendations."""

    kind: str
    severity: str
    stream: Optional[int]
    episodes: int
    cost: Cost
    confidence: float
    evidence: list[Evidence]
    wireshark_filter: str
    explanation: str
    recommendations: list[str]
    episode_list: list[Episode]
    _doc: dict[str, Any] = _doc_field()

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> Finding:
        return cls(
            kind=d["kind"],
            severity=d["severity"],
            stream=d.get("stream"),
            episodes=d.get("episodes", 0),
            cost=Cost.from_dict(d["cost"]),
            confidence=d.get("confidence", 0.0),
            evidence=[Evidence.from_dict(e) for e in d.get("evidence", [])],
            wireshark_filter=d.get("wireshark_filter", ""),
            explanation=d.get("explanation", ""),
            recommendations=list(d.get("recommendations", [])),
            episode_list=[Episode.from_dict(e) for e in d.get("episode_list", [])],
            _doc=d,
        )


@dataclass(frozen=True)
class StateTime(_FromDoc):
    """Time spent in one state of the time budget, and its share."""

    seconds: float
    share: float
    _doc: dict[str, Any] = _doc_field()

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> StateTime:
        return cls(seconds=d["seconds"], share=d["share"], _doc=d)


def _states(d: dict[str, Any]) -> dict[str, StateTime]:
    return {k: StateTime.from_dict(v) for k, v in d.get("states", {}).items()}


@dataclass(frozen=True)
class ConnectionBudget(_FromDoc):
    """One connection's time budget: where its seconds went, state by state."""

    stream: int
    seconds: float
    states: dict[str, StateTime]
    _doc: dict[str, Any] = _doc_field()

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> ConnectionBudget:
        return cls(stream=d["stream"], seconds=d["seconds"], states=_states(d), _doc=d)


@dataclass(frozen=True)
class TimeBudget(_FromDoc):
    """Where the connection-seconds of the capture went (``retransmission_timeout``,
    ``sending``, ...), in all and per connection."""

    seconds: float
    states: dict[str, StateTime]
    connections: list[ConnectionBudget]
    _doc: dict[str, Any] = _doc_field()

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> TimeBudget:
        return cls(
            seconds=d.get("seconds", 0.0),
            states=_states(d),
            connections=[ConnectionBudget.from_dict(c) for c in d.get("connections", [])],
            _doc=d,
        )


@dataclass(frozen=True)
class Connection(_FromDoc):
    """What was inferred of one connection: endpoints, where the capture was taken, RTT,
    path and goodput rates, rounds and losses. Every field of the JSON is in ``to_dict()``."""

    stream: int
    client: str
    server: str
    main_direction: Optional[str]
    capture_point: Optional[str]
    rtt_s: Optional[float]
    path_bps: Optional[float]
    goodput_bps: Optional[float]
    loss_episodes: Optional[int]
    _doc: dict[str, Any] = _doc_field()

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> Connection:
        return cls(
            stream=d["stream"],
            client=d.get("client", ""),
            server=d.get("server", ""),
            main_direction=d.get("main_direction"),
            capture_point=d.get("capture_point"),
            rtt_s=d.get("rtt_s"),
            path_bps=d.get("path_bps"),
            goodput_bps=d.get("goodput_bps"),
            loss_episodes=d.get("loss_episodes"),
            _doc=d,
        )


@dataclass(frozen=True)
class Diagnosis(_FromDoc):
    """The diagnosis of a capture: findings (most costly first), the time budget, what was
    inferred of each connection, and the verdict lines the command prints first.
    ``to_dict()`` is the document of ``tcpdx diagnose --json``."""

    findings: list[Finding]
    time_budget: TimeBudget
    connections: list[Connection]
    verdict: list[str]
    _doc: dict[str, Any] = _doc_field()

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> Diagnosis:
        return cls(
            findings=[Finding.from_dict(f) for f in d.get("findings", [])],
            time_budget=TimeBudget.from_dict(d.get("time_budget", {})),
            connections=[Connection.from_dict(c) for c in d.get("connections", [])],
            verdict=list(d.get("verdict", {}).get("lines", [])),
            _doc=d,
        )

    @property
    def worst(self) -> Optional[Finding]:
        """The costliest finding, or None when there is none."""
        return self.findings[0] if self.findings else None

    def __repr__(self) -> str:
        worst = self.worst
        w = f", worst={worst.kind!r} on stream {worst.stream}" if worst else ""
        return (
            f"Diagnosis({len(self.findings)} findings, {len(self.connections)} connections, "
            f"{self.time_budget.seconds:.3f} connection-seconds{w})"
        )
