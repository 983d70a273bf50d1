#include "collectors/TorchBridgeLoader.h"

#include <dlfcn.h>
#include <elf.h>
#include <link.h>

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

#include "collectors/ModuleName.h"
#include "collectors/Tracker.h"
#include "collectors/torch/TorchBridgeApi.h"
#include "core/Protocol.h"

namespace memtool::collectors {
namespace {

// Plain data only at namespace scope: the library constructor that fills these
// runs before this file's dynamic initializers would.
char gBridgePath[4096];             // empty: this memtool was built without the bridge
std::atomic<bool> gSettled{false};  // attached, or given up with a warning
std::atomic<bool> gBusy{false};     // one thread at a time; the others do not wait
// dlpi_adds when libc10_cuda.so was last looked for and not found (under gBusy).
unsigned long long gSeenAdds = ~0ull;
void* gHandle = nullptr;  // the bridge, once loaded (under gBusy)

struct C10Cuda {
    unsigned long long lastAdds = ~0ull;  // in: nothing was loaded since this count
    bool unchanged = false;
    bool found = false;
    std::string buildId;  // lower-case hex
    unsigned long long adds = 0;
};

std::string hex(const unsigned char* p, size_t n) {
    static const char digits[] = "0123456789abcdef";
    std::string s;
    for (size_t i = 0; i < n; ++i) {
        s += digits[p[i] >> 4];
        s += digits[p[i] & 15];
    }
    return s;
}

// The GNU build id in a loaded module's PT_NOTE segments.
std::string buildIdOf(const dl_phdr_info* info) {
    for (int i = 0; i < info->dlpi_phnum; ++i) {
        const auto& ph = info->dlpi_phdr[i];
        if (ph.p_type != PT_NOTE) continue;
        const auto* p = reinterpret_cast<const unsigned char*>(info->dlpi_addr + ph.p_vaddr);
        const unsigned char* end = p + ph.p_memsz;
        while (p + sizeof(ElfW(Nhdr)) <= end) {
            const auto* note = reinterpret_cast<const ElfW(Nhdr)*>(p);
            const unsigned char* name = p + sizeof(ElfW(Nhdr));
            const unsigned char* desc = name + ((note->n_namesz + 3) & ~3u);
            if (note->n_type == NT_GNU_BUILD_ID && note->n_namesz == 4 &&
                std::memcmp(name, "GNU", 4) == 0)
                return hex(desc, note->n_descsz);
            p = desc + ((note->n_descsz + 3) & ~3u);
        }
    }
    return {};
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
    out->buildId = buildIdOf(info);
    return 1;
}

void hostAlloc(uint8_t device, uint64_t key, uint64_t size) {
    Tracker& t = Tracker::instance();
    if (t.active()) t.recordAlloc(device, key, size, /*timedFlush=*/false);
}

void hostFree(uint64_t key) {
    Tracker& t = Tracker::instance();
    if (t.active()) t.recordFree(key);
}

void hostWarn(const char* text) { Tracker::instance().recordNote(core::kNoteWarning, text); }

void settle(const std::string& warning) {
    if (!warning.empty()) hostWarn(warning.c_str());
    gSettled.store(true);
}

const char* kDeviceOnly = "; cuda rows show driver-level figures only (no active/reserved)";

}  // namespace

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
        settle(
            std::string(
                "this memtool was built without the torch bridge (it needs a CUDA build of torch "
                "2.2 or later at build time)") +
            kDeviceOnly);
        return;
    }
    if (!gHandle) {
        gHandle = dlopen(gBridgePath, RTLD_NOW | RTLD_LOCAL);
        if (!gHandle) {
            const char* why = dlerror();
            settle(std::string("the torch bridge does not load into this torch (") +
                   (why ? why : "?") + ")" + kDeviceOnly);
            return;
        }
        auto buildId = reinterpret_cast<MemtoolBridgeBuildIdFn>(
            dlsym(gHandle, "memtool_torch_bridge_build_id"));
        std::string expected = buildId ? buildId() : "";
        if (expected.empty() || expected != c10.buildId) {
            dlclose(gHandle);
            gHandle = nullptr;
            settle("the torch bridge was built for another torch (libc10_cuda.so build id " +
                   expected + ", this process runs " +
                   (c10.buildId.empty() ? "one without a build id" : c10.buildId) + ")" +
                   kDeviceOnly);
            return;
        }
    }
    auto attach =
        reinterpret_cast<MemtoolBridgeAttachFn>(dlsym(gHandle, "memtool_torch_bridge_attach"));
    if (!attach) {
        settle(std::string("the torch bridge has no attach function") + kDeviceOnly);
        return;
    }
    static const MemtoolBridgeHost host{kMemtoolBridgeApiVersion, hostAlloc, hostFree, hostWarn};
    int rc = attach(&host);
    if (rc == kMemtoolBridgeAttached) {
        Tracker::instance().recordNote(core::kNoteTorchBridge, "attached");
        gSettled.store(true);
    } else if (rc == kMemtoolBridgeRefused) {
        gSettled.store(true);  // the bridge said why
    }
    // kMemtoolBridgeNotYet: the allocator is not initialized; the next allocation tries again.
}

}  // namespace memtool::collectors
