// Stream and report scale: N alloc/free pairs straight through libc10's CPU
// allocator (c10::alloc_cpu / c10::free_cpu, what every CPU storage uses), from
// a handful of distinct call stacks. No tensors: the allocator is the whole cost.
//
//   alloc_stress N [LIVE]
//
// Pair i allocates 64 + (i % 4) * 64 bytes from one of four functions and frees
// the block it allocated LIVE pairs earlier (default 16), so LIVE blocks are
// live at any time.
#include <c10/core/impl/alloc_cpu.h>

#include <cstdio>
#include <cstdlib>
#include <vector>

namespace {

__attribute__((noinline)) void* fromA(size_t n) { return c10::alloc_cpu(n); }
__attribute__((noinline)) void* fromB(size_t n) { return c10::alloc_cpu(n); }
__attribute__((noinline)) void* fromC(size_t n) { return c10::alloc_cpu(n); }
__attribute__((noinline)) void* fromD(size_t n) { return c10::alloc_cpu(n); }

}  // namespace

int main(int argc, char** argv) {
    long long n = argc > 1 ? std::atoll(argv[1]) : 1000000;
    size_t live = argc > 2 ? static_cast<size_t>(std::atoll(argv[2])) : 16;
    std::vector<void*> ring(live, nullptr);
    unsigned long long bytes = 0;
    for (long long i = 0; i < n; ++i) {
        size_t size = 64 + static_cast<size_t>(i % 4) * 64;
        void* p = nullptr;
        switch (i % 4) {
            case 0:
                p = fromA(size);
                break;
            case 1:
                p = fromB(size);
                break;
            case 2:
                p = fromC(size);
                break;
            default:
                p = fromD(size);
                break;
        }
        bytes += size;
        void*& slot = ring[static_cast<size_t>(i) % live];
        if (slot) c10::free_cpu(slot);
        slot = p;
    }
    for (void* p : ring)
        if (p) c10::free_cpu(p);
    std::printf("alloc_stress: %lld pairs, %llu bytes\n", n, bytes);
    return 0;
}
