#include "collectors/Tracker.h"

#include <dlfcn.h>
#include <fcntl.h>
#include <link.h>
#include <pthread.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <new>

#include "collectors/RecursionGuard.h"
#include "core/Records.h"

namespace memtool::collectors {

namespace {

uint64_t monotonicNs() {
    timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return static_cast<uint64_t>(ts.tv_sec) * 1000000000ull + static_cast<uint64_t>(ts.tv_nsec);
}

// Thread ids are read once per thread; gettid is a syscall.
thread_local uint64_t tlsThreadId __attribute__((tls_model("initial-exec"))) = 0;
uint64_t threadId() {
    if (tlsThreadId == 0) tlsThreadId = static_cast<uint64_t>(syscall(SYS_gettid));
    return tlsThreadId;
}

// The last native stack this thread recorded, outermost frame first, with the trie
// node of each prefix: consecutive allocations share their outer frames (main, the
// interpreter loop), so only the differing inner part is looked up again.
struct NativeStackCache {
    uint64_t generation;
    int depth;
    uint64_t ips[Tracker::kMaxNativeDepth];
    uint32_t nodes[Tracker::kMaxNativeDepth];
};
thread_local NativeStackCache tlsNativeCache __attribute__((tls_model("initial-exec")));

void warn(const char* message) {
    // stderr without stdio: hooks may run where stdio locks are held.
    const char prefix[] = "memtool: ";
    ssize_t ignored = write(STDERR_FILENO, prefix, sizeof prefix - 1);
    ignored = write(STDERR_FILENO, message, std::strlen(message));
    ignored = write(STDERR_FILENO, "\n", 1);
    (void)ignored;
}

std::vector<std::string> readCommandLine() {
    std::vector<std::string> args;
    int fd = open("/proc/self/cmdline", O_RDONLY | O_CLOEXEC);
    if (fd < 0) return args;
    std::string all;
    char buf[4096];
    for (ssize_t n; (n = read(fd, buf, sizeof buf)) > 0;) all.append(buf, static_cast<size_t>(n));
    close(fd);
    size_t start = 0;
    for (size_t i = 0; i < all.size(); ++i) {
        if (all[i] == '\0') {
            args.emplace_back(all, start, i - start);
            start = i + 1;
        }
    }
    return args;
}

void parseOptions(const char* text, TrackerOptions& o) {
    if (!text) return;
    std::string s(text);
    size_t pos = 0;
    while (pos <= s.size()) {
        size_t comma = s.find(',', pos);
        std::string item = s.substr(pos, comma == std::string::npos ? std::string::npos : comma - pos);
        size_t eq = item.find('=');
        if (eq != std::string::npos) {
            std::string key = item.substr(0, eq);
            int value = std::atoi(item.c_str() + eq + 1);
            if (key == "native") o.nativeStacks = value != 0;
            if (key == "python") o.pythonStacks = value != 0;
            if (key == "cudahooks") o.cudaRuntimeHooks = value != 0;
            if (key == "depth" && value > 0)
                o.maxNativeDepth = value < Tracker::kMaxNativeDepth ? value : Tracker::kMaxNativeDepth;
        }
        if (comma == std::string::npos) break;
        pos = comma + 1;
    }
}

}  // namespace

Tracker& Tracker::instance() {
    // Never destroyed: hooks may run during and after static destruction.
    alignas(Tracker) static unsigned char storage[sizeof(Tracker)];
    static Tracker* tracker = new (storage) Tracker();
    return *tracker;
}

bool Tracker::start() {
    const char* socket = std::getenv(core::kEnvSocket);
    if (!socket || !*socket) return false;
    socketPath_ = socket;
    parseOptions(std::getenv(core::kEnvOptions), options_);

    Dl_info self;
    if (dladdr(reinterpret_cast<void*>(&warn), &self) && self.dli_fbase) {
        struct Range {
            uintptr_t base;
            uint64_t start = 0, end = 0;
        } range{reinterpret_cast<uintptr_t>(self.dli_fbase)};
        dl_iterate_phdr(
            [](dl_phdr_info* info, size_t, void* data) {
                auto* r = static_cast<Range*>(data);
                for (int i = 0; i < info->dlpi_phnum; ++i) {
                    const auto& ph = info->dlpi_phdr[i];
                    if (ph.p_type != PT_LOAD || !(ph.p_flags & PF_X)) continue;
                    uint64_t start = info->dlpi_addr + ph.p_vaddr;
                    if (r->base >= info->dlpi_addr && r->base <= start) {
                        r->start = start;
                        r->end = start + ph.p_memsz;
                        return 1;
                    }
                }
                return 0;
            },
            &range);
        selfStart_ = range.start;
        selfEnd_ = range.end;
    }
    if (options_.nativeStacks) {
        const char* why = nullptr;
        if (!unwinder_.load(&why)) {
            warn(why);
            options_.nativeStacks = false;
        }
    }
    configured_ = true;
    return true;
}

bool Tracker::connected() {
    std::lock_guard<std::mutex> lock(mu_);
    return connected_;
}

void Tracker::ensureConnected() {
    std::lock_guard<std::mutex> lock(mu_);
    if (!configured_ || connected_ || shutDown_) return;
    if (!connectLocked()) {
        shutDown_ = true;  // the CLI is not there: run on untracked, warn once
        return;
    }
    active_.store(true, std::memory_order_release);
}

bool Tracker::connectLocked() {
    int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0) {
        warn("cannot create a socket; this process is not profiled");
        return false;
    }
    sockaddr_un addr{};
    addr.sun_family = AF_UNIX;
    if (socketPath_.size() >= sizeof addr.sun_path) {
        warn("socket path too long; this process is not profiled");
        close(fd);
        return false;
    }
    std::memcpy(addr.sun_path, socketPath_.c_str(), socketPath_.size() + 1);
    int rc;
    do {
        rc = ::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr);
    } while (rc != 0 && errno == EINTR);
    if (rc != 0) {
        warn("cannot reach `memtool run` (socket gone); this process is not profiled");
        close(fd);
        return false;
    }
    fd_ = fd;
    connected_ = true;

    core::Handshake h;
    h.pid = getpid();
    h.ppid = getppid();
    timespec now;
    clock_gettime(CLOCK_REALTIME, &now);
    h.startUnixNs = static_cast<uint64_t>(now.tv_sec) * 1000000000ull + static_cast<uint64_t>(now.tv_nsec);
    h.nativeStacks = options_.nativeStacks;
    h.pythonStacks = options_.pythonStacks;
    h.command = readCommandLine();
    std::vector<uint8_t> bytes = core::encodeHandshake(h);
    writeLocked(bytes.data(), bytes.size());
    ++counters_.recordCount;
    lastClockNs_ = monotonicNs();
    lastFlushNs_ = lastClockNs_;
    return flushLocked();
}

