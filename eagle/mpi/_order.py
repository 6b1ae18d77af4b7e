"""The token every collective writes, so a graph's collectives run in recording order.

MPI (and NCCL) need every rank to call the collectives of one communicator in
one order: every collective node declares this one array as written, which
gives each an ordering-only edge to the one before it.
"""
import numpy as np

#: written by every collective (an ordering-only edge)
ORDER_TOKEN = np.zeros(1, dtype=np.uint8)
#: its name in a collective's ``writes``
ORDER_NAME = "collective order"
