"""The counts of a where= mask's block (csrc/cpu/mask_scan.h) that decide how the masked
loop runs it: a count that says "all set" for a block that is not would write the unset
elements. The C check (mask_counts_check.c) built as the extension builds it (AVX-512 BW
where the CPU has it) and with the portable form alone, and run."""
import pytest

from programs import run_c_check


@pytest.mark.parametrize("portable", [False, True], ids=["as-built", "portable"])
def test_mask_counts_equal_a_byte_by_byte_count(tmp_path, portable):
    run_c_check(tmp_path, ["tests/ufunc/mask_counts_check.c"],
                ["-O3", *(["-DEAGLE_NO_AVX512_MASKS"] if portable else [])])