void Tracker::announceModules(const std::vector<Module>& modules) {
    std::lock_guard<std::mutex> lock(mu_);
    if (!connected_) return;
    for (const Module& m : modules) {
        bool known = false;
        for (const auto& a : announced_) known |= a.second == m.loadBias && a.first == m.path;
        if (known || m.ranges.empty()) continue;
        announced_.emplace_back(m.path, m.loadBias);
        std::vector<uint8_t> rec(core::moduleBytes(m.path.size(), m.ranges.size()));
        uint8_t* p = core::encodeModuleHead(rec.data(), ++moduleIds_, m.path.data(), m.path.size(),
                                            m.loadBias, m.ranges.size());
        for (const auto& r : m.ranges) p = core::encodeModuleRange(p, r.first, r.second - r.first);
        writeLocked(rec.data(), static_cast<size_t>(p - rec.data()));
        ++counters_.recordCount;
    }
    flushLocked();
}

void Tracker::recordNote(const char* key, const char* text) {
    if (RecursionGuard::active) return;
    RecursionGuard guard;
    size_t keyLen = std::strlen(key), textLen = std::strlen(text);
    std::lock_guard<std::mutex> lock(mu_);
    if (!connected_) return;
    // Notes are rare (a handful per process) and say things worth a flush.
    std::vector<uint8_t> rec(core::noteBytes(keyLen, textLen));
    uint8_t* end = core::encodeNote(rec.data(), key, keyLen, text, textLen);
    writeLocked(rec.data(), static_cast<size_t>(end - rec.data()));
    ++counters_.recordCount;
    flushLocked();
}

void Tracker::writeLocked(const uint8_t* data, size_t len) {
    if (used_ + len > kBufferBytes && !flushLocked()) return;
    if (len > kBufferBytes) {
        // Larger than the buffer (a huge command line): send it as it is.
        const uint8_t* p = data;
        size_t left = len;
        while (left > 0 && connected_) {
            ssize_t n = send(fd_, p, left, MSG_NOSIGNAL);
            if (n < 0 && errno == EINTR) continue;
            if (n <= 0) {
                deactivateLocked("lost the connection to `memtool run`; profiling stopped");
                return;
            }
            p += n;
            left -= static_cast<size_t>(n);
        }
        return;
    }
    std::memcpy(buffer_ + used_, data, len);
    used_ += len;
}

bool Tracker::flushLocked() {
    size_t sent = 0;
    while (sent < used_ && connected_) {
        ssize_t n = send(fd_, buffer_ + sent, used_ - sent, MSG_NOSIGNAL);
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) {
            deactivateLocked("lost the connection to `memtool run`; profiling stopped");
            return false;
        }
        sent += static_cast<size_t>(n);
    }
    used_ = 0;
    return connected_;
}

