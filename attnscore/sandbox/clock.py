"""The worker's own time: how long the grader waits for a worker, judged so that load cannot flip a verdict.

A time limit on untrusted code is wall time (a submission that sleeps must time out, and CPU
time alone would let it), but wall time also counts the time the machine kept the worker waiting
for a CPU while other work ran: on a busy machine (a CI runner, ``--jobs`` neighbours, another
grader) a correct call could time out. :class:`OwnTime` measures one wait (an import, a call) as
wall time **less the time the worker's main thread spent runnable in the CPU run queue**
(``/proc/PID/task/PID/schedstat``, second field, nanoseconds; the kernel's scheduler statistics),
but never less than the CPU time the worker process used in it. Waiting for a CPU is discounted
only while no other task of the worker itself (a thread, a child process of its session, or, when
the worker runs as a uid of its own, any process of that uid) is runnable at the moment the wait
is judged: a submission that starves its own call with busy threads or forks gains nothing from
it. Whatever the discount, a wait ends after ``stretch`` times its limit of wall time (default 4):
only a machine slowed more than that can still time out a call that fits its limit.

Where the kernel gives no scheduler statistics (or the grader cannot see the worker's process,
as with a fresh bubblewrap per worker, whose process is bubblewrap itself) the own time is the
wall time, as before.
"""

from __future__ import annotations

import os
import time

STRETCH = 4.0
_CLOCK_TICKS = os.sysconf("SC_CLK_TCK")


def _schedstat(pid: int) -> str:
    return f"/proc/{pid}/task/{pid}/schedstat"


def _stat(pid: int) -> str:
    return f"/proc/{pid}/stat"


def _read(path: str) -> bytes | None:
    try:
        with open(path, "rb") as f:
            return f.read()
    except OSError:
        return None


def _run_delay_of(schedstat: bytes | None) -> float | None:
    """The run-queue wait (seconds) in a ``schedstat`` file's bytes (second field, nanoseconds)."""
    try:
        return int(schedstat.split()[1]) / 1e9 if schedstat else None
    except (ValueError, IndexError):
        return None


def _cpu_of(stat: bytes | None) -> float | None:
    """User + system CPU seconds in a ``/proc/PID/stat`` file's bytes (fields 14 and 15)."""
    try:
        fields = stat.rsplit(b")", 1)[1].split() if stat else None
        return (int(fields[11]) + int(fields[12])) / _CLOCK_TICKS if fields else None
    except (ValueError, IndexError):
        return None


def _process_cpu_clock(pid: int) -> int:
    """The clock id of process ``pid``'s CPU time (all its threads), as ``clock_getcpuclockid``
    makes it: ``MAKE_PROCESS_CPUCLOCK(pid, CPUCLOCK_SCHED)`` of ``include/linux/posix-timers.h``."""
    return ((~pid) << 3) | 2


def run_delay_s(pid: int) -> float | None:
    """Seconds the main thread of process ``pid`` has spent runnable but waiting for a CPU, since
    it started; ``None`` when the kernel does not say (no schedstat, or no such process)."""
    return _run_delay_of(_read(_schedstat(pid)))


def cpu_s(pid: int) -> float | None:
    """CPU seconds (user + system) that every thread of process ``pid`` has used; ``None`` when unknown."""
    return _cpu_of(_read(_stat(pid)))


class ProcessReadings:
    """:func:`run_delay_s` and :func:`cpu_s` of one process, from its ``/proc`` files opened once
    (a call's clock reads them twice per call: re-reading an open file costs a few microseconds,
    opening it again ten times that). An open ``/proc/PID`` file stays with the process it was
    opened for: once that process is gone it reads nothing (``None``), even if its pid is reused.
    A file that cannot be opened reads as ``None`` too, as the functions say. Close it with the
    process (:meth:`close`)."""

    def __init__(self, pid: int) -> None:
        self.schedstat = self._open(_schedstat(pid))
        self.stat = self._open(_stat(pid))
        self.cpu_clock = _process_cpu_clock(pid)

    @staticmethod
    def _open(path: str) -> int | None:
        try:
            return os.open(path, os.O_RDONLY | os.O_CLOEXEC)
        except OSError:
            return None

    @staticmethod
    def _read(fd: int | None) -> bytes | None:
        if fd is None:
            return None
        try:
            return os.pread(fd, 4096, 0)
        except OSError:
            return None

    def run_delay_s(self) -> float | None:
        """As :func:`run_delay_s` of the process."""
        return _run_delay_of(self._read(self.schedstat))

    def cpu_s(self) -> float | None:
        """As :func:`cpu_s` of the process."""
        return self.delay_and_cpu()[1]

    def delay_and_cpu(self) -> tuple[float | None, float | None]:
        """:meth:`run_delay_s` and :meth:`cpu_s` together. The CPU time is read from the process's
        CPU clock (``clock_gettime``: a tenth of the cost of formatting its ``stat`` file, and in
        nanoseconds, not clock ticks), by pid; the run-queue wait is read after it, from the kept
        ``schedstat`` file, and that it reads at all shows the process had not been reaped, so its
        pid still named it when its clock was read (a pid is reused only after its process is
        reaped). Where the clock cannot be read, the ``stat`` file; without ``schedstat``, no wait."""
        if self.schedstat is None:
            return None, _cpu_of(self._read(self.stat))
        try:
            nanoseconds: int | None = time.clock_gettime_ns(self.cpu_clock)
        except OSError:
            nanoseconds = None
        schedstat = self._read(self.schedstat)
        if schedstat is None:  # gone (or closed): nothing read counts
            return None, None
        cpu = nanoseconds / 1e9 if nanoseconds is not None else _cpu_of(self._read(self.stat))
        return _run_delay_of(schedstat), cpu

    def close(self) -> None:
        for fd in (self.schedstat, self.stat):
            if fd is not None:
                try:
                    os.close(fd)
                except OSError:
                    pass
        self.schedstat = self.stat = None


