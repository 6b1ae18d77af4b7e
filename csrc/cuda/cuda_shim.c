/* eagle CUDA driver shim: the compiled C layer of the Python extension
 * eagle.cuda._shim. eagle reaches CUDA through the driver only (libcuda.so.1,
 * opened with dlopen, every entry point resolved with cuGetProcAddress), never
 * the CUDA runtime. The code lives in eagle/detail/cuda_shim_impl.h so that
 * the header-only C++ face (eagle/cuda.hpp) can compile the same code into a
 * C++ program (define EAGLE_CUDA_SHIM_IMPLEMENTATION in one translation unit).
 * The declarations and the contract are in eagle/cuda_shim.h. */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE /* dladdr, RTLD_NOLOAD */
#endif
#include "eagle/detail/cuda_shim_impl.h"
