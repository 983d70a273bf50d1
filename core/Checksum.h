#pragma once
// The checksum a verified pause takes of each allocation's content and its
// resume checks (memtool run --verify, memtool.region(..., verify=True)): the
// sum, modulo 2^64, of one term per 8-byte word, each the word mixed with its
// index (splitmix64's finalizer). A changed word changes its term; a word moved
// or two swapped change theirs, as the index is mixed in. The order the terms
// are added in does not matter, so a device adds them in parallel (the CUDA
// backend's kernel, collectors/cuda/ChecksumKernel.cu) and gets what the host
// gets here. Sizes are multiples of 8 bytes (region memory is whole pages).
//
// Compiled by nvcc too (the kernel includes it): plain C++, no library.

#include <cstdint>

#if defined(__x86_64__) && !defined(__CUDACC__)
#include <immintrin.h>
#endif

#ifdef __CUDACC__
#define MEMTOOL_HOST_DEVICE __host__ __device__
#else
#define MEMTOOL_HOST_DEVICE
#endif

namespace memtool::core {

MEMTOOL_HOST_DEVICE inline uint64_t checksumTerm(uint64_t word, uint64_t index) {
    uint64_t z = word + (index + 1) * 0x9E3779B97F4A7C15ull;
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

// The checksum of `words` 8-byte words at `data`, the first one's index `first`
// (a range checked in parts adds its parts' sums), one word at a time.
inline uint64_t checksumWordsScalar(const uint64_t* data, uint64_t words, uint64_t first = 0) {
    uint64_t sum = 0;
    for (uint64_t i = 0; i < words; ++i) sum += checksumTerm(data[i], first + i);
    return sum;
}

#if defined(__x86_64__) && !defined(__CUDACC__)
// The same, eight words at a time (AVX-512's 64-bit multiply): as fast as the
// memory reads here (1 GiB in 0.042-0.058 s, where one at a time took 0.16 s).
__attribute__((target("avx512f,avx512dq"))) inline uint64_t checksumWordsAvx512(
    const uint64_t* data, uint64_t words, uint64_t first = 0) {
    const __m512i golden = _mm512_set1_epi64(static_cast<long long>(0x9E3779B97F4A7C15ull));
    const __m512i m1 = _mm512_set1_epi64(static_cast<long long>(0xBF58476D1CE4E5B9ull));
    const __m512i m2 = _mm512_set1_epi64(static_cast<long long>(0x94D049BB133111EBull));
    const __m512i eight = _mm512_set1_epi64(8);
    // The masked shifts (all lanes): the plain ones make GCC 12 warn of an
    // uninitialized value inside its own header (-Werror).
    const __mmask8 all = 0xff;
    __m512i index = _mm512_add_epi64(_mm512_set1_epi64(static_cast<long long>(first + 1)),
                                     _mm512_set_epi64(7, 6, 5, 4, 3, 2, 1, 0));
    __m512i sum = _mm512_setzero_si512();
    uint64_t i = 0;
    for (; i + 8 <= words; i += 8) {
        __m512i z =
            _mm512_add_epi64(_mm512_loadu_si512(data + i), _mm512_mullo_epi64(index, golden));
        z = _mm512_mullo_epi64(_mm512_xor_si512(z, _mm512_maskz_srli_epi64(all, z, 30)), m1);
        z = _mm512_mullo_epi64(_mm512_xor_si512(z, _mm512_maskz_srli_epi64(all, z, 27)), m2);
        sum = _mm512_add_epi64(sum, _mm512_xor_si512(z, _mm512_maskz_srli_epi64(all, z, 31)));
        index = _mm512_add_epi64(index, eight);
    }
    uint64_t lanes[8];  // (_mm512_reduce_add_epi64: the same warning)
    _mm512_storeu_si512(lanes, sum);
    uint64_t total = checksumWordsScalar(data + i, words - i, first + i);
    for (uint64_t lane : lanes) total += lane;
    return total;
}
#endif

// The checksum, the fastest way this CPU has.
inline uint64_t checksumWords(const uint64_t* data, uint64_t words, uint64_t first = 0) {
#if defined(__x86_64__) && !defined(__CUDACC__)
    __builtin_cpu_init();  // may run before the constructors that would make it
    if (__builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512dq"))
        return checksumWordsAvx512(data, words, first);
#endif
    return checksumWordsScalar(data, words, first);
}

}  // namespace memtool::core
