#pragma once
// The collector's engine: one per process. Front ends (preload hooks, later the
// CUPTI injection) call recordAlloc/recordFree; everything reaches the CLI as
// protocol records (core/PROTOCOL.md) over the socket named by MEMTOOL_SOCKET.
//
// Hot-path contract: check the active flag and the recursion guard, capture the
// stacks, then take the lock. No heap allocation, stdio or exceptions after
// start-up; on any failure the tracker warns once on stderr and deactivates,
// and the program runs on.

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <mutex>
#include <string>
#include <vector>

#include "collectors/MappedTable.h"
#include "collectors/NativeUnwinder.h"
#include "collectors/ShadowStack.h"
#include "core/Protocol.h"

namespace memtool::collectors {

struct TrackerOptions {
    bool nativeStacks = true;
    bool pythonStacks = true;
    int maxNativeDepth = 128;
    bool cudaRuntimeHooks = false;  // record CUDA memory through runtime hooks from the start
};

class Tracker {
public:
    static constexpr int kMaxNativeDepth = 256;

    static Tracker& instance();

    Tracker(const Tracker&) = delete;
    Tracker& operator=(const Tracker&) = delete;

    // One loaded ELF object, as announced to the CLI.
    struct Module {
        std::string path;
        uint64_t loadBias = 0;
        std::vector<std::pair<uint64_t, uint64_t>> ranges;  // executable [start, start+len)
    };

    // From the library constructor: reads the environment. False outside `memtool run`.
    bool start();
    bool configured() const { return configured_; }
    // Connects to the CLI and sends the handshake, once; then tracking is active.
    void ensureConnected();
    bool connected();
    // Announces modules not announced before (list them without the lock held).
    void announceModules(const std::vector<Module>& modules);
    // Sends the end-of-stream record and disconnects. exitKind: see core::EndFields.
    void shutdown(uint64_t exitKind);

    void prepareFork();
    void parentAfterFork();
    void childAfterFork();

    bool active() const { return active_.load(std::memory_order_relaxed); }
    const TrackerOptions& options() const { return options_; }

    // Sizes must be below 2^56 bytes. Addresses are unique across devices (CUDA's
    // unified addressing); callers key non-address objects (VMM handles) apart.
    // timedFlush false: send only when the buffer is full, never because time passed
    // (the torch bridge records under PyTorch's allocator lock, where waiting on the
    // socket would stall every allocating thread).
    void recordAlloc(uint8_t device, uint64_t address, uint64_t size, bool timedFlush = true);
    void recordFree(uint64_t address);
    // A note for the trace (core::kNote* keys). Not for hooks: it allocates.
    void recordNote(const char* key, const char* text);

    // The interpreter loop's code, [start, end): with Python frames recorded, native
    // unwinding stops there (the CLI puts the Python stack in place of what lies
    // outside it).
    void setInterpreterLoop(uint64_t start, uint64_t end) {
        evalStart_ = start;
        evalEnd_ = end;
    }

    // Python support (GIL held by the caller). Returns the code object's wire id.
    uint32_t emitPyCode(const char* file, size_t fileLen, const char* name, size_t nameLen,
                        uint64_t firstLine);

private:
    Tracker() = default;

    bool connectLocked();
    void writeLocked(const uint8_t* data, size_t len);
    bool flushLocked();
    void deactivateLocked(const char* why);
    int captureNative(uint64_t* ips, bool stopAtInterpreter) const;
    uint32_t nativeNodeLocked(const uint64_t* ips, int count);
    uint32_t pyNodeLocked(ShadowStack* stack);
    uint64_t clockDeltaLocked();

    TrackerOptions options_;
    NativeUnwinder unwinder_;
    std::atomic<bool> active_{false};
    bool configured_ = false;
    bool connected_ = false;
    bool shutDown_ = false;
    int fd_ = -1;
    std::string socketPath_;
    std::mutex mu_;

    // Output buffer: records accumulate here and leave in large writes.
    static constexpr size_t kBufferBytes = 256 * 1024;
    static constexpr size_t kFlushAt = kBufferBytes - 8 * 1024;
    uint8_t buffer_[kBufferBytes];
    size_t used_ = 0;

    FrameTrie nativeTrie_;
    FrameTrie pyTrie_;
    PointerMap live_;
    uint32_t pyCodes_ = 0;
    uint64_t lastClockNs_ = 0;
    uint64_t lastFlushNs_ = 0;
    uint64_t trieGeneration_ = 1;  // bumped when the tries are cleared
    core::EndFields counters_;

    // Our own code, so that hook frames are not reported.
    uint64_t selfStart_ = 0;
    uint64_t selfEnd_ = 0;
    uint64_t evalStart_ = 0;
    uint64_t evalEnd_ = 0;

    std::vector<std::pair<std::string, uint64_t>> announced_;  // (path, load bias)
    uint64_t moduleIds_ = 0;
};

}  // namespace memtool::collectors
