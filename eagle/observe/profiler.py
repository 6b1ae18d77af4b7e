"""``with eagle.profile() as prof:`` — per-node counts and times of the launches inside.

While a profile is open on a thread, every launch made by that thread is
recorded: on the cpu backend the C executor times every node call on every
thread of the team into a per-thread buffer (in C, no Python call per node),
and the profile turns the buffers into tables and a trace after each launch.
On other backends (cuda) a profile records whole launches; for per-node GPU
time use Nsight Systems (``nsys profile --cuda-graph-trace=node``), which
sees eagle's NVTX ranges.

Scope: a profile sees the launches of the thread that opened it (launches of
other threads are not recorded, even while it is open). Profiles nest: a
launch is recorded by every profile open on its thread. A profile can be
opened again later (it accumulates), but not while it is already open.
With no profile open anywhere, a launch does not look at profiling at all
beyond one test of a counter.
"""
from __future__ import annotations

import copy
import json
import os
import threading
import time
import weakref
from dataclasses import dataclass

import numpy as np

from eagle import _core
from eagle._text import duration, monospace_html, plural

__all__ = ["Profile", "profile", "LaunchRecord", "NodeStats"]

#: eagle_span in csrc/cpu/plan.h
SPAN_DTYPE = np.dtype([("node", "<i4"), ("phase", "<i4"), ("replay", "<i8"),
                       ("t0", "<i8"), ("t1", "<i8")])
assert SPAN_DTYPE.itemsize == 32

_local = threading.local()


def _open_profiles():
    stack = getattr(_local, "stack", None)
    if stack is None:
        stack = _local.stack = []
    return stack


def launch_record(graph, backend, n, until_done):
    """Called by the compiled launch path (eagle._core) while some profile is open somewhere:
    a record of this launch for the profiles open on this thread, or None."""
    stack = getattr(_local, "stack", None)
    if not stack:
        return None
    return LaunchRecord(graph, backend, n, until_done, tuple(stack))


class LaunchRecord:
    """One launch as the profiles open on its thread saw it."""

    def __init__(self, graph, backend, n, until_done, profiles):
        self.graph = graph
        self.requested = n
        self.call = f"launch_until_done({n})" if until_done else f"launch({n})"
        self.backend = backend.name
        self._backend = backend
        rec = backend.recording
        timed = backend.timed   # per timed node (cpu), in the executor's order; then bodies' nodes
        self.node_names = [name for name, _, _ in timed]
        self.node_stages = [stage for _, stage, _ in timed]
        self.per_call = [per_call for _, _, per_call in timed]
        self.controls = backend.timed_controls
        self.profiles = profiles
        # each profile keeps its own max_spans (Profile._add): the executor keeps the most
        self.max_spans = max(p.max_spans for p in profiles)
        self.thread = threading.get_native_id()
        self.thread_name = threading.current_thread().name
        self.lanes = []          # (os thread id or 0, spans array) per executor thread
        self.dropped = 0
        self.replays = None      # replays done (None: the launch raised)
        self.error = None        # the exception's type name when it raised
        self.t0 = time.monotonic_ns()   # CLOCK_MONOTONIC, as the executor's spans
        self.t1 = self.t0

    # the executor's side (CpuPlan.run_observed)
    def lanes_done(self, lanes):
        for os_thread, spans, dropped in lanes:
            self.lanes.append((os_thread, np.frombuffer(spans, SPAN_DTYPE)))
            self.dropped += dropped

    def kept_by(self, max_spans):
        """This launch as a profile with this max_spans sees it: a copy, each lane cut as
        the executor would have cut it (the first max_spans calls, then control nodes' own
        calls up to twice that)."""
        view = copy.copy(self)
        if max_spans >= self.max_spans:
            return view
        view.max_spans = max_spans
        view.lanes = []
        for os_thread, lane in self.lanes:
            rest = lane[max_spans:]
            if len(rest) and self.controls:
                rest = rest[np.isin(rest["node"], list(self.controls))][:max_spans]
            else:
                rest = rest[:0]
            kept = np.concatenate([lane[:max_spans], rest])
            view.dropped += len(lane) - len(kept)
            view.lanes.append((os_thread, kept))
        return view

    def finish(self, done, exc):
        self.t1 = time.monotonic_ns()
        self.replays = done
        if exc is not None:
            self.error = type(exc).__name__
            where = self._backend.last_failure
            if where is not None:
                self.replays = where[1]   # replays completed before the one that failed
        for p in self.profiles:
            p._add(self)


