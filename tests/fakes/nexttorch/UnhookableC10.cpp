// A libc10.so of a torch memtool has never seen, whose CPU allocator does not call
// posix_memalign (aligned_alloc instead): memtool cannot hook it, and the trace must
// say so, naming the torch (tests/e2e/CollectorLibraryTest.cpp). Its sibling, built
// from tests/fakes/reload/Block.cpp, allocates as every known libc10 does.
#include <cstdlib>

extern "C" void* block_alloc(std::size_t bytes) {
    return std::aligned_alloc(64, (bytes + 63) / 64 * 64);
}

extern "C" void block_free(void* p) { std::free(p); }
