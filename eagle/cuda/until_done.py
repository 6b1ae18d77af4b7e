"""``launch_until_done`` on the cuda backend: replay until no sample is live, never past it.

Three paths (``UntilDone.path``):

* **device** (12.4+ drivers): one conditional WHILE node whose body is the captured replay
  (a child graph) then the condition kernel ``eagle_until_done_condition`` (continue while
  the live count is above 0, fewer than the allowed replays ran and the stop flag is
  clear): one ``cuGraphLaunch`` runs a chunk of replays, the size block is read back after
  each chunk (Ctrl-C is seen between chunks);
* **host**: one replay at a time, the live count read back after each (older drivers, and
  a replay graph holding conditional nodes, which CUDA refuses in a child graph);
* **ranks**: with collectives over several ranks, replay by replay, the ranks agreeing
  after each (MPI allreduce of the live counts) whether any sample is live anywhere.
"""
from __future__ import annotations

import ctypes
import sys


from eagle._errors import CudaError
from eagle.cuda._driver import has
from eagle.cuda._graph import Graph
from eagle.cuda.finished import G_LIVE_REPLAYS, G_SIZE, G_STOP

__all__ = ["UntilDone"]


class UntilDone:
    """How one cuda backend runs ``launch_until_done``: its ``control`` lowering (whether the
    replay graph holds conditional nodes) and the communicators of its collectives; each
    call is handed the backend (a ``CudaBackend``: its stream, exec, retune, device state,
    read-back and Ctrl-C handling), which it does not keep (no backend <-> UntilDone cycle:
    a dropped graph is freed without the cyclic collector)."""

    def __init__(self, control, communicators):
        self.control = control
        #: "device", "host", or None: device when the driver has conditional nodes
        self.mode = None
        #: why the WHILE node could not be built (then the host loop runs), or None
        self.fallback = None
        #: replays one launch of the WHILE node may run at most (Ctrl-C is seen between launches)
        self.chunk = 4096
        #: (logical size it was built for, its exec, its graph) of the WHILE node, or None
        self.while_graph = None
        self.refused = None
        #: the MPI communicator the ranks agree over (collectives over several ranks), or None
        self.ranks = self._ranks_of(communicators)

    def _ranks_of(self, comms):
        """The communicator of the graph's collectives over several ranks (``comms``: what
        their lowerings added, ``CaptureContext.add_communicator``), or None: a rank whose
        samples finish first must keep replaying (its collectives pair with the others'),
        or the others' next collective would wait forever."""
        if len(comms) > 1:
            self.refused = ("launch_until_done: this graph's collectives use "
                            f"{len(comms)} communicators; eagle agrees on the stop "
                            "over one only (use launch(n))")
        return comms[0] if comms else None

    def path(self) -> str:
        if self.ranks is not None:
            return "ranks"
        mode = self.mode
        if mode is None:
            mode = "device" if has("conditional") else "host"
        conditional = self.control.conditional_nodes
        if mode == "device" and conditional:
            # the WHILE node's body holds the replay graph as a child graph (_while_exec),
            # and CUDA refuses a child graph holding conditional nodes: decided here, with
            # no driver call made to fail
            self.fallback = (
                f"the replay graph holds {conditional} conditional "
                "node(s) (while_loop / if_else), and CUDA refuses a child graph holding "
                "conditional nodes, which launch_until_done's WHILE node would need around "
                "the replay: it replays one at a time, reading the live count after each")
            mode = "host"
        return mode

    def run(self, b, n: int) -> int:
        """Up to ``n`` replays of backend ``b``, stopping once no sample is live; returns the
        replays that started with live samples (every rank's count with ranks, as on the CPU)."""
        state = b.state
        if self.refused:
            raise ValueError(self.refused)
        if self.ranks is not None:
            # a rank whose samples finished replays on at size 0: its replays count (the
            # CPU's count, and the device replay counter of random nodes advances on each)
            ran = [0]
            try:
                self._run_ranks(b, n, ran)
            except KeyboardInterrupt as e:
                b.last_failure = (-1, 0)
                b.interrupted(e, f"launch_until_done({n})", ran[0])
                raise
            except CudaError:
                b.settle()
                raise
            finally:
                state.host_replays += ran[0]
            return ran[0]
        live = state.host_block
        live_before = int(live[G_LIVE_REPLAYS])
        done = 0
        try:
            exec_ = None
            if self.path() == "device":
                try:
                    exec_ = self._while_exec(b)
                except Exception as e:  # e.g. the condition kernel does not load: use the host loop
                    self.fallback = f"{type(e).__name__}: {e}"
                    self.mode = "host"
            if exec_ is not None:
                # chunks of replays per WHILE launch, so Ctrl-C is seen between them
                while done < n:
                    step = min(n - done, self.chunk)
                    before = int(live[G_LIVE_REPLAYS])
                    state.write_word(G_STOP, before + step)
                    exec_.launch(b.stream, 1)
                    g = b.read_back()
                    ran = int(g[G_LIVE_REPLAYS]) - before
                    done += ran
                    if g[G_SIZE] == 0 or ran < step:
                        break
            else:
                while done < n:
                    b.exec.launch(b.stream, 1)
                    done += 1
                    if b.read_back()[G_SIZE] == 0:
                        break
        except KeyboardInterrupt as e:
            # the device path counts its replays on the device: `done` lags by the chunk
            # under way, the counter read back after the drain does not
            b.interrupted(e, f"launch_until_done({n})",
                          lambda: int(live[G_LIVE_REPLAYS]) - live_before)
            b.last_failure = (-1, max(int(live[G_LIVE_REPLAYS]) - live_before - 1, 0))
            raise
        except CudaError:
            b.settle()
            raise
        finally:
            state.host_replays += int(live[G_LIVE_REPLAYS]) - live_before
        return int(live[G_LIVE_REPLAYS]) - live_before

    def _run_ranks(self, b, n, done):
        """Replay by replay; after each, the ranks agree (MPI allreduce, max of the live
        counts) on whether any sample is live anywhere. A rank with none left replays on
        at logical size 0 (its kernels do nothing, its collectives pair with the others').
        ``done[0]`` counts the replays issued (every rank's count, as on the CPU)."""
        mpi = sys.modules["mpi4py.MPI"]
        live_anywhere = self.ranks.allreduce(int(b.logical_size), op=mpi.MAX)
        while done[0] < n and live_anywhere > 0:
            b.exec.launch(b.stream, 1)
            done[0] += 1
            local = int(b.read_back()[G_SIZE])
            live_anywhere = self.ranks.allreduce(local, op=mpi.MAX)

    def _while_exec(self, b):
        """One WHILE node whose body is the captured replay then the condition kernel
        (see the module doc). Built for the logical size the host knows (sized grids are an
        upper bound within the call), rebuilt when that changed."""
        key = b.logical_size
        if self.while_graph is not None and self.while_graph[0] == key:
            return self.while_graph[1]
        self.close()
        b.retune.write_back_to_graph()
        top = Graph()
        try:
            _node, handle, body = top.add_while(initial=1)
            child = body.add_child(b.exec.graph)
            func = b.kernels.function("eagle_until_done_condition")
            body.add_kernel(func, 1, 1, [ctypes.c_uint64(handle), ctypes.c_uint64(b.state.size_ptr),
                                         ctypes.c_uint64(b.state.stop_ptr)],
                            deps=[child])
            exec_ = top.instantiate(upload_stream=b.stream)
        except BaseException:
            top.close()
            raise
        self.while_graph = (key, exec_, top)
        return exec_

    def close(self):
        """Destroy the WHILE node's exec and graph; raises the first error after trying both."""
        if self.while_graph is not None:
            _, exec_, top = self.while_graph
            self.while_graph = None
            first = None
            for obj in (exec_, top):
                try:
                    obj.close()
                except CudaError as e:
                    first = first or e
            if first is not None:
                raise first
