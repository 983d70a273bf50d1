// A CUDA runtime user that puts an allocation in a pausable region through the
// collector's C surface, linked against the fake runtime (FakeCudart.cpp) and run
// with the fake driver (FakeCudaDriver.cpp, MEMTOOL_CUDA_DRIVER): cudaMalloc inside
// the region is served by the CUDA VMM backend through the runtime hooks, then
// paused (host backup), resumed and freed. Prints what the "device" held at each
// step, whether the content survived, and the pinned host memory held at the end
// (the host backup's buffer, when the resume kept it: memtool run --host-pool).
//
//   cuda_region_user capture: a region allocation freed by cudaFreeAsync while its
//   stream is captured into a CUDA graph, and one made then; prints the device
//   memory held before and after.
//   cuda_region_user referenced: what the CUDA injection says when a library takes
//   a reference to mapped memory (cuMemRetainAllocationHandle, as NCCL's buffer
//   registration does), for an address inside the region's allocation, twice,
//   and for one outside every region.
//   cuda_region_user implicit: the same allocation made outside any region, then
//   tag "default" paused and resumed (run with torch_memory_saver's TMS_INIT_ENABLE).
//   cuda_region_user spill: paused, then waits until its host backup's pinned
//   memory is gone (a policy spilled it to disk) before the resume.
#include <dlfcn.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>

extern "C" {
int cudaMalloc(void**, size_t);
int cudaFree(void*);
int cudaMallocAsync(void**, size_t, void*);
int cudaFreeAsync(void*, void*);
int cudaStreamBeginCapture(void*, int);
int cudaStreamEndCapture(void*, void**);
}

namespace {
template <typename Fn>
Fn find(void* lib, const char* name) {
    return reinterpret_cast<Fn>(dlsym(lib, name));
}
}  // namespace

int main(int argc, char** argv) {
    auto enter =
        find<int (*)(const char*, int, char*, size_t)>(RTLD_DEFAULT, "memtool_region_enter");
    auto leave = find<void (*)()>(RTLD_DEFAULT, "memtool_region_exit");
    auto pause = find<int (*)(const char*, char*, size_t)>(RTLD_DEFAULT, "memtool_pause");
    auto resume = find<int (*)(const char*, char*, size_t)>(RTLD_DEFAULT, "memtool_resume");
    const char* driverPath = std::getenv("MEMTOOL_CUDA_DRIVER");
    void* driver = driverPath ? dlopen(driverPath, RTLD_NOW | RTLD_NOLOAD) : nullptr;
    if (!enter || !leave || !pause || !resume) {
        std::printf("not under memtool run\n");
        return 2;
    }
    char out[4096];
    const bool implicit = argc > 1 && std::strcmp(argv[1], "implicit") == 0;
    const char* tag = implicit ? "default" : "kv";
    if (!implicit && enter("kv", 1, out, sizeof out) != 0) {
        std::printf("enter: %s\n", out);
        return 1;
    }
    const bool capture = argc > 1 && std::strcmp(argv[1], "capture") == 0;
    void* const stream = reinterpret_cast<void*>(0x5);
    void* p = nullptr;
    const int rc = capture ? cudaMallocAsync(&p, 3000000, stream) : cudaMalloc(&p, 3000000);
    if (!implicit) leave();
    driver = driver ? driver : dlopen(driverPath, RTLD_NOW | RTLD_NOLOAD);
    auto used = driver ? find<size_t (*)()>(driver, "fake_cuda_used_bytes") : nullptr;
    auto pinned = driver ? find<size_t (*)()>(driver, "fake_cuda_host_bytes") : nullptr;
    if (rc != 0 || !p || !used || !pinned) {
        std::printf("cudaMalloc in the region: %d\n", rc);
        return 1;
    }
    if (argc > 1 && std::strcmp(argv[1], "referenced") == 0) {
        auto referenced = find<void (*)(uint64_t)>(RTLD_DEFAULT, "memtool_cuda_memory_referenced");
        const uint64_t address = reinterpret_cast<uint64_t>(p);
        static char outside[64];
        referenced(reinterpret_cast<uint64_t>(outside));
        referenced(address + 4096);
        referenced(address);
        std::printf("referenced 0x%llx\n", static_cast<unsigned long long>(address + 4096));
        cudaFree(p);
        return 0;
    }
    if (capture) {
        const size_t before = used();
        cudaStreamBeginCapture(stream, 0);
        void* inGraph = nullptr;
        enter("kv", 1, out, sizeof out);
        const int graphRc = cudaMallocAsync(&inGraph, 1000, stream);
        leave();
        const size_t whileCapturing = used();
        cudaFreeAsync(p, stream);
        cudaFreeAsync(inGraph, stream);
        void* graph = nullptr;
        cudaStreamEndCapture(stream, &graph);
        std::printf("capture held %zu graph's %d %zu after %zu\n", before, graphRc, whileCapturing,
                    used());
        return 0;
    }
    auto* bytes = static_cast<uint8_t*>(p);
    for (size_t i = 0; i < 3000000; ++i) bytes[i] = static_cast<uint8_t>(i * 31);
    const size_t held = used();
    const int paused = pause(tag, out, sizeof out);
    const size_t whilePaused = used();
    if (argc > 1 && std::strcmp(argv[1], "spill") == 0) {
        std::printf("pinned while paused %zu\n", pinned());
        std::fflush(stdout);
        while (pinned() != 0) {
        }
    }
    const int resumed = resume(tag, out, sizeof out);
    bool same = true;
    for (size_t i = 0; i < 3000000; ++i) same &= bytes[i] == static_cast<uint8_t>(i * 31);
    cudaFree(p);
    std::printf("held %zu paused %d %zu resumed %d %s freed %zu pinned %zu\n", held, paused,
                whilePaused, resumed, same ? "same" : "DIFFERENT", used(), pinned());
    return 0;
}
