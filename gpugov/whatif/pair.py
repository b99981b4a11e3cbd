"""Base and head replayed at the same time: the two replays of `gpugov whatif` share nothing but their
inputs, so where more than one CPU is usable the head replays in a second process while this one
replays the base (issue #42: the wall time of base and head is about that of the longer one).

The second process is started with multiprocessing's "spawn" (a fresh interpreter: no thread, lock or
gRPC state of this process is inherited, and nothing imports pulumi), as soon as the command starts,
so that its start-up overlaps the validation of the revisions. It is given only the replay's
picklable inputs (the model, the cluster, the jobs, the options, this command's language for what a
replay words) and sends back the replay's result, pickled. A replay reads nothing of its process (its
numbers are integers and Decimals, its orders sorted or by insertion), so serial and parallel give
byte-identical reports (tests/unit/test_whatif_pair.py). An error raised in the worker (TraceError,
SetupError, CompileError) is raised here as it was there, with its message; the base's comes first, as
in a serial run, and either ends the other replay. Where no second process can be had (it cannot
start, or it died), the head is replayed here after the base.

One after the other instead: one usable CPU (os.sched_getaffinity), `gpugov whatif --serial`, or
GPUGOV_WHATIF_SERIAL=1.
"""

from __future__ import annotations

import gc
import multiprocessing
import os
import pickle
import signal
from collections.abc import Callable
from concurrent.futures import ProcessPoolExecutor, wait
from concurrent.futures.process import BrokenProcessPool
from typing import Any, TypeVar

from gpugov import i18n

T = TypeVar("T")

SERIAL_ENV = "GPUGOV_WHATIF_SERIAL"
POLL_S = 0.2  # how often the head's progress is read while only it replays

# (which, jobs submitted, jobs in all, simulated ms): as Simulator.run's progress, with the side
Progress = Callable[[str, int, int, int], None]

_shared: Any = None  # in the worker: the shared array its replay writes its progress to


def usable_cpus() -> int:
    """CPUs this process may run on (its affinity where the platform says, else the machine's)."""
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return os.cpu_count() or 1


def parallel_wanted(serial: bool = False) -> bool:
    """Whether base and head replay at once: not when asked for serial (or GPUGOV_WHATIF_SERIAL is set
    to anything but "" or "0"), nor on one usable CPU."""
    if serial or os.environ.get(SERIAL_ENV, "") not in ("", "0"):
        return False
    return usable_cpus() > 1


def _init(shared: Any, language: str) -> None:
    global _shared
    _shared = shared
    i18n.use(language)  # what a replay words (Volcano's reasons), in the language of this command
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C is this process's to handle: it ends the worker
    import gpugov.whatif.replay
    import gpugov.whatif.volcano_report  # noqa: F401  (imported while this process validates the revisions)


def _started() -> None:
    """The first task: it only makes the executor start its process."""


def _report(submitted: int, total: int, now_ms: int) -> None:
    _shared[0], _shared[1], _shared[2] = submitted, total, now_ms
    _shared[3] += 1  # a version: the reader shows nothing before the first report


def _in_worker(work: Callable[..., Any], args: tuple[Any, ...], with_progress: bool) -> bytes:
    """work(*args)'s result, pickled here with the collector paused (a replay's result is hundreds of
    thousands of objects, none of them garbage; the executor then sends bytes)."""
    result = work(*args, progress=_report if with_progress else None)
    gc.disable()
    try:
        return pickle.dumps(result, protocol=pickle.HIGHEST_PROTOCOL)
    finally:
        gc.enable()


def _loads(data: bytes) -> Any:
    gc.disable()
    try:
        return pickle.loads(data)
    finally:
        gc.enable()


class Pair:
    """Replays base and head (`replay`): with `parallel`, the head in a second process, started here so
    that its start-up overlaps what this process does before the replays (validating the revisions,
    reading the trace). A context manager: leaving it ends the second process."""

    def __init__(self, parallel: bool) -> None:
        self.executor: ProcessPoolExecutor | None = None
        self.shared: Any = None
        if not parallel:
            return
        context = multiprocessing.get_context("spawn")
        try:
            self.shared = context.RawArray("q", 4)  # jobs submitted, jobs in all, simulated ms, version
            self.executor = ProcessPoolExecutor(1, mp_context=context, initializer=_init,
                                                initargs=(self.shared, i18n.current()))
            self.executor.submit(_started)
        except (OSError, RuntimeError, BrokenProcessPool):  # no second process here: one after the other
            self.close(stop=True)

    @property
    def parallel(self) -> bool:
        """Whether base and head will replay at once (a second process could be had)."""
        return self.executor is not None

    def __enter__(self) -> Pair:
        return self

    def __exit__(self, kind: type[BaseException] | None, *_: object) -> None:
        self.close(stop=kind is not None)

    def close(self, stop: bool = False) -> None:
        """Ends the second process: at once where `stop` (the command failed or was interrupted: the
        head's replay is not wanted), else once it is idle."""
        executor, self.executor = self.executor, None
        if executor is None:
            return
        if stop:
            for process in list((getattr(executor, "_processes", None) or {}).values()):
                process.terminate()
        executor.shutdown(wait=True, cancel_futures=True)

    def replay(self, work: Callable[..., T], base: tuple[Any, ...], head: tuple[Any, ...],
               progress: Progress | None = None) -> tuple[T, T]:
        """(work(*base), work(*head)), each called with a `progress` keyword (a callback as
        Simulator.run's, or None). `work` is a module-level function and `head` picklable: in parallel,
        the head's call runs in the second process while the base's runs here."""
        def side(which: str) -> Callable[[int, int, int], None] | None:
            if progress is None:
                return None
            return lambda submitted, total, now_ms: progress(which, submitted, total, now_ms)

        executor, shared = self.executor, self.shared
        future = None
        if executor is not None:
            shared[3] = 0
            try:
                future = executor.submit(_in_worker, work, head, progress is not None)
            except (OSError, RuntimeError, BrokenProcessPool):
                future = None
        if future is None:
            return work(*base, progress=side("base")), work(*head, progress=side("head"))

        def head_progress() -> None:
            if progress is not None and shared[3]:
                progress("head", shared[0], shared[1], shared[2])

        def base_progress(submitted: int, total: int, now_ms: int) -> None:
            head_progress()
            if progress is not None:
                progress("base", submitted, total, now_ms)

        try:
            base_result = work(*base, progress=base_progress if progress is not None else None)
            while not wait([future], timeout=POLL_S if progress is not None else None).done:
                head_progress()
            head_result: T = _loads(future.result())
        except BrokenProcessPool:  # the worker died (killed, out of memory): the head replayed here
            self.close(stop=True)
            head_result = work(*head, progress=side("head"))
        except BaseException:  # the base's error (raised first, as one after the other) or the head's
            self.close(stop=True)
            raise
        return base_result, head_result


def replay_pair(work: Callable[..., T], base: tuple[Any, ...], head: tuple[Any, ...],
                progress: Progress | None = None, parallel: bool = True) -> tuple[T, T]:
    """Pair(parallel).replay(work, base, head, progress), the second process ended after."""
    with Pair(parallel) as pair:
        return pair.replay(work, base, head, progress)
