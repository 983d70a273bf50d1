#include "cli/policy/UsagePoller.h"

#include <dlfcn.h>
#include <fmt/format.h>
#include <sys/statvfs.h>
#include <time.h>
#include <unistd.h>

#include <cstdlib>
#include <fstream>
#include <sstream>

#include "core/Files.h"

namespace memtool::cli::policy {

namespace {

// A /proc or cgroup file (their sizes read as 0: read to the end, 1 MiB at most).
std::optional<std::string> readText(const std::string& path) {
    std::string why;
    return core::readRegularFile(path, 1 << 20, &why);
}

std::optional<uint64_t> readNumber(const std::string& path) {
    const auto text = readText(path);
    if (!text) return std::nullopt;
    char* end = nullptr;
    const unsigned long long v = std::strtoull(text->c_str(), &end, 10);
    if (end == text->c_str()) return std::nullopt;  // "max"
    return v;
}

// v1 writes "no limit" as the largest page multiple below 2^63.
constexpr uint64_t kNoLimit = uint64_t{1} << 62;

// The memory controller's path of `pid`: ("v2", "/a/b") or ("v1", "/a/b").
std::optional<std::pair<std::string, std::string>> cgroupPath(pid_t pid, const std::string& proc) {
    std::ifstream in(proc + "/" + std::to_string(pid) + "/cgroup");
    std::optional<std::pair<std::string, std::string>> v2;
    for (std::string line; std::getline(in, line);) {
        const size_t a = line.find(':'), b = line.find(':', a + 1);
        if (a == std::string::npos || b == std::string::npos) continue;
        const std::string controllers = line.substr(a + 1, b - a - 1);
        const std::string path = line.substr(b + 1);
        if (controllers == "memory") return std::pair{std::string("v1"), path};
        if (line.compare(0, 3, "0::") == 0) v2 = std::pair{std::string("v2"), path};
    }
    return v2;
}

// NVML's C surface, as far as memtool reads it.
struct NvmlMemory {
    unsigned long long total, free, used;
};
struct NvmlProcess {  // nvmlProcessInfo_t (v2 and v3)
    unsigned int pid;
    unsigned long long usedGpuMemory;
    unsigned int gpuInstanceId, computeInstanceId;
};
class Nvml {
public:
    Nvml() {
        const char* named = std::getenv("MEMTOOL_NVML_LIBRARY");
        handle_ = dlopen(named && *named ? named : "libnvidia-ml.so.1", RTLD_NOW | RTLD_LOCAL);
        if (!handle_) return;
        auto init = reinterpret_cast<int (*)()>(dlsym(handle_, "nvmlInit_v2"));
        count_ = reinterpret_cast<int (*)(unsigned*)>(dlsym(handle_, "nvmlDeviceGetCount_v2"));
        byIndex_ = reinterpret_cast<int (*)(unsigned, void**)>(
            dlsym(handle_, "nvmlDeviceGetHandleByIndex_v2"));
        memory_ = reinterpret_cast<int (*)(void*, NvmlMemory*)>(
            dlsym(handle_, "nvmlDeviceGetMemoryInfo"));
        processes_ = reinterpret_cast<int (*)(void*, unsigned*, NvmlProcess*)>(
            dlsym(handle_, "nvmlDeviceGetComputeRunningProcesses_v3"));
        if (!init || !count_ || !byIndex_ || !memory_ || init() != 0) {
            dlclose(handle_);
            handle_ = nullptr;
        }
    }
    ~Nvml() {
        if (!handle_) return;
        if (auto shutdown = reinterpret_cast<int (*)()>(dlsym(handle_, "nvmlShutdown"))) shutdown();
        dlclose(handle_);
    }
    Nvml(const Nvml&) = delete;
    Nvml& operator=(const Nvml&) = delete;
    bool loaded() const { return handle_ != nullptr; }
    unsigned count() const {
        unsigned n = 0;
        return count_(&n) == 0 ? n : 0;
    }
    // Device `index`'s memory and the bytes `pids` use on it.
    std::optional<DeviceUsage> read(unsigned index, const std::vector<pid_t>& pids) const {
        void* device = nullptr;
        NvmlMemory m{};
        if (byIndex_(index, &device) != 0 || memory_(device, &m) != 0) return std::nullopt;
        DeviceUsage u{"", m.used, m.total, std::nullopt};
        if (!processes_) return u;
        NvmlProcess list[256];
        unsigned n = 256;
        if (processes_(device, &n, list) != 0) return u;
        uint64_t ours = 0;
        for (unsigned i = 0; i < n && i < 256; ++i)
            for (pid_t p : pids)
                if (static_cast<pid_t>(list[i].pid) == p) ours += list[i].usedGpuMemory;
        u.processes = ours;
        return u;
    }

private:
    void* handle_ = nullptr;
    int (*count_)(unsigned*) = nullptr;
    int (*byIndex_)(unsigned, void**) = nullptr;
    int (*memory_)(void*, NvmlMemory*) = nullptr;
    int (*processes_)(void*, unsigned*, NvmlProcess*) = nullptr;
};

class SystemUsage final : public UsageSource {
public:
    SystemUsage(pid_t program, std::string backupDirectory) : backups_(std::move(backupDirectory)) {
        visible_ = visibleDevices(program);
        cgroup_ = findCgroup(program);
        hostSource_ = cgroup_ ? cgroup_->source : "meminfo";
    }
    UsageSample poll(const std::vector<pid_t>& pids) override {
        UsageSample s;
        s.unixNs = unixNowNs();
        std::optional<HostMemory> host = cgroup_ ? readCgroup(*cgroup_) : std::nullopt;
        if (!host) host = meminfoMemory();
        if (host) s.devices.push_back({"cpu", host->used, host->total, std::nullopt});
        if (nvml_.loaded()) pollCuda(pids, s);
        const long page = sysconf(_SC_PAGESIZE);
        for (pid_t p : pids) {
            std::ifstream statm("/proc/" + std::to_string(p) + "/statm");
            uint64_t size = 0, resident = 0;
            if (statm >> size >> resident) s.rss[p] = resident * static_cast<uint64_t>(page);
        }
        struct statvfs fs {};
        if (!backups_.empty() && statvfs(backups_.c_str(), &fs) == 0)
            s.backupFreeBytes = static_cast<uint64_t>(fs.f_bavail) * fs.f_frsize;
        return s;
    }
    std::string hostSource() const override { return hostSource_; }
    std::string cudaSource() const override { return nvml_.loaded() ? "nvml" : "none"; }

private:
    void pollCuda(const std::vector<pid_t>& pids, UsageSample& s) {
        const unsigned count = nvml_.count();
        // cuda:N is the program's Nth visible device.
        std::vector<int> order;
        if (visible_)
            order = *visible_;
        else
            for (unsigned i = 0; i < count; ++i) order.push_back(static_cast<int>(i));
        for (size_t n = 0; n < order.size(); ++n) {
            if (order[n] < 0 || static_cast<unsigned>(order[n]) >= count) continue;
            if (auto u = nvml_.read(static_cast<unsigned>(order[n]), pids)) {
                u->device = fmt::format("cuda:{}", n);
                s.devices.push_back(*u);
            }
        }
    }

