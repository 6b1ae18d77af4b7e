# cython: language_level=3
"""eagle.cuda._graph for ``cimport``: graphs (owned and borrowed) and executable graphs."""
from eagle.cuda._driver cimport eagle_cudaGraph_t, eagle_cudaGraphExec_t


cdef class GraphBase:
    cdef eagle_cudaGraph_t handle
    cdef eagle_cudaGraph_t live_handle(self) except? NULL


cdef class Graph(GraphBase):
    pass


cdef class BorrowedGraph(GraphBase):
    cdef readonly object owner
    cdef eagle_cudaGraph_t live_handle(self) except? NULL


cdef Graph own_graph(eagle_cudaGraph_t g)


cdef class GraphExec:
    cdef eagle_cudaGraphExec_t handle
    cdef readonly GraphBase graph    # the graph instantiated from (its node handles name nodes)
    cdef readonly list updated_from  # the last graph update() took arguments from (kept alive)
    cdef object lock                 # serializes launch, update, close and the retune
    cdef object retune               # a weak reference to the exec's Retune (eagle.cuda._retune)

    cdef int alive(self) except -1
