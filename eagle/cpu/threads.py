"""eagle.cpu's thread policy: how many threads a team has, as users see and set it.

Public through ``eagle.get_num_threads``, ``eagle.set_num_threads``, ``eagle.max_threads`` and
``eagle.have_openmp``. The mechanism is the C runtime's (csrc/cpu/runtime.c, through
``eagle.cpu._executor``: its state lives once, in that extension): every launch reads the team
size there (``eagle_team_size``) without a Python call; this module gives it its inputs, once,
at import.
"""
import operator
import os

from eagle.cpu import _executor as _rt

__all__ = ["have_openmp", "usable_cpus", "max_threads", "get_num_threads", "set_num_threads"]


def have_openmp():
    """Whether eagle's executor was built with OpenMP (else it runs serially)."""
    return _rt._have_openmp()


def usable_cpus():
    """CPUs this process may run on: the affinity mask, capped by a cgroup CPU quota."""
    try:
        n = len(os.sched_getaffinity(0))
    except AttributeError:
        n = os.cpu_count() or 1
    try:
        with open("/sys/fs/cgroup/cpu.max") as f:
            quota, period = f.read().split()[:2]
        if quota != "max":
            n = min(n, max(1, int(quota) // int(period)))
    except (OSError, ValueError):
        pass
    return max(1, n)


# Read once: libgomp reads OMP_NUM_THREADS once, at load, and the CPUs a process
# may use rarely change; the team size is read on every launch.
_rt._configure_team_size(usable_cpus(), "OMP_NUM_THREADS" in os.environ)
_MAX_THREADS = _rt._max_threads()


def get_num_threads():
    """Threads a parallel stage uses.

    OpenMP's own setting (``OMP_NUM_THREADS``, ``set_num_threads``, a
    threadpoolctl limit) when one was given; otherwise the CPUs the process may
    use (affinity and cgroup quota, read at import), which OpenMP alone does
    not see. One rule from the start of the process: a setting made behind
    eagle's back (threadpoolctl, another library's ``omp_set_num_threads``)
    counts as given when it differs from OpenMP's setting at eagle's import. Never more than ``max_threads()`` (a larger ``OMP_NUM_THREADS``
    or threadpoolctl value is capped to it). Always 1 when eagle was built
    without OpenMP or runs in a child forked after a parallel region (libgomp
    is not fork-safe).
    """
    return _rt._team_size()


def max_threads():
    """The most threads a team may have: 8 per CPU of the machine (at least 64,
    at most 1024) and no more than OpenMP's thread limit (``OMP_THREAD_LIMIT``).
    More threads than CPUs never speed a stage up, and the OpenMP runtime ends
    the process when it cannot create a thread, so eagle refuses (in
    ``set_num_threads``) or caps (``OMP_NUM_THREADS``, threadpoolctl) beyond it."""
    return _rt._max_threads() if _rt._have_openmp() else 1


def set_num_threads(n):
    """Set the threads parallel stages use (OpenMP's ``omp_set_num_threads``;
    threadpoolctl sees and can change it): 1 <= n <= ``max_threads()``.

    As in OpenMP, the setting belongs to the calling thread: launches from
    other threads keep their own (``OMP_NUM_THREADS`` or all usable CPUs), and
    a launch in flight keeps the team it started with.
    """
    if isinstance(n, bool):
        raise TypeError("set_num_threads() needs an integer, got a bool")
    try:
        n = operator.index(n)
    except TypeError:
        raise TypeError(f"set_num_threads() needs an integer, got {type(n).__name__}") from None
    if n < 1:
        raise ValueError(f"set_num_threads needs n >= 1, got {n}")
    if n > _MAX_THREADS:
        raise ValueError(f"set_num_threads({n}): a team has at most {_MAX_THREADS} threads here "
                         "(eagle.max_threads(): 8 per CPU, at least 64, at most 1024, and at most "
                         "OMP_THREAD_LIMIT)")
    _rt._set_team_size(n)


# libgomp's pool is not fork-safe: a child forked after a parallel region runs serially
if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_rt._mark_forked_child)


def __dir__():
    from eagle._public import public_dir

    return public_dir(globals())
