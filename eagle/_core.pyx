"""The compiled core of ``eagle.Graph``: its lock and its launch path.

The launch path is compiled so that no Python bytecode runs between taking a
graph's lock and the ``try`` that gives it back: a signal (Ctrl-C) can only
arrive where the C code checks for it, and every such place is inside it.

``GraphCore`` talks to a backend only through the backend contract
(``eagle.record.backend.Backend``): ``launch``, ``launch_observed``,
``after_launch``, ``after_failed_launch``, ``note_failure``, ``logical_size``,
and, when the backend has one, its ``compiled`` launcher (a ``CompiledLaunch``,
called without a Python call). The profile and the progress bar register
themselves here (``register_observer``); this module imports no other eagle
module but ``eagle._errors``.
"""
import operator
import os

from libc.stdint cimport int64_t
from cpython.exc cimport PyErr_CheckSignals
from cpython.pythread cimport (NOWAIT_LOCK, PY_LOCK_ACQUIRED, PyThread_allocate_lock, PyThread_free_lock,
                               PyThread_release_lock, PyThread_type_lock)

from eagle._errors import NotBuiltError

cdef extern from "Python.h":
    bint PyLong_CheckExact(object o)
    long long PyLong_AsLongLongAndOverflow(object o, int *overflow) except? -1

cdef extern from "pythread.h":
    int PyThread_acquire_lock(PyThread_type_lock lock, int waitflag)
    int PyThread_acquire_lock_timed(PyThread_type_lock lock, long long microseconds, int intr_flag) nogil
    unsigned long PyThread_get_thread_ident()


cdef class CompiledLaunch:
    """Base of a backend's compiled launch path (see eagle/_core.pxd)."""

    cdef int64_t run(self, int64_t n, bint until_done) except -1:
        raise NotImplementedError("a CompiledLaunch subclass runs the replays")

    cdef bint encloses_current_thread(self) noexcept:
        return False


def replay_count(n, what):
    """n as a replay count: an integer in 0 .. 2**63 - 1, else a clear TypeError,
    ValueError or OverflowError that names ``what``."""
    if isinstance(n, bool):
        raise TypeError(f"{what} needs an integer count, got a bool")
    try:
        n = operator.index(n)
    except TypeError:
        raise TypeError(f"{what} needs an integer count, got {type(n).__name__}") from None
    if n < 0:
        raise ValueError(f"{what} needs a count >= 0, got {n}")
    if n > 0x7FFFFFFFFFFFFFFF:
        raise OverflowError(f"{what} count {n} is more than 2**63 - 1 replays")
    return n


cdef inline int64_t _fast_count(object n, str what) except -1:
    cdef int overflow = 0
    cdef long long c
    if PyLong_CheckExact(n):
        c = PyLong_AsLongLongAndOverflow(n, &overflow)
        if overflow == 0 and c >= 0:
            return c
    return replay_count(n, what)


