// Pausable CUDA regions through the real CUDA VMM backend, against a test double
// of the driver whose device memory is host memory (tests/fakes/FakeCudaDriver.cpp):
// addresses kept, granularity rounding, device memory given back and taken
// again, host and disk backups round trip, failures leave regions paused.
#include <dlfcn.h>
#include <gtest/gtest.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "collectors/control/ControlChannel.h"
#include "collectors/control/Courtesy.h"
#include "collectors/control/CudaVmmBackend.h"
#include "collectors/control/Regions.h"
#include "collectors/control/SafePoint.h"
#include "collectors/engine/Engine.h"
#include "collectors/engine/SocketSink.h"
#include "tests/collectors/DeviceRegionCases.h"

using namespace memtool;
using namespace memtool::collectors::control;

namespace {

constexpr uint64_t MiB = 1 << 20;

struct FakeDriver {
    size_t (*usedBytes)() = nullptr;
    void (*setCapacity)(size_t) = nullptr;
    size_t (*hostBytes)() = nullptr;
    unsigned long long (*accessDevices)(uint64_t) = nullptr;
    void (*setUsedElsewhere)(size_t) = nullptr;
    FakeDriver() {
        setenv("MEMTOOL_CUDA_DRIVER", FAKE_CUDA_DRIVER, 1);
        void* lib = dlopen(FAKE_CUDA_DRIVER, RTLD_NOW | RTLD_LOCAL);
        usedBytes = reinterpret_cast<size_t (*)()>(dlsym(lib, "fake_cuda_used_bytes"));
        setCapacity = reinterpret_cast<void (*)(size_t)>(dlsym(lib, "fake_cuda_set_capacity"));
        hostBytes = reinterpret_cast<size_t (*)()>(dlsym(lib, "fake_cuda_host_bytes"));
        accessDevices = reinterpret_cast<unsigned long long (*)(uint64_t)>(
            dlsym(lib, "fake_cuda_access_devices"));
        setUsedElsewhere =
            reinterpret_cast<void (*)(size_t)>(dlsym(lib, "fake_cuda_set_used_elsewhere"));
    }
};

FakeDriver& driver() {
    static FakeDriver d;
    return d;
}

struct CudaFixture : test_support::DeviceRegionFixture<CudaVmmBackend, FakeDriver> {
    CudaVmmBackend& cuda = backend;
    const uint8_t cuda0 = core::cudaDevice(0);
    CudaFixture()
        : DeviceRegionFixture(core::cudaDevice(0), 256, driver(), &Regions::setCudaBackend) {}
};

}  // namespace

TEST(CudaRegions, PauseGivesDeviceMemoryBackAndResumeRestoresItAtTheSameAddress) {
    CudaFixture f;
    test_support::region_cases::pauseGivesMemoryBackAndResumeRestoresItAtTheSameAddress(f);
}

TEST(CudaRegions, TheOwningDeviceAndItsPeersGetAccessAtEveryMapping) {
    {
        CudaFixture f;  // one device: its own access only
        uint8_t* p = f.allocate("solo", core::BackupKind::None, MiB, 1);
        ASSERT_NE(p, nullptr);
        EXPECT_EQ(driver().accessDevices(reinterpret_cast<uint64_t>(p)), 0b1u);
        f.regions->release(reinterpret_cast<uint64_t>(p));
    }
    // Three devices, the third with no peer-to-peer path: cuda:0's memory is
    // cuda:0's and cuda:1's, after a resume too.
    setenv("FAKE_CUDA_DEVICES", "3", 1);
    setenv("FAKE_CUDA_PEERLESS", "2", 1);
    {
        CudaFixture f;
        uint8_t* p = f.allocate("peers", core::BackupKind::Host, MiB, 1);
        ASSERT_NE(p, nullptr);
        const uint64_t address = reinterpret_cast<uint64_t>(p);
        EXPECT_EQ(driver().accessDevices(address), 0b011u);
        ASSERT_TRUE(f.regions->pause("peers", core::ControlOrigin::Api).ok);
        ASSERT_TRUE(f.regions->resume("peers", core::ControlOrigin::Api).ok);
        EXPECT_EQ(driver().accessDevices(address), 0b011u);
        EXPECT_TRUE(CudaFixture::holds(p, MiB, 1));
        f.regions->release(address);
    }
    unsetenv("FAKE_CUDA_DEVICES");
    unsetenv("FAKE_CUDA_PEERLESS");
}

