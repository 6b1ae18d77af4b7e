/* A team thread's hold on the GIL for the length of one parallel region: the first
 * take makes (or finds) the thread's Python state, later ones reuse it. A worker
 * other than the launching thread also enters, at its first opaque call, its own
 * copy of the launching thread's context (caller_context): np.errstate, decimal's
 * context and every contextvars value are the caller's there too, so a node sees
 * the same whatever thread runs it. One copy per worker, since a context is
 * entered by one thread at a time.
 *
 * Ownership: a slot is its thread's, for one region. Thread-safety: its thread.
 */
#ifndef EAGLE_GIL_H
#define EAGLE_GIL_H

#include <Python.h>

typedef struct eagle_gil_slot {
    int have_state;
    PyGILState_STATE gstate;
    PyThreadState *tstate;
    PyObject *context;      /* this worker's copy of caller_context, entered; or NULL */
} eagle_gil_slot;

static inline void eagle_gil_take(eagle_gil_slot *g)
{
    if (!g->have_state) {
        g->gstate = PyGILState_Ensure();
        g->have_state = 1;
    } else {
        PyEval_RestoreThread(g->tstate);
    }
}

static inline void eagle_gil_drop(eagle_gil_slot *g) { g->tstate = PyEval_SaveThread(); }

/* Holding the GIL, on a worker (not the launching thread): enter a copy of the
 * caller's context unless done. -1 with the Python error set. */
static inline int eagle_gil_enter_context(eagle_gil_slot *g, PyObject *caller_context)
{
    if (g->context != NULL || caller_context == NULL)
        return 0;
    PyObject *ctx = PyContext_Copy(caller_context);
    if (ctx == NULL)
        return -1;
    if (PyContext_Enter(ctx) < 0) {
        Py_DECREF(ctx);
        return -1;
    }
    g->context = ctx;
    return 0;
}

/* At the region's end: leave the context and release the thread's Python state. */
static inline void eagle_gil_finish(eagle_gil_slot *g)
{
    if (g->have_state) {
        PyEval_RestoreThread(g->tstate);
        if (g->context != NULL) {
            if (PyContext_Exit(g->context) < 0)
                PyErr_Clear();    /* a node left another context entered: nothing to restore */
            Py_DECREF(g->context);
        }
        PyGILState_Release(g->gstate);
    }
}

#endif
