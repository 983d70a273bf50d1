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

#include "collectors/ascend/AclDecls.h"
#include "collectors/control/AclVmmBackend.h"
#include "tests/collectors/DeviceRegionCases.h"

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

struct NpuFixture : test_support::DeviceRegionFixture<AclVmmBackend, FakeAcl> {
    const uint8_t npu0 = core::npuDeviceOrFirst(0);
    NpuFixture()
        : DeviceRegionFixture(core::npuDeviceOrFirst(0), 512, acl(), &Regions::setNpuBackend) {}
};

}  // namespace

TEST(AclRegions, PauseGivesNpuMemoryBackAndResumeRestoresItAtTheSameAddress) {
    NpuFixture f;
    test_support::region_cases::pauseGivesMemoryBackAndResumeRestoresItAtTheSameAddress(f);
}

// The device itself refuses a paused range (the double's copies check that their
// device side is mapped), and reads it again once resumed.
TEST(AclRegions, APausedRangeIsUnmappedOnTheDevice) {
    NpuFixture f;
    uint8_t* kv = f.allocate("kv", core::BackupKind::Host, 2 * kMiB, 7);
    ASSERT_NE(kv, nullptr);
    ASSERT_TRUE(f.pause("kv"));
    uint8_t byte = 0;
    EXPECT_EQ(acl().memcpy(&byte, 1, kv, 1, ACL_MEMCPY_DEVICE_TO_HOST), ACL_ERROR_RT_PARAM_INVALID);
    ASSERT_TRUE(f.resume("kv"));
    EXPECT_EQ(acl().memcpy(&byte, 1, kv, 1, ACL_MEMCPY_DEVICE_TO_HOST), ACL_SUCCESS);
    EXPECT_EQ(byte, 7);
    EXPECT_TRUE(f.release(kv));
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
    test_support::region_cases::aMemoryMarginRefusesWhatWouldLeaveLessFree(f, "npu:0");
}

TEST(AclRegions, DiskBackupsStreamInChunksAndComeBackWhole) {
    NpuFixture f;
    test_support::region_cases::diskBackupsStreamInChunksAndComeBackWhole(
        f, AclVmmBackend::kChunkBytes);
}

TEST(AclRegions, AResumeWithoutRoomOnTheDeviceKeepsTheRegionPausedAndItsContent) {
    NpuFixture f;
    test_support::region_cases::aResumeWithoutRoomKeepsTheRegionPausedAndItsContent(
        f, "aclrtMallocPhysical: out of device memory (aclError 207001)");
}

TEST(AclRegions, BackupNoneReleasesWithoutCopying) {
    NpuFixture f;
    test_support::region_cases::backupNoneReleasesWithoutCopying(f);
}

TEST(AclRegions, FreeingWhilePausedReleasesTheAddresses) {
    NpuFixture f;
    test_support::region_cases::freeingWhilePausedReleasesTheAddresses(f);
}

// The disk backup streams through one pinned buffer (the backend's, kept for the
// next); the host backup's buffer is freed on resume (no pool).
TEST(AclRegions, OneTagWithAHostAndADiskBackupBringsBothBack) {
    NpuFixture f;
    const size_t hostBefore = acl().hostBytes();
    test_support::region_cases::oneTagWithAHostAndADiskBackupBringsBothBack(
        f, AclVmmBackend::kChunkBytes);
    EXPECT_EQ(acl().hostBytes() - hostBefore, AclVmmBackend::kChunkBytes);
}

TEST(AclRegions, ADeviceOnlyRegionServesNpuMemory) {
    NpuFixture f;
    test_support::region_cases::aDeviceOnlyRegionServesDeviceMemory(f);
}

TEST(AclRegions, SpillMovesHostBackupsToDiskAndLetsThePinnedMemoryGo) {
    NpuFixture f;
    test_support::region_cases::spillMovesHostBackupsToDiskAndLetsThePinnedMemoryGo(f);
}

TEST(AclRegions, AHostBudgetSendsWhatItCannotHoldToDisk) {
    NpuFixture f;
    test_support::region_cases::aHostBudgetSendsWhatItCannotHoldToDisk(f);
}

// NPU memory has no checksum kernel: a verified pause is refused before anything
// is released, saying why.
TEST(AclRegions, AVerifiedPauseOfNpuMemoryIsRefusedWithNothingReleased) {
    NpuFixture f;
    Failure why;
    ASSERT_TRUE(f.regions->enter("vnpu", core::BackupKind::Host, why, false, true)) << why.text;
    auto* p = static_cast<uint8_t*>(f.regions->serve(f.device, 2 * kMiB, 512, why));
    f.regions->exit();
    ASSERT_NE(p, nullptr) << why.text;
    p[0] = 42;
    const OpResult paused = f.regions->pause("vnpu", core::ControlOrigin::Api);
    EXPECT_FALSE(paused.ok);
    EXPECT_STREQ(paused.message,
                 "pause failed, nothing was released: region 'vnpu' cannot be verified: acl-vmm "
                 "cannot checksum its memory");
    EXPECT_EQ(p[0], 42);
    EXPECT_TRUE(f.regions->release(reinterpret_cast<uint64_t>(p)));
}