TEST(CudaRegions, AResumeKeepsPinnedMemoryUpToTheHostPoolLimit) {
    CudaFixture f;
    uint8_t* a = f.allocate("a", core::BackupKind::Host, 4 * MiB, 1);
    uint8_t* b = f.allocate("b", core::BackupKind::Host, 2 * MiB, 2);
    ASSERT_TRUE(a && b);
    const size_t before = driver().hostBytes();
    auto pause = [&](const char* tag) {
        ASSERT_TRUE(f.regions->pause(tag, core::ControlOrigin::Api).ok);
    };
    auto resume = [&](const char* tag) {
        ASSERT_TRUE(f.regions->resume(tag, core::ControlOrigin::Api).ok);
    };
    // By default a resume keeps each backup's pinned buffer for the next pause,
    // and that pause reuses it: the smallest that fits, whole (b's pause takes a's
    // 4 MiB buffer, and gives all 4 MiB back for a's next pause).
    pause("a");
    resume("a");
    pause("b");
    resume("b");
    pause("a");
    resume("a");
    EXPECT_EQ(driver().hostBytes() - before, 4 * MiB);
    // Two backups at once need two buffers.
    pause("a");
    pause("b");
    resume("a");
    resume("b");
    EXPECT_EQ(driver().hostBytes() - before, 6 * MiB);
    EXPECT_EQ(f.cuda.hostPoolBytes(), 6 * MiB);
    pause("b");
    resume("b");
    pause("a");
    resume("a");
    EXPECT_EQ(driver().hostBytes() - before, 6 * MiB);
    EXPECT_EQ(f.cuda.hostPoolBytes(), 6 * MiB);
    // `memtool ctl PID status` says what is kept, and the margin.
    f.regions->setMemoryMargin(8 * MiB);
    char status[4096];
    RegionCommands commands(*f.regions);
    const char* argv[] = {"status"};
    ASSERT_EQ(commands.handle(1, argv, status, sizeof status),
              static_cast<uint8_t>(core::ReplyStatus::Ok));
    EXPECT_NE(
        std::string(status).find("}],\"host_pool_bytes\":6291456,\"memory_margin_bytes\":8388608,"
                                 "\"threads_waiting\":0}"),
        std::string::npos)
        << status;
    // and the host budget, where one is set.
    f.regions->setHostBudget(16 * MiB);
    ASSERT_EQ(commands.handle(1, argv, status, sizeof status),
              static_cast<uint8_t>(core::ReplyStatus::Ok));
    EXPECT_NE(std::string(status).find("\"threads_waiting\":0,\"host_budget_bytes\":16777216}"),
              std::string::npos)
        << status;
    f.regions->setHostBudget(UINT64_MAX);
    f.regions->setMemoryMargin(0);
    // A lower limit frees the largest first, now; 0 keeps nothing after a resume.
    EXPECT_EQ(f.regions->setHostPoolLimit(3 * MiB), 2 * MiB);
    EXPECT_EQ(driver().hostBytes() - before, 2 * MiB);
    EXPECT_EQ(f.regions->setHostPoolLimit(0), 0u);
    EXPECT_EQ(driver().hostBytes(), before);
    pause("a");
    EXPECT_EQ(driver().hostBytes() - before, 4 * MiB);
    resume("a");
    EXPECT_EQ(driver().hostBytes(), before);
    EXPECT_TRUE(CudaFixture::holds(a, 4 * MiB, 1));
    EXPECT_TRUE(CudaFixture::holds(b, 2 * MiB, 2));
    f.regions->release(reinterpret_cast<uint64_t>(a));
    f.regions->release(reinterpret_cast<uint64_t>(b));
}

TEST(CudaRegions, AMemoryMarginRefusesWhatWouldLeaveLessFree) {
    CudaFixture f;
    test_support::region_cases::aMemoryMarginRefusesWhatWouldLeaveLessFree(f, "cuda:0");
}

TEST(CudaRegions, DiskBackupsStreamInChunksAndComeBackWhole) {
    CudaFixture f;
    test_support::region_cases::diskBackupsStreamInChunksAndComeBackWhole(
        f, CudaVmmBackend::kChunkBytes);
}

TEST(CudaRegions, AResumeWithoutRoomOnTheDeviceKeepsTheRegionPausedAndItsContent) {
    CudaFixture f;
    test_support::region_cases::aResumeWithoutRoomKeepsTheRegionPausedAndItsContent(
        f, "cuMemCreate: out of memory (CUresult 2)");
}