cdef class GraphCore:
    """The part of ``eagle.Graph`` on every launch: its lock (with the holder's
    thread, so a node calling back into its graph is refused, not deadlocked)
    and ``launch``/``launch_until_done`` (argument check, lock, execute,
    release, all compiled). ``eagle.graph.Graph`` is the rest."""

    # The lock: a flag guarded by the GIL (taking a free lock costs no system
    # call and no clock read), and a semaphore that hands it to a waiting
    # thread directly on release (_waiters counts the threads not yet served).
    cdef bint _busy
    cdef unsigned long _busy_fork_generation   # _fork_generation when _busy was set
    cdef int _waiters
    cdef PyThread_type_lock _handoff   # "acquired" while no hand-off is pending
    cdef unsigned long _holder_ident
    cdef object _backend_obj
    cdef CompiledLaunch _compiled      # the backend's compiled launch path, or None
    cdef bint _checks                  # the backend's after_launch / after_failed_launch are needed
    cdef bint _resizes
    cdef bint _plain                   # compiled, no checks, no resizing: _graph_run_plain serves launch()
    #: the logical size asked for with set_logical_size (None: follow the capacity)
    cdef public object _logical_size
    #: whether the graph was built once (the NotBuiltError message says "again")
    cdef public bint _ever_built
    #: whether a compaction node is recorded (launch_until_done needs one)
    cdef public bint _has_resizer

    def __cinit__(self, *args, **kwargs):
        self._handoff = PyThread_allocate_lock()
        if self._handoff == NULL:
            raise MemoryError()
        PyThread_acquire_lock(self._handoff, 1)

    def __dealloc__(self):
        if self._handoff != NULL:
            PyThread_free_lock(self._handoff)

    @property
    def _backend(self):
        return self._backend_obj

    @_backend.setter
    def _backend(self, value):
        self._backend_obj = value
        self._compiled = None
        self._checks = False
        self._resizes = False
        self._plain = False
        if value is not None:
            self._compiled = value.compiled
            self._checks = value.checks_launches
            self._resizes = value.resizes
            self._plain = self._compiled is not None and not self._checks and not self._resizes

    @property
    def _holder(self):
        """Ident of the thread holding the graph's lock, or None."""
        return self._holder_ident if self._busy else None

    def _exclusive(self, what):
        """A context manager holding the graph's lock (``what`` names the call in
        the error a node calling back from inside its own launch gets)."""
        return _Held(self, what)

    # ---- launch ----

    def launch(self, n=1, *more, progress=False):
        """Replay the built graph ``n`` times, in one call.

        If a node raises, the replay stops there and the exception reaches you
        with a note naming the node, its stage and the replay; the graph stays
        usable. Ctrl-C stops a long launch within a few milliseconds of the
        current replay's end, however long a replay takes (see Threads in the
        README), and never leaves the graph locked. Inside ``with eagle.profile():``
        every node call is timed.

        Parameters
        ----------
        n : int, default 1
            The replays to run, ``n >= 0`` (a NumPy integer too).
        progress : bool, default False
            Keyword only. ``True`` shows a progress bar (tqdm when installed, else a line
            on stderr) once the launch has run for about a second, updated at most every
            100 ms; anything but ``True`` or ``False`` is refused.

        Returns
        -------
        None

        Raises
        ------
        NotBuiltError
            The graph was never built, or was recorded into since ``build()``.
        TypeError, ValueError
            ``n`` is not an integer, or is negative; ``progress`` given positionally or
            not a bool.
        RuntimeError
            Called by a node of this graph (or of a graph whose launch encloses it).
        Exception
            A node's own exception, with a note naming the node, its stage and the replay.

        Examples
        --------
        >>> import numpy as np, eagle
        >>> from eagle.graph import ufunc
        >>> x = np.ones(3)
        >>> g = eagle.Graph()
        >>> g.add_node(ufunc(np.multiply, x, 2.0, out=x), name="double")
        >>> g.build().launch(3)
        >>> x
        array([8., 8., 8.])
        """
        cdef int overflow = 0
        cdef long long count = -1
        if more:
            _positional_progress("launch", more)
        # written out, not through _fast_count: an exact int needs no call
        if PyLong_CheckExact(n):
            count = PyLong_AsLongLongAndOverflow(n, &overflow)
        if count < 0 or overflow:
            count = replay_count(n, "launch()")
        if self._plain and progress is False and _profiles_open == 0:
            _graph_run_plain(self, count)
        else:
            _graph_run(self, count, False, progress)

    def launch_until_done(self, n=None, *more, progress=False, **old):
        """Replay until no sample is left (a compaction node's live count reaches 0), at
        most ``n`` times, without returning to Python in between.

        Parameters
        ----------
        n : int
            The most replays to run, ``n >= 0``.
        progress : bool, default False
            As for ``launch``: keyword only, ``True`` or ``False``.

        Returns
        -------
        int
            The replays run: fewer than ``n`` when the samples ran out first.

        Raises
        ------
        NotBuiltError, TypeError, ValueError, RuntimeError
            As for ``launch``; a node's own exception, with its note, too.

        Examples
        --------
        >>> import numpy as np, eagle
        >>> from eagle.graph import compact, ufunc
        >>> alive = np.ones(4, dtype=bool)
        >>> g = eagle.Graph()
        >>> g.add_node(ufunc(np.logical_and, alive, False, out=alive), name="finish")
        >>> g.add_node(compact(alive, {}), name="compact")
        >>> g.build().launch_until_done(100)
        1

        ``launch_until_done(max_replays=...)`` still works, with a ``DeprecationWarning``.
        """
        if more:
            _positional_progress("launch_until_done", more)
        if old:
            n = _old_max_replays(n, old)
        if n is None:
            raise TypeError("launch_until_done() needs n, the most replays to run")
        return _graph_run(self, _fast_count(n, "launch_until_done()"), True, progress)


