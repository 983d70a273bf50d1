// Pausable CUDA regions through the real CUDA VMM backend, against a test double
// of the driver whose device memory is host memory (tests/fakes/FakeCudaDriver.cpp):
// addresses kept, granularity rounding, device memory given back and taken
// again, host and disk backups round trip, failures leave regions paused.
#include <dlfcn.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "collectors/control/ControlChannel.h"
#include "collectors/control/CpuPagesBackend.h"
#include "collectors/control/CudaVmmBackend.h"
#include "collectors/control/Regions.h"
#include "tests/TempDir.h"

using namespace memtool;
using namespace memtool::collectors::control;

namespace {

constexpr uint64_t MiB = 1 << 20;

struct FakeDriver {
    size_t (*usedBytes)() = nullptr;
    void (*setCapacity)(size_t) = nullptr;
    size_t (*hostBytes)() = nullptr;
    unsigned long long (*accessDevices)(uint64_t) = nullptr;
    FakeDriver() {
        setenv("MEMTOOL_CUDA_DRIVER", FAKE_CUDA_DRIVER, 1);
        void* lib = dlopen(FAKE_CUDA_DRIVER, RTLD_NOW | RTLD_LOCAL);
        usedBytes = reinterpret_cast<size_t (*)()>(dlsym(lib, "fake_cuda_used_bytes"));
        setCapacity = reinterpret_cast<void (*)(size_t)>(dlsym(lib, "fake_cuda_set_capacity"));
        hostBytes = reinterpret_cast<size_t (*)()>(dlsym(lib, "fake_cuda_host_bytes"));
        accessDevices = reinterpret_cast<unsigned long long (*)(uint64_t)>(
            dlsym(lib, "fake_cuda_access_devices"));
    }
};

FakeDriver& driver() {
    static FakeDriver d;
    return d;
}

struct CudaFixture {
    CpuPagesBackend cpu;
    CudaVmmBackend cuda;
    Regions* regions = new Regions();
    std::string dir;
    const uint8_t cuda0 = core::cudaDevice(0);
    CudaFixture() {
        driver();
        dir = memtool::test_support::makeTempDir("memtool-cuda-regions");
        Failure why;
        EXPECT_TRUE(cuda.load(why)) << why.text;
        regions->setCpuBackend(&cpu);
        regions->setCudaBackend(&cuda);
        regions->setBackupDirectory(dir.c_str());
    }
    ~CudaFixture() { delete regions; }
    uint8_t* allocate(const char* tag, core::BackupKind backup, uint64_t bytes, uint8_t seed) {
        Failure why;
        EXPECT_TRUE(regions->enter(tag, backup, why)) << why.text;
        auto* p = static_cast<uint8_t*>(regions->serve(cuda0, bytes, 256, why));
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

TEST(CudaRegions, PauseGivesDeviceMemoryBackAndResumeRestoresItAtTheSameAddress) {
    CudaFixture f;
    const size_t before = driver().usedBytes();
    uint8_t* kv = f.allocate("kv", core::BackupKind::Host, 5 * MiB + 1, 7);
    ASSERT_NE(kv, nullptr);
    EXPECT_EQ(driver().usedBytes() - before, 6 * MiB);  // rounded up to the 2 MiB granularity
    OpResult paused = f.regions->pause("kv", core::ControlOrigin::Api);
    ASSERT_TRUE(paused.ok) << paused.message;
    EXPECT_EQ(paused.bytes, 6 * MiB);
    EXPECT_EQ(driver().usedBytes(), before);  // every byte of it given back to the device
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
    EXPECT_EQ(driver().usedBytes() - before, 6 * MiB);
    EXPECT_TRUE(CudaFixture::holds(kv, 5 * MiB + 1, 7));  // the same address, the same content
    EXPECT_TRUE(f.regions->release(reinterpret_cast<uint64_t>(kv)));
    EXPECT_EQ(driver().usedBytes(), before);
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
    const size_t used = driver().usedBytes();
    driver().setCapacity(used + 16 * MiB);
    f.regions->setMemoryMargin(8 * MiB);
    uint8_t* first = f.allocate("m", core::BackupKind::None, 6 * MiB, 1);  // leaves 10 MiB
    ASSERT_NE(first, nullptr);
    Failure why;
    ASSERT_TRUE(f.regions->enter("m", core::BackupKind::None, why));
    EXPECT_EQ(f.regions->serve(f.cuda0, 4 * MiB, 256, why), nullptr);  // would leave 6 MiB
    EXPECT_STREQ(why.text,
                 "a region allocation of 4194304 B on cuda:0 is refused: 10485760 B are free, and "
                 "the memory margin keeps 8388608 B free");
    EXPECT_EQ(driver().usedBytes(), used + 6 * MiB);
    f.regions->setMemoryMargin(0);
    void* second = f.regions->serve(f.cuda0, 4 * MiB, 256, why);
    f.regions->exit();
    EXPECT_NE(second, nullptr) << why.text;
    f.regions->release(reinterpret_cast<uint64_t>(first));
    f.regions->release(reinterpret_cast<uint64_t>(second));
    driver().setCapacity(0);
}

TEST(CudaRegions, DiskBackupsStreamInChunksAndComeBackWhole) {
    CudaFixture f;
    // Larger than two staging chunks: the pipelined copy runs its whole course.
    const uint64_t bytes = 2 * CudaVmmBackend::kChunkBytes + 6 * MiB;
    uint8_t* w = f.allocate("weights", core::BackupKind::Disk, bytes, 3);
    ASSERT_NE(w, nullptr);
    ASSERT_TRUE(f.regions->pause("weights", core::ControlOrigin::Api).ok);
    ASSERT_TRUE(f.regions->resume("weights", core::ControlOrigin::Api).ok);
    EXPECT_TRUE(CudaFixture::holds(w, bytes, 3));
    f.regions->release(reinterpret_cast<uint64_t>(w));
}

TEST(CudaRegions, AResumeWithoutRoomOnTheDeviceKeepsTheRegionPausedAndItsContent) {
    CudaFixture f;
    uint8_t* kv = f.allocate("kv2", core::BackupKind::Host, 4 * MiB, 11);
    ASSERT_TRUE(f.regions->pause("kv2", core::ControlOrigin::Api).ok);
    driver().setCapacity(driver().usedBytes() + 2 * MiB);  // someone else took the device meanwhile
    OpResult r = f.regions->resume("kv2", core::ControlOrigin::Api);
    EXPECT_FALSE(r.ok);
    EXPECT_STREQ(r.message,
                 "1 region(s) could not be resumed and stay paused, their content kept: 'kv2': "
                 "cuMemCreate: out of memory "
                 "(CUresult 2)");
    driver().setCapacity(0);
    ASSERT_TRUE(f.regions->resume("kv2", core::ControlOrigin::Api).ok);
    EXPECT_TRUE(CudaFixture::holds(kv, 4 * MiB, 11));
    f.regions->release(reinterpret_cast<uint64_t>(kv));
}

TEST(CudaRegions, BackupNoneReleasesWithoutCopying) {
    CudaFixture f;
    const size_t before = driver().usedBytes();
    uint8_t* scratch = f.allocate("scratch", core::BackupKind::None, 2 * MiB, 1);
    OpResult r = f.regions->pause("scratch", core::ControlOrigin::Ctl);
    ASSERT_TRUE(r.ok);
    EXPECT_EQ(driver().usedBytes(), before);
    ASSERT_TRUE(f.regions->resume("scratch", core::ControlOrigin::Ctl).ok);
    EXPECT_EQ(scratch[0], 0);  // undefined after resume; this driver gives fresh memory
    f.regions->release(reinterpret_cast<uint64_t>(scratch));
}

TEST(CudaRegions, FreeingWhilePausedReleasesTheAddresses) {
    CudaFixture f;
    const size_t before = driver().usedBytes();
    uint8_t* a = f.allocate("f", core::BackupKind::Host, 2 * MiB, 1);
    ASSERT_TRUE(f.regions->pause("f", core::ControlOrigin::Api).ok);
    EXPECT_TRUE(f.regions->release(reinterpret_cast<uint64_t>(a)));
    EXPECT_EQ(driver().usedBytes(), before);
    EXPECT_FALSE(f.regions->resume("f", core::ControlOrigin::Api).changed);
}

// torch_memory_saver's cpu_backup.py and disk_backup.py examples: the default tag
// entered with a host backup, then with a disk one. Each allocation keeps its own
// kind through a pause of the tag, and both come back.
TEST(CudaRegions, OneTagWithAHostAndADiskBackupBringsBothBack) {
    CudaFixture f;
    const size_t before = driver().usedBytes(), hostBefore = driver().hostBytes();
    uint8_t* host = f.allocate("default", core::BackupKind::Host, 2 * MiB, 3);
    uint8_t* disk = f.allocate("default", core::BackupKind::Disk, 4 * MiB, 5);
    ASSERT_NE(host, nullptr);
    ASSERT_NE(disk, nullptr);
    OpResult paused = f.regions->pause("default", core::ControlOrigin::Api);
    ASSERT_TRUE(paused.ok) << paused.message;
    EXPECT_EQ(paused.bytes, 6 * MiB);
    EXPECT_EQ(paused.regions, 2u);
    EXPECT_EQ(driver().usedBytes(), before);
    // Pinned: the host backup, and the two buffers the disk one streamed through.
    EXPECT_EQ(driver().hostBytes() - hostBefore, 2 * MiB + 2 * CudaVmmBackend::kChunkBytes);
    OpResult resumed = f.regions->resume("default", core::ControlOrigin::Api);
    ASSERT_TRUE(resumed.ok) << resumed.message;
    EXPECT_TRUE(CudaFixture::holds(host, 2 * MiB, 3));
    EXPECT_TRUE(CudaFixture::holds(disk, 4 * MiB, 5));
    f.regions->release(reinterpret_cast<uint64_t>(host));
    f.regions->release(reinterpret_cast<uint64_t>(disk));
    EXPECT_EQ(driver().usedBytes(), before);
}

// A device-only region (the shim's) serves CUDA memory as any region does.
TEST(CudaRegions, ADeviceOnlyRegionServesCudaMemory) {
    CudaFixture f;
    Failure why;
    ASSERT_TRUE(f.regions->enter("gpu", core::BackupKind::Host, why, true)) << why.text;
    EXPECT_FALSE(f.regions->threadInRegionForCpu(1 << 20));
    auto* p = static_cast<uint8_t*>(f.regions->serve(f.cuda0, MiB, 256, why));
    f.regions->exit();
    ASSERT_NE(p, nullptr) << why.text;
    p[0] = 42;
    ASSERT_TRUE(f.regions->pause("gpu", core::ControlOrigin::Api).ok);
    ASSERT_TRUE(f.regions->resume("gpu", core::ControlOrigin::Api).ok);
    EXPECT_EQ(p[0], 42);
    f.regions->release(reinterpret_cast<uint64_t>(p));
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

// A policy's "spill host backups to disk": every paused region's host backup
// goes to a disk backup, oldest first, and the pinned memory goes with it (the
// host pool keeps none); reads and resumes then come from disk, whole.
TEST(CudaRegions, SpillMovesHostBackupsToDiskAndLetsThePinnedMemoryGo) {
    CudaFixture f;
    uint8_t* a = f.allocate("sa", core::BackupKind::Host, 4 * MiB, 5);
    uint8_t* b = f.allocate("sb", core::BackupKind::Host, 2 * MiB, 9);
    ASSERT_TRUE(a && b);
    const size_t before = driver().hostBytes();
    EXPECT_STREQ(f.regions->spillHostBackups().message, "nothing to spill: no region is paused");
    ASSERT_TRUE(f.regions->pause("sa", core::ControlOrigin::Api).ok);
    ASSERT_TRUE(f.regions->pause("sb", core::ControlOrigin::Api).ok);
    EXPECT_EQ(driver().hostBytes() - before, 6 * MiB);
    const OpResult spilled = f.regions->spillHostBackups();
    ASSERT_TRUE(spilled.ok) << spilled.message;
    EXPECT_TRUE(spilled.changed);
    EXPECT_EQ(spilled.bytes, 6 * MiB);
    EXPECT_EQ(spilled.regions, 2u);
    EXPECT_EQ(spilled.allocations, 2u);
    EXPECT_STREQ(spilled.message, "moved 2 host backups to disk");
    EXPECT_EQ(driver().hostBytes(), before);  // no pinned memory left, none kept for later
    EXPECT_EQ(f.cuda.hostPoolBytes(), 0u);
    EXPECT_STREQ(f.regions->spillHostBackups().message, "nothing to spill: no host backup");
    // Read while paused, from the disk now; then resumed whole (through the disk
    // path's staging buffers, as any disk backup's resume).
    std::vector<uint8_t> copy(MiB);
    Failure why;
    ASSERT_TRUE(
        f.regions->readBackup(reinterpret_cast<uint64_t>(b) + MiB, copy.data(), copy.size(), why))
        << why.text;
    EXPECT_EQ(copy[0], static_cast<uint8_t>(9 + MiB / 4096));
    ASSERT_TRUE(f.regions->resume("sa", core::ControlOrigin::Api).ok);
    ASSERT_TRUE(f.regions->resume("sb", core::ControlOrigin::Api).ok);
    EXPECT_TRUE(CudaFixture::holds(a, 4 * MiB, 5));
    EXPECT_TRUE(CudaFixture::holds(b, 2 * MiB, 9));
    EXPECT_TRUE(f.regions->release(reinterpret_cast<uint64_t>(a)));
    EXPECT_TRUE(f.regions->release(reinterpret_cast<uint64_t>(b)));
}
