# eagle.cpu's thread policy: how many threads a team has (included in
# eagle/cpu/_executor.pyx, which shares the runtime's state with the executor: the
# fork flags and OpenMP's settings live once, in that extension). Public through
# eagle.set_num_threads, eagle.get_num_threads, eagle.max_threads, eagle.have_openmp.

cdef bint _explicit_threads = False


def have_openmp():
    """Whether eagle's executor was built with OpenMP (else it runs serially)."""
    return bool(eagle_have_openmp())


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
# may use rarely change; get_num_threads() is on the path of every launch.
cdef int _usable_cpus = usable_cpus()
cdef bint _omp_env_set = "OMP_NUM_THREADS" in os.environ
cdef int _max_threads = eagle_max_threads()


cpdef int get_num_threads():
    """Threads a parallel stage uses.

    OpenMP's own setting (``OMP_NUM_THREADS``, ``set_num_threads``, a
    threadpoolctl limit) when one was given; otherwise the CPUs the process may
    use (affinity and cgroup quota, read at import), which OpenMP alone does
    not see. Never more than ``max_threads()`` (a larger ``OMP_NUM_THREADS``
    or threadpoolctl value is capped to it). Always 1 when eagle was built
    without OpenMP or runs in a child forked after a parallel region (libgomp
    is not fork-safe).
    """
    if not eagle_have_openmp() or eagle_is_forked_child():
        return 1
    cdef int n = eagle_omp_max_threads()
    if not _explicit_threads and not _omp_env_set and n > _usable_cpus:
        n = _usable_cpus
    if n > _max_threads:
        n = _max_threads
    return n if n > 1 else 1


def max_threads():
    """The most threads a team may have: 8 per CPU of the machine (at least 64,
    at most 1024) and no more than OpenMP's thread limit (``OMP_THREAD_LIMIT``).
    More threads than CPUs never speed a stage up, and the OpenMP runtime ends
    the process when it cannot create a thread, so eagle refuses (in
    ``set_num_threads``) or caps (``OMP_NUM_THREADS``, threadpoolctl) beyond it."""
    return eagle_max_threads() if eagle_have_openmp() else 1


def set_num_threads(n):
    """Set the threads parallel stages use (OpenMP's ``omp_set_num_threads``;
    threadpoolctl sees and can change it): 1 <= n <= ``max_threads()``.

    As in OpenMP, the setting belongs to the calling thread: launches from
    other threads keep their own (``OMP_NUM_THREADS`` or all usable CPUs), and
    a launch in flight keeps the team it started with.
    """
    global _explicit_threads
    if isinstance(n, bool):
        raise TypeError("set_num_threads() needs an integer, got a bool")
    try:
        n = operator.index(n)
    except TypeError:
        raise TypeError(f"set_num_threads() needs an integer, got {type(n).__name__}") from None
    if n < 1:
        raise ValueError(f"set_num_threads needs n >= 1, got {n}")
    if n > _max_threads:
        raise ValueError(f"set_num_threads({n}): a team has at most {_max_threads} threads here "
                         "(eagle.max_threads(): 8 per CPU, at least 64, at most 1024, and at most "
                         "OMP_THREAD_LIMIT)")
    eagle_omp_set_num_threads(n)
    _explicit_threads = True


def _after_fork_in_child():
    eagle_mark_forked_child()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_after_fork_in_child)