def _positional_progress(name, more):
    """launch(n, True): the arguments after n are keywords (one, progress=)."""
    raise TypeError(f"{name}() takes 1 positional argument (n), got {1 + len(more)}: progress is a "
                    f"keyword, e.g. {name}(10, progress=True)")


def _old_max_replays(n, old):
    """launch_until_done()'s n, given under its old name ``max_replays=`` (with a warning)."""
    from eagle._public import renamed_keyword

    # a compiled method has no frame of its own: the caller is two frames up
    return renamed_keyword(dict(old), "max_replays", "n", n, "launch_until_done()", stacklevel=3)


# The graph's lock and launch path as module functions of GraphCore, not cdef methods:
# a cdef method would give GraphCore (and so eagle.Graph) a __pyx_vtable__ in help().
# Every line runs with the GIL held.

# Bumped in a child process by fork(): a lock taken in an earlier generation was
# held by a thread of the parent (the child has only the thread that forked), so
# the child finds it free instead of waiting for ever for a thread it does not have.
cdef unsigned long _fork_generation = 0
cdef unsigned long _forked_by = 0           # the thread that forked: the child's only one


def _after_fork_in_child():
    global _fork_generation, _forked_by
    _fork_generation += 1
    _forked_by = PyThread_get_thread_ident()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_after_fork_in_child)


cdef void _graph_forget_parents_lock(GraphCore self) noexcept:
    """In a forked child: the lock's holder and waiters were the parent's other
    threads, gone here. Free it, and leave the hand-off semaphore taken (its state
    when no hand-off is pending); a hand-off pending at the fork is dropped."""
    self._busy = False
    self._waiters = 0
    self._holder_ident = 0
    PyThread_acquire_lock(self._handoff, NOWAIT_LOCK)


cdef int _graph_acquire(GraphCore self, what) except -1:
    cdef unsigned long me = PyThread_get_thread_ident()
    if (self._busy and self._busy_fork_generation != _fork_generation
            and not (self._busy_fork_generation + 1 == _fork_generation and self._holder_ident == _forked_by)
            and not (self._compiled is not None and self._compiled.encloses_current_thread())):
        # taken before a fork by a thread the child does not have. Only the thread that
        # forked (when it held the lock in the process it forked from: a fork inside a
        # node) or a launch enclosing this thread still holds it; a thread of an earlier
        # generation with the same ident is another thread (glibc reuses idents in a child)
        _graph_forget_parents_lock(self)
    if self._busy:
        if self._holder_ident == me or (self._compiled is not None
                                        and self._compiled.encloses_current_thread()):
            raise RuntimeError(f"cannot {what} this graph from inside its own launch (a node "
                               "of the graph called back into it)")
        _graph_wait(self)
    self._busy = True
    self._busy_fork_generation = _fork_generation
    self._holder_ident = me
    return 0


cdef int _graph_wait(GraphCore self) except -1:
    """Wait, without the GIL, until a release hands the lock over; Ctrl-C
    (a signal handler that raises) gives up waiting, holding nothing."""
    cdef int r
    self._waiters += 1
    while True:
        # in slices of 5 ms: the signal may have been delivered to another thread
        with nogil:
            r = PyThread_acquire_lock_timed(self._handoff, 5000, 1)
        if r == PY_LOCK_ACQUIRED:
            return 0      # handed over: _busy stayed set for us
        if PyThread_acquire_lock(self._handoff, NOWAIT_LOCK):
            return 0      # handed over while the signal came
        try:
            PyErr_CheckSignals()
        except BaseException:
            self._waiters -= 1
            raise


cdef inline void _graph_release(GraphCore self) noexcept:
    self._holder_ident = 0
    if self._waiters > 0:
        self._waiters -= 1
        PyThread_release_lock(self._handoff)   # the lock passes to a waiter, still busy
    else:
        self._busy = False


