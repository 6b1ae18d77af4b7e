"""csrc/cpu/exponential_avx512.h gives the portable exponential sampler's bits (the GPU's):
the C check (exponential_check.c) built with the random kernels' own flags and run, on a
CPU with AVX-512 F and DQ. Elsewhere the node runs the portable loop alone, which
tests/random/test_distributions.py checks against the scalar sampler."""
import pytest

from programs import cpu_has, run_c_check


def test_the_avx512_exponential_gives_the_portable_bits(tmp_path):
    if not cpu_has("avx512f", "avx512dq"):
        pytest.skip("this CPU has no AVX-512 F and DQ")
    # the flags distribution_kernels.c is built with (setup.py): no FP contraction
    run_c_check(tmp_path, ["tests/random/exponential_check.c"], ["-O3", "-ffp-contract=off"], ["-lm"])
