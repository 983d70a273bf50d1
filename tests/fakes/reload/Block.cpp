// A library that allocates through posix_memalign and frees through free, from
// its own GOT, as libc10's CPU allocator does. Built twice from this one source,
// once as libc10.so: the two map the same way, so the second takes the
// addresses the first left.
#include <cstdlib>

extern "C" void* block_alloc(std::size_t bytes) {
    void* p = nullptr;
    return posix_memalign(&p, 64, bytes) == 0 ? p : nullptr;
}

extern "C" void block_free(void* p) { std::free(p); }
