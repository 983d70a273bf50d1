// The CUDA backend's checksum of region memory (a verified pause and its
// resume: CudaVmmBackend::checksum), run on the device in the stream the copies
// use: core/Checksum.h's sum, each thread adding the terms of a stride of words
// (coalesced: neighbouring threads read neighbouring words), a warp adding its
// threads', one atomic add per warp into `out` (which starts at zero). The order
// of the adds does not matter: the host's checksumWords gets the same sum.
//
// Not compiled with the project: scripts/gen-checksum-ptx.sh turns it into the
// PTX text collectors/cuda/ChecksumKernelPtx.h holds (which the driver compiles
// for the GPU it finds), and a test checks that text is this file's.
#include "core/Checksum.h"

extern "C" __global__ void memtool_checksum(const unsigned long long* data,
                                            unsigned long long words, unsigned long long* out) {
    const unsigned long long stride = static_cast<unsigned long long>(gridDim.x) * blockDim.x;
    unsigned long long sum = 0;
    for (unsigned long long i = static_cast<unsigned long long>(blockIdx.x) * blockDim.x + threadIdx.x;
         i < words; i += stride)
        sum += memtool::core::checksumTerm(data[i], i);
    for (int offset = 16; offset > 0; offset /= 2) sum += __shfl_down_sync(0xffffffffu, sum, offset);
    if ((threadIdx.x & 31) == 0) atomicAdd(out, sum);
}
