#include "collectors/torch/TorchBridgeLoader.h"

#include <dlfcn.h>
#include <elf.h>
#include <link.h>

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "collectors/engine/Engine.h"
#include "collectors/engine/ModuleName.h"
#include "collectors/preload/TorchVersion.h"
#include "collectors/torch/TorchBridgeApi.h"
#include "core/Protocol.h"

namespace memtool::collectors {
namespace {

// Plain data only at namespace scope: the library constructor that fills these
// runs before this file's dynamic initializers would. Texts are fixed buffers:
// this runs inside CUDA allocation hooks, where the heap is off limits.
char gBridgePath[4096];              // empty: this memtool was built without the bridge
std::atomic<bool> gSettled{false};   // attached, or given up with a warning
std::atomic<bool> gBusy{false};      // one thread at a time; the others do not wait
std::atomic<bool> gAttached{false};  // the bridge is attached (gHandle is loaded for good)
// dlpi_adds when libc10_cuda.so was last looked for and not found (under gBusy).
unsigned long long gSeenAdds = ~0ull;
void* gHandle = nullptr;    // the bridge, once loaded (under gBusy)
Engine* gEngine = nullptr;  // what the bridge records into (bindTorchBridge)

constexpr size_t kBuildIdChars = 2 * 64 + 1;  // hex of the longest build id we read

struct C10Cuda {
    unsigned long long lastAdds = ~0ull;  // in: nothing was loaded since this count
    bool unchanged = false;
    bool found = false;
    char buildId[kBuildIdChars] = "";  // lower-case hex
    char path[1024] = "";              // where it was loaded from (cut to fit)
    unsigned long long adds = 0;
};

void hex(const unsigned char* p, size_t n, char* out, size_t outSize) {
    static const char digits[] = "0123456789abcdef";
    size_t o = 0;
    for (size_t i = 0; i < n && o + 2 < outSize; ++i) {
        out[o++] = digits[p[i] >> 4];
        out[o++] = digits[p[i] & 15];
    }
    out[o] = '\0';
}

// The GNU build id in a loaded module's PT_NOTE segments, as hex ("" when none).
void buildIdOf(const dl_phdr_info* info, char* out, size_t outSize) {
    out[0] = '\0';
    for (int i = 0; i < info->dlpi_phnum; ++i) {
        const auto& ph = info->dlpi_phdr[i];
        if (ph.p_type != PT_NOTE) continue;
        const auto* p = reinterpret_cast<const unsigned char*>(info->dlpi_addr + ph.p_vaddr);
        const unsigned char* end = p + ph.p_memsz;
        while (p + sizeof(ElfW(Nhdr)) <= end) {
            const auto* note = reinterpret_cast<const ElfW(Nhdr)*>(p);
            const unsigned char* name = p + sizeof(ElfW(Nhdr));
            const unsigned char* desc = name + ((note->n_namesz + 3) & ~3u);
            if (desc + note->n_descsz > end) break;
            if (note->n_type == NT_GNU_BUILD_ID && note->n_namesz == 4 &&
                std::memcmp(name, "GNU", 4) == 0)
                return hex(desc, note->n_descsz, out, outSize);
            p = desc + ((note->n_descsz + 3) & ~3u);
        }
    }
}

int findC10Cuda(dl_phdr_info* info, size_t, void* data) {
    auto* out = static_cast<C10Cuda*>(data);
    out->adds = info->dlpi_adds;
    if (info->dlpi_adds == out->lastAdds) {
        // No object was loaded since the last look, which found no libc10_cuda.so:
        // a plain CUDA program pays one callback per allocation, not a walk.
        out->unchanged = true;
        return 1;
    }
    if (!fileNameStartsWith(info->dlpi_name ? info->dlpi_name : "", "libc10_cuda.so")) return 0;
    out->found = true;
    buildIdOf(info, out->buildId, sizeof out->buildId);
    std::snprintf(out->path, sizeof out->path, "%s", info->dlpi_name);
    return 1;
}

// The bridge records under PyTorch's allocator lock: never wait on the socket
// there unless the buffer is full.
void hostAlloc(uint8_t device, uint64_t key, uint64_t size) {
    gEngine->alloc(device, key, size, FlushPolicy::WhenFull);
}
void hostFree(uint64_t key) { gEngine->free(key); }
void hostWarn(const char* text) { gEngine->note(core::kNoteWarning, text); }
void hostOom(uint8_t device, uint64_t size, uint64_t deviceFree) {
    gEngine->oom(device, size, core::OomSource::Torch, deviceFree);
}
void hostNote(const char* key, const char* text) { gEngine->note(key, text); }

const char kDeviceOnly[] = "; cuda rows show driver-level figures only (no active/reserved)";

// Settles with a warning made of `parts`, followed by kDeviceOnly.
void settle(const char* a, const char* b = "", const char* c = "", const char* d = "",
            const char* e = "") {
    char text[1024];
    std::snprintf(text, sizeof text, "%s%s%s%s%s%s", a, b, c, d, e, kDeviceOnly);
    hostWarn(text);
    gSettled.store(true);
}

}  // namespace

void bindTorchBridge(Engine& engine) { gEngine = &engine; }

void emptyTorchCache() {
    if (!gAttached.load()) return;
    auto empty = reinterpret_cast<MemtoolBridgeEmptyCacheFn>(
        dlsym(gHandle, "memtool_torch_bridge_empty_cache"));
    if (empty) empty();
}

int releaseTorchWorkspaces() {
    if (!gAttached.load()) return 0;
    auto release = reinterpret_cast<MemtoolBridgeReleaseWorkspacesFn>(
        dlsym(gHandle, "memtool_torch_bridge_release_workspaces"));
    return release ? release() : 0;
}

void configureTorchBridge() {
    const char* path = std::getenv(core::kEnvTorchBridge);
    if (path && std::strlen(path) < sizeof gBridgePath) std::strcpy(gBridgePath, path);
}

void tryAttachTorchBridge() {
    if (gSettled.load(std::memory_order_relaxed)) return;
    if (gBusy.exchange(true)) return;
    struct Release {
        ~Release() { gBusy.store(false); }
    } release;
    if (gSettled.load()) return;

    C10Cuda c10;
    c10.lastAdds = gSeenAdds;
    dl_iterate_phdr(findC10Cuda, &c10);
    if (c10.unchanged) return;
    if (!c10.found) {
        gSeenAdds = c10.adds;  // not (yet) a torch program with CUDA: nothing to attach to
        return;
    }
    if (!gBridgePath[0]) {
        return settle(
            "this memtool was built without the torch bridge (it needs a CUDA build of torch 2.2 "
            "or later at "
            "build time)");
    }
    if (!gHandle) {
        gHandle = dlopen(gBridgePath, RTLD_NOW | RTLD_LOCAL);
        if (!gHandle) {
            const char* why = dlerror();
            return settle("the torch bridge does not load into this torch (", why ? why : "?", ")");
        }
        auto buildId = reinterpret_cast<MemtoolBridgeBuildIdFn>(
            dlsym(gHandle, "memtool_torch_bridge_build_id"));
        const char* expected = buildId ? buildId() : "";
        if (!expected || !*expected || std::strcmp(expected, c10.buildId) != 0) {
            // Which torches, by version, where both are known: a torch memtool's bridge
            // was not built for (another major version included) is named, not loaded.
            auto versionFn = reinterpret_cast<MemtoolBridgeTorchVersionFn>(
                dlsym(gHandle, "memtool_torch_bridge_torch_version"));
            const char* built = versionFn ? versionFn() : nullptr;
            char builtFor[96] = "", runs[96] = "", version[64];
            if (built && *built) std::snprintf(builtFor, sizeof builtFor, " of torch %s", built);
            if (torchVersionOf(c10.path, version, sizeof version))
                std::snprintf(runs, sizeof runs, " of torch %s", version);
            char why[512];
            std::snprintf(why, sizeof why,
                          "the torch bridge was built for another torch (libc10_cuda.so build id "
                          "%s%s, this process runs %s%s)",
                          expected ? expected : "", builtFor,
                          c10.buildId[0] ? c10.buildId : "one without a build id", runs);
            dlclose(gHandle);
            gHandle = nullptr;
            return settle(why);
        }
    }
    auto attach =
        reinterpret_cast<MemtoolBridgeAttachFn>(dlsym(gHandle, "memtool_torch_bridge_attach"));
    if (!attach) return settle("the torch bridge has no attach function");
    static const MemtoolBridgeHost host{
        kMemtoolBridgeApiVersion, hostAlloc, hostFree, hostWarn, hostOom, hostNote};
    const int rc = attach(&host);
    if (rc == kMemtoolBridgeAttached) {
        gEngine->note(core::kNoteTorchBridge, "attached");
        gAttached.store(true);
        gSettled.store(true);
    } else if (rc == kMemtoolBridgeRefused) {
        gSettled.store(true);  // the bridge said why
    }
    // kMemtoolBridgeNotYet: the allocator is not initialized; the next allocation tries again.
}

}  // namespace memtool::collectors