void Tracker::deactivateLocked(const char* why) {
    active_.store(false, std::memory_order_release);
    if (connected_) {
        close(fd_);
        fd_ = -1;
        connected_ = false;
        warn(why);
    }
    shutDown_ = true;
    used_ = 0;
}

uint64_t Tracker::clockDeltaLocked() {
    uint64_t now = monotonicNs();
    uint64_t delta = now > lastClockNs_ ? now - lastClockNs_ : 0;
    lastClockNs_ += delta;
    return delta;
}

// How deep the interpreter loop sat in this thread's last stack: the next walk
// asks for a little more than that, instead of the whole stack.
thread_local int tlsEvalDepth __attribute__((tls_model("initial-exec"))) = 0;

int Tracker::captureNative(uint64_t* ips, bool stopAtInterpreter) const {
    void* raw[kMaxNativeDepth + 8];
    const int limit = options_.maxNativeDepth + 8;
    int got = 0;
    int cut = -1;  // index of the innermost interpreter-loop frame
    if (stopAtInterpreter && evalStart_ != 0) {
        int want = tlsEvalDepth > 0 ? tlsEvalDepth + 4 : 24;
        if (want > limit) want = limit;
        got = unwinder_.backtrace(raw, want);
        for (int i = 0; i < got && cut < 0; ++i) {
            uint64_t ip = reinterpret_cast<uint64_t>(raw[i]);
            if (ip > evalStart_ && ip <= evalEnd_) cut = i;  // a return address: ip - 1 is inside
        }
        if (cut < 0 && got == want && want < limit) got = 0;  // deeper than guessed: walk it all
    }
    if (got == 0) {
        got = unwinder_.backtrace(raw, limit);
        if (stopAtInterpreter && evalStart_ != 0) {
            for (int i = 0; i < got && cut < 0; ++i) {
                uint64_t ip = reinterpret_cast<uint64_t>(raw[i]);
                if (ip > evalStart_ && ip <= evalEnd_) cut = i;
            }
        }
    }
    if (cut >= 0) {
        tlsEvalDepth = cut + 1;
        got = cut + 1;  // keep the loop's own frame: the CLI splices Python frames there
    }
    int skip = 0;
    while (skip < got && reinterpret_cast<uint64_t>(raw[skip]) >= selfStart_ &&
           reinterpret_cast<uint64_t>(raw[skip]) < selfEnd_)
        ++skip;
    int n = 0;
    for (int i = skip; i < got && n < options_.maxNativeDepth; ++i)
        ips[n++] = reinterpret_cast<uint64_t>(raw[i]);
    return n;
}

uint32_t Tracker::nativeNodeLocked(const uint64_t* ips, int count) {
    NativeStackCache& c = tlsNativeCache;
    if (c.generation != trieGeneration_) {
        c.generation = trieGeneration_;
        c.depth = 0;
    }
    // ips is innermost first; the cache and the trie go outermost first.
    int common = 0;
    while (common < count && common < c.depth && ips[count - 1 - common] == c.ips[common]) ++common;
    uint32_t node = common ? c.nodes[common - 1] : 0;
    for (int k = common; k < count; ++k) {
        uint64_t ip = ips[count - 1 - k];
        bool created;
        uint32_t child = nativeTrie_.findOrInsert(node, ip, &created);
        if (child == 0) return node;  // out of memory: keep the outer part
        if (created) {
            uint8_t rec[core::kMaxFixedRecordBytes];
            writeLocked(rec, static_cast<size_t>(core::encodeNativeNode(rec, node, ip) - rec));
            ++counters_.recordCount;
        }
        node = child;
        c.ips[k] = ip;
        c.nodes[k] = node;
    }
    c.depth = count;
    return node;
}

uint32_t Tracker::pyNodeLocked(ShadowStack* stack) {
    uint32_t n = stack->depth < ShadowStack::kCapacity ? stack->depth : ShadowStack::kCapacity;
    uint32_t parent = 0;
    bool stale = false;  // a recomputed frame invalidates every frame inside it
    for (uint32_t i = 0; i < n; ++i) {
        ShadowFrame& f = stack->frames[i];
        // The innermost frame keeps executing between allocations: always re-read it.
        bool innermost = i + 1 == stack->depth;
        if (innermost || f.node == 0 || stale) {
            uint32_t line = currentLine(f.frame);
            if (line == f.line && f.node != 0 && !stale) {
                parent = f.node;
                continue;
            }
            stale = true;
            f.line = line;
            bool created;
            uint64_t key = (static_cast<uint64_t>(f.codeId) << 32) | line;
            uint32_t node = pyTrie_.findOrInsert(parent, key, &created);
            if (node == 0) return parent;
            if (created) {
                uint8_t rec[core::kMaxFixedRecordBytes];
                writeLocked(rec, static_cast<size_t>(core::encodePyNode(rec, parent, f.codeId, line) - rec));
                ++counters_.recordCount;
            }
            f.node = node;
        }
        parent = f.node;
    }
    return parent;
}

