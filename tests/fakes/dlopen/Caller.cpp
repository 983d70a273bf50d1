// A library that loads a sibling by bare name, relying on its own run path
// ($ORIGIN/sub), as pip's torch, cuDNN and triton do. Built twice: with a
// DT_RUNPATH and with a DT_RPATH.
#include <dlfcn.h>

extern "C" __attribute__((visibility("default"))) int open_sibling() {
    void* h = dlopen("libdlopen_sibling.so", RTLD_NOW | RTLD_LOCAL);
    if (!h) return -1;
    auto value = reinterpret_cast<int (*)()>(dlsym(h, "dlopen_sibling_value"));
    return value ? value() : -2;
}
