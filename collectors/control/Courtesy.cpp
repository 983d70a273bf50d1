#include "collectors/control/Courtesy.h"

#include <dlfcn.h>
#include <time.h>

#include <cstdio>
#include <cstring>

#include "collectors/control/JsonWriter.h"
#include "collectors/control/PausedAccess.h"
#include "collectors/control/ResidentBytes.h"
#include "collectors/engine/MonotonicClock.h"
#include "collectors/engine/RecursionGuard.h"
#include "core/CtlArgs.h"

namespace memtool::collectors::control {

namespace {

constexpr double kDefaultWaitS = 30;

// NCCL's communicators keep their buffers (1-10 GB a rank) through a yield.
// ncclCommSuspend(comm, NCCL_SUSPEND_MEM) (NCCL 2.29.7 and later) lets them go,
// but it is collective: every rank of the communicator must call it at once, so
// memtool, which yields one process, does not. The answer says which case this is.
const char* ncclStatement() {
    using VersionFn = int (*)(int*);
    auto version = reinterpret_cast<VersionFn>(dlsym(RTLD_DEFAULT, "ncclGetVersion"));
    if (!version) return "no NCCL in this process";
    if (!dlsym(RTLD_DEFAULT, "ncclCommSuspend"))
        return "NCCL's communicators keep their buffers: this NCCL has no ncclCommSuspend "
               "(2.29.7 and later have)";
    return "NCCL's communicators keep their buffers: ncclCommSuspend is collective (every rank "
           "at once), and memtool yields one process";
}

}  // namespace

OpResult Courtesy::yieldLocked(core::BackupKind cudaTarget, core::ControlOrigin origin) {
    // PyTorch's cache holds free blocks that need no backup: let them go first.
    // What it gives back is the program's memory, recorded as such, though the
    // control thread (which records nothing of its own) asks: before, those frees
    // went missing, and the trace kept the segments as held.
    // cuBLAS keeps a workspace per handle as blocks of that cache, which emptying
    // it cannot give back while they are held; the next cuBLAS call makes them
    // again.
    if (releaseWorkspaces_) {
        ProgramEvents program;
        workspacesReleased_ = releaseWorkspaces_() != 0;
    }
    if (emptyCache_) {
        ProgramEvents program;
        emptyCache_();
    }
    ForcedBackup forced;
    forced.cpu = core::BackupKind::Disk;
    forced.cuda = cudaTarget;
    OpResult r = regions_.pause(nullptr, origin, core::ControlAction::Yield, &forced);
    if (r.ok && !r.changed)
        std::snprintf(r.message, sizeof r.message,
                      "nothing to yield: no region holds resident memory (under `memtool run "
                      "--pausable all` every allocation is in one)");
    return r;
}

void Courtesy::describe(const OpResult& r, const char* action, double parkS, int64_t threadsWaited,
                        char* out, size_t size) {
    JsonWriter j(out, size);
    j.open('{');
    j.key("ok").value(r.ok);
    j.key("action").value(action);
    j.key("changed").value(r.changed);
    j.key("bytes").value(r.bytes);
    r.writeLetGo(j);
    r.writePlaces(j);
    j.key("allocations").value(r.allocations);
    j.key("seconds").value(r.seconds);
    j.key("park_seconds").value(parkS);
    j.key("parked").value(parkedByUs_);
    if (threadsWaited >= 0) j.key("threads_waited").value(static_cast<uint64_t>(threadsWaited));
    j.key("message").value(r.message);
    // Per device: what moved, and what the device (or the process) still holds:
    // memory memtool does not serve (the CUDA context, libraries' own buffers).
    j.key("devices").open('[');
    for (int i = 0; i < r.deviceCount; ++i) {
        char name[16];
        deviceText(r.devices[i].device, name, sizeof name);
        j.open('{');
        j.key("device").value(name);
        j.key("bytes").value(r.devices[i].bytes);
        if (r.devices[i].device == core::kDeviceCpu) {
            j.key("process_resident_bytes").value(residentBytes());
        } else {
            describeLeft(j, r.devices[i].device);
        }
        j.close('}');
    }
    j.close(']');
    if (!r.resumed) {
        if (releaseWorkspaces_) j.key("cublas_workspaces_released").value(workspacesReleased_);
        j.key("nccl").value(ncclStatement());
    }
    j.close('}');
}

void Courtesy::describeLeft(JsonWriter& j, uint8_t device) {
    uint64_t free = 0, total = 0;
    if (!regions_.deviceMemory(device, &free, &total)) return;
    const uint64_t used = total - free;
    j.key("device_used_bytes").value(used);
    j.key("device_total_bytes").value(total);
    // What the device still holds, by what memtool can name: the regions' memory
    // still resident, the allocations it saw that no region holds, and the rest,
    // which it never saw (the CUDA context, libraries' own memory, other processes).
    uint64_t resident = 0, outside = 0;
    if (!regions_.heldOnDevice(device, &resident, &outside)) return;
    j.key("left").open('{');
    j.key("in_regions_bytes").value(resident);
    j.key("outside_regions_bytes").value(outside);
    j.key("unseen_bytes").value(used > outside + resident ? used - outside - resident : 0);
    j.close('}');
}

void Courtesy::describeNothing(const char* action, bool ok, const char* message, char* out,
                               size_t size) {
    OpResult r;
    r.ok = ok;
    r.resumed = std::strcmp(action, "restore") == 0;
    std::snprintf(r.message, sizeof r.message, "%s", message);
    describe(r, action, 0, -1, out, size);
}

uint8_t Courtesy::yieldCommand(size_t argc, const char* const* argv, char* out, size_t size) {
    core::BackupKind target = core::BackupKind::Disk;
    double waitS = kDefaultWaitS;
    for (size_t i = 1; i < argc; ++i) {
        const bool hasValue = i + 1 < argc;
        if (std::strcmp(argv[i], "--to") == 0 && hasValue &&
            std::strcmp(argv[i + 1], "host") == 0) {
            target = core::BackupKind::Host;
            ++i;
        } else if (std::strcmp(argv[i], "--to") == 0 && hasValue &&
                   std::strcmp(argv[i + 1], "disk") == 0) {
            ++i;
        } else if (std::strcmp(argv[i], "--wait") == 0 && hasValue &&
                   core::parseWaitSeconds(argv[i + 1], &waitS)) {
            ++i;
        } else {
            LockGuard lock(mu_);  // the answer says whether the program is parked
            describeNothing("yield", false,
                            "yield takes [--to host|disk] [--wait SECONDS] (seconds above 0, at "
                            "most 10000000)",
                            out, size);
            return static_cast<uint8_t>(core::ReplyStatus::Refused);
        }
    }
    LockGuard lock(mu_);
    if (yielded_) {
        describeNothing("yield", true,
                        "the program has yielded already; nothing done (restore gives its memory "
                        "back)",
                        out, size);
        return static_cast<uint8_t>(core::ReplyStatus::Ok);
    }
    const uint64_t start = monotonicNs();
    // Why nothing was yielded when the program did not park, with the wait in it.
    const auto notParked = [&](const char* why, core::ReplyStatus status) {
        char message[256];
        std::snprintf(message, sizeof message, why, waitS);
        describeNothing("yield", false, message, out, size);
        return static_cast<uint8_t>(status);
    };
    switch (safePoint_.park(static_cast<uint64_t>(waitS * 1e9))) {
        case SafePoint::Outcome::Parked:
            break;
        case SafePoint::Outcome::TimedOut:
            return notParked(
                "the program's main thread did not reach a safe point within %g s (it may be "
                "blocked in a system call: a sleep, I/O, a lock); nothing was yielded",
                core::ReplyStatus::Failed);
        case SafePoint::Outcome::NoSafePoints:
            return notParked(
                "this program runs no Python interpreter and marked no safe point within %g s "
                "(memtool_safe_point() in the collector's C API); yield is refused",
                core::ReplyStatus::Refused);
        case SafePoint::Outcome::Busy:
        case SafePoint::Outcome::Ran:  // not an outcome of park()
            describeNothing("yield", false, "the program is being parked already", out, size);
            return static_cast<uint8_t>(core::ReplyStatus::Failed);
    }
    parkedByUs_ = true;
    const double parkS = static_cast<double>(monotonicNs() - start) / 1e9;
    // Threads that run on while the main thread is parked (inside an op, the GIL
    // released) and touch what the yield takes wait for restore, not die.
    holdFaultsWhileYielded(true);
    OpResult r = yieldLocked(target, core::ControlOrigin::Ctl);
    if (!r.ok) {  // nothing is away (or some is, and stays away): the program waits for restore
        yielded_ = r.changed;
        if (!r.changed) {
            holdFaultsWhileYielded(false);
            safePoint_.release();
            parkedByUs_ = false;
        }
    } else {
        yielded_ = true;
    }
    r.seconds = static_cast<double>(monotonicNs() - start) / 1e9;
    // Where the content went, after what the pause said (cut to the message's room).
    bool cuda = false, npu = false;
    for (int i = 0; i < r.deviceCount; ++i) {
        cuda |= core::cudaOrdinal(r.devices[i].device) >= 0;
        npu |= core::npuOrdinal(r.devices[i].device) >= 0;
    }
    const char* devices = cuda && npu ? ", CUDA and NPU memory to "
                          : cuda      ? ", CUDA memory to "
                          : npu       ? ", NPU memory to "
                                      : "";
    const size_t used = std::strlen(r.message);
    if (r.changed)
        std::snprintf(r.message + used, sizeof r.message - used,
                      "; content backed up: CPU memory to disk%s%s", devices,
                      *devices ? backupName(target) : "");
    describe(r, "yield", parkS, -1, out, size);
    return static_cast<uint8_t>(r.ok ? core::ReplyStatus::Ok : core::ReplyStatus::Failed);
}

uint8_t Courtesy::restoreCommand(char* out, size_t size) {
    LockGuard lock(mu_);
    if (!yielded_) {
        describeNothing("restore", true, "the program has not yielded; nothing to restore", out,
                        size);
        return static_cast<uint8_t>(core::ReplyStatus::Ok);
    }
    const uint64_t start = monotonicNs();
    OpResult r = regions_.resume(nullptr, core::ControlOrigin::Ctl, core::ControlAction::Restore);
    // A resume that could not bring everything back keeps the program parked: it
    // must not run on with memory missing. restore can be asked again.
    uint32_t waited = 0;
    if (r.ok) {
        yielded_ = false;
        if (parkedByUs_) {
            waited = holdFaultsWhileYielded(false);
            safePoint_.release();
        }
        parkedByUs_ = false;
    }
    if (waited) {
        const size_t used = std::strlen(r.message);
        std::snprintf(r.message + used, sizeof r.message - used,
                      "; %u thread%s that touched yielded memory waited for it and went on", waited,
                      waited == 1 ? "" : "s");
    }
    r.seconds = static_cast<double>(monotonicNs() - start) / 1e9;
    describe(r, "restore", 0, waited, out, size);
    return static_cast<uint8_t>(r.ok ? core::ReplyStatus::Ok : core::ReplyStatus::Failed);
}

OpResult Courtesy::yieldHere(core::BackupKind cudaTarget) {
    LockGuard lock(mu_);
    OpResult r;
    if (yielded_) {
        std::snprintf(r.message, sizeof r.message, "the program has yielded already; nothing done");
        return r;
    }
    r = yieldLocked(cudaTarget, core::ControlOrigin::Api);
    yielded_ = r.changed;
    return r;
}

OpResult Courtesy::restoreHere() {
    LockGuard lock(mu_);
    OpResult r;
    r.resumed = true;
    if (!yielded_) {
        std::snprintf(r.message, sizeof r.message,
                      "the program has not yielded; nothing to restore");
        return r;
    }
    if (parkedByUs_) {  // it yielded from outside: only memtool ctl restore ends that
        r.ok = false;
        std::snprintf(r.message, sizeof r.message,
                      "the program was yielded by memtool ctl; restore it from there");
        return r;
    }
    r = regions_.resume(nullptr, core::ControlOrigin::Api, core::ControlAction::Restore);
    if (r.ok) yielded_ = false;
    return r;
}

void Courtesy::abandon() {
    LockGuard lock(mu_);
    if (!parkedByUs_) return;
    regions_.resume(nullptr, core::ControlOrigin::Ctl, core::ControlAction::Restore);
    yielded_ = false;
    parkedByUs_ = false;
    holdFaultsWhileYielded(false);
    safePoint_.release();
}

}  // namespace memtool::collectors::control
