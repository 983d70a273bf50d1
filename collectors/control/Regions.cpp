#include "collectors/control/Regions.h"

#include <pthread.h>
#include <sys/mman.h>
#include <time.h>

#include <algorithm>
#include <cinttypes>
#include <cstdio>
#include <cstring>

#include "collectors/control/JsonWriter.h"
#include "collectors/engine/Engine.h"
#include "collectors/engine/MonotonicClock.h"
#include "collectors/engine/ThreadState.h"
#include "collectors/engine/Warn.h"

namespace memtool::collectors::control {

namespace {

uint64_t roundUp(uint64_t n, uint64_t to) { return (n + to - 1) / to * to; }

}  // namespace

// "cpu", "cuda:3": a device as the trace names it.
void deviceText(uint8_t device, char* out, size_t size) {
    const int ordinal = core::cudaOrdinal(device);
    if (ordinal >= 0)
        std::snprintf(out, size, "cuda:%d", ordinal);
    else if (core::npuOrdinal(device) >= 0)
        std::snprintf(out, size, "npu:%d", core::npuOrdinal(device));
    else
        std::snprintf(out, size, "%s", device == core::kDeviceCpu ? "cpu" : "pinned");
}

void OpResult::addBytes(uint8_t device, uint64_t n) {
    bytes += n;
    for (int i = 0; i < deviceCount; ++i) {
        if (devices[i].device != device) continue;
        devices[i].bytes += n;
        return;
    }
    if (deviceCount < kMaxDevices) devices[deviceCount++] = DeviceBytes{device, n};
}

void OpResult::writeLetGo(JsonWriter& j) const {
    if (resumed)
        j.key("freed_bytes").value(freedBytes);
    else
        j.key("cached_bytes").value(cachedBytes);
}

void OpResult::writePlaces(JsonWriter& j) const {
    if (resumed) {
        j.key("verify_failed").value(verifyFailed);
        return;
    }
    j.key("to_host_bytes").value(toHostBytes);
    j.key("to_disk_bytes").value(toDiskBytes);
    j.key("over_budget_bytes").value(overBudgetBytes);
}

size_t OpResult::toJson(const char* action, char* out, size_t size) const {
    JsonWriter j(out, size);
    j.open('{');
    j.key("ok").value(ok);
    j.key("action").value(action);
    j.key("changed").value(changed);
    j.key("bytes").value(bytes);
    writeLetGo(j);
    writePlaces(j);
    j.key("regions").value(static_cast<uint64_t>(regions));
    j.key("allocations").value(allocations);
    j.key("seconds").value(seconds);
    j.key("message").value(message);
    j.close('}');
    return j.length();
}

void Regions::setBackupDirectory(const char* directory) {
    backups_.setDirectory(directory && *directory ? directory : "/tmp");
}

bool Regions::changeBackupDirectory(const char* directory, Failure& why) {
    if (!BackupSlots::checkDirectory(directory, why)) return false;
    LockGuard op(opMu_);  // not while a pause opens its backups
    backups_.setDirectory(directory);
    return true;
}

MemoryBackend* Regions::LazyBackend::get(const char* missing, Failure& whyNot) {
    int s = state.load(std::memory_order_acquire);
    if (s == 0) {
        LockGuard lock(mu);
        s = state.load();
        if (s == 0) {
            Failure f;
            s = backend && (!ready || ready(f)) ? 1 : -1;
            if (s < 0) std::snprintf(why, sizeof why, "%s", backend ? f.text : missing);
            if (s > 0 || !retries) state.store(s, std::memory_order_release);
        }
    }
    if (s < 0) whyNot.set(why);
    return s > 0 ? backend : nullptr;
}

bool Regions::deviceHostBackups(Failure& why) {
    if (cudaAvailable(why)) return true;
    // No CUDA: an NPU's runtime, where the program loaded one.
    Failure npuWhy;
    return npu_.get("", npuWhy) != nullptr;
}

MemoryBackend* Regions::backendFor(uint8_t device) {
    if (device == core::kDeviceCpu) return cpu_;
    Failure ignored;
    if (core::cudaOrdinal(device) >= 0 && core::devicePool(device) == core::DevicePool::Device)
        return cuda_.get("this memtool has no CUDA support", ignored);
    if (core::npuOrdinal(device) >= 0) return npu_.get("this memtool has no NPU support", ignored);
    return nullptr;
}

// ---- the calling thread's region ------------------------------------------------------

void Regions::lockOuterForFork() {
    opMu_.lock();
    cuda_.mu.lock();
    npu_.mu.lock();
}
void Regions::lockTableForFork() { tableMu_.lock(); }
void Regions::unlockTableAfterFork() { tableMu_.unlock(); }
void Regions::unlockOuterAfterFork() {
    npu_.mu.unlock();
    cuda_.mu.unlock();
    opMu_.unlock();
}

void Regions::childAfterFork() {
    for (uint32_t i = 0; i < allocations_.size(); ++i) {
        Allocation& a = allocations_[i];
        if (a.state == State::Resident || a.state == State::Paused) {
            a.pausedInParent = a.state == State::Paused;
            a.state = State::Inherited;
        } else if (a.state == State::Cached) {
            // Kept for the parent's reuse: nothing of this process's. CPU pages are
            // unmapped here; device memory is left alone (a fork child cannot use
            // the driver its parent set up).
            if (regions_[a.region].device == core::kDeviceCpu && cpu_)
                cpu_->release(core::kDeviceCpu, a.address, a.mapped);
            allocations_.freeSlot(i);
        }
    }
    cache_.clear();
    // The regions in use are a prefix of the table (regionLocked takes the first
    // free one, and none is ever given back); the rest are as they were made. A
    // program that declares none touches none of the table's pages here: each
    // would be a page fault in every process it forks.
    for (Region& r : regions_) {
        if (!r.used) break;
        r.inherited = true;
        r.busy = false;
        r.declaredIn = 0;
        r.residentBytes = r.pausedBytes = 0;
        r.pausedCount = 0;
        r.freedPausedBytes = 0;
    }
}

bool Regions::entryFor(uint8_t device, uint16_t* entry, bool* implicit) const {
    ThreadState* ts = existingThreadState();
    const bool cpu = device == core::kDeviceCpu;
    for (int i = ts ? ts->regionDepth - 1 : -1; i >= 0; --i) {
        const uint16_t e = ts->regionEntries[i];
        if (cpu && entryDeviceOnly(e)) continue;  // "no region" entries never are
        *implicit = false;
        if (entryTag(e) == kNoRegion) return false;
        *entry = e;
        return true;
    }
    *implicit = true;
    if (!pausableAll_ || (cpu && entryDeviceOnly(defaultEntry_))) return false;
    *entry = defaultEntry_;
    return true;
}

bool Regions::threadInRegion() const {
    uint16_t entry = 0;
    bool implicit = false;
    return entryFor(core::kDeviceCudaBase, &entry, &implicit);
}

bool Regions::threadInRegionForCpu(uint64_t size) const {
    uint16_t entry = 0;
    bool implicit = false;
    return entryFor(core::kDeviceCpu, &entry, &implicit) &&
           (!implicit || size >= kImplicitMinCpuBytes);
}

void Regions::setPausableAll(core::BackupKind backup, bool deviceOnly) {
    LockGuard lock(tableMu_);
    int t = findTagLocked("default");
    if (t < 0) {
        for (t = 0; t < kMaxTags && tags_[t].used; ++t) {
        }
        if (t == kMaxTags) return;
        std::memcpy(tags_[t].name, "default", 8);
        tags_[t].used = true;
    }
    defaultEntry_ = entryOf(t, backup, deviceOnly);
    pausableAll_ = true;
}

bool Regions::enterNone(Failure& why) {
    ThreadState* ts = threadState();
    if (!ts || ts->regionDepth >= ThreadState::kMaxRegionDepth) {
        why.set("regions nest at most 16 deep");
        return false;
    }
    ts->regionEntries[ts->regionDepth++] = kNoRegion;
    return true;
}

int Regions::findTagLocked(const char* tag) const {
    for (int i = 0; i < kMaxTags; ++i)
        if (tags_[i].used && std::strcmp(tags_[i].name, tag) == 0) return i;
    return -1;
}

bool Regions::enter(const char* tag, core::BackupKind backup, Failure& why, bool deviceOnly,
                    bool verify) {
    const size_t len = std::strlen(tag);
    if (len == 0 || len > core::kMaxTagBytes) {
        why.set("a region tag is 1 to 63 bytes long");
        return false;
    }
    for (const char* c = tag; *c; ++c) {
        if (static_cast<unsigned char>(*c) < 0x20) {
            why.set("a region tag has no control characters");
            return false;
        }
    }
    Failure cudaWhy;
    // A device-only region serves no CPU memory, so a host backup there waits for
    // CUDA memory, if any comes (torch_memory_saver in a CPU-only process).
    if (backup == core::BackupKind::Host && !deviceOnly && !deviceHostBackups(cudaWhy)) {
        why.set(
            "backup='host' keeps CUDA or NPU memory in pinned host memory, and this process "
            "has neither (",
            cudaWhy.text, "); CPU memory can be backed up to disk: use backup='disk' (or 'none')");
        return false;
    }
    ThreadState* ts = threadState();
    if (!ts) {
        why.set("out of memory for the thread's state");
        return false;
    }
    if (ts->regionDepth >= ThreadState::kMaxRegionDepth) {
        why.set("regions nest at most 16 deep");
        return false;
    }
    LockGuard lock(tableMu_);
    int t = findTagLocked(tag);
    if (t < 0) {
        for (t = 0; t < kMaxTags && tags_[t].used; ++t) {
        }
        if (t == kMaxTags) {
            why.set("at most 64 region tags");
            return false;
        }
        std::memcpy(tags_[t].name, tag, len + 1);
        tags_[t].used = true;
        tags_[t].verify = false;
    }
    tags_[t].verify |= verify;
    ts->regionEntries[ts->regionDepth++] = entryOf(t, backup, deviceOnly);
    return true;
}

void Regions::exit() {
    ThreadState* ts = existingThreadState();
    if (ts && ts->regionDepth > 0) --ts->regionDepth;
}

// ---- allocation routing ---------------------------------------------------------------

int Regions::regionLocked(int tag, core::BackupKind backup, uint8_t device) {
    int free = -1;
    for (int i = 0; i < kMaxRegions; ++i) {
        const Region& r = regions_[i];
        if (r.used && r.tag == tag && r.backup == backup && r.device == device) return i;
        if (!regions_[i].used && free < 0) free = i;
    }
    if (free < 0) return -1;
    Region& r = regions_[free];
    r.used = true;
    r.tag = static_cast<uint8_t>(tag);
    r.device = device;
    r.backup = backup;
    r.declaredIn = 0;
    r.freedPausedBytes = 0;
    return free;
}

void Regions::declareLocked(int region) {
    Region& r = regions_[region];
    r.inherited = false;  // serving this process's memory now
    if (!engine_ || !engine_->active() || r.declaredIn == engine_->generation()) return;
    engine_->region(static_cast<uint32_t>(region + 1), tags_[r.tag].name, r.device, r.backup);
    r.declaredIn = engine_->generation();
}

int Regions::regionOfLocked(int tag, core::BackupKind backup, uint8_t device) {
    uint16_t& cached = regionIndex_[(tag * 3 + static_cast<int>(backup)) * 256 + device];
    if (cached) return cached - 1;
    const int region = regionLocked(tag, backup, device);
    if (region >= 0) cached = static_cast<uint16_t>(region + 1);
    return region;
}

bool Regions::leavesMargin(MemoryBackend& backend, uint8_t device, uint64_t bytes, Failure& why) {
    const uint64_t margin = margin_.load(std::memory_order_relaxed);
    uint64_t free = 0, total = 0;
    if (margin == 0 || !backend.deviceMemory(device, &free, &total)) return true;
    if (bytes <= free && free - bytes >= margin) return true;
    char dev[16];
    deviceText(device, dev, sizeof dev);
    char text[sizeof why.text];
    std::snprintf(text, sizeof text,
                  "a region allocation of %" PRIu64 " B on %s is refused: %" PRIu64
                  " B are free, and the memory margin keeps %" PRIu64 " B free",
                  bytes, dev, free, margin);
    why.set(text);
    // Said once, on stderr and in the trace: the program sees only an
    // out-of-memory error.
    if (!marginSaid_.exchange(true)) {
        warn(text);
        if (engine_) engine_->note(core::kNoteWarning, text);
    }
    return false;
}

void* Regions::serve(uint8_t device, uint64_t size, uint64_t alignment, Failure& why) {
    MemoryBackend* backend = backendFor(device);
    uint16_t entry = 0;
    bool implicit = false;
    const bool inRegion = entryFor(device, &entry, &implicit);
    const int tag = inRegion ? entryTag(entry) : -1;
    const core::BackupKind backup = entryBackup(entry);
    if (tag < 0 || !backend) {
        why.set(backend ? "not in a region" : "no backend serves this device");
        return nullptr;
    }
    // A fork child's stream starts at its first event: this one, whose region
    // must be declared on it first (and not with the table's lock held: starting
    // a stream scans the modules, a lock taken before it).
    if (engine_) engine_->activate();
    const uint64_t mapped = roundUp(size ? size : 1, backend->granularity(device));
    // A cached allocation of the same size first: no system call, no page fault.
    // Larger alignments than the backend's own always get fresh addresses.
    if (alignment <= backend->granularity(device)) {
        LockGuard lock(tableMu_);
        const int region = regionOfLocked(tag, backup, device);
        const uint32_t slot = region < 0 ? UINT32_MAX : cache_.take(allocations_, region, mapped);
        if (slot != UINT32_MAX) {
            Allocation& a = allocations_[slot];
            if (allocations_.index(a.address, slot)) {
                a.state = State::Resident;
                a.size = size;
                regions_[region].residentBytes += size;
                declareLocked(region);
                // Under tableMu_, as release() records frees: the engine never calls back.
                if (engine_)
                    engine_->alloc(device, a.address, size, FlushPolicy::Timed,
                                   static_cast<uint32_t>(region + 1));
                return reinterpret_cast<void*>(a.address);
            }
            cache_.put(allocations_, slot,
                       backend);  // no room in the index: leave it cached, map fresh pages
        }
    }
    if (!leavesMargin(*backend, device, mapped, why)) return nullptr;
    uint64_t address = 0;
    if (!backend->reserve(device, mapped, alignment, &address, why)) return nullptr;
    if (!backend->map(device, address, mapped, why)) {
        backend->release(device, address, mapped);
        return nullptr;
    }
    int region;
    {
        LockGuard lock(tableMu_);
        region = regionOfLocked(tag, backup, device);
        const uint32_t slot = region < 0 ? UINT32_MAX : allocations_.newSlot();
        if (slot == UINT32_MAX || !allocations_.index(address, slot)) {
            backend->release(device, address, mapped);
            why.set(region < 0 ? "at most 256 regions (tags times backups times devices)"
                               : "out of memory for the region table");
            return nullptr;
        }
        allocations_[slot] =
            Allocation{address,         size,  mapped, 0, 0, 0, 0, 0, static_cast<uint16_t>(region),
                       State::Resident, false, false};
        if (!anyServed_.exchange(true, std::memory_order_acq_rel)) warmLocked();
        regions_[region].residentBytes += size;
        declareLocked(region);
    }
    if (engine_)
        engine_->alloc(device, address, size, FlushPolicy::Timed,
                       static_cast<uint32_t>(region + 1));
    return reinterpret_cast<void*>(address);
}

void Regions::waitForOperation() {
    opMu_.lock();
    opMu_.unlock();
}

void Regions::warmLocked() {
    // The bookkeeping a first pause writes (a backup slot, the paused ranges),
    // touched now, while the program grows anyway: a pause then grows the process
    // by nothing while it shrinks it.
    backups_.warm();
    paused_.warm();
}

bool Regions::holds(uint64_t address) {
    if (!anyServed_.load(std::memory_order_acquire)) return false;
    uint32_t slot = 0;
    LockGuard lock(tableMu_);
    return allocations_.find(address, &slot);
}

bool Regions::tagOf(uint64_t address, char* tag, size_t tagSize) {
    if (!anyServed_.load(std::memory_order_acquire)) return false;
    LockGuard lock(tableMu_);
    const long slot = allocations_.slotContaining(address);
    if (slot < 0) return false;
    std::snprintf(tag, tagSize, "%s", tags_[regions_[allocations_[slot].region].tag].name);
    return true;
}

bool Regions::readBackup(uint64_t address, void* out, uint64_t bytes, Failure& why) {
    LockGuard op(opMu_);  // no pause or resume meanwhile
    uint16_t backup = 0;
    uint64_t offset = 0;
    uint8_t device = 0;
    {
        LockGuard lock(tableMu_);
        const long slot =
            anyServed_.load(std::memory_order_acquire) ? allocations_.slotContaining(address) : -1;
        if (slot < 0) {
            why.set("this memory is no region's");
            return false;
        }
        const Allocation& a = allocations_[slot];
        const char* tag = tags_[regions_[a.region].tag].name;
        if (a.state != State::Paused) {
            why.set("region '", tag, "' is not paused: its memory holds the content");
            return false;
        }
        if (a.backup == 0) {
            why.set("region '", tag, "' was paused without a backup: its content is gone");
            return false;
        }
        if (bytes > a.size - (address - a.address)) {
            why.set("the range runs past the end of its allocation in region '", tag, "'");
            return false;
        }
        backup = a.backup;
        backups_.use(backup - 1);  // kept while it is read, should the tensor be freed
        offset = a.backupOffset + (address - a.address);
        device = regions_[a.region].device;
    }
    // Backups are read in whole units of the backend's granularity (disk files
    // with O_DIRECT), through a bounce buffer.
    MemoryBackend* backend = backendFor(device);
    const uint64_t unit = backend ? backend->granularity(device) : 4096;
    const uint64_t chunk = roundUp(uint64_t{4} << 20, unit);
    void* bounce = mmap(nullptr, chunk, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    bool ok = bounce != MAP_FAILED;
    if (!ok) why.set("no memory for reading the backup");
    Backup& content = backups_.content(backup - 1);
    for (uint64_t done = 0; ok && done < bytes;) {
        const uint64_t at = offset + done;
        const uint64_t start = at / unit * unit;
        const uint64_t length = std::min(chunk, roundUp(offset + bytes, unit) - start);
        ok = content.read(start, bounce, length, why);
        const uint64_t n = std::min(bytes - done, start + length - at);
        if (ok)
            std::memcpy(static_cast<char*>(out) + done, static_cast<char*>(bounce) + (at - start),
                        n);
        done += n;
    }
    if (bounce != MAP_FAILED) munmap(bounce, chunk);
    LockGuard lock(tableMu_);
    backups_.unuse(backup);
    return ok;
}

bool Regions::release(uint64_t address) {
    if (!anyServed_.load(std::memory_order_acquire))
        return false;  // no region ever served: the common case
    for (;;) {
        uint32_t slot = 0;
        tableMu_.lock();
        if (!allocations_.find(address, &slot)) {
            tableMu_.unlock();
            return false;
        }
        Allocation a = allocations_[slot];
        Region& r = regions_[a.region];
        if (a.state == State::Inherited) {
            releaseInheritedLocked(slot);  // unlocks
            return true;
        }
        if (r.busy) {  // a pause or resume is copying or releasing it: wait for the end
            tableMu_.unlock();
            waitForOperation();
            continue;
        }
        // Recorded as freed before the memory can go back to anyone.
        if (engine_) engine_->free(address);
        allocations_.unindex(address);
        if (a.state == State::Paused) {
            paused_.remove(a.pausedSlot);
            r.pausedBytes -= a.size;
            --r.pausedCount;
            r.freedPausedBytes += a.mapped;
            backups_.unuse(a.backup);
        } else {
            r.residentBytes -= a.size;
            // Resident and the cache has room: kept mapped for the next one this size.
            if (cache_.put(allocations_, slot, backendFor(r.device))) {
                tableMu_.unlock();
                return true;
            }
        }
        allocations_.freeSlot(slot);
        tableMu_.unlock();
        // A paused allocation's backup bytes stay in its region's backup until the
        // resume, which skips them.
        if (MemoryBackend* backend = backendFor(r.device))
            backend->release(r.device, a.address, a.mapped);
        return true;
    }
}

void Regions::releaseInheritedLocked(uint32_t slot) {
    const Allocation a = allocations_[slot];
    const uint8_t device = regions_[a.region].device;
    allocations_.unindex(a.address);
    // Not recorded: the engine forgot the parent's blocks at the fork. Device
    // memory and its host backups are left alone (the driver is the parent's).
    const bool cpu = device == core::kDeviceCpu;
    if (a.pausedInParent) {
        paused_.remove(a.pausedSlot);
        if (cpu) backups_.unuse(a.backup);
    }
    allocations_.freeSlot(slot);
    tableMu_.unlock();
    if (cpu && cpu_) cpu_->release(device, a.address, a.mapped);
}

// ---- commands -------------------------------------------------------------------------

bool Regions::beginLocked(int tag, State state, MappedArray<Work>& work, bool* busy) {
    for (uint32_t i = 0; i < allocations_.size(); ++i) {
        const Allocation& a = allocations_[i];
        if (a.state != state) continue;
        const Region& r = regions_[a.region];
        if (tag >= 0 && r.tag != tag) continue;
        if (!work.push(Work{i, a.region, a.backup, r.device, a.address, a.mapped, a.backupOffset,
                            a.checksum, a.verified}))
            return false;
        busy[a.region] = true;
    }
    for (int i = 0; i < kMaxRegions; ++i)
        if (busy[i]) regions_[i].busy = true;
    return work.size() > 0;
}

void Regions::endLocked(const bool* busy) {
    for (int i = 0; i < kMaxRegions; ++i)
        if (busy[i]) regions_[i].busy = false;
}

void Regions::record(const Work* first, size_t count, core::ControlAction action,
                     core::ControlOrigin origin, core::BackupKind backup, uint64_t startNs, bool ok,
                     const char* message) {
    if (!engine_ || count == 0) return;
    // One event per region: the work list is grouped by region.
    uint64_t bytes = 0;
    for (size_t i = 0; i < count; ++i) bytes += first[i].mapped;
    core::ControlFields f;
    f.region = first[0].region + 1u;
    f.action = action;
    f.origin = origin;
    f.bytes = ok ? bytes : 0;
    f.backup = backup;
    f.durationNs = monotonicNs() - startNs;
    f.ok = ok;
    {
        LockGuard lock(tableMu_);
        declareLocked(first[0].region);
    }
    engine_->control(f, message);
}

uint64_t Regions::dropCache(const char* tag, OpResult& into) {
    MappedArray<Work> dropped;
    {
        LockGuard lock(tableMu_);
        if (cache_.bytes() == 0) return 0;
        const int t = tag ? findTagLocked(tag) : -1;
        if (tag && t < 0) return 0;
        bool targets[kMaxRegions] = {};
        for (int i = 0; i < kMaxRegions; ++i)
            targets[i] = regions_[i].used && (t < 0 || regions_[i].tag == t);
        cache_.takeRegions(allocations_, targets, [&](uint32_t slot, const Allocation& a) {
            dropped.push(Work{slot, a.region, 0, regions_[a.region].device, a.address, a.mapped, 0,
                              0, false});
        });
    }
    uint64_t bytes = 0;
    for (size_t i = 0; i < dropped.size(); ++i) {
        if (MemoryBackend* backend = backendFor(dropped[i].device))
            backend->release(dropped[i].device, dropped[i].address, dropped[i].mapped);
        bytes += dropped[i].mapped;
        into.addBytes(dropped[i].device, dropped[i].mapped);
    }
    return bytes;
}

OpResult Regions::spillHostBackups() {
    OpResult result;
    LockGuard op(opMu_);
    MappedArray<Work> work;
    bool* busy = opBusy_;
    {
        // Not begin(): a resume's count of what was freed while paused stays its own.
        LockGuard lock(tableMu_);
        if (!beginLocked(-1, State::Paused, work, busy)) {
            endLocked(busy);
            std::snprintf(result.message, sizeof result.message,
                          "nothing to spill: no region is paused");
            return result;
        }
    }
    const uint64_t start = monotonicNs();
    // The host backups the paused allocations point at, oldest first.
    struct Spill {
        uint64_t serial;
        int slot;
        uint16_t region;
        uint8_t device;
        uint64_t bytes, allocations;
    };
    Spill spills[BackupSlots::kCapacity];
    int n = 0;
    for (size_t i = 0; i < work.size(); ++i) {
        const Work& w = work[i];
        if (w.backup == 0 || backups_.kind(w.backup - 1) != core::BackupKind::Host) continue;
        const int slot = w.backup - 1;
        int k = 0;
        while (k < n && spills[k].slot != slot) ++k;
        if (k == n) spills[n++] = {backups_.serial(slot), slot, w.region, w.device, 0, 0};
        spills[k].bytes = std::max(spills[k].bytes, w.offset + w.mapped);
        ++spills[k].allocations;
    }
    for (int i = 1; i < n; ++i)
        for (int j = i; j > 0 && spills[j - 1].serial > spills[j].serial; --j)
            std::swap(spills[j - 1], spills[j]);
    int moved = 0;
    for (; moved < n; ++moved) {
        const Spill& s = spills[moved];
        char device[16];
        deviceText(s.device, device, sizeof device);
        Failure why;
        if (!backups_.toDisk(s.slot, tags_[regions_[s.region].tag].name, device, s.bytes, why)) {
            result.ok = false;
            std::snprintf(result.message, sizeof result.message,
                          "region '%s' on %s stays in host memory: %s",
                          tags_[regions_[s.region].tag].name, device, why.text);
            break;
        }
        result.changed = true;
        result.addBytes(s.device, s.bytes);
        result.allocations += s.allocations;
        ++result.regions;
    }
    if (result.changed && cuda_.backend) {
        const uint64_t limit = cuda_.backend->hostPoolLimit();
        cuda_.backend->setHostPoolLimit(0);
        cuda_.backend->setHostPoolLimit(limit);
    }
    if (result.ok)
        std::snprintf(result.message, sizeof result.message,
                      n ? "moved %d host backup%s to disk" : "nothing to spill: no host backup", n,
                      n == 1 ? "" : "s");
    result.seconds = static_cast<double>(monotonicNs() - start) / 1e9;
    LockGuard lock(tableMu_);
    // A later resume says where its content came from.
    for (int i = 0; i < moved; ++i) regions_[spills[i].region].pausedWith = core::BackupKind::Disk;
    endLocked(busy);
    return result;
}

bool Regions::begin(const char* tag, State state, MappedArray<Work>& work, bool* busy,
                    OpResult& result) {
    const bool pausing = state == State::Resident;
    {
        LockGuard lock(tableMu_);
        const int t = tag ? findTagLocked(tag) : -1;
        if (tag && t < 0) {
            result.ok = false;
            std::snprintf(result.message, sizeof result.message, "no region has the tag '%s'", tag);
            return false;
        }
        // A resume reports what was freed while paused, whether anything is left
        // to resume or not. Taken under the same lock that marks the regions busy:
        // a free in a region being resumed waits for the resume, not a paused one.
        if (!pausing)
            for (Region& r : regions_) {
                if (!r.used || (t >= 0 && r.tag != t)) continue;
                result.freedBytes += r.freedPausedBytes;
                r.freedPausedBytes = 0;
            }
        if (!beginLocked(t, state, work, busy)) {
            endLocked(busy);
            if (tag && pausing)
                std::snprintf(
                    result.message, sizeof result.message,
                    "nothing to pause: region '%s' holds no resident memory (paused already?)",
                    tag);
            else if (tag)
                std::snprintf(result.message, sizeof result.message,
                              "nothing to resume: region '%s' is not paused", tag);
            else
                std::snprintf(result.message, sizeof result.message, "%s",
                              pausing ? "nothing to pause: no region holds resident memory"
                                      : "nothing to resume: no region is paused");
            return false;
        }
    }
    // Grouped by region (stable within one: backup offsets follow the table).
    for (size_t i = 1; i < work.size(); ++i)
        for (size_t j = i; j > 0 && work[j - 1].region > work[j].region; --j) {
            Work w = work[j];
            work[j] = work[j - 1];
            work[j - 1] = w;
        }
    return true;
}

void Regions::recordEach(const MappedArray<Work>& work, core::ControlAction action,
                         core::ControlOrigin origin, uint64_t startNs, bool ok,
                         const char* message) {
    for (size_t from = 0; from < work.size();) {
        size_t to = from;
        while (to < work.size() && work[to].region == work[from].region) ++to;
        record(&work[from], to - from, action, origin, regions_[work[from].region].pausedWith,
               startNs, ok, message);
        from = to;
    }
}

// A pause, in phases, under opMu_ throughout:
//   1. pauseCollect: the cache let go, the regions marked busy, their resident
//      allocations listed;
//   2. pauseCheck: every backup can be made, the devices are idle, a yield's
//      memory frozen;
//   3. pauseBackUp: the content out, region by region, before anything is
//      released (when 2 or 3 fails, pauseUndo leaves all as it was);
//   4. pauseRelease: the physical memory released, the allocations paused;
//   5. pauseAnswer: the backups no allocation uses let go, the answer written;
//      then one control event per region.
OpResult Regions::pause(const char* tag, core::ControlOrigin origin, core::ControlAction action,
                        const ForcedBackup* forced) {
    OpResult result;
    LockGuard op(opMu_);
    const uint64_t start = monotonicNs();
    MappedArray<Work> work;
    if (!pauseCollect(tag, work, result)) return result;  // 1.
    Failure why;
    size_t frozen = 0;  // allocations a yield froze (see pauseCheck)
    if (!pauseCheck(work, action, forced, frozen, why) || !pauseBackUp(work, why)) {  // 2., 3.
        pauseUndo(work, frozen, why, result);
        recordEach(work, action, origin, start, false, result.message);
        return result;
    }
    char firstError[256] = "";
    const size_t failed = pauseRelease(work, frozen, result, firstError, sizeof firstError);  // 4.
    pauseAnswer(work, failed, firstError, start, result);                                     // 5.
    recordEach(work, action, origin, start, true, result.message);
    return result;
}

// 1. Collect: the work, or false with the answer already in `result`.
bool Regions::pauseCollect(const char* tag, MappedArray<Work>& work, OpResult& result) {
    // Per-operation state lives in the object (under opMu_), not on the caller's
    // stack: a pause from the program's own thread must not grow its stack. No
    // region is busy yet, and none has a backup slot of this pause (pauseUndo
    // reads opOpened_ whichever phase failed).
    std::fill(opBusy_, opBusy_ + kMaxRegions, false);
    std::fill(opOpened_, opOpened_ + kMaxRegions, -1);
    std::fill(opOverBudget_, opOverBudget_ + kMaxRegions, false);
    // Memory the regions keep for reuse goes first: nothing of it to back up.
    const uint64_t uncached = dropCache(tag, result);
    result.cachedBytes = uncached;
    if (begin(tag, State::Resident, work, opBusy_, result)) return true;
    if (uncached) {
        result.changed = true;
        std::snprintf(result.message, sizeof result.message,
                      "released %llu bytes of memory kept for reuse; nothing live to pause",
                      static_cast<unsigned long long>(uncached));
    }
    return false;
}

// 2. Check: every region's backup can be made, and the devices are idle; a
// yield's memory is frozen. `frozen` counts the allocations freeze was asked for
// (the one that failed included: pauseUndo maps it back too).
bool Regions::pauseCheck(const MappedArray<Work>& work, core::ControlAction action,
                         const ForcedBackup* forced, size_t& frozen, Failure& why) {
    bool ok = true;
    for (size_t i = 0; i < work.size() && ok; ++i) {
        Region& r = regions_[work[i].region];
        const core::BackupKind kind = !forced                        ? r.backup
                                      : r.device == core::kDeviceCpu ? forced->cpu
                                                                     : forced->cuda;
        MemoryBackend* backend = backendFor(r.device);
        if (!backend->supports(kind)) {
            char device[16];
            deviceText(r.device, device, sizeof device);
            std::snprintf(why.text, sizeof why.text,
                          "region '%s' on %s holds %s memory, which %s cannot back up to %s (use "
                          "backup='disk')",
                          tags_[r.tag].name, device, device, backend->name(), backupName(kind));
            ok = false;
        }
        r.pausedWith = kind;
    }
    for (size_t i = 0; i < work.size() && ok; ++i)
        if (i == 0 || work[i].device != work[i - 1].device)
            ok = backendFor(work[i].device)->synchronize(work[i].device, why);
    // A yield comes to a program that did not ask for it: a thread of it may be
    // inside an op (the GIL released) and write on. Its writes stop here, so that
    // the backup is what the memory holds (it waits in PausedAccess until restore).
    if (action == core::ControlAction::Yield)
        for (; frozen < work.size() && ok; ++frozen)
            ok = backendFor(work[frozen].device)
                     ->freeze(work[frozen].device, work[frozen].address, work[frozen].mapped, why);
    return ok;
}

// 3. Back up: content out, region by region, before anything is released. Each
// region with a backup gets a slot (opOpened_) sized for all of its work; each
// of its allocations gets its offset in it and the slot (Work::backup).
bool Regions::pauseBackUp(MappedArray<Work>& work, Failure& why) {
    int* opened = opOpened_;  // the backup slot each region's content goes to in this pause
    bool ok = true;
    for (size_t i = 0; i < work.size() && ok; ++i) {
        Region& r = regions_[work[i].region];
        if (r.pausedWith == core::BackupKind::None) continue;
        if (i == 0 || work[i].region != work[i - 1].region) {
            uint64_t total = 0;
            for (size_t j = i; j < work.size() && work[j].region == work[i].region; ++j) {
                work[j].offset = total;
                total += work[j].mapped;
            }
            char device[16];
            deviceText(r.device, device, sizeof device);
            LockGuard lock(tableMu_);
            if (r.pausedWith == core::BackupKind::Host &&
                !fitHostBudgetLocked(work[i].region, total, why)) {
                ok = false;
                break;
            }
            MemoryBackend* host =
                r.pausedWith == core::BackupKind::Host ? backendFor(r.device) : nullptr;
            opened[work[i].region] =
                backups_.open(tags_[r.tag].name, r.device, device, host, r.pausedWith, total, why);
            if (opened[work[i].region] < 0) {
                ok = false;
                break;
            }
        }
        const int slot = opened[work[i].region];
        work[i].backup = static_cast<uint16_t>(slot + 1);
        work[i].verify = verifyAll_.load(std::memory_order_relaxed) || tags_[r.tag].verify;
        ok = copyOutChecked(*backendFor(r.device), work[i], backups_.content(slot), why);
    }
    return ok;
}

namespace {

// A checksum of one allocation, on a thread of its own (copyOutChecked).
struct ChecksumJob {
    MemoryBackend* backend;
    uint8_t device;
    uint64_t address, bytes;
    uint64_t sum = 0;
    bool ok = false;
    Failure why;
    static void* run(void* arg) {
        auto* job = static_cast<ChecksumJob*>(arg);
        job->ok =
            job->backend->checksum(job->device, job->address, job->bytes, &job->sum, job->why);
        return nullptr;
    }
};

// Below this, a thread of its own costs more than the sum it hides.
constexpr uint64_t kChecksumBesideBytes = 8ull << 20;

}  // namespace

bool Regions::copyOutChecked(MemoryBackend& backend, Work& w, Backup& to, Failure& why) {
    if (!w.verify) return backend.copyOut(w.device, w.address, w.mapped, to, w.offset, why);
    ChecksumJob job{&backend, w.device, w.address, w.mapped, 0, false, {}};
    pthread_t summer;
    const bool beside = backend.checksumsOnHost() && w.mapped >= kChecksumBesideBytes &&
                        pthread_create(&summer, nullptr, &ChecksumJob::run, &job) == 0;
    const bool copied = backend.copyOut(w.device, w.address, w.mapped, to, w.offset, why);
    if (beside)
        pthread_join(summer, nullptr);
    else if (copied)
        ChecksumJob::run(&job);
    if (!copied) return false;
    if (!job.ok) {
        why.set("region '", tags_[regions_[w.region].tag].name,
                "' cannot be verified: ", job.why.text);
        return false;
    }
    w.sum = job.sum;
    return true;
}

bool Regions::fitHostBudgetLocked(uint16_t index, uint64_t bytes, Failure& why) {
    const uint64_t budget = hostBudget();
    if (budget == UINT64_MAX) return true;
    Region& r = regions_[index];
    MemoryBackend* backend = backendFor(r.device);
    const uint64_t held = backups_.hostBytes();
    if (held <= budget && bytes <= budget - held) {
        // The pool's buffers are pinned too: it keeps no more than the room left.
        const uint64_t room = budget - held - bytes;
        if (backend->hostPoolBytes() > room) {
            const uint64_t limit = backend->hostPoolLimit();
            backend->setHostPoolLimit(room);
            backend->setHostPoolLimit(limit);
        }
        return true;
    }
    if (!backend->supports(core::BackupKind::Disk)) {
        char device[16];
        deviceText(r.device, device, sizeof device);
        std::snprintf(why.text, sizeof why.text,
                      "region '%s' on %s needs %llu bytes of host backup, beyond the host budget "
                      "of %llu bytes (%llu held), and %s memory cannot go to disk",
                      tags_[r.tag].name, device, static_cast<unsigned long long>(bytes),
                      static_cast<unsigned long long>(budget),
                      static_cast<unsigned long long>(held), backend->name());
        return false;
    }
    r.pausedWith = core::BackupKind::Disk;
    opOverBudget_[index] = true;
    return true;
}

// 2. or 3. failed: nothing was released. The frozen memory is writable again, as
// before the yield; the slots this pause opened go; the regions are not busy.
void Regions::pauseUndo(const MappedArray<Work>& work, size_t frozen, const Failure& why,
                        OpResult& result) {
    for (size_t i = 0; i < frozen; ++i) {
        Failure ignored;
        backendFor(work[i].device)->map(work[i].device, work[i].address, work[i].mapped, ignored);
    }
    {
        LockGuard lock(tableMu_);
        for (int r = 0; r < kMaxRegions; ++r)
            if (opOpened_[r] >= 0) backups_.unuse(static_cast<uint16_t>(opOpened_[r] + 1));
        endLocked(opBusy_);
    }
    result.ok = false;
    std::snprintf(result.message, sizeof result.message, "pause failed, nothing was released: %s",
                  why.text);
}

// 4. Release the physical memory; addresses stay, access is refused. Each
// allocation released is paused in the table (tableMu_ taken per allocation) and
// counted in `result`; one that is not stays resident. Returns how many were
// not, the first one's reason in firstError.
size_t Regions::pauseRelease(const MappedArray<Work>& work, size_t frozen, OpResult& result,
                             char* firstError, size_t errorSize) {
    size_t failed = 0;
    for (size_t i = 0; i < work.size(); ++i) {
        const Work& w = work[i];
        Failure unmapWhy;
        const bool released = backendFor(w.device)->unmap(w.device, w.address, w.mapped, unmapWhy);
        if (!released && i < frozen) {  // it stays resident: writable again
            Failure ignored;
            backendFor(w.device)->map(w.device, w.address, w.mapped, ignored);
        }
        LockGuard lock(tableMu_);
        Allocation& a = allocations_[w.index];
        Region& r = regions_[w.region];
        if (!released) {
            if (!failed++) std::snprintf(firstError, errorSize, "%s", unmapWhy.text);
            continue;
        }
        a.state = State::Paused;
        a.backupOffset = w.offset;
        a.backup = w.backup;
        a.checksum = w.sum;
        a.verified = w.verify;
        if (w.backup) backups_.use(w.backup - 1);
        r.residentBytes -= a.size;
        r.pausedBytes += a.size;
        ++r.pausedCount;
        a.pausedSlot = paused_.add(w.address, w.mapped, w.region);
        result.addBytes(w.device, w.mapped);
        if (r.pausedWith == core::BackupKind::Host) result.toHostBytes += w.mapped;
        if (r.pausedWith == core::BackupKind::Disk) result.toDiskBytes += w.mapped;
        if (opOverBudget_[w.region]) result.overBudgetBytes += w.mapped;
        ++result.allocations;
    }
    return failed;
}

// 5. Answer: the operation ends (its regions not busy) and `result` says what it
// did; `failed` allocations of the work could not be released (firstError: why).
void Regions::pauseAnswer(const MappedArray<Work>& work, size_t failed, const char* firstError,
                          uint64_t startNs, OpResult& result) {
    const uint64_t uncached = result.cachedBytes;  // pauseCollect's, part of result.bytes
    {
        LockGuard lock(tableMu_);
        // A slot no allocation ended up in (every unmap failed) has nothing to keep.
        for (int r = 0; r < kMaxRegions; ++r)
            if (opOpened_[r] >= 0 && backups_.users(opOpened_[r]) == 0)
                backups_.unuse(static_cast<uint16_t>(opOpened_[r] + 1));
        endLocked(opBusy_);
    }
    result.changed = result.allocations > 0 || uncached > 0;
    result.ok = failed == 0;
    for (int i = 0; i < kMaxRegions; ++i) result.regions += opBusy_[i];
    result.seconds = static_cast<double>(monotonicNs() - startNs) / 1e9;
    if (failed)
        std::snprintf(result.message, sizeof result.message,
                      "%zu of %zu allocations could not be released: %s", failed, work.size(),
                      firstError);
    else if (uncached)
        std::snprintf(
            result.message, sizeof result.message,
            "paused %llu bytes in %llu allocation%s, and let go of %llu bytes of free blocks "
            "kept for reuse (no backup needed)",
            static_cast<unsigned long long>(result.bytes - uncached),
            static_cast<unsigned long long>(result.allocations), result.allocations == 1 ? "" : "s",
            static_cast<unsigned long long>(uncached));
    else
        std::snprintf(result.message, sizeof result.message,
                      "paused %llu bytes in %llu allocation%s",
                      static_cast<unsigned long long>(result.bytes),
                      static_cast<unsigned long long>(result.allocations),
                      result.allocations == 1 ? "" : "s");
    if (result.overBudgetBytes) {
        const size_t used = std::strlen(result.message);
        std::snprintf(result.message + used, sizeof result.message - used,
                      "; %llu bytes went to disk, as host backups had reached the host budget of "
                      "%llu bytes",
                      static_cast<unsigned long long>(result.overBudgetBytes),
                      static_cast<unsigned long long>(hostBudget()));
    }
}

OpResult Regions::resume(const char* tag, core::ControlOrigin origin, core::ControlAction action) {
    OpResult result;
    result.resumed = true;
    LockGuard op(opMu_);
    const uint64_t start = monotonicNs();
    MappedArray<Work> work;
    bool* busy = opBusy_;
    std::fill(opBusy_, opBusy_ + kMaxRegions, false);
    // begin() also takes what was freed while paused (result.freedBytes).
    if (!begin(tag, State::Paused, work, busy, result)) return result;
    // Region by region: map everything back and restore the content; a region
    // that cannot be restored whole stays paused (its backup kept).
    size_t failedRegions = 0;
    bool contentLost = false;  // a backup no longer there to read
    char firstError[512] = "";
    char wrongText[512], firstWrong[512] = "";  // a verified region that came back different
    for (size_t from = 0; from < work.size();) {
        size_t to = from;
        while (to < work.size() && work[to].region == work[from].region) ++to;
        Region& r = regions_[work[from].region];
        MemoryBackend* backend = backendFor(r.device);
        const core::BackupKind kind =
            work[from].backup ? backups_.kind(work[from].backup - 1) : core::BackupKind::None;
        Failure why;
        size_t mapped = from;
        bool ok = true;
        for (; mapped < to && ok; ++mapped) {
            const Work& w = work[mapped];
            ok = w.backup ? backend->mapFilled(w.device, w.address, w.mapped,
                                               backups_.content(w.backup - 1), w.offset, why)
                          : backend->map(w.device, w.address, w.mapped, why);
        }
        if (!ok) {
            for (size_t i = from; i < mapped; ++i) {
                Failure ignored;
                backend->unmap(work[i].device, work[i].address, work[i].mapped, ignored);
            }
            for (size_t i = from; i < to; ++i)
                contentLost |= work[i].backup && !backups_.content(work[i].backup - 1).intact();
            if (!failedRegions++)
                std::snprintf(firstError, sizeof firstError, "'%s': %s", tags_[r.tag].name,
                              why.text);
            record(&work[from], to - from, action, origin, kind, start, false, why.text);
            from = to;
            continue;
        }
        // Checked before the table says resumed: a mismatch is said with the rest.
        const bool same =
            verifyResumed(&work[from], to - from, *backend, wrongText, sizeof wrongText);
        {
            LockGuard lock(tableMu_);
            for (size_t i = from; i < to; ++i) {
                Allocation& a = allocations_[work[i].index];
                a.state = State::Resident;
                a.verified = false;
                r.pausedBytes -= a.size;
                --r.pausedCount;
                r.residentBytes += a.size;
                paused_.remove(a.pausedSlot);
                backups_.unuse(a.backup);
                a.backup = 0;
                result.addBytes(work[i].device, work[i].mapped);
                ++result.allocations;
            }
        }
        ++result.regions;
        if (!same) {
            // Loud: on stderr and in the trace, whatever the caller does with the answer.
            warn(wrongText);
            if (engine_) engine_->note(core::kNoteWarning, wrongText);
            if (!result.verifyFailed) std::snprintf(firstWrong, sizeof firstWrong, "%s", wrongText);
            result.verifyFailed = true;
            record(&work[from], to - from, action, origin, kind, start, false, wrongText);
            from = to;
            continue;
        }
        char message[96];
        std::snprintf(message, sizeof message, "resumed %zu allocations", to - from);
        record(&work[from], to - from, action, origin, kind, start, true, message);
        from = to;
    }
    {
        LockGuard lock(tableMu_);
        endLocked(busy);
    }
    result.changed = result.allocations > 0;
    result.ok = failedRegions == 0 && !result.verifyFailed;
    result.seconds = static_cast<double>(monotonicNs() - start) / 1e9;
    if (result.verifyFailed)
        std::snprintf(result.message, sizeof result.message, "%s", firstWrong);
    else if (failedRegions)
        std::snprintf(result.message, sizeof result.message,
                      "%zu region(s) could not be resumed and stay paused%s: %s", failedRegions,
                      contentLost ? "" : ", their content kept", firstError);
    else
        std::snprintf(result.message, sizeof result.message,
                      "resumed %llu bytes in %llu allocation%s",
                      static_cast<unsigned long long>(result.bytes),
                      static_cast<unsigned long long>(result.allocations),
                      result.allocations == 1 ? "" : "s");
    return result;
}

bool Regions::verifyResumed(const Work* first, size_t count, MemoryBackend& backend, char* message,
                            size_t size) {
    size_t wrong = 0, verified = 0;
    const Work* firstWrong = nullptr;
    uint64_t now = 0, nowOfFirst = 0;
    Failure why;
    bool checked = true;
    for (size_t i = 0; i < count; ++i) {
        if (!first[i].verify) continue;
        ++verified;
        if (!backend.checksum(first[i].device, first[i].address, first[i].mapped, &now, why)) {
            checked = false;
            break;
        }
        if (now == first[i].sum) continue;
        if (!wrong++) {
            firstWrong = &first[i];
            nowOfFirst = now;
        }
    }
    if (checked && wrong == 0) return true;
    const Region& r = regions_[first[0].region];
    char device[16];
    deviceText(r.device, device, sizeof device);
    if (!checked) {
        std::snprintf(message, size,
                      "verify: region '%s' on %s is resumed, but its content could not be "
                      "checked: %s",
                      tags_[r.tag].name, device, why.text);
        return false;
    }
    std::snprintf(message, size,
                  "verify: region '%s' on %s came back different from what was paused: %zu of %zu "
                  "allocations, the first at 0x%llx (%llu bytes; checksum %016llx at the pause, "
                  "%016llx after the resume); it is resumed with that content",
                  tags_[r.tag].name, device, wrong, verified,
                  static_cast<unsigned long long>(firstWrong->address),
                  static_cast<unsigned long long>(firstWrong->mapped),
                  static_cast<unsigned long long>(firstWrong->sum),
                  static_cast<unsigned long long>(nowOfFirst));
    return false;
}

size_t Regions::describe(char* out, size_t size) {
    LockGuard lock(tableMu_);
    JsonWriter j(out, size);
    j.open('[');
    for (int i = 0; i < kMaxRegions; ++i) {
        const Region& r = regions_[i];
        if (!r.used || r.inherited) continue;
        char device[16];
        deviceText(r.device, device, sizeof device);
        const char* state = r.pausedBytes == 0     ? "resident"
                            : r.residentBytes == 0 ? "paused"
                                                   : "partly paused";
        j.open('{');
        j.key("tag").value(tags_[r.tag].name);
        j.key("device").value(device);
        j.key("bytes").value(r.residentBytes + r.pausedBytes);
        j.key("resident_bytes").value(r.residentBytes);
        j.key("paused_bytes").value(r.pausedBytes);
        j.key("state").value(state);
        j.key("backup").value(backupName(r.backup));
        j.close('}');
    }
    j.close(']');
    return j.truncated() ? 0 : j.length();
}

void Regions::totals(uint8_t device, uint64_t* resident, uint64_t* paused) {
    LockGuard lock(tableMu_);
    *resident = *paused = 0;
    for (const Region& r : regions_) {
        if (!r.used || r.device != device) continue;
        *resident += r.residentBytes;
        *paused += r.pausedBytes;
    }
}

bool Regions::heldOnDevice(uint8_t device, uint64_t* inRegions, uint64_t* outsideRegions) {
    if (!engine_) return false;
    const uint64_t live = engine_->liveBytesOn(device);
    uint64_t paused = 0;
    totals(device, inRegions, &paused);
    *outsideRegions = live > *inRegions + paused ? live - *inRegions - paused : 0;
    return true;
}

// ---- faults ---------------------------------------------------------------------------

bool Regions::pausedAt(uint64_t address, char* tag, size_t tagSize) const {
    uint16_t region;
    if (!paused_.find(address, &region)) return false;
    const Region& r = regions_[region];
    // No snprintf here: this runs in a signal handler.
    size_t n = 0;
    for (const char* c = tags_[r.tag].name; *c && n + 1 < tagSize; ++c) tag[n++] = *c;
    if (tagSize) tag[n] = '\0';
    return true;
}

}  // namespace memtool::collectors::control
