"""Numbered states of cohort trees, for answers that depend on nothing else (Simulator._nomination).

A tree's state is the multiset of what its queues' admitted workloads (evicting ones too) hold:
(queue, usage, priority) with how many hold it. Every node's usage and which ((flavor, resource),
priority) each queue holds follow from it, and that is all a nomination that searched no victim
reads of the tree. A backlog's trees go back and forth between few states (a finish, then an
admission of the same size), so a state is numbered once and each admission or release moves a
tracked tree's number by a kept transition: a dictionary look-up, no key made from the whole tree.
Only trees the caller asks for are tracked (one without a backlog would pay for nothing), and a tree
whose states seldom come back is given up (see WINDOW).
"""

from __future__ import annotations

from itertools import chain
from typing import Generic, TypeVar

from gpugov.whatif.setup import FR
from gpugov.whatif.state import ClusterQueue, Workload

T = TypeVar("T")
STATES_KEPT = 1 << 14  # states numbered at most: then all are forgotten (tracking starts over)
ANSWERS_KEPT = 1 << 17  # answers kept at most: then all are forgotten
# A tracked tree's moves are counted in windows of this many; where more than half led to a new state, or
# fewer answers were found than twice its new states, its states seldom come back: each new one costs a key,
# about what an answer found saves, and the tree is tracked no more.
WINDOW = 1024

# What one admitted workload adds to its tree's state: (its queue's id, its usage sorted, its priority).
Held = tuple[int, tuple[tuple[FR, int], ...], int]
# (what is held, by its number in `held`; by how many), sorted, flat: one tuple of ints per state, which the
# garbage collector soon stops tracking (pairs kept in thousands of states made its passes more frequent).
State = tuple[int, ...]


class TreeStates(Generic[T]):
    """Tracked trees' state numbers, and answers kept by (kind, state)."""

    def __init__(self, kinds: int) -> None:
        self.kinds = kinds  # answers are kept by kind, one of range(kinds)
        self.tracked: dict[int, int] = {}  # tree root id -> its state's number
        self.tally: dict[int, list[int]] = {}  # tree root id -> [moves to a new state, moves, answers found]
        self.given_up: set[int] = set()  # tree root ids no longer tracked
        self.numbers: dict[State, int] = {}
        self.states: list[State] = []  # number -> state
        self.held: list[Held] = []  # what admitted workloads hold, numbered (states hash as ints)
        self.held_numbers: dict[Held, int] = {}
        # Keys are ints (no tuple kept per key: fewer objects for the garbage collector's full passes).
        self.moves: dict[int, int] = {}  # number << 64 | what is held << 1 | joins -> next number
        self.answers: dict[int, T] = {}  # state number * kinds + kind -> answer

    def look_up(self, cq: ClusterQueue, kind: int) -> tuple[int | None, T | None]:
        """(the key of kind's answer in cq's tree state now, the answer kept there); (None, None) while the
        tree is not tracked."""
        root = id(cq.root)
        number = self.tracked.get(root)
        if number is None:
            return None, None
        key = number * self.kinds + kind
        answer = self.answers.get(key)
        if answer is not None:
            self.tally[root][2] += 1
        return key, answer

    def keep(self, key: int, answer: T) -> None:
        if len(self.answers) >= ANSWERS_KEPT:
            self.answers.clear()
        self.answers[key] = answer

    def track(self, cq: ClusterQueue, kind: int) -> int | None:
        """Start tracking cq's tree (its state counted from its queues' admitted): the key of kind's answer;
        None for a tree given up."""
        if id(cq.root) in self.given_up:
            return None
        if len(self.states) >= STATES_KEPT:
            self.tracked.clear()
            self._forget()
        root = cq.root
        counts: dict[int, int] = {}
        for node in root.subtree_cqs() if not root.is_cq else [root]:
            for wl in node.owner.admitted.values():
                item = self._held(node.owner, wl)
                counts[item] = counts.get(item, 0) + 1
        number = self.tracked[id(root)] = self._number(flat(counts))
        self.tally[id(root)] = [0, 0, 0]
        return number * self.kinds + kind

    def move(self, cq: ClusterQueue, wl: Workload, step: int) -> None:
        """wl joins (1) or leaves (-1) the admitted of cq, whose tree is tracked."""
        root = id(cq.root)
        item = self._held(cq, wl)
        now = self.tracked[root]
        key = now << 64 | item << 1 | (step > 0)
        number = self.moves.get(key)
        tally = self.tally[root]
        tally[1] += 1
        if number is None:
            known = len(self.states)
            state = self.states[now]
            counts = dict(zip(state[::2], state[1::2], strict=True))
            count = counts.get(item, 0) + step
            if count:
                counts[item] = count
            else:
                del counts[item]
            number = self.moves[key] = self._number(flat(counts))
            tally[0] += number == known
        self.tracked[root] = number
        if tally[1] == WINDOW:
            if tally[0] * 2 > WINDOW or tally[2] < tally[0]:
                del self.tracked[root]
                self.given_up.add(root)
                if not self.tracked:  # what none reads any more is not kept (nor walked by the garbage collector)
                    self._forget()
            tally[0] = tally[1] = tally[2] = 0

    def _forget(self) -> None:
        """Forget every state, and what is kept by them (no tree may be tracked)."""
        for kept in (self.numbers, self.states, self.held, self.held_numbers, self.moves, self.answers):
            kept.clear()

    def _held(self, cq: ClusterQueue, wl: Workload) -> int:
        """The number of what wl holds in cq."""
        item = (id(cq), tuple(sorted(wl.usage.items())), wl.priority)
        number = self.held_numbers.get(item)
        if number is None:
            number = self.held_numbers[item] = len(self.held)
            self.held.append(item)
        return number

    def _number(self, state: State) -> int:
        number = self.numbers.get(state)
        if number is None:
            number = self.numbers[state] = len(self.states)
            self.states.append(state)
        return number


def flat(counts: dict[int, int]) -> State:
    return tuple(chain.from_iterable(sorted(counts.items())))
