"""The CUDA shim's entry table read from its source (csrc/include/eagle/detail/
cuda_shim_impl.h), for the tests that check it against the driver's headers."""
import re


def field_types(src: str) -> dict:
    """{field: eagle_cu_* type} of the shim's ``eagle_cuda_table`` struct in ``src``."""
    table = src[src.index("typedef struct eagle_cuda_table {"):src.index("} eagle_cuda_table;")]
    types = {}
    for t, fields in re.findall(r"^\s*(eagle_cu_\w+) ([\w, ]+);", table, re.M):
        for f in fields.split(","):
            types[f.strip()] = t
    return types