def _state_and_session(stat_path: str) -> tuple[bytes, int] | None:
    try:
        with open(stat_path, "rb") as f:
            fields = f.read().rsplit(b")", 1)[1].split()
        return fields[0], int(fields[3])
    except (OSError, ValueError, IndexError):
        return None


def _uid_of(pid: str) -> int:
    try:
        with open(f"/proc/{pid}/status", "rb") as f:
            for line in f:
                if line.startswith(b"Uid:"):
                    return int(line.split()[1])
    except (OSError, ValueError, IndexError):
        pass
    return -1


def own_competitors(pid: int, uid: int | None = None) -> int:
    """How many tasks of the worker ``pid`` other than its main thread are runnable now: its other
    threads, processes of its session (the worker leads one), and with ``uid`` (a uid only this
    worker uses) every process of that uid."""
    count = 0
    try:
        threads = os.listdir(f"/proc/{pid}/task")
    except OSError:
        threads = []
    for tid in threads:
        if tid != str(pid):
            found = _state_and_session(f"/proc/{pid}/task/{tid}/stat")
            count += found is not None and found[0] == b"R"
    for entry in os.listdir("/proc"):
        if not entry.isdigit() or entry == str(pid):
            continue
        found = _state_and_session(f"/proc/{entry}/stat")
        if found is None or found[0] != b"R":
            continue
        if found[1] == pid or (uid is not None and _uid_of(entry) == uid):
            count += 1
    return count


class OwnTime:
    """One wait for a worker: a call, or an import (see the module's docstring).

    ``pid``: the worker's process; ``limit_s``: how much own time the wait may take; ``uid``: the
    worker's own uid when it has one (the grader is root); ``fresh``: the process started with
    this wait (its whole run-queue wait counts, not only what follows the first reading);
    ``began``: when the wait began (monotonic seconds; default now); ``stretch``: the most wall
    time, in limits (default :data:`STRETCH`); ``readings``: the process's ``/proc`` files kept
    open (:class:`ProcessReadings`; default: opened for each reading).
    """

    def __init__(
        self,
        pid: int,
        limit_s: float,
        uid: int | None = None,
        fresh: bool = False,
        began: float | None = None,
        stretch: float | None = None,
        readings: ProcessReadings | None = None,
    ) -> None:
        self.pid, self.limit_s, self.uid = pid, limit_s, uid
        self.stretch = STRETCH if stretch is None else stretch
        self.began = time.monotonic() if began is None else began
        self._delay = readings.run_delay_s if readings is not None else lambda: run_delay_s(pid)
        self._cpu = readings.cpu_s if readings is not None else lambda: cpu_s(pid)
        self._both = readings.delay_and_cpu if readings is not None else lambda: (self._delay(), self._cpu())
        self.delay0, self.cpu0 = (0.0, 0.0) if fresh else self._both()
        self.discount = 0.0  # run-queue wait discounted so far
        self.allowance = 0.0  # own seconds added to the limit (torch.compile's compilations: :meth:`allow`)

    def allow(self, seconds: float) -> None:
        """Let the wait run ``seconds`` longer than its limit (replacing any earlier allowance):
        the time the worker spends compiling with ``torch.compile``, which its caller bounds."""
        self.allowance = max(0.0, seconds)

    @property
    def deadline(self) -> float:
        """When the wait ends unless the worker was kept waiting for a CPU (monotonic seconds)."""
        return self.began + self.limit_s + self.allowance + self.discount

    def spent(self) -> float:
        """Own seconds so far: wall time less the run-queue wait that was discounted."""
        return max(0.0, time.monotonic() - self.began - self.discount)

    def settled(self) -> float:
        """Own seconds of a wait that ended before its deadline (a reply came): the wall time less
        the main thread's run-queue wait since the wait began, never less than the CPU time the
        process used in it, read once more now (two ``pread`` calls on kept files). A call that
        returns early is otherwise counted in wall time, load included (:meth:`extend` discounts
        only at a deadline); the submission's total and its time budget add these up, so that a
        loaded machine does not spend a budget sooner. Unlike :meth:`extend` it does not look for
        the worker's own runnable tasks (a scan of ``/proc`` per call): a submission that starves
        its own main thread with child processes counts less than it ran, and still stops at each
        call's limit. Where the kernel does not say (or the process is gone): :meth:`spent`."""
        spent = self.spent()
        if self.delay0 is None:
            return spent
        delay, cpu = self._both()
        if delay is None or cpu is None or self.cpu0 is None:
            return spent
        wall = time.monotonic() - self.began
        discount = min(delay - self.delay0, max(0.0, wall - (cpu - self.cpu0)))
        return max(0.0, wall - max(discount, self.discount))

    def extend(self) -> float:
        """At the deadline: a later deadline when the worker was kept waiting for a CPU by other
        work, else the deadline as it is (the wait has timed out)."""
        now = time.monotonic()
        last = self.began + self.stretch * self.limit_s + self.allowance
        if now >= last or self.delay0 is None:
            return self.deadline
        delay = self._delay()
        if delay is None or delay - self.delay0 <= self.discount:
            return self.deadline
        cpu, cpu0 = self._cpu(), self.cpu0
        used = cpu - cpu0 if cpu is not None and cpu0 is not None else 0.0
        # the run-queue wait, but never so much that the own time falls below the CPU time used
        discount = min(delay - self.delay0, max(0.0, now - self.began - used))
        if discount <= self.discount or own_competitors(self.pid, self.uid):
            return self.deadline
        self.discount = discount
        return min(last, self.deadline)
