// A C++ program without Python whose leaks depend on when they are counted.
// Three blocks from libc10's CPU allocator, as LibTorch's storages are made:
//   a static object's  200,000 bytes, freed by its destructor after main (teardown)
//   a block of          50,000 bytes, never freed
//   a local block of 1,000,000 bytes, freed before main returns
//
//   leak_at_exit         returns from main: 250,000 bytes live then
//   leak_at_exit exit    calls exit(0) inside main, the local block still held:
//                        1,250,000 bytes live then
#include <c10/core/impl/alloc_cpu.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>

namespace {

struct Cache {
    void* block = nullptr;
    ~Cache() { c10::free_cpu(block); }
};
Cache cache;

}  // namespace

int main(int argc, char** argv) {
    cache.block = c10::alloc_cpu(200000);
    void* never = c10::alloc_cpu(50000);
    void* local = c10::alloc_cpu(1000000);
    std::printf("leak_at_exit: %p %p\n", never, local);
    if (argc > 1 && std::strcmp(argv[1], "exit") == 0) std::exit(0);
    c10::free_cpu(local);
    return 0;
}