TEST(CudaRegions, BackupNoneReleasesWithoutCopying) {
    CudaFixture f;
    test_support::region_cases::backupNoneReleasesWithoutCopying(f);
}

TEST(CudaRegions, FreeingWhilePausedReleasesTheAddresses) {
    CudaFixture f;
    test_support::region_cases::freeingWhilePausedReleasesTheAddresses(f);
}

// The disk backup streams through two pinned buffers, the host pool keeps none yet.
TEST(CudaRegions, OneTagWithAHostAndADiskBackupBringsBothBack) {
    CudaFixture f;
    test_support::region_cases::oneTagWithAHostAndADiskBackupBringsBothBack(
        f, 2 * CudaVmmBackend::kChunkBytes);
}

TEST(CudaRegions, ADeviceOnlyRegionServesCudaMemory) {
    CudaFixture f;
    test_support::region_cases::aDeviceOnlyRegionServesDeviceMemory(f);
}

// TMS_DISK_BACKUP_CHUNK_MB=2: a disk backup streams through two 2 MiB pinned
// buffers, not two of 64 MiB, and comes back whole.
TEST(CudaRegions, ADiskBackupStreamsInTheChunkSizeItIsGiven) {
    CudaFixture f;
    f.cuda.setChunkBytes(2 * MiB);
    const size_t hostBefore = driver().hostBytes();
    uint8_t* p = f.allocate("kv", core::BackupKind::Disk, 6 * MiB, 9);
    ASSERT_NE(p, nullptr);
    ASSERT_TRUE(f.regions->pause("kv", core::ControlOrigin::Api).ok);
    EXPECT_EQ(driver().hostBytes() - hostBefore, 4 * MiB);
    ASSERT_TRUE(f.regions->resume("kv", core::ControlOrigin::Api).ok);
    EXPECT_TRUE(CudaFixture::holds(p, 6 * MiB, 9));
    f.regions->release(reinterpret_cast<uint64_t>(p));
}

TEST(CudaRegions, SpillMovesHostBackupsToDiskAndLetsThePinnedMemoryGo) {
    CudaFixture f;
    test_support::region_cases::spillMovesHostBackupsToDiskAndLetsThePinnedMemoryGo(f);
}

TEST(CudaRegions, AHostBudgetSendsWhatItCannotHoldToDisk) {
    CudaFixture f;
    test_support::region_cases::aHostBudgetSendsWhatItCannotHoldToDisk(f);
}

// A verified CUDA region: the checksum kernel runs on the "device" at the pause
// and after the resume (the double runs it as the host sums); a restore whose
// copy comes back with one byte wrong fails, naming the allocation, from host
// and from disk backups alike.
TEST(CudaRegions, AVerifiedRestoreThatComesBackWrongFailsNamingTheAllocation) {
    CudaFixture f;
    auto spoil = reinterpret_cast<void (*)()>(
        dlsym(dlopen(FAKE_CUDA_DRIVER, RTLD_NOW | RTLD_NOLOAD), "fake_cuda_spoil_next_copy_in"));
    auto launches = reinterpret_cast<int (*)()>(
        dlsym(dlopen(FAKE_CUDA_DRIVER, RTLD_NOW | RTLD_NOLOAD), "fake_cuda_kernel_launches"));
    ASSERT_TRUE(spoil && launches);
    for (const core::BackupKind backup : {core::BackupKind::Host, core::BackupKind::Disk}) {
        const char* tag = backup == core::BackupKind::Host ? "vhost" : "vdisk";
        Failure why;
        ASSERT_TRUE(f.regions->enter(tag, backup, why, false, true)) << why.text;
        auto* p = static_cast<uint8_t*>(f.regions->serve(f.cuda0, 4 * MiB, 256, why));
        f.regions->exit();
        ASSERT_NE(p, nullptr) << why.text;
        for (uint64_t i = 0; i < 4 * MiB; ++i) p[i] = static_cast<uint8_t>(i * 13);
        const int before = launches();
        ASSERT_TRUE(f.regions->pause(tag, core::ControlOrigin::Api).ok);
        OpResult resumed = f.regions->resume(tag, core::ControlOrigin::Api);
        EXPECT_TRUE(resumed.ok) << resumed.message;
        EXPECT_FALSE(resumed.verifyFailed);
        EXPECT_EQ(launches() - before, 2);  // one at the pause, one after the resume

        ASSERT_TRUE(f.regions->pause(tag, core::ControlOrigin::Api).ok);
        spoil();
        resumed = f.regions->resume(tag, core::ControlOrigin::Api);
        EXPECT_FALSE(resumed.ok);
        EXPECT_TRUE(resumed.verifyFailed);
        char address[32];
        std::snprintf(address, sizeof address, "0x%llx",
                      static_cast<unsigned long long>(reinterpret_cast<uint64_t>(p)));
        EXPECT_EQ(std::string(resumed.message)
                      .rfind(std::string("verify: region '") + tag +
                                 "' on cuda:0 came back different from what was paused: 1 of 1 "
                                 "allocations, the first at " +
                                 address + " (4194304 bytes; checksum ",
                             0),
                  0u)
            << resumed.message;
        EXPECT_EQ(p[0], static_cast<uint8_t>(0xff));  // byte 0 was 0, flipped
        EXPECT_TRUE(f.regions->release(reinterpret_cast<uint64_t>(p)));
    }
}

