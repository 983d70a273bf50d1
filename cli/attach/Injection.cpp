#include "cli/attach/Injection.h"

#include <dlfcn.h>
#include <elf.h>
#include <fmt/format.h>
#include <signal.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <fstream>
#include <sstream>

#include "cli/attach/RemoteCall.h"
#include "core/Error.h"

namespace memtool::cli {

namespace {

constexpr double kCallTimeoutS = 30;  // dlopen of the collector takes ~5 ms here
constexpr double kSettleS = 10;       // for the main thread to be stopped outside libc's locks

[[noreturn]] void refuse(const std::string& why) {
    throw core::Error(core::kExitBadInput, "attach: " + why);
}

std::string readAll(const std::string& path) {
    std::ifstream in(path, std::ios::binary);
    std::ostringstream s;
    s << in.rdbuf();
    return s.str();
}

// One line of /proc/PID/maps: its start, file offset, and what names the file
// ("dev inode path", as the kernel writes them).
struct Mapping {
    uint64_t start = 0, end = 0, offset = 0;
    bool executable = false;
    std::string file;
};

std::vector<Mapping> mappingsOf(const std::string& mapsPath) {
    std::vector<Mapping> out;
    std::ifstream in(mapsPath);
    for (std::string line; std::getline(in, line);) {
        std::istringstream words(line);
        std::string range, perms, offset, dev, inode;
        if (!(words >> range >> perms >> offset >> dev >> inode) || inode == "0") continue;
        std::string path;
        std::getline(words >> std::ws, path);
        Mapping m;
        m.start = std::strtoull(range.c_str(), nullptr, 16);
        const size_t dash = range.find('-');
        m.end = dash == std::string::npos ? m.start
                                          : std::strtoull(range.c_str() + dash + 1, nullptr, 16);
        m.executable = perms.size() > 2 && perms[2] == 'x';
        m.offset = std::strtoull(offset.c_str(), nullptr, 16);
        m.file = dev + " " + inode + " " + path;
        out.push_back(std::move(m));
    }
    return out;
}

// Where the file that holds `address` in this process (memtool's own libc)
// begins, and how /proc names it.
Mapping ownFileOf(const void* address) {
    Dl_info info{};
    if (!dladdr(address, &info) || !info.dli_fbase)
        throw core::Error(core::kExitInternal, "attach: memtool's own C library cannot be found");
    const auto base = reinterpret_cast<uint64_t>(info.dli_fbase);
    for (const Mapping& m : mappingsOf("/proc/self/maps"))
        if (m.start == base && m.offset == 0) return m;
    throw core::Error(core::kExitInternal,
                      "attach: memtool's own C library is not in /proc/self/maps");
}

std::string statusField(const std::string& status, const std::string& name) {
    const size_t at = status.find("\n" + name + ":");
    if (at == std::string::npos) return {};
    const size_t begin = status.find_first_not_of(" \t", at + name.size() + 2);
    return status.substr(begin, status.find('\n', begin) - begin);
}

// The tests' hooks: MEMTOOL_ATTACH_DIE_AT=STEP, memtool dies at that step of the
// injection (the process must run on whatever step it is killed at);
// MEMTOOL_ATTACH_KILL_AT=STEP, the process is killed there (memtool must say so).
void reached(const char* step, pid_t pid) {
    const char* die = std::getenv("MEMTOOL_ATTACH_DIE_AT");
    if (die && std::strcmp(die, step) == 0) raise(SIGKILL);
    const char* kill = std::getenv("MEMTOOL_ATTACH_KILL_AT");
    if (kill && std::strcmp(kill, step) == 0) ::kill(pid, SIGKILL);
}

bool holdsAny(const std::string& maps, std::initializer_list<const char*> names) {
    for (const char* n : names)
        if (maps.find(n) != std::string::npos) return true;
    return false;
}

}  // namespace

RemoteLibc::RemoteLibc(pid_t pid, const std::string& procRoot) {
    const Mapping libc = ownFileOf(reinterpret_cast<const void*>(&dlopen));
    own_ = libc.start;
    for (const Mapping& m : mappingsOf(fmt::format("{}/{}/maps", procRoot, pid))) {
        if (m.file == libc.file && m.offset == 0) remote_ = m.start;
        if (m.executable && (m.file == libc.file || m.file.find("/ld-linux") != std::string::npos))
            lockingCode_.emplace_back(m.start, m.end);
    }
    if (remote_ != 0) return;
    refuse(fmt::format(
        "process {} does not use this system's C library ({}): it is statically linked, or "
        "built for another libc or container, and memtool cannot load its collector there",
        pid, libc.file.substr(libc.file.rfind(' ') + 1)));
}

bool RemoteLibc::inLockingCode(uint64_t address) const {
    for (const auto& [start, end] : lockingCode_)
        if (address >= start && address < end) return true;
    return false;
}

uint64_t RemoteLibc::function(const char* name) const {
    void* own = dlsym(RTLD_DEFAULT, name);
    Dl_info info{};
    if (!own || !dladdr(own, &info) || reinterpret_cast<uint64_t>(info.dli_fbase) != own_)
        throw core::Error(core::kExitInternal,
                          fmt::format("attach: no {} in memtool's C library", name));
    return remote_ + (reinterpret_cast<uint64_t>(own) - own_);
}

void checkAttachable(pid_t pid, const std::string& procRoot) {
    if (pid <= 0) refuse(fmt::format("{} is no process id", pid));
    if (pid == 1) refuse("pid 1 is the system's init process: memtool does not attach to it");
    if (pid == getpid()) refuse("memtool does not attach to itself");
    const std::string dir = fmt::format("{}/{}", procRoot, pid);
    const std::string stat = readAll(dir + "/stat");
    if (stat.empty()) refuse(fmt::format("no process {}", pid));
    const size_t paren = stat.rfind(')');
    if (paren != std::string::npos && paren + 2 < stat.size() && stat[paren + 2] == 'Z')
        refuse(fmt::format("process {} is a zombie (it has exited; its parent has not reaped it)",
                           pid));
    const std::string status = readAll(dir + "/status");
    const uid_t me = geteuid();
    const uid_t owner =
        static_cast<uid_t>(std::strtoul(statusField(status, "Uid").c_str(), nullptr, 10));
    if (me != 0 && owner != me)
        refuse(
            fmt::format("process {} belongs to another user (uid {}); memtool attaches to your own",
                        pid, owner));
    const std::string tracer = statusField(status, "TracerPid");
    if (!tracer.empty() && tracer != "0")
        refuse(
            fmt::format("process {} is traced already (by process {}: a debugger?)", pid, tracer));
    // Where the executable can be read: a 64-bit x86-64 ELF file.
    const std::string elf = readAll(dir + "/exe").substr(0, sizeof(Elf64_Ehdr));
    if (elf.size() == sizeof(Elf64_Ehdr)) {
        Elf64_Ehdr h;
        std::memcpy(&h, elf.data(), sizeof h);
        if (std::memcmp(h.e_ident, ELFMAG, SELFMAG) != 0 || h.e_ident[EI_CLASS] != ELFCLASS64 ||
            h.e_machine != EM_X86_64)
            refuse(
                fmt::format("process {} is not an x86-64 program: memtool attach needs one", pid));
    }
    const std::string maps = readAll(dir + "/maps");
    if (maps.empty()) refuse(fmt::format("the memory map of process {} cannot be read", pid));
    (void)RemoteLibc(pid, procRoot);  // refuses a static or foreign libc
    if (!holdsAny(maps, {"/libc10.so", "/libcudart.so", "/libcuda.so"}))
        refuse(
            fmt::format("nothing memtool tracks is loaded in process {} (no libc10 of PyTorch, no "
                        "CUDA runtime)",
                        pid));
    const std::string environ = readAll(dir + "/environ");
    if (environ.find(std::string("MEMTOOL_SOCKET=")) != std::string::npos)
        refuse(
            fmt::format("process {} runs under memtool run already, which records all of it", pid));
}

void inject(const InjectionPlan& plan) {
    const pid_t pid = plan.pid;
    const RemoteLibc libc(pid);
    const uint64_t dlopenAt = libc.function("dlopen");
    const uint64_t dlsymAt = libc.function("dlsym");
    const uint64_t dlerrorAt = libc.function("dlerror");
    using Arg = RemoteThread::Arg;
    RemoteThread thread(pid, pid);  // the main thread: Python's pending calls want it
    // Stopped inside malloc or the loader, it may hold the lock the collector's dlopen
    // needs (a resnet18 training step, attached: "did not answer within 30 s").
    thread.stopOutside([&](uint64_t rip) { return libc.inLockingCode(rip); }, kSettleS);
    reached("stopped", pid);
    const uint64_t handle =
        thread.call(dlopenAt, {Arg::string(plan.collector), Arg::number(RTLD_NOW | RTLD_GLOBAL)},
                    kCallTimeoutS);
    if (handle == 0) {
        const uint64_t why = thread.call(dlerrorAt, {}, kCallTimeoutS);
        throw core::Error(
            core::kExitRunFailed,
            fmt::format("attach: the collector could not be loaded into process {}: {}", pid,
                        why ? thread.readString(why, 512) : "no reason given"));
    }
    reached("loaded", pid);
    const uint64_t start = thread.call(
        dlsymAt, {Arg::number(handle), Arg::string("memtool_attach_start")}, kCallTimeoutS);
    if (start == 0)
        refuse(fmt::format(
            "process {} holds another version of memtool's collector (no attach in it)", pid));
    const auto code =
        static_cast<int>(thread.call(start,
                                     {Arg::string(plan.socket), Arg::string(plan.options),
                                      Arg::string(plan.backupDir), Arg::string(plan.pythonPackage)},
                                     kCallTimeoutS));
    reached("started", pid);
    switch (code) {
        case 0:
            return;
        case 1:
            refuse(
                fmt::format("process {} is profiled already (memtool attach, or memtool.track in "
                            "it): one at a time",
                            pid));
        case 2:
            refuse(fmt::format("process {} runs under memtool run already, which records all of it",
                               pid));
        case 4:
            refuse(
                fmt::format("nothing memtool tracks is loaded in process {} (no libc10 of PyTorch, "
                            "no CUDA runtime)",
                            pid));
        default:
            throw core::Error(
                core::kExitRunFailed,
                fmt::format("attach: the collector in process {} did not start ({})", pid, code));
    }
}

}  // namespace memtool::cli
