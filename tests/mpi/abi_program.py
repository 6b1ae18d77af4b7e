"""Run by test_handle_abi.py in a process of its own: eagle's collective kernels bound to a
stand-in MPI (tests/doubles/fake_mpi.c, a test double) of one handle ABI. No mpi4py here."""
import ctypes
import sys

import numpy as np

import eagle
from eagle.graph import native
from eagle.mpi import _collectives

path, pointer = sys.argv[1], sys.argv[2] == "pointer"
fake = ctypes.CDLL(path)
for name in ("dtype", "op", "comm"):
    getattr(fake, f"fake_mpi_last_{name}").restype = ctypes.c_uint64
for name in ("send", "recv"):
    getattr(fake, f"fake_mpi_last_{name}").restype = ctypes.c_void_p
fake.fake_mpi_last_call.restype = ctypes.c_char_p
IN_PLACE = (1 << 64) - 1       # (void *)-1, as MPICH's
_collectives.resolve(path, pointer, IN_PLACE)

# handles as mpi4py gives them: unsigned 64-bit; MPICH's int handles sign-extended
if pointer:
    DT, OP, COMM = 0x7F00DEADBEE8, 0x7F00CAFE0010, 0x7FFF12345678
else:
    DT, OP, COMM = 0x4C00080B, 0x58000003, (1 << 64) - 0x7C000000   # int 0x84000000: negative


def run(call, arrays):
    g = eagle.Graph()
    g.add_node(native(call.kernel, writes={f"a{k}": a for k, a in enumerate(arrays)}), name="c")
    g.build().launch(1)


x, y = np.arange(4.0), np.zeros(4)
run(_collectives.CollectiveCall("allreduce", "sum", 4, 0, False, DT, OP, COMM, 0, -1, -1, 0, 0, 0, 1), [x, y])
assert fake.fake_mpi_last_call() == b"MPI_Allreduce"
assert fake.fake_mpi_last_dtype() == DT and fake.fake_mpi_last_op() == OP and fake.fake_mpi_last_comm() == COMM, \
    (hex(fake.fake_mpi_last_dtype()), hex(fake.fake_mpi_last_op()), hex(fake.fake_mpi_last_comm()))
assert fake.fake_mpi_last_count() == 4
assert fake.fake_mpi_last_send() == x.ctypes.data and fake.fake_mpi_last_recv() == y.ctypes.data
np.testing.assert_array_equal(y, x)

run(_collectives.CollectiveCall("allreduce", "inplace", 4, 0, True, DT, OP, COMM, 0, -1, -1, 0, 0, 0, 1), [y])
assert fake.fake_mpi_last_send() == IN_PLACE and fake.fake_mpi_last_recv() == y.ctypes.data

g_out = np.zeros(4)
run(_collectives.CollectiveCall("allgather", "gather", 4, 4, False, DT, 0, COMM, 0, -1, -1, 0, 0, 0, 1), [x, g_out])
assert fake.fake_mpi_last_call() == b"MPI_Allgather" and fake.fake_mpi_last_recv_count() == 4
assert fake.fake_mpi_last_comm() == COMM

run(_collectives.CollectiveCall("bcast", "share", 4, 0, False, DT, 0, COMM, 3, -1, -1, 0, 0, 0, 1), [x])
assert fake.fake_mpi_last_call() == b"MPI_Bcast" and fake.fake_mpi_last_root() == 3

h_out = np.zeros(2)
run(_collectives.CollectiveCall("sendrecv", "halo", 4, 2, False, DT, 0, COMM, 0, 5, 6, 9, 9, 0, 1), [x, h_out])
assert fake.fake_mpi_last_call() == b"MPI_Sendrecv" and fake.fake_mpi_last_dest() == 5
assert fake.fake_mpi_last_source() == 6 and fake.fake_mpi_last_tag() == 9 and fake.fake_mpi_last_recv_count() == 2
assert fake.fake_mpi_last_comm() == COMM
print("ABI OK", flush=True)

# an MPI error: the kernel names the node and the call, aborts, and this process ends with status 1
bad = np.zeros(13)
run(_collectives.CollectiveCall("allreduce", "tally", 13, 0, False, DT, OP, COMM, 0, -1, -1, 0, 0, 2, 4), [bad, bad.copy()])
print("NOT REACHED", flush=True)