void Tracker::recordAlloc(uint8_t device, uint64_t address, uint64_t size, bool timedFlush) {
    if (RecursionGuard::active) return;
    RecursionGuard guard;
    ShadowStack* py = options_.pythonStacks ? currentShadowStack() : nullptr;
    bool hasPython = py && py->depth > 0;
    uint64_t ips[kMaxNativeDepth];
    int depth = options_.nativeStacks ? captureNative(ips, hasPython) : 0;

    std::lock_guard<std::mutex> lock(mu_);
    if (!connected_) return;
    core::AllocFields a;
    a.device = device;
    a.address = address;
    a.size = size;
    a.nativeNode = nativeNodeLocked(ips, depth);
    a.pyNode = py ? pyNodeLocked(py) : 0;
    a.threadId = threadId();
    a.timeDeltaNs = clockDeltaLocked();
    // The device rides in the top byte: a free is reported on the device the block
    // was allocated on, whatever context is current when it is freed.
    if (!live_.insert(address, (static_cast<uint64_t>(device) << 56) | size)) {
        deactivateLocked("out of memory for the table of live blocks; profiling stopped");
        return;
    }
    uint8_t rec[core::kMaxFixedRecordBytes];
    writeLocked(rec, static_cast<size_t>(core::encodeAlloc(rec, a) - rec));
    ++counters_.recordCount;
    ++counters_.allocCount;
    counters_.allocatedBytes += size;
    // Flush when the buffer fills, and at least every 50 ms so the CLI sees a
    // steady stream and a killed target loses little.
    if (used_ >= kFlushAt || (timedFlush && lastClockNs_ - lastFlushNs_ > 50000000ull)) {
        lastFlushNs_ = lastClockNs_;
        flushLocked();
    }
}

void Tracker::recordFree(uint64_t address) {
    if (RecursionGuard::active) return;
    RecursionGuard guard;
    std::lock_guard<std::mutex> lock(mu_);
    if (!connected_) return;
    uint64_t entry;
    if (!live_.erase(address, &entry)) return;  // not ours: nothing to say
    const uint64_t size = entry & ((1ull << 56) - 1);
    core::FreeFields f;
    f.device = static_cast<uint8_t>(entry >> 56);
    f.address = address;
    f.threadId = threadId();
    f.timeDeltaNs = clockDeltaLocked();
    uint8_t rec[core::kMaxFixedRecordBytes];
    writeLocked(rec, static_cast<size_t>(core::encodeFree(rec, f) - rec));
    ++counters_.recordCount;
    ++counters_.freeCount;
    counters_.freedBytes += size;
    if (used_ >= kFlushAt) flushLocked();
}

uint32_t Tracker::emitPyCode(const char* file, size_t fileLen, const char* name, size_t nameLen,
                             uint64_t firstLine) {
    RecursionGuard guard;
    std::lock_guard<std::mutex> lock(mu_);
    uint32_t id = ++pyCodes_;
    if (!connected_) return id;
    std::vector<uint8_t> rec(core::pyCodeBytes(fileLen, nameLen));
    uint8_t* end = core::encodePyCode(rec.data(), file, fileLen, name, nameLen, firstLine);
    writeLocked(rec.data(), static_cast<size_t>(end - rec.data()));
    ++counters_.recordCount;
    return id;
}

void Tracker::shutdown(uint64_t exitKind) {
    RecursionGuard guard;
    std::lock_guard<std::mutex> lock(mu_);
    active_.store(false, std::memory_order_release);
    if (connected_) {
        counters_.exitKind = exitKind;
        uint8_t rec[core::kMaxFixedRecordBytes];
        writeLocked(rec, static_cast<size_t>(core::encodeEnd(rec, counters_) - rec));
        flushLocked();
        close(fd_);
        fd_ = -1;
        connected_ = false;
    }
    shutDown_ = true;
}

void Tracker::prepareFork() { mu_.lock(); }

void Tracker::parentAfterFork() { mu_.unlock(); }

void Tracker::childAfterFork() {
    // The child must not write into the parent's stream. It runs on untracked.
    mu_.unlock();
    active_.store(false, std::memory_order_release);
    if (fd_ >= 0) close(fd_);
    fd_ = -1;
    connected_ = false;
    shutDown_ = true;
    used_ = 0;
}

}  // namespace memtool::collectors