@dataclass(frozen=True)
class NodeStats:
    """One row of ``Profile.stats()``. Times in ns. ``count``: replays the node
    ran in (a body node of a control node: its calls, once per iteration);
    ``total``/``mean``/``min``: its time in a replay (a call), from its first
    thread's start to its last thread's end; ``thread_total``: summed over
    threads; ``share``: total / the launches' time (``in_body``: a part of its
    control node's share, which holds it)."""
    graph: str
    node: str
    stage: int | None
    count: int
    total: float
    mean: float
    min: float
    thread_total: float
    threads: int
    share: float
    #: a control node's body node: its calls' time is inside the control node's row (the
    #: table shows its share in parentheses; the other rows' shares add up to 100%)
    in_body: bool = False


class Profile:
    """Per-node counts and times of the launches made inside ``with``.

    ``print(prof)`` / ``prof.table()`` show them, ``prof.stats()`` gives them
    as rows, ``prof.export_chrome_trace(path)`` writes a trace for Perfetto or
    chrome://tracing. ``max_spans``: node calls kept per thread per launch;
    beyond it they are counted (``dropped``) and the table says so.
    """

    def __init__(self, max_spans: int = 1_000_000):
        if isinstance(max_spans, bool) or not isinstance(max_spans, int) or max_spans < 1:
            raise ValueError(f"max_spans needs an integer >= 1, got {max_spans!r}")
        self.max_spans = max_spans
        self.launches: list[LaunchRecord] = []
        self._open_on = None
        self._graphs = []        # weak references, in order of first launch: "graph 1", ...

    def __enter__(self):
        if self._open_on is not None:
            raise RuntimeError("this profile is already open (open a new eagle.profile() to nest)")
        self._open_on = threading.get_ident()
        _open_profiles().append(self)
        _core._profile_opened(1)
        return self

    def __exit__(self, *exc):
        if self._open_on != threading.get_ident():
            raise RuntimeError("a profile must be closed on the thread that opened it")
        stack = _open_profiles()
        stack.remove(self)
        self._open_on = None
        _core._profile_opened(-1)
        return False

    def _add(self, record):
        record = record.kept_by(self.max_spans)   # this profile's own copy, its own label
        self.launches.append(record)
        if not any(r() is record.graph for r in self._graphs):
            try:
                self._graphs.append(weakref.ref(record.graph))
            except TypeError:
                self._graphs.append(lambda g=record.graph: g)
        record.graph_label = self._label(record.graph)

    def _label(self, graph):
        for k, r in enumerate(self._graphs):
            if r() is graph:
                return f"graph {k + 1}"
        return "graph ?"

    @property
    def dropped(self) -> int:
        """Node calls not kept (a thread's buffer was full) over all launches."""
        return sum(r.dropped for r in self.launches)

    @property
    def replays(self) -> int:
        return sum(r.replays or 0 for r in self.launches)

    # ---- rows ----

    def stats(self, per_thread: bool = False) -> list[NodeStats]:
        """One row per (graph, node) in plan order (``per_thread``: per thread as
        well, where count is the node's calls on that thread), then for each graph
        a row for the time between nodes (the executor, barriers, GIL hand-offs),
        or, for a backend that does not time nodes (cuda), one for the whole graph."""
        rows = []
        for label, records in self._by_graph():
            wall = float(sum(r.t1 - r.t0 for r in records))
            names, stages = records[0].node_names, records[0].node_stages
            spans = [(k, lane) for r in records for k, (_, lane) in enumerate(r.lanes) if len(lane)]
            if not spans and records[0].backend != "cpu":   # a backend that does not time nodes
                replays = sum(r.replays or 0 for r in records)
                rows.append(NodeStats(label, f"(whole graph, {records[0].backend})", None, replays, wall,
                                      wall / replays if replays else 0.0, None, wall, 1, 1.0))
                continue
            node_sum = 0.0
            for i, name in enumerate(names):
                if per_thread:
                    for tid in sorted({k for k, lane in spans}):
                        d = np.concatenate([lane["t1"][lane["node"] == i] - lane["t0"][lane["node"] == i]
                                            for k, lane in spans if k == tid])
                        if len(d):
                            rows.append(NodeStats(label, f"{name} [thread {tid}]", stages[i], len(d),
                                                  float(d.sum()), float(d.mean()), float(d.min()),
                                                  float(d.sum()), 1, float(d.sum()) / wall if wall else 0.0))
                    continue
                per_call = records[0].per_call[i]
                per_replay, thread_total, threads = self._node_times(records, i, per_call)
                if per_replay is None:
                    continue
                total = float(per_replay.sum())
                if not per_call:   # a body node's time is inside its control node's already
                    node_sum += total
                rows.append(NodeStats(label, name, stages[i], len(per_replay), total,
                                      float(per_replay.mean()), float(per_replay.min()), thread_total,
                                      threads, total / wall if wall else 0.0, bool(per_call)))
            if not per_thread:
                rest = max(wall - node_sum, 0.0)
                # the time of the calls not kept is in the rest too: say so rather than call it all executor time
                what = ("(between nodes, and node calls not kept)" if any(r.dropped for r in records)
                        else "(between nodes)")
                rows.append(NodeStats(label, what, None, len(records), rest,
                                      rest / len(records), None, rest, 1, rest / wall if wall else 0.0))
        return rows

    def _by_graph(self):
        """Launches grouped by graph and build (a graph rebuilt with other nodes between
        launches numbers its nodes differently: "graph 1 (build 2)")."""
        groups = {}
        for r in self.launches:
            groups.setdefault((r.graph_label, tuple(r.node_names)), []).append(r)
        builds = {}
        out = []
        for (label, _), records in groups.items():
            builds[label] = builds.get(label, 0) + 1
            out.append((label if builds[label] == 1 else f"{label} (build {builds[label]})", records))
        return out

    @staticmethod
    def _node_times(records, i, per_call=False):
        """Node i's time in each replay it ran (first start to last end over the
        threads), its time summed over threads, and how many threads ran it. per_call
        (a control node's body node): each call's time (an iteration), over the threads."""
        per_replay, thread_total, threads = [], 0.0, set()
        for r in records:
            parts = [(k, lane[lane["node"] == i]) for k, (_, lane) in enumerate(r.lanes)]
            parts = [(k, p) for k, p in parts if len(p)]
            if not parts:
                continue
            threads |= {k for k, _ in parts}
            sp = np.concatenate([p for _, p in parts])
            thread_total += float((sp["t1"] - sp["t0"]).sum())
            if per_call:
                # a call (an iteration) is (replay, k): the k-th of the replay on the lane that
                # ran every call (thread 0 takes part in each; of one phase: a team node is
                # timed once per phase). On a team every thread times its part of it, and
                # starts it after the same barrier: another thread's span is the call that
                # started nearest (a loop's first iterations may run on thread 0 alone, so a
                # worker's k-th span need not be iteration k), first start to last end over
                # the threads and phases
                reps, keys = _call_keys(parts)
                order = np.lexsort((keys, reps))
                key = np.stack([reps[order], keys[order]])
                starts = np.flatnonzero(np.r_[True, (key[:, 1:] != key[:, :-1]).any(axis=0)])
                per_replay.append(np.maximum.reduceat(sp["t1"][order], starts)
                                  - np.minimum.reduceat(sp["t0"][order], starts))
                continue
            order = np.argsort(sp["replay"], kind="stable")
            rep = sp["replay"][order]
            starts = np.flatnonzero(np.r_[True, rep[1:] != rep[:-1]])
            t0 = np.minimum.reduceat(sp["t0"][order], starts)
            t1 = np.maximum.reduceat(sp["t1"][order], starts)
            per_replay.append(t1 - t0)
        if not per_replay:
            return None, 0.0, 0
        return np.concatenate(per_replay).astype(np.float64), thread_total, len(threads)

    # ---- the table ----

    def table(self, per_thread: bool = False) -> str:
        """The profile as text: per node its count, total, mean and min time in a
        replay, and its share of the launches' time."""
        if not self.launches:
            return "eagle.profile: no launch recorded"
        wall = sum(r.t1 - r.t0 for r in self.launches)
        threads = max((sum(1 for _, lane in r.lanes if len(lane)) for r in self.launches), default=1)
        n_graphs = len(self._by_graph())
        head = (f"eagle.profile: {plural(len(self.launches), 'launch')}, "
                f"{self.replays:,} replays in {duration(wall)}"
                + (f", {n_graphs} graphs" if n_graphs > 1 else "")
                + (f", {threads} threads" if threads > 1 else ""))
        rows = self.stats(per_thread)
        name_of = (lambda s: f"{s.graph}: {s.node}") if n_graphs > 1 else (lambda s: s.node)
        cols = ["node", "stage", "count", "total", "mean", "min", "share"]
        body = [[name_of(s), "" if s.stage is None else str(s.stage), f"{s.count:,}", duration(s.total),
                 duration(s.mean), duration(s.min),
                 f"({100 * s.share:.1f}%)" if s.in_body else f"{100 * s.share:.1f}%"] for s in rows]
        widths = [max(len(c), *(len(b[k]) for b in body)) for k, c in enumerate(cols)]

        def line(cells):
            return "  ".join(c.ljust(w) if k == 0 else c.rjust(w)
                             for k, (c, w) in enumerate(zip(cells, widths))).rstrip()

        out = [head, line(cols)] + [line(b) for b in body]
        if any(s.in_body for s in rows):
            out.append("(share): a body node's calls, inside its control node's share; "
                       "the other shares add up to 100%")
        failed = [r for r in self.launches if r.error]
        if failed:
            out.append(f"{len(failed)} launch(es) raised ({', '.join(sorted({r.error for r in failed}))}): "
                       "their replays up to the failure are counted")
        if self.dropped:
            out.append(f"{self.dropped:,} node calls not kept (max_spans={self.max_spans:,} per thread per "
                       "launch): the rows cover the calls kept")
        if any(not any(len(l) for _, l in r.lanes) and r.backend != "cpu" for r in self.launches):
            out.append("per-node GPU time: nsys profile --cuda-graph-trace=node python your_script.py")
        return "\n".join(out)

    def __str__(self):
        return self.table()

    def __repr__(self):
        return f"<eagle.profile: {plural(len(self.launches), 'launch')}, {plural(self.replays, 'replay')}>"

    def _repr_html_(self):
        """Jupyter: the table, as ``print(prof)`` shows it."""
        return monospace_html(self.table())

    # ---- the trace ----

    def chrome_trace(self) -> dict:
        """The profile in the Trace Event Format (what ``export_chrome_trace`` writes)."""
        pid = os.getpid()
        origin = min((r.t0 for r in self.launches), default=0)
        events = [{"name": "process_name", "ph": "M", "pid": pid, "tid": 0,
                   "args": {"name": f"eagle (pid {pid})"}}]
        named = {}

        def name_thread(tid, name, sort):
            if tid not in named:
                named[tid] = name
                events.append({"name": "thread_name", "ph": "M", "pid": pid, "tid": tid,
                               "args": {"name": name}})
                events.append({"name": "thread_sort_index", "ph": "M", "pid": pid, "tid": tid,
                               "args": {"sort_index": sort}})

        us = lambda ns: (ns - origin) / 1e3   # noqa: E731
        for r in self.launches:
            label = getattr(r, "graph_label", "graph ?")
            name_thread(r.thread, f"{r.thread_name} (launching)", 0)
            events.append({"name": r.call, "cat": "launch", "ph": "X", "pid": pid, "tid": r.thread,
                           "ts": us(r.t0), "dur": (r.t1 - r.t0) / 1e3,
                           "args": {"graph": label, "backend": r.backend, "replays": r.replays,
                                    **({"error": r.error} if r.error else {})}})
            for k, (os_thread, lane) in enumerate(r.lanes):
                if not len(lane):
                    continue
                tid = r.thread if k == 0 else int(os_thread)
                name_thread(tid, f"eagle worker {k}", k)
                for node, phase, replay, t0, t1 in lane.tolist():
                    args = {"graph": label, "stage": r.node_stages[node], "replay": replay}
                    if phase:
                        args["phase"] = phase
                    events.append({"name": r.node_names[node], "cat": "node", "ph": "X", "pid": pid,
                                   "tid": tid, "ts": us(t0), "dur": (t1 - t0) / 1e3, "args": args})
        return {"traceEvents": events, "displayTimeUnit": "ns",
                "otherData": {"producer": "eagle.profile", "dropped_node_calls": self.dropped}}

    def export_chrome_trace(self, path) -> None:
        """Write the trace (JSON, Trace Event Format): open it in https://ui.perfetto.dev
        or chrome://tracing. One lane per thread, each node call a span named after the node."""
        with open(path, "w") as f:
            json.dump(self.chrome_trace(), f)


