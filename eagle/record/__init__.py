"""Recording, below every backend: what a node is, memory and staging, and the backend
contract.

* ``eagle.record.node`` — the node contract (``Node``, ``RunsAs``) and the opaque node;
* ``eagle.record.arrays`` — the array arguments of every constructor: one parser;
* ``eagle.record.options`` — ``CpuOptions`` and ``CudaOptions``, what ``build()`` takes;
* ``eagle.record.memory``, ``eagle.record.foreign`` — arrays as byte extents (any owner);
* ``eagle.record.staging`` — stages and edges from memory hazards, the group check;
* ``eagle.record.recording`` — ``Recording``, the read-only view backends are given;
* ``eagle.record.backend`` — ``Backend``, what a backend offers the graph;
* ``eagle.record.plan`` — ``Plan`` and ``StagePlan``, how a built graph runs;
* ``eagle.record.hooks`` — where scale-out joins a build and a failed launch;
* ``eagle.record.ufunc_operands`` — a ufunc node's operands, for both backends;
* ``eagle.record.finished`` — what the compaction and reorder nodes of both backends share.

Nothing here imports a backend, ``eagle.graph`` or ``eagle.mpi``.
"""


#: the public submodules (the extension API: docs/api.md, "Extending eagle"); the others are
#: the implementation, reached by their full names only
__all__ = ["node", "recording", "plan", "options", "backend", "hooks"]


def __dir__():
    from eagle._public import public_dir

    return public_dir(globals(), submodules=False)