cdef object _graph_run(GraphCore self, int64_t n, bint until_done, object progress):
    cdef object done = None
    _graph_acquire(self, "launch")
    try:
        backend = self._backend_obj
        if until_done and not self._has_resizer:
            raise ValueError("launch_until_done() needs a compaction node (eagle.graph.compact) "
                             "to know when the samples are done")
        if backend is None:
            raise NotBuiltError("the graph was recorded into since build(); call g.build() again"
                                if self._ever_built else "launch() needs a built graph: call g.build() first")
        try:
            if _profiles_open == 0 and progress is False:   # the plain launch: nothing observes it
                # written out here, not through _launch_checked: a call there costs ~40
                # instructions per launch (its own exception frame)
                try:
                    if self._compiled is not None:
                        done = self._compiled.run(n, until_done)
                    else:
                        done = backend.launch(n, until_done)
                except BaseException:
                    if self._checks:
                        backend.after_failed_launch(n)
                    raise
                if self._checks:
                    backend.after_launch(n)
            else:
                done = _run_observed(self, backend, n, until_done, progress)
        except BaseException as e:
            backend.note_failure(e, n, until_done)
            raise
        finally:
            if self._resizes:
                self._logical_size = backend.logical_size
    finally:
        _graph_release(self)
    return done


cdef int _graph_run_plain(GraphCore self, int64_t n) except -1:
    """_graph_run for launch(n) of a graph that is ``_plain`` (its compiled launcher does
    all, nothing checks after it or resizes), with no profile open and no progress bar:
    the same steps, the ones that do nothing there left out (one exception frame, not three)."""
    _graph_acquire(self, "launch")
    try:
        try:
            self._compiled.run(n, False)
        except BaseException as e:
            self._backend_obj.note_failure(e, n)
            raise
    finally:
        _graph_release(self)
    return 0


# ---- observing a launch: eagle.profile and progress= (eagle/observe/) ----

# Profiles open on any thread. While 0, and without progress=, a launch takes the
# plain path above: one test of this counter and one identity test.
cdef int _profiles_open = 0
# registered by eagle.observe.profile and eagle.observe.progress when they are imported
cdef object _launch_record = None   # (graph, backend, n, until_done) -> a LaunchRecord or None
cdef object _progress_start = None  # (progress, n, until_done, backend) -> a bar or None


def _profile_opened(int delta):
    """eagle.observe.profile.Profile's __enter__ (+1) and __exit__ (-1)."""
    global _profiles_open
    _profiles_open += delta


def register_observer(*, launch_record=None, progress_start=None):
    """How the profile (``launch_record``) and the progress bar (``progress_start``) see
    launches; eagle.observe registers them when it is imported (``import eagle`` does)."""
    global _launch_record, _progress_start
    if launch_record is not None:
        _launch_record = launch_record
    if progress_start is not None:
        _progress_start = progress_start


cdef object _launch_checked(GraphCore self, backend, int64_t n, bint until_done, object bar,
                            object record):
    """An observed launch and the backend's checks after it (the plain path in _graph_run
    does the same inline): the outcome the caller sees (the checks raise errors the nodes
    reported while the executor ran: a ufunc loop's, a reorder key's)."""
    try:
        if bar is None and record is None:
            if self._compiled is not None:
                done = self._compiled.run(n, until_done)
            else:
                done = backend.launch(n, until_done)
        else:
            done = backend.launch_observed(n, until_done, bar, record)
    except BaseException:
        if self._checks:
            backend.after_failed_launch(n)
        raise
    if self._checks:
        backend.after_launch(n)
    return done


cdef object _run_observed(GraphCore self, backend, int64_t n, bint until_done, object progress):
    record = _launch_record(self, backend, n, until_done) if _profiles_open else None
    bar = _progress_start(progress, n, until_done, backend) if progress is not False else None
    if record is None and bar is None:   # a profile open on another thread only, progress=None/0
        return _launch_checked(self, backend, n, until_done, None, None)
    done = None
    try:
        # the checks run before the record is finished: it records what the caller sees
        done = _launch_checked(self, backend, n, until_done, bar, record)
    except BaseException as e:
        if record is not None:
            record.finish(None, e)
        if bar is not None:
            try:
                bar.close(None)
            except Exception:
                pass     # the launch's own exception is the one to see, not the display's
        raise
    if record is not None:
        record.finish(done, None)   # before the bar closes: a bar that fails to close loses no launch
    if bar is not None:
        bar.close(done)
    return done


cdef class _Held:
    """``with graph._exclusive(what):`` holds the graph's lock, blocking while
    another thread holds it; refused (RuntimeError) from inside its own launch."""
    cdef GraphCore g
    cdef object what

    def __cinit__(self, GraphCore g, what):
        self.g = g
        self.what = what

    def __enter__(self):
        _graph_acquire(self.g, self.what)
        return None

    def __exit__(self, *exc):
        _graph_release(self.g)
        return False
