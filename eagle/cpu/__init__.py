"""eagle's cpu backend: the nogil OpenMP executor (csrc/) and the node kinds it runs.

* ``eagle.cpu.backend`` — ``CpuBackend``: a recording handed to the executor;
* ``eagle.cpu._executor`` — the Cython face of the executor: ``CpuPlan`` (the compiled
  launch path; the C declarations in ``_executor_c.pxd``) and the runtime's primitives;
* ``eagle.cpu.threads`` — the thread policy (``eagle.get_num_threads`` ...), made of those
  primitives (the team size itself is the C runtime's, read by every launch);
* ``eagle.cpu.lowering`` and ``eagle.cpu.spec`` — each node kind's cpu lowering, the one
  place a recorded node becomes what the executor runs (a typed spec);
* ``eagle.cpu.native_node`` — ``native()`` nodes: nogil C kernels;
* ``eagle.cpu.ufunc_node`` and ``eagle.cpu._ufunc`` — ufunc nodes and their loops;
* ``eagle.cpu.finished`` and ``eagle.cpu._partition`` — compaction and reorder.
"""


#: the public submodules (the thread policy; the extension API: docs/api.md, "Extending eagle"); the others are
#: the implementation, reached by their full names only
__all__ = ["lowering", "spec", "threads"]


def __dir__():
    from eagle._public import public_dir

    return public_dir(globals(), submodules=False)
