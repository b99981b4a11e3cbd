"""Go's container/heap over a less function, as Volcano's util.PriorityQueue uses it.

vc-scheduler keeps its queues and jobs in such heaps and compares an element only when it is pushed or
popped, while the shares it compares change as the session allocates; so which queue comes next
depends on the heap's own sift order. Replaying the same algorithm gives the same order.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Generic, TypeVar

T = TypeVar("T")


class GoHeap(Generic[T]):
    def __init__(self, less: Callable[[T, T], bool]) -> None:
        self.less = less
        self.items: list[T] = []

    def __len__(self) -> int:
        return len(self.items)

    def push(self, item: T) -> None:
        self.items.append(item)
        self._up(len(self.items) - 1)

    def pop(self) -> T:
        n = len(self.items) - 1
        self.items[0], self.items[n] = self.items[n], self.items[0]
        self._down(0, n)
        return self.items.pop()

    def _up(self, j: int) -> None:
        while j > 0:
            i = (j - 1) // 2
            if not self.less(self.items[j], self.items[i]):
                break
            self.items[i], self.items[j] = self.items[j], self.items[i]
            j = i

    def _down(self, i: int, n: int) -> None:
        while True:
            j = 2 * i + 1
            if j >= n:
                break
            if j + 1 < n and self.less(self.items[j + 1], self.items[j]):
                j += 1
            if not self.less(self.items[j], self.items[i]):
                break
            self.items[i], self.items[j] = self.items[j], self.items[i]
            i = j
