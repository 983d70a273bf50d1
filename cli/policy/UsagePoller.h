#pragma once
// What the machine holds, read from outside the program every interval_ms by
// memtool run (off the program's allocation path: nothing of it runs in the
// target): each CUDA device's used and total bytes, whole and the run's
// processes' share (NVML, loaded at run time); host memory, as the cgroup the
// program runs in limits it (v2 `memory.max`/`memory.current`, v1
// `memory.limit_in_bytes`/`memory.usage_in_bytes`), else /proc/meminfo's
// MemTotal less MemAvailable; each process's RSS; the backup directory's free
// space.
//
// NVML is the one vendor call, behind Nvml (libnvidia-ml.so.1, or the library
// MEMTOOL_NVML_LIBRARY names: tests give a double that plays a scripted curve).

#include <sys/types.h>

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace memtool::cli::policy {

struct DeviceUsage {
    std::string device;  // "cpu" (host memory), "cuda:0", ...
    uint64_t used = 0;
    uint64_t total = 0;
    std::optional<uint64_t> processes;  // the run's processes' share, where the source tells
};

struct UsageSample {
    uint64_t unixNs = 0;
    std::vector<DeviceUsage> devices;
    std::map<pid_t, uint64_t> rss;            // resident bytes per process
    std::optional<uint64_t> backupFreeBytes;  // free space where disk backups go
};

class UsageSource {
public:
    virtual ~UsageSource() = default;
    // One reading of everything, for the processes `pids` (the run's).
    virtual UsageSample poll(const std::vector<pid_t>& pids) = 0;
    // Where host and CUDA figures come from: "cgroup v2 /sys/fs/cgroup/x", "meminfo"; "nvml",
    // "none".
    virtual std::string hostSource() const = 0;
    virtual std::string cudaSource() const = 0;
};

// CLOCK_REALTIME in ns: the rounds' and the actions' time.
uint64_t unixNowNs();

// The machine's: `program` is the launched process (its cgroup is the run's;
// its CUDA_VISIBLE_DEVICES maps NVML's indexes to the program's cuda:N).
std::unique_ptr<UsageSource> systemUsage(pid_t program, const std::string& backupDirectory);

// The host's figures as a cgroup limits them.
struct HostMemory {
    uint64_t used = 0;
    uint64_t total = 0;
    std::string source;
};
// The group whose limit is the tightest from `pid`'s memory cgroup up to the
// root (`root` stands for /sys/fs/cgroup, `proc` for /proc): its limit and usage
// files. Found once, when the program starts: read on after it ended.
struct CgroupFiles {
    std::string limit, usage, source;
};
std::optional<CgroupFiles> findCgroup(pid_t pid, const std::string& root = "/sys/fs/cgroup",
                                      const std::string& proc = "/proc");
std::optional<HostMemory> readCgroup(const CgroupFiles& files);
std::optional<HostMemory> meminfoMemory(const std::string& proc = "/proc");
// "0,2" -> {0, 2}: what CUDA_VISIBLE_DEVICES keeps, in its order; nullopt when it
// is unset or names devices by UUID (then cuda:N is taken to be NVML's N).
std::optional<std::vector<int>> visibleDevices(pid_t pid, const std::string& proc = "/proc");

}  // namespace memtool::cli::policy
