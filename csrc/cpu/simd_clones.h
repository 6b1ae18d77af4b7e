/* EAGLE_SIMD_CLONES: a function built once per x86-64 level and picked at load time, so
 * the wheel vectorises for the machine it runs on (the random and distribution kernels'
 * loops). One clone per level: a target_clones string is one ISA per comma ("avx2,fma"
 * would be two clones, an AVX2 one without FMA whose fma() calls stop the vectoriser),
 * so the levels are named as arch= (GCC 11+; v4: AVX-512F/BW/DQ/VL, v3: AVX2 + FMA).
 * Elsewhere (other compilers, other machines, EAGLE_NO_CLONES) it is empty. */
#ifndef EAGLE_SIMD_CLONES_H
#define EAGLE_SIMD_CLONES_H

#if defined(__x86_64__) && defined(__ELF__) && defined(__GNUC__) && !defined(__clang__) && \
    __GNUC__ >= 11 && !defined(EAGLE_NO_CLONES)
#define EAGLE_SIMD_CLONES \
    __attribute__((target_clones("arch=x86-64-v4", "arch=x86-64-v3", "default")))
#else
#define EAGLE_SIMD_CLONES
#endif

#endif
