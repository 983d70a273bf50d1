// Loads CudaLocalLib (argv[1]) RTLD_LOCAL and has it allocate through the CUDA
// runtime: memtool's runtime hooks must forward to that libcudart, which is not
// in the global scope. Prints "done" when every call succeeded.
#include <dlfcn.h>

#include <cstdio>

int main(int argc, char** argv) {
    if (argc != 2) return 2;
    void* lib = dlopen(argv[1], RTLD_NOW | RTLD_LOCAL);
    if (!lib) {
        std::printf("cannot load %s: %s\n", argv[1], dlerror());
        return 1;
    }
    auto run = reinterpret_cast<int (*)()>(dlsym(lib, "allocate_and_free"));
    const int rc = run ? run() : 3;
    if (rc == 0) std::printf("done\n");
    return rc;
}
