"""Pure-Python and NumPy references of Philox4x32-10 and of the random nodes' transforms
(the spec: csrc/include/eagle/philox.h), for the tests of tests/random/."""
import numpy as np

M0, M1, W0, W1 = 0xD2511F53, 0xCD9E8D57, 0x9E3779B9, 0xBB67AE85
MASK = 0xFFFFFFFF


def philox_py(ctr, key):
    """Philox4x32-10 of one counter (4 ints) and key (2 ints), in plain Python integers,
    written from Salmon et al.'s description (Random123's philox4x32)."""
    c0, c1, c2, c3 = ctr
    k0, k1 = key
    for i in range(10):
        if i:
            k0, k1 = (k0 + W0) & MASK, (k1 + W1) & MASK
        p0, p1 = M0 * c0, M1 * c2
        c0, c1, c2, c3 = (p1 >> 32) ^ c1 ^ k0, p1 & MASK, (p0 >> 32) ^ c3 ^ k1, p0 & MASK
    return c0, c1, c2, c3


def philox_np(ids, replay, key):
    """The words (n, 4) uint32 eagle draws for samples with ``ids`` (int64) at ``replay``."""
    ids = np.asarray(ids, dtype=np.int64).view(np.uint64)
    c0 = ids & MASK
    c1 = ids >> np.uint64(32)
    c2 = np.full_like(c0, replay & MASK)
    c3 = np.full_like(c0, replay >> 32)
    k0, k1 = np.uint64(key & MASK), np.uint64(key >> 32)
    m = np.uint64(MASK)
    for i in range(10):
        if i:
            k0, k1 = (k0 + np.uint64(W0)) & m, (k1 + np.uint64(W1)) & m
        p0, p1 = np.uint64(M0) * c0, np.uint64(M1) * c2
        c0, c1, c2, c3 = ((p1 >> np.uint64(32)) ^ c1 ^ k0, p1 & m, (p0 >> np.uint64(32)) ^ c3 ^ k1, p0 & m)
    return np.stack([c0, c1, c2, c3], axis=1).astype(np.uint32)


def top53(lo, hi):
    return ((hi.astype(np.uint64) << np.uint64(32)) | lo.astype(np.uint64)) >> np.uint64(11)


def uniform_np(w, low, high, dtype):
    if dtype == np.float64:
        u = top53(w[:, 0], w[:, 1]).astype(np.float64) * 2.0 ** -53
        lo, hi = np.float64(low), np.float64(high)
    else:
        u = (w[:, 0] >> 8).astype(np.float32) * np.float32(2.0 ** -24)
        lo, hi = np.float32(low), np.float32(high)
    span = dtype(hi - lo)
    v = (lo + span * u).astype(dtype)
    below = np.nextafter(hi, dtype(-np.inf))
    return np.where(v > below, below, v)


def normal_np(w, loc, scale, dtype):
    """Box-Muller as philox.h defines it, with NumPy's (libm's) log and cos."""
    u1 = (top53(w[:, 0], w[:, 1]) + np.uint64(1)).astype(np.float64) * 2.0 ** -53
    u2 = top53(w[:, 2], w[:, 3]).astype(np.float64) * 2.0 ** -53
    # cos(2 pi u2) reduced in turns as philox.h does (exact), then libm's sin / cos
    q = np.floor(4 * u2 + 0.5)
    x = 2 * np.pi * (u2 - q / 4)
    quad = q.astype(np.int64) & 3
    c = np.select([quad == 0, quad == 1, quad == 2], [np.cos(x), -np.sin(x), -np.cos(x)], np.sin(x))
    z = np.sqrt(-2.0 * np.log(u1)) * c
    return (loc + scale * z).astype(dtype)
