// Loads first/libreload_first.so, allocates through it, unloads it, then loads
// c10/libc10.so (the same code, named as the allocator memtool hooks) and
// allocates 3,000,000 bytes through it. Prints "reused 1" when the second took
// the first's load address: then the collector met a new object at an address
// it had already checked, which it must check again.
#include <dlfcn.h>
#include <link.h>

#include <cstdio>
#include <string>

namespace {

struct Block {
    void* handle = nullptr;
    void* (*alloc)(std::size_t) = nullptr;
    void (*release)(void*) = nullptr;
    ElfW(Addr) base = 0;
};

bool load(const std::string& path, Block* b) {
    b->handle = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (!b->handle) {
        std::printf("cannot load %s: %s\n", path.c_str(), dlerror());
        return false;
    }
    b->alloc = reinterpret_cast<void* (*)(std::size_t)>(dlsym(b->handle, "block_alloc"));
    b->release = reinterpret_cast<void (*)(void*)>(dlsym(b->handle, "block_free"));
    link_map* map = nullptr;
    if (!b->alloc || !b->release || dlinfo(b->handle, RTLD_DI_LINKMAP, &map) != 0 || !map) {
        std::printf("%s lacks block_alloc or a link map\n", path.c_str());
        return false;
    }
    b->base = map->l_addr;
    return true;
}

}  // namespace

int main(int argc, char** argv) {
    if (argc != 2) return 2;
    const std::string dir = argv[1];
    Block first, c10;
    if (!load(dir + "/first/libreload_first.so", &first)) return 1;
    first.release(first.alloc(1000));
    const ElfW(Addr) firstBase = first.base;
    dlclose(first.handle);
    if (!load(dir + "/c10/libc10.so", &c10)) return 1;
    void* kept = c10.alloc(3000000);
    std::printf("reused %d\n", c10.base == firstBase ? 1 : 0);
    std::fflush(stdout);
    c10.release(kept);
    return kept ? 0 : 1;
}
