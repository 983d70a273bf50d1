#pragma once
// The pausable-region cases every device backend passes with the same figures
// (CudaRegionsTest.cpp over the CUDA VMM backend and its fake driver,
// AclRegionsTest.cpp over the ACL VMM backend and its fake runtime): addresses
// kept, 2 MiB granularity rounding, device memory given back and taken again,
// host and disk backups round trip, failures leave regions paused.
//
// A fixture F is a DeviceRegionFixture<Backend, Fake>; Fake gives the double's
// counters: usedBytes() (device memory held), setCapacity(bytes) (0: no limit),
// hostBytes() (pinned host memory held).

#include <gtest/gtest.h>

#include <cstdint>
#include <string>
#include <vector>

#include "collectors/control/CpuPagesBackend.h"
#include "collectors/control/Regions.h"
#include "tests/TempDir.h"

namespace memtool::test_support {

using collectors::control::Failure;
using collectors::control::OpResult;
using collectors::control::Regions;

inline constexpr uint64_t kRegionMiB = 1 << 20;

template <class Backend, class Fake>
struct DeviceRegionFixture {
    collectors::control::CpuPagesBackend cpu;
    Backend backend;
    Regions* regions = new Regions();
    std::string dir;
    uint8_t device;
    uint64_t alignment;
    Fake& fake;
    // `attach` hands the backend to the regions (setCudaBackend, setNpuBackend).
    DeviceRegionFixture(uint8_t deviceCode, uint64_t align, Fake& f,
                        void (Regions::*attach)(collectors::control::MemoryBackend*,
                                                bool (*)(Failure&)))
        : device(deviceCode), alignment(align), fake(f) {
        dir = makeTempDir("memtool-device-regions");
        Failure why;
        EXPECT_TRUE(backend.load(why)) << why.text;
        regions->setCpuBackend(&cpu);
        (regions->*attach)(&backend, nullptr);
        regions->setBackupDirectory(dir.c_str());
    }
    ~DeviceRegionFixture() { delete regions; }
    DeviceRegionFixture(const DeviceRegionFixture&) = delete;
    DeviceRegionFixture& operator=(const DeviceRegionFixture&) = delete;