// What a yield leaves on the device, in its answer: the regions' memory still
// resident (none once yielded), what memtool saw allocated that no region holds
// (a library's own cudaMalloc), and what it never saw (here the fake's "context").
// cuBLAS's workspaces are let go before the cache is emptied, and the answer says so.
TEST(CudaRegions, AYieldsAnswerSaysWhatTheDeviceStillHolds) {
    CudaFixture f;
    int fds[2];
    ASSERT_EQ(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, fds), 0);
    collectors::SocketSink sink;
    collectors::Engine engine;
    collectors::EngineOptions o;
    o.nativeStacks = o.pythonStacks = false;
    const char* why = nullptr;
    engine.configure(o, &why);
    sink.adopt(fds[0]);
    collectors::StreamIdentity id;
    id.pid = 1;
    id.command = "test";
    id.commandBytes = 5;
    ASSERT_TRUE(engine.connect(sink, id));
    f.regions->setEngine(&engine);

    const size_t before = driver().usedBytes();
    uint8_t* kv = f.allocate("kv", core::BackupKind::Host, 6 * MiB, 3);
    ASSERT_NE(kv, nullptr);
    engine.alloc(f.cuda0, 0x7e0000000000ull, 3 * MiB);  // seen, in no region
    driver().setUsedElsewhere(5 * MiB);
    SafePoint safePoint;
    Courtesy courtesy(*f.regions, safePoint);
    static int releases = 0;
    courtesy.setWorkspaceReleaser([] {
        ++releases;
        return 1;
    });
    std::atomic<bool> stop{false};
    safePoint.reached();
    std::thread program([&] {
        while (!stop.load()) safePoint.reached();
    });
    char out[8192];
    const char* args[] = {"yield", "--to", "host"};
    ASSERT_EQ(courtesy.yieldCommand(3, args, out, sizeof out),
              static_cast<uint8_t>(core::ReplyStatus::Ok))
        << out;
    EXPECT_EQ(releases, 1);
    const uint64_t used = before + 5 * MiB;  // the region's 6 MiB went back
    const std::string device =
        "{\"device\":\"cuda:0\",\"bytes\":6291456,\"device_used_bytes\":" + std::to_string(used) +
        ",";
    const std::string left =
        ",\"left\":{\"in_regions_bytes\":0,\"outside_regions_bytes\":3145728,"
        "\"unseen_bytes\":" +
        std::to_string(used - 3 * MiB) + "}}";
    EXPECT_NE(std::strstr(out, device.c_str()), nullptr) << out;
    EXPECT_NE(std::strstr(out, left.c_str()), nullptr) << out;
    EXPECT_NE(std::strstr(out,
                          ",\"cublas_workspaces_released\":true,\"nccl\":\"no NCCL in this "
                          "process\"}"),
              nullptr)
        << out;
    ASSERT_EQ(courtesy.restoreCommand(out, sizeof out), static_cast<uint8_t>(core::ReplyStatus::Ok))
        << out;
    EXPECT_EQ(std::strstr(out, "nccl"), nullptr) << out;  // a restore's answer has none
    stop.store(true);
    program.join();
    EXPECT_TRUE(f.holds(kv, 6 * MiB, 3));
    driver().setUsedElsewhere(0);
    f.regions->setEngine(nullptr);
    EXPECT_TRUE(f.release(kv));
    engine.finish(core::ExitKind::Normal);
    close(fds[1]);
}
