"""csrc/cpu/philox_block.c's vector paths give the portable Philox's words: the C check
(philox_block_check.c) built at each path level the machine can run and run."""
import pytest

from programs import cpu_has, run_c_check

CPU_FLAG = {0: (), 1: ("avx2",), 2: ("avx512f",)}


@pytest.mark.parametrize("level", [0, 1, 2], ids=["portable", "avx2", "avx512"])
def test_every_path_gives_the_portable_words(tmp_path, level):
    if not cpu_has(*CPU_FLAG[level]):
        pytest.skip(f"this CPU has no {CPU_FLAG[level][0]}")
    run_c_check(tmp_path, ["tests/random/philox_block_check.c", "csrc/cpu/philox_block.c"],
                ["-O2", f"-DEAGLE_PHILOX_MAX_LEVEL={level}"])