def profile(max_spans: int = 1_000_000) -> Profile:
    """``with eagle.profile() as prof: g.launch(n)``, then ``print(prof)`` or
    ``prof.export_chrome_trace("trace.json")``. See ``eagle.observe.profiler``."""
    return Profile(max_spans)


_core.register_observer(launch_record=launch_record)


def _call_keys(parts):
    """(replay, ordinal) of each span of one node's parts ((lane, spans) per lane, in
    lane order, concatenated as they come): lane 0's own ordinals, and each other lane's
    span keyed as the lane-0 span that started nearest it (by ordinals of its own when
    lane 0 has none: a node dealt out to another thread)."""
    base = parts[0][1] if parts[0][0] == 0 else None
    if base is not None:
        base_keys, t0 = _call_ordinals(base["replay"], base["phase"]), base["t0"]
    reps, keys = [], []
    for k, p in parts:
        if base is None or k == 0:
            reps.append(p["replay"])
            keys.append(_call_ordinals(p["replay"], p["phase"]))
            continue
        hi = np.clip(np.searchsorted(t0, p["t0"]), 0, len(t0) - 1)
        lo = np.clip(hi - 1, 0, len(t0) - 1)
        near = np.where(np.abs(t0[lo] - p["t0"]) <= np.abs(t0[hi] - p["t0"]), lo, hi)
        reps.append(base["replay"][near])
        keys.append(base_keys[near])
    return np.concatenate(reps), np.concatenate(keys)


def _call_ordinals(replays, phases):
    """For one lane's spans of one node, in the lane's order: each span's ordinal among
    those of its replay and phase (0, 1, ... per replay: the iteration)."""
    out = np.zeros(len(replays), np.int64)
    for ph in np.unique(phases):
        at = np.flatnonzero(phases == ph)
        rep = replays[at]
        n = len(rep)
        starts = np.flatnonzero(np.r_[True, rep[1:] != rep[:-1]])
        first = np.repeat(starts, np.diff(np.r_[starts, n]))
        out[at] = np.arange(n) - first
    return out
