// Pausable Ascend NPU regions through the real ACL VMM backend, against a test
// double of the runtime whose device memory is host memory
// (tests/fakes/FakeAscendCl.cpp): the CUDA backend's region tests
// (CudaRegionsTest.cpp) with the same figures, on npu:0: addresses kept,
// granularity rounding, device memory given back and taken again, host and disk
// backups round trip, failures leave regions paused.
#include <dlfcn.h>
#include <gtest/gtest.h>

#include <cstdlib>
#include <string>
#include <vector>

#include "collectors/ascend/AclDecls.h"
#include "collectors/control/AclVmmBackend.h"
#include "collectors/control/CpuPagesBackend.h"
#include "collectors/control/Regions.h"
#include "tests/TempDir.h"

using namespace memtool;
using namespace memtool::collectors::control;

namespace {

constexpr uint64_t kMiB = 1 << 20;

struct FakeAcl {
    size_t (*usedBytes)() = nullptr;
    void (*setCapacity)(size_t) = nullptr;
    size_t (*hostBytes)() = nullptr;
    decltype(&::aclrtMemcpy) memcpy = nullptr;
    FakeAcl() {
        setenv("MEMTOOL_ACL_LIBRARY", FAKE_ASCEND_CL, 1);
        void* lib = dlopen(FAKE_ASCEND_CL, RTLD_NOW | RTLD_LOCAL);
        usedBytes = reinterpret_cast<size_t (*)()>(dlsym(lib, "fake_npu_used_bytes"));
        setCapacity = reinterpret_cast<void (*)(size_t)>(dlsym(lib, "fake_npu_set_capacity"));
        hostBytes = reinterpret_cast<size_t (*)()>(dlsym(lib, "fake_npu_host_bytes"));
        memcpy = reinterpret_cast<decltype(&::aclrtMemcpy)>(dlsym(lib, "aclrtMemcpy"));
    }
};

FakeAcl& acl() {
    static FakeAcl a;
    return a;
}

struct NpuFixture {
    CpuPagesBackend cpu;
    AclVmmBackend npu;
    Regions* regions = new Regions();
    std::string dir;
    const uint8_t npu0 = core::npuDeviceOrFirst(0);
    NpuFixture() {
        acl();
        dir = memtool::test_support::makeTempDir("memtool-npu-regions");
        Failure why;
        EXPECT_TRUE(npu.load(why)) << why.text;
        regions->setCpuBackend(&cpu);
        regions->setNpuBackend(&npu);
        regions->setBackupDirectory(dir.c_str());
    }
    ~NpuFixture() { delete regions; }
    uint8_t* allocate(const char* tag, core::BackupKind backup, uint64_t bytes, uint8_t seed) {
        Failure why;
        EXPECT_TRUE(regions->enter(tag, backup, why)) << why.text;
        auto* p = static_cast<uint8_t*>(regions->serve(npu0, bytes, 512, why));
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
};

}  // namespace

TEST(AclRegions, PauseGivesNpuMemoryBackAndResumeRestoresItAtTheSameAddress) {
    NpuFixture f;
    const size_t before = acl().usedBytes();
    uint8_t* kv = f.allocate("kv", core::BackupKind::Host, 5 * kMiB + 1, 7);
    ASSERT_NE(kv, nullptr);
    EXPECT_EQ(acl().usedBytes() - before, 6 * kMiB);  // rounded up to the 2 MiB granularity
    OpResult paused = f.regions->pause("kv", core::ControlOrigin::Api);
    ASSERT_TRUE(paused.ok) << paused.message;
    EXPECT_EQ(paused.bytes, 6 * kMiB);
    EXPECT_EQ(acl().usedBytes(), before);  // every byte of it given back to the device
    // The device itself refuses the paused range: nothing is mapped there.
    uint8_t byte = 0;
    EXPECT_EQ(acl().memcpy(&byte, 1, kv, 1, ACL_MEMCPY_DEVICE_TO_HOST), ACL_ERROR_RT_PARAM_INVALID);
    // Its content, read from the host backup while paused (memtool.read_backup).
    std::vector<uint8_t> copy(3 * kMiB);
    Failure why;
    ASSERT_TRUE(
        f.regions->readBackup(reinterpret_cast<uint64_t>(kv) + kMiB, copy.data(), copy.size(), why))
        << why.text;
    bool same = true;
    for (uint64_t i = 0; i < copy.size(); i += 4096)
        same &= copy[i] == static_cast<uint8_t>(7 + (kMiB + i) / 4096);
    EXPECT_TRUE(same);
    EXPECT_FALSE(f.regions->readBackup(reinterpret_cast<uint64_t>(kv) + 4 * kMiB, copy.data(),
                                       copy.size(), why));
    EXPECT_STREQ(why.text, "the range runs past the end of its allocation in region 'kv'");
    OpResult resumed = f.regions->resume("kv", core::ControlOrigin::Api);
    ASSERT_TRUE(resumed.ok) << resumed.message;
    EXPECT_EQ(acl().usedBytes() - before, 6 * kMiB);
    EXPECT_TRUE(NpuFixture::holds(kv, 5 * kMiB + 1, 7));  // the same address, the same content
    EXPECT_EQ(acl().memcpy(&byte, 1, kv, 1, ACL_MEMCPY_DEVICE_TO_HOST), ACL_SUCCESS);
    EXPECT_EQ(byte, 7);
    EXPECT_TRUE(f.regions->release(reinterpret_cast<uint64_t>(kv)));
    EXPECT_EQ(acl().usedBytes(), before);
}

TEST(AclRegions, TheRegionIsDeclaredOnNpu0AndItsTotalsSayWhatIsPaused) {
    NpuFixture f;
    uint8_t* kv = f.allocate("kv", core::BackupKind::Host, 3 * kMiB, 1);
    ASSERT_NE(kv, nullptr);
    uint64_t resident = 0, paused = 0;
    f.regions->totals(f.npu0, &resident, &paused);
    EXPECT_EQ(resident, 3 * kMiB);  // live bytes, as asked (4 MiB mapped)
    EXPECT_EQ(paused, 0u);
    ASSERT_TRUE(f.regions->pause("kv", core::ControlOrigin::Api).ok);
    f.regions->totals(f.npu0, &resident, &paused);
    EXPECT_EQ(resident, 0u);
    EXPECT_EQ(paused, 3 * kMiB);
    char json[2048];
    f.regions->describe(json, sizeof json);
    EXPECT_NE(std::string(json).find("\"device\":\"npu:0\""), std::string::npos) << json;
    ASSERT_TRUE(f.regions->resume("kv", core::ControlOrigin::Api).ok);
    f.regions->release(reinterpret_cast<uint64_t>(kv));
}

TEST(AclRegions, AMemoryMarginRefusesWhatWouldLeaveLessFree) {
    NpuFixture f;
    const size_t used = acl().usedBytes();
    acl().setCapacity(used + 16 * kMiB);
    f.regions->setMemoryMargin(8 * kMiB);
    uint8_t* first = f.allocate("m", core::BackupKind::None, 6 * kMiB, 1);  // leaves 10 MiB
    ASSERT_NE(first, nullptr);
    Failure why;
    ASSERT_TRUE(f.regions->enter("m", core::BackupKind::None, why));
    EXPECT_EQ(f.regions->serve(f.npu0, 4 * kMiB, 512, why), nullptr);  // would leave 6 MiB
    EXPECT_STREQ(why.text,
                 "a region allocation of 4194304 B on npu:0 is refused: 10485760 B are free, and "
                 "the memory margin keeps 8388608 B free");
    EXPECT_EQ(acl().usedBytes(), used + 6 * kMiB);
    f.regions->setMemoryMargin(0);
    void* second = f.regions->serve(f.npu0, 4 * kMiB, 512, why);
    f.regions->exit();
    EXPECT_NE(second, nullptr) << why.text;
    f.regions->release(reinterpret_cast<uint64_t>(first));
    f.regions->release(reinterpret_cast<uint64_t>(second));
    acl().setCapacity(0);
}

TEST(AclRegions, DiskBackupsStreamInChunksAndComeBackWhole) {
    NpuFixture f;
    // Larger than two staging chunks: the chunked copy runs its whole course.
    const uint64_t bytes = 2 * AclVmmBackend::kChunkBytes + 6 * kMiB;
    uint8_t* w = f.allocate("weights", core::BackupKind::Disk, bytes, 3);
    ASSERT_NE(w, nullptr);
    ASSERT_TRUE(f.regions->pause("weights", core::ControlOrigin::Api).ok);
    ASSERT_TRUE(f.regions->resume("weights", core::ControlOrigin::Api).ok);
    EXPECT_TRUE(NpuFixture::holds(w, bytes, 3));
    f.regions->release(reinterpret_cast<uint64_t>(w));
}

TEST(AclRegions, AResumeWithoutRoomOnTheDeviceKeepsTheRegionPausedAndItsContent) {
    NpuFixture f;
    uint8_t* kv = f.allocate("kv2", core::BackupKind::Host, 4 * kMiB, 11);
    ASSERT_TRUE(f.regions->pause("kv2", core::ControlOrigin::Api).ok);
    acl().setCapacity(acl().usedBytes() + 2 * kMiB);  // someone else took the device meanwhile
    OpResult r = f.regions->resume("kv2", core::ControlOrigin::Api);
    EXPECT_FALSE(r.ok);
    EXPECT_STREQ(r.message,
                 "1 region(s) could not be resumed and stay paused, their content kept: 'kv2': "
                 "aclrtMallocPhysical: out of device memory (aclError 207001)");
    acl().setCapacity(0);
    ASSERT_TRUE(f.regions->resume("kv2", core::ControlOrigin::Api).ok);
    EXPECT_TRUE(NpuFixture::holds(kv, 4 * kMiB, 11));
    f.regions->release(reinterpret_cast<uint64_t>(kv));
}

TEST(AclRegions, BackupNoneReleasesWithoutCopying) {
    NpuFixture f;
    const size_t before = acl().usedBytes();
    uint8_t* scratch = f.allocate("scratch", core::BackupKind::None, 2 * kMiB, 1);
    OpResult r = f.regions->pause("scratch", core::ControlOrigin::Ctl);
    ASSERT_TRUE(r.ok);
    EXPECT_EQ(acl().usedBytes(), before);
    ASSERT_TRUE(f.regions->resume("scratch", core::ControlOrigin::Ctl).ok);
    EXPECT_EQ(scratch[0], 0);  // undefined after resume; this runtime gives fresh memory
    f.regions->release(reinterpret_cast<uint64_t>(scratch));
}

TEST(AclRegions, FreeingWhilePausedReleasesTheAddresses) {
    NpuFixture f;
    const size_t before = acl().usedBytes();
    uint8_t* a = f.allocate("f", core::BackupKind::Host, 2 * kMiB, 1);
    ASSERT_TRUE(f.regions->pause("f", core::ControlOrigin::Api).ok);
    EXPECT_TRUE(f.regions->release(reinterpret_cast<uint64_t>(a)));
    EXPECT_EQ(acl().usedBytes(), before);
    EXPECT_FALSE(f.regions->resume("f", core::ControlOrigin::Api).changed);
}

// torch_memory_saver's cpu_backup.py and disk_backup.py examples on an NPU: the
// default tag entered with a host backup, then with a disk one; both come back.
TEST(AclRegions, OneTagWithAHostAndADiskBackupBringsBothBack) {
    NpuFixture f;
    const size_t before = acl().usedBytes(), hostBefore = acl().hostBytes();
    uint8_t* host = f.allocate("default", core::BackupKind::Host, 2 * kMiB, 3);
    uint8_t* disk = f.allocate("default", core::BackupKind::Disk, 4 * kMiB, 5);
    ASSERT_NE(host, nullptr);
    ASSERT_NE(disk, nullptr);
    OpResult paused = f.regions->pause("default", core::ControlOrigin::Api);
    ASSERT_TRUE(paused.ok) << paused.message;
    EXPECT_EQ(paused.bytes, 6 * kMiB);
    EXPECT_EQ(paused.regions, 2u);
    EXPECT_EQ(acl().usedBytes(), before);
    // Pinned: the host backup, and the buffer the disk one streamed through (the
    // backend's, kept for the next).
    const size_t staging = AclVmmBackend::kChunkBytes;
    EXPECT_EQ(acl().hostBytes() - hostBefore, 2 * kMiB + staging);
    OpResult resumed = f.regions->resume("default", core::ControlOrigin::Api);
    ASSERT_TRUE(resumed.ok) << resumed.message;
    EXPECT_EQ(acl().hostBytes() - hostBefore, staging);  // the host backup's memory freed
    EXPECT_TRUE(NpuFixture::holds(host, 2 * kMiB, 3));
    EXPECT_TRUE(NpuFixture::holds(disk, 4 * kMiB, 5));
    f.regions->release(reinterpret_cast<uint64_t>(host));
    f.regions->release(reinterpret_cast<uint64_t>(disk));
    EXPECT_EQ(acl().usedBytes(), before);
}

// A device-only region (the torch_memory_saver shim's) serves NPU memory as any
// region does.
TEST(AclRegions, ADeviceOnlyRegionServesNpuMemory) {
    NpuFixture f;
    Failure why;
    ASSERT_TRUE(f.regions->enter("npu", core::BackupKind::Host, why, true)) << why.text;
    EXPECT_FALSE(f.regions->threadInRegionForCpu(1 << 20));
    auto* p = static_cast<uint8_t*>(f.regions->serve(f.npu0, kMiB, 512, why));
    f.regions->exit();
    ASSERT_NE(p, nullptr) << why.text;
    p[0] = 42;
    ASSERT_TRUE(f.regions->pause("npu", core::ControlOrigin::Api).ok);
    ASSERT_TRUE(f.regions->resume("npu", core::ControlOrigin::Api).ok);
    EXPECT_EQ(p[0], 42);
    f.regions->release(reinterpret_cast<uint64_t>(p));
}

// A policy's "spill host backups to disk", on an NPU's regions.
TEST(AclRegions, SpillMovesHostBackupsToDiskAndLetsThePinnedMemoryGo) {
    NpuFixture f;
    uint8_t* a = f.allocate("sa", core::BackupKind::Host, 4 * kMiB, 5);
    uint8_t* b = f.allocate("sb", core::BackupKind::Host, 2 * kMiB, 9);
    ASSERT_TRUE(a && b);
    const size_t before = acl().hostBytes();
    ASSERT_TRUE(f.regions->pause("sa", core::ControlOrigin::Api).ok);
    ASSERT_TRUE(f.regions->pause("sb", core::ControlOrigin::Api).ok);
    EXPECT_EQ(acl().hostBytes() - before, 6 * kMiB);
    const OpResult spilled = f.regions->spillHostBackups();
    ASSERT_TRUE(spilled.ok) << spilled.message;
    EXPECT_EQ(spilled.bytes, 6 * kMiB);
    EXPECT_EQ(spilled.regions, 2u);
    EXPECT_STREQ(spilled.message, "moved 2 host backups to disk");
    EXPECT_EQ(acl().hostBytes(), before);
    ASSERT_TRUE(f.regions->resume("sa", core::ControlOrigin::Api).ok);
    ASSERT_TRUE(f.regions->resume("sb", core::ControlOrigin::Api).ok);
    EXPECT_TRUE(NpuFixture::holds(a, 4 * kMiB, 5));
    EXPECT_TRUE(NpuFixture::holds(b, 2 * kMiB, 9));
    EXPECT_TRUE(f.regions->release(reinterpret_cast<uint64_t>(a)));
    EXPECT_TRUE(f.regions->release(reinterpret_cast<uint64_t>(b)));
}