    uint8_t* allocate(const char* tag, core::BackupKind backup, uint64_t bytes, uint8_t seed) {
        Failure why;
        EXPECT_TRUE(regions->enter(tag, backup, why)) << why.text;
        auto* p = static_cast<uint8_t*>(regions->serve(device, bytes, alignment, why));
        regions->exit();
        EXPECT_NE(p, nullptr) << why.text;
        if (p)
            for (uint64_t i = 0; i < bytes; i += 4096) p[i] = static_cast<uint8_t>(seed + i / 4096);
        return p;
    }
    static bool holds(const uint8_t* p, uint64_t bytes, uint8_t seed) {
        for (uint64_t i = 0; i < bytes; i += 4096)
            if (p[i] != static_cast<uint8_t>(seed + i / 4096)) return false;
        return true;
    }
    bool pause(const char* tag) { return regions->pause(tag, core::ControlOrigin::Api).ok; }
    bool resume(const char* tag) { return regions->resume(tag, core::ControlOrigin::Api).ok; }
    bool release(const void* p) { return regions->release(reinterpret_cast<uint64_t>(p)); }
};

namespace region_cases {

constexpr uint64_t MiB = kRegionMiB;

template <class F>
void pauseGivesMemoryBackAndResumeRestoresItAtTheSameAddress(F& f) {
    const size_t before = f.fake.usedBytes();
    uint8_t* kv = f.allocate("kv", core::BackupKind::Host, 5 * MiB + 1, 7);
    ASSERT_NE(kv, nullptr);
    EXPECT_EQ(f.fake.usedBytes() - before, 6 * MiB);  // rounded up to the 2 MiB granularity
    OpResult paused = f.regions->pause("kv", core::ControlOrigin::Api);
    ASSERT_TRUE(paused.ok) << paused.message;
    EXPECT_EQ(paused.bytes, 6 * MiB);
    EXPECT_EQ(f.fake.usedBytes(), before);  // every byte of it given back to the device
    // Its content, read from the host backup while paused (memtool.read_backup).
    std::vector<uint8_t> copy(3 * MiB);
    Failure why;
    ASSERT_TRUE(
        f.regions->readBackup(reinterpret_cast<uint64_t>(kv) + MiB, copy.data(), copy.size(), why))
        << why.text;
    bool same = true;
    for (uint64_t i = 0; i < copy.size(); i += 4096)
        same &= copy[i] == static_cast<uint8_t>(7 + (MiB + i) / 4096);
    EXPECT_TRUE(same);
    EXPECT_FALSE(f.regions->readBackup(reinterpret_cast<uint64_t>(kv) + 4 * MiB, copy.data(),
                                       copy.size(), why));
    EXPECT_STREQ(why.text, "the range runs past the end of its allocation in region 'kv'");
    OpResult resumed = f.regions->resume("kv", core::ControlOrigin::Api);
    ASSERT_TRUE(resumed.ok) << resumed.message;
    EXPECT_EQ(f.fake.usedBytes() - before, 6 * MiB);
    EXPECT_TRUE(F::holds(kv, 5 * MiB + 1, 7));  // the same address, the same content
    EXPECT_TRUE(f.release(kv));
    EXPECT_EQ(f.fake.usedBytes(), before);
}

// `deviceName` as the refusal names it ("cuda:0").
template <class F>
void aMemoryMarginRefusesWhatWouldLeaveLessFree(F& f, const char* deviceName) {
    const size_t used = f.fake.usedBytes();
    f.fake.setCapacity(used + 16 * MiB);
    f.regions->setMemoryMargin(8 * MiB);
    uint8_t* first = f.allocate("m", core::BackupKind::None, 6 * MiB, 1);  // leaves 10 MiB
    ASSERT_NE(first, nullptr);
    Failure why;
    ASSERT_TRUE(f.regions->enter("m", core::BackupKind::None, why));
    EXPECT_EQ(f.regions->serve(f.device, 4 * MiB, f.alignment, why), nullptr);  // would leave 6
    EXPECT_EQ(std::string(why.text), std::string("a region allocation of 4194304 B on ") +
                                         deviceName +
                                         " is refused: 10485760 B are free, and the memory "
                                         "margin keeps 8388608 B free");
    EXPECT_EQ(f.fake.usedBytes(), used + 6 * MiB);
    f.regions->setMemoryMargin(0);
    void* second = f.regions->serve(f.device, 4 * MiB, f.alignment, why);
    f.regions->exit();
    EXPECT_NE(second, nullptr) << why.text;
    f.release(first);
    f.release(second);
    f.fake.setCapacity(0);
}

// Larger than two staging chunks of `chunkBytes`: the streamed copy runs its whole course.
template <class F>
void diskBackupsStreamInChunksAndComeBackWhole(F& f, uint64_t chunkBytes) {
    const uint64_t bytes = 2 * chunkBytes + 6 * MiB;
    uint8_t* w = f.allocate("weights", core::BackupKind::Disk, bytes, 3);
    ASSERT_NE(w, nullptr);
    ASSERT_TRUE(f.pause("weights"));
    ASSERT_TRUE(f.resume("weights"));
    EXPECT_TRUE(F::holds(w, bytes, 3));
    f.release(w);
}

// `outOfMemory`: the backend's reason when the device has no room.
template <class F>
void aResumeWithoutRoomKeepsTheRegionPausedAndItsContent(F& f, const char* outOfMemory) {
    uint8_t* kv = f.allocate("kv2", core::BackupKind::Host, 4 * MiB, 11);
    ASSERT_TRUE(f.pause("kv2"));
    f.fake.setCapacity(f.fake.usedBytes() + 2 * MiB);  // someone else took the device meanwhile
    OpResult r = f.regions->resume("kv2", core::ControlOrigin::Api);
    EXPECT_FALSE(r.ok);
    EXPECT_EQ(std::string(r.message),
              std::string("1 region(s) could not be resumed and stay paused, their content kept: "
                          "'kv2': ") +
                  outOfMemory);
    f.fake.setCapacity(0);
    ASSERT_TRUE(f.resume("kv2"));
    EXPECT_TRUE(F::holds(kv, 4 * MiB, 11));
    f.release(kv);
}

template <class F>
void backupNoneReleasesWithoutCopying(F& f) {
    const size_t before = f.fake.usedBytes();
    uint8_t* scratch = f.allocate("scratch", core::BackupKind::None, 2 * MiB, 1);
    ASSERT_TRUE(f.regions->pause("scratch", core::ControlOrigin::Ctl).ok);
    EXPECT_EQ(f.fake.usedBytes(), before);
    ASSERT_TRUE(f.regions->resume("scratch", core::ControlOrigin::Ctl).ok);
    EXPECT_EQ(scratch[0], 0);  // undefined after resume; this double gives fresh memory
    f.release(scratch);
}

template <class F>
void freeingWhilePausedReleasesTheAddresses(F& f) {
    const size_t before = f.fake.usedBytes();
    uint8_t* a = f.allocate("f", core::BackupKind::Host, 2 * MiB, 1);
    ASSERT_TRUE(f.pause("f"));
    EXPECT_TRUE(f.release(a));
    EXPECT_EQ(f.fake.usedBytes(), before);
    EXPECT_FALSE(f.regions->resume("f", core::ControlOrigin::Api).changed);
}

// torch_memory_saver's cpu_backup.py and disk_backup.py examples: the default tag
// entered with a host backup, then with a disk one. Each allocation keeps its own
// kind through a pause of the tag, and both come back. `stagingBytes`: the
// pinned memory the disk backup streams through, held while paused.
template <class F>
void oneTagWithAHostAndADiskBackupBringsBothBack(F& f, uint64_t stagingBytes) {
    const size_t before = f.fake.usedBytes(), hostBefore = f.fake.hostBytes();
    uint8_t* host = f.allocate("default", core::BackupKind::Host, 2 * MiB, 3);
    uint8_t* disk = f.allocate("default", core::BackupKind::Disk, 4 * MiB, 5);
    ASSERT_NE(host, nullptr);
    ASSERT_NE(disk, nullptr);
    OpResult paused = f.regions->pause("default", core::ControlOrigin::Api);
    ASSERT_TRUE(paused.ok) << paused.message;
    EXPECT_EQ(paused.bytes, 6 * MiB);
    EXPECT_EQ(paused.regions, 2u);
    EXPECT_EQ(f.fake.usedBytes(), before);
    EXPECT_EQ(f.fake.hostBytes() - hostBefore, 2 * MiB + stagingBytes);
    OpResult resumed = f.regions->resume("default", core::ControlOrigin::Api);
    ASSERT_TRUE(resumed.ok) << resumed.message;
    EXPECT_TRUE(F::holds(host, 2 * MiB, 3));
    EXPECT_TRUE(F::holds(disk, 4 * MiB, 5));
    f.release(host);
    f.release(disk);
    EXPECT_EQ(f.fake.usedBytes(), before);
}

// A device-only region (the torch_memory_saver shim's) serves device memory as
// any region does, and no CPU memory.
template <class F>
void aDeviceOnlyRegionServesDeviceMemory(F& f) {
    Failure why;
    ASSERT_TRUE(f.regions->enter("dev", core::BackupKind::Host, why, true)) << why.text;
    EXPECT_FALSE(f.regions->threadInRegionForCpu(1 << 20));
    auto* p = static_cast<uint8_t*>(f.regions->serve(f.device, MiB, f.alignment, why));
    f.regions->exit();
    ASSERT_NE(p, nullptr) << why.text;
    p[0] = 42;
    ASSERT_TRUE(f.pause("dev"));
    ASSERT_TRUE(f.resume("dev"));
    EXPECT_EQ(p[0], 42);
    f.release(p);
}

// A policy's "spill host backups to disk": every paused region's host backup
// goes to a disk backup, oldest first, and the pinned memory goes with it; reads
// and resumes then come from disk, whole.
template <class F>
void spillMovesHostBackupsToDiskAndLetsThePinnedMemoryGo(F& f) {
    uint8_t* a = f.allocate("sa", core::BackupKind::Host, 4 * MiB, 5);
    uint8_t* b = f.allocate("sb", core::BackupKind::Host, 2 * MiB, 9);
    ASSERT_TRUE(a && b);
    const size_t before = f.fake.hostBytes();
    EXPECT_STREQ(f.regions->spillHostBackups().message, "nothing to spill: no region is paused");
    ASSERT_TRUE(f.pause("sa"));
    ASSERT_TRUE(f.pause("sb"));
    EXPECT_EQ(f.fake.hostBytes() - before, 6 * MiB);
    const OpResult spilled = f.regions->spillHostBackups();
    ASSERT_TRUE(spilled.ok) << spilled.message;
    EXPECT_TRUE(spilled.changed);
    EXPECT_EQ(spilled.bytes, 6 * MiB);
    EXPECT_EQ(spilled.regions, 2u);
    EXPECT_EQ(spilled.allocations, 2u);
    EXPECT_STREQ(spilled.message, "moved 2 host backups to disk");
    EXPECT_EQ(f.fake.hostBytes(), before);  // no pinned memory left, none kept for later
    EXPECT_EQ(f.backend.hostPoolBytes(), 0u);
    EXPECT_STREQ(f.regions->spillHostBackups().message, "nothing to spill: no host backup");
    std::vector<uint8_t> copy(MiB);
    Failure why;
    ASSERT_TRUE(
        f.regions->readBackup(reinterpret_cast<uint64_t>(b) + MiB, copy.data(), copy.size(), why))
        << why.text;
    EXPECT_EQ(copy[0], static_cast<uint8_t>(9 + MiB / 4096));
    ASSERT_TRUE(f.resume("sa"));
    ASSERT_TRUE(f.resume("sb"));
    EXPECT_TRUE(F::holds(a, 4 * MiB, 5));
    EXPECT_TRUE(F::holds(b, 2 * MiB, 9));
    EXPECT_TRUE(f.release(a));
    EXPECT_TRUE(f.release(b));
}

// A host budget: a region whose host backup would take the pinned memory past
// it goes to disk, the answer saying how much; the pool of pinned memory a
// resume keeps is trimmed to leave room, so that what is pinned stays within it.
template <class F>
void aHostBudgetSendsWhatItCannotHoldToDisk(F& f) {
    uint8_t* a = f.allocate("ha", core::BackupKind::Host, 4 * MiB, 3);
    uint8_t* b = f.allocate("hb", core::BackupKind::Host, 2 * MiB, 7);
    uint8_t* warm = f.allocate("hwarm", core::BackupKind::Disk, 2 * MiB, 1);
    ASSERT_TRUE(a && b && warm);
    // Disk copies stream through pinned staging buffers the backend makes once
    // and keeps; the budget is for backups, so they are made before counting.
    ASSERT_TRUE(f.pause("hwarm") && f.resume("hwarm"));
    EXPECT_TRUE(f.release(warm));
    const size_t before = f.fake.hostBytes();
    f.regions->setHostBudget(5 * MiB);
    const OpResult first = f.regions->pause("ha", core::ControlOrigin::Api);
    ASSERT_TRUE(first.ok) << first.message;
    EXPECT_EQ(first.toHostBytes, 4 * MiB);
    EXPECT_EQ(first.toDiskBytes, 0u);
    EXPECT_STREQ(first.message, "paused 4194304 bytes in 1 allocation");
    const OpResult second = f.regions->pause("hb", core::ControlOrigin::Api);
    ASSERT_TRUE(second.ok) << second.message;
    EXPECT_EQ(second.toHostBytes, 0u);
    EXPECT_EQ(second.toDiskBytes, 2 * MiB);
    EXPECT_EQ(second.overBudgetBytes, 2 * MiB);
    EXPECT_STREQ(second.message,
                 "paused 2097152 bytes in 1 allocation; 2097152 bytes went to disk, as host "
                 "backups had reached the host budget of 5242880 bytes");
    EXPECT_EQ(f.fake.hostBytes() - before, 4 * MiB);
    char answer[1024];
    second.toJson("pause", answer, sizeof answer);
    EXPECT_NE(std::string(answer).find(
                  "\"to_host_bytes\":0,\"to_disk_bytes\":2097152,\"over_budget_bytes\":2097152"),
              std::string::npos)
        << answer;
    ASSERT_TRUE(f.resume("ha"));
    ASSERT_TRUE(f.resume("hb"));
    EXPECT_TRUE(F::holds(a, 4 * MiB, 3));
    EXPECT_TRUE(F::holds(b, 2 * MiB, 7));
    // A pool may keep ha's 4 MiB of pinned memory; hb's 2 MiB fit only once it
    // is let go, so that 2 MiB are pinned, not 6.
    const OpResult third = f.regions->pause("hb", core::ControlOrigin::Api);
    ASSERT_TRUE(third.ok) << third.message;
    EXPECT_EQ(third.toHostBytes, 2 * MiB);
    EXPECT_EQ(f.fake.hostBytes() - before, 2 * MiB);
    ASSERT_TRUE(f.resume("hb"));
    EXPECT_TRUE(F::holds(b, 2 * MiB, 7));
    EXPECT_TRUE(f.release(a));
    EXPECT_TRUE(f.release(b));
}

}  // namespace region_cases
}  // namespace memtool::test_support