    std::string backups_;
    Nvml nvml_;
    std::optional<std::vector<int>> visible_;
    std::optional<CgroupFiles> cgroup_;
    std::string hostSource_;
};

}  // namespace

std::optional<CgroupFiles> findCgroup(pid_t pid, const std::string& root, const std::string& proc) {
    const auto where = cgroupPath(pid, proc);
    if (!where) return std::nullopt;
    const bool v1 = where->first == "v1";
    const std::string base = v1 ? root + "/memory" : root;
    std::optional<CgroupFiles> best;
    uint64_t bestLimit = 0;
    for (std::string path = where->second;;) {
        const std::string dir = base + (path == "/" ? "" : path);
        CgroupFiles f{dir + (v1 ? "/memory.limit_in_bytes" : "/memory.max"),
                      dir + (v1 ? "/memory.usage_in_bytes" : "/memory.current"),
                      fmt::format("cgroup {} {}", v1 ? "v1" : "v2", dir)};
        const auto limit = readNumber(f.limit);
        if (limit && *limit < kNoLimit && readNumber(f.usage) && (!best || *limit < bestLimit)) {
            best = f;
            bestLimit = *limit;
        }
        if (path == "/" || path.empty()) break;
        const size_t slash = path.rfind('/');
        path = slash == 0 ? "/" : path.substr(0, slash);
    }
    return best;
}

std::optional<HostMemory> readCgroup(const CgroupFiles& files) {
    const auto limit = readNumber(files.limit);
    const auto usage = readNumber(files.usage);
    if (!limit || !usage || *limit >= kNoLimit) return std::nullopt;
    return HostMemory{*usage, *limit, files.source};
}

std::optional<HostMemory> meminfoMemory(const std::string& proc) {
    std::ifstream in(proc + "/meminfo");
    uint64_t total = 0, available = 0;
    bool haveTotal = false, haveAvailable = false;
    for (std::string key; in >> key;) {
        uint64_t kib = 0;
        in >> kib;
        in.ignore(64, '\n');
        if (key == "MemTotal:") total = kib * 1024, haveTotal = true;
        if (key == "MemAvailable:") available = kib * 1024, haveAvailable = true;
    }
    if (!haveTotal || !haveAvailable || available > total) return std::nullopt;
    return HostMemory{total - available, total, "meminfo"};
}

std::optional<std::vector<int>> visibleDevices(pid_t pid, const std::string& proc) {
    const auto environ = readText(proc + "/" + std::to_string(pid) + "/environ");
    if (!environ) return std::nullopt;
    static const std::string key = "CUDA_VISIBLE_DEVICES=";
    for (size_t at = 0; at < environ->size();) {
        const size_t end = environ->find('\0', at);
        const std::string entry = environ->substr(at, end - at);
        at = end == std::string::npos ? environ->size() : end + 1;
        if (entry.compare(0, key.size(), key) != 0) continue;
        std::vector<int> out;
        std::stringstream list(entry.substr(key.size()));
        for (std::string item; std::getline(list, item, ',');) {
            char* stop = nullptr;
            const long v = std::strtol(item.c_str(), &stop, 10);
            if (item.empty() || *stop != '\0') return std::nullopt;  // a UUID, MIG id
            // CUDA stops at the first index that is not a device.
            if (v < 0) break;
            out.push_back(static_cast<int>(v));
        }
        return out;
    }
    return std::nullopt;
}

uint64_t unixNowNs() {
    timespec ts{};
    clock_gettime(CLOCK_REALTIME, &ts);
    return static_cast<uint64_t>(ts.tv_sec) * 1'000'000'000 + static_cast<uint64_t>(ts.tv_nsec);
}

std::unique_ptr<UsageSource> systemUsage(pid_t program, const std::string& backupDirectory) {
    return std::make_unique<SystemUsage>(program, backupDirectory);
}

}  // namespace memtool::cli::policy
