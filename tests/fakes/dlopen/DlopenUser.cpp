// Loads the two caller libraries by path and has each load its sibling by name:
// prints "runpath 42 rpath 42" when every lookup found what it would without memtool.
#include <dlfcn.h>

#include <cstdio>
#include <string>

int main(int argc, char** argv) {
    if (argc != 2) return 2;
    const std::string dir = argv[1];
    int results[2] = {0, 0};
    const char* kinds[2] = {"runpath", "rpath"};
    for (int i = 0; i < 2; ++i) {
        void* h = dlopen((dir + "/libdlopen_" + kinds[i] + ".so").c_str(), RTLD_NOW);
        if (!h) {
            std::printf("cannot load %s: %s\n", kinds[i], dlerror());
            return 1;
        }
        results[i] = reinterpret_cast<int (*)()>(dlsym(h, "open_sibling"))();
    }
    std::printf("runpath %d rpath %d\n", results[0], results[1]);
    return results[0] == 42 && results[1] == 42 ? 0 : 1;
}
