// Pausable regions on real CPU pages (CpuPagesBackend) and against a backend
// that fails on request, with the engine recording into a socketpair: what is
// released, what comes back, what the stream says, and that a pause that cannot
// complete leaves everything as it was.
#include <dirent.h>
#include <fcntl.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cinttypes>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <future>
#include <string>
#include <thread>
#include <vector>

#include "collectors/control/Backups.h"
#include "collectors/control/Collection.h"
#include "collectors/control/ControlChannel.h"
#include "collectors/control/Courtesy.h"
#include "collectors/control/CpuPagesBackend.h"
#include "collectors/control/PausedAccess.h"
#include "collectors/control/Regions.h"
#include "collectors/control/SafePoint.h"
#include "collectors/engine/Engine.h"
#include "collectors/engine/RecursionGuard.h"
#include "collectors/engine/SocketSink.h"
#include "core/Aggregator.h"
#include "core/StreamDecoder.h"
#include "tests/TempDir.h"

using namespace memtool;
using namespace memtool::collectors;
using namespace memtool::collectors::control;

namespace {

constexpr uint64_t MiB = 1 << 20;

std::string tempDir() { return memtool::test_support::makeTempDir("memtool-regions"); }

std::vector<std::string> filesIn(const std::string& dir) {
    std::vector<std::string> out;
    if (DIR* d = opendir(dir.c_str())) {
        while (dirent* e = readdir(d))
            if (e->d_name[0] != '.') out.push_back(e->d_name);
        closedir(d);
    }
    return out;
}

// Disk backups this process holds in `dir`: no name points to one, so its
// descriptor in /proc/self/fd ("DIR/#INODE (deleted)") is what shows.
size_t heldBackupsIn(const std::string& dir) {
    const std::string deleted = " (deleted)";
    size_t n = 0;
    if (DIR* d = opendir("/proc/self/fd")) {
        while (dirent* e = readdir(d)) {
            if (e->d_name[0] == '.') continue;
            char target[4096];
            const std::string link = std::string("/proc/self/fd/") + e->d_name;
            const ssize_t len = readlink(link.c_str(), target, sizeof target);
            if (len <= 0) continue;
            const std::string t(target, static_cast<size_t>(len));
            if (t.rfind(dir + "/", 0) == 0 && t.size() > dir.size() + 1 + deleted.size() &&
                t.compare(t.size() - deleted.size(), deleted.size(), deleted) == 0)
                ++n;
        }
        closedir(d);
    }
    return n;
}

// Flips the byte at `offset` of the one disk backup this process holds in
// `dir` (through its /proc/self/fd link: no name points to it): a backup that
// comes back wrong, as a bad disk or a stray writer would make it. False when
// there is not exactly one.
bool corruptBackupIn(const std::string& dir, off_t offset) {
    std::string found;
    if (DIR* d = opendir("/proc/self/fd")) {
        while (dirent* e = readdir(d)) {
            char target[4096];
            const std::string link = std::string("/proc/self/fd/") + e->d_name;
            const ssize_t len = readlink(link.c_str(), target, sizeof target);
            if (e->d_name[0] == '.' || len <= 0) continue;
            if (std::string(target, static_cast<size_t>(len)).rfind(dir + "/", 0) != 0) continue;
            if (!found.empty()) found = "two";
            if (found != "two") found = link;
        }
        closedir(d);
    }
    if (found.empty() || found == "two") return false;
    const int fd = open(found.c_str(), O_RDWR | O_CLOEXEC);
    unsigned char byte = 0;
    const bool ok = fd >= 0 && pread(fd, &byte, 1, offset) == 1 &&
                    (byte ^= 0xff, pwrite(fd, &byte, 1, offset) == 1) && fsync(fd) == 0;
    if (fd >= 0) close(fd);
    return ok;
}

// Resident bytes of [p, p + bytes), from mincore.
uint64_t residentBytes(const void* p, uint64_t bytes) {
    const uint64_t page = static_cast<uint64_t>(sysconf(_SC_PAGESIZE));
    std::vector<unsigned char> vec((bytes + page - 1) / page);
    if (mincore(const_cast<void*>(p), bytes, vec.data()) != 0) return 0;
    uint64_t n = 0;
    for (unsigned char v : vec) n += (v & 1) * page;
    return n;
}

// Whether the mapping holding address a allows writes, from /proc/self/maps.
bool mappingWritable(uint64_t a) {
    std::ifstream maps("/proc/self/maps");
    std::string line;
    while (std::getline(maps, line)) {
        uint64_t lo = 0, hi = 0;
        char perms[5] = {};
        if (std::sscanf(line.c_str(), "%" SCNx64 "-%" SCNx64 " %4s", &lo, &hi, perms) != 3)
            continue;
        if (a >= lo && a < hi) return perms[1] == 'w';
    }
    ADD_FAILURE() << "no mapping holds 0x" << std::hex << a;
    return false;
}

// CPU pages that fail where a test says (the real backend inside).
struct FlakyBackend final : MemoryBackend {
    CpuPagesBackend real;
    bool failCopyOut = false, failMap = false;
    // copyOut looks whether the memory it backs up could be written meanwhile.
    int copiesOfWritableMemory = 0, copiesOfReadOnlyMemory = 0;
    const char* name() const override { return "flaky-cpu-pages"; }
    uint64_t granularity(uint8_t d) override { return real.granularity(d); }
    bool supports(core::BackupKind k) const override { return real.supports(k); }
    bool reserve(uint8_t d, uint64_t b, uint64_t al, uint64_t* a, Failure& why) override {
        return real.reserve(d, b, al, a, why);
    }
    bool map(uint8_t d, uint64_t a, uint64_t b, Failure& why) override {
        if (failMap) {
            why.set("the test made mapping fail");
            return false;
        }
        return real.map(d, a, b, why);
    }
    bool unmap(uint8_t d, uint64_t a, uint64_t b, Failure& why) override {
        return real.unmap(d, a, b, why);
    }
    void release(uint8_t d, uint64_t a, uint64_t b) override { real.release(d, a, b); }
    bool synchronize(uint8_t d, Failure& why) override { return real.synchronize(d, why); }
    bool copyOut(uint8_t d, uint64_t a, uint64_t b, Backup& to, uint64_t o, Failure& why) override {
        if (failCopyOut) {
            why.set("the test made the copy fail");
            return false;
        }
        // Whether the memory could be written meanwhile, from its mapping's
        // permissions: a probe that wrote a byte back would race the checksum
        // a verified pause runs beside the copy.
        if (mappingWritable(a))
            ++copiesOfWritableMemory;
        else
            ++copiesOfReadOnlyMemory;
        return real.copyOut(d, a, b, to, o, why);
    }
    bool copyIn(uint8_t d, uint64_t a, uint64_t b, Backup& from, uint64_t o,
                Failure& why) override {
        return real.copyIn(d, a, b, from, o, why);
    }
    bool keepsFreedMemory() const override { return real.keepsFreedMemory(); }
    bool checksum(uint8_t d, uint64_t a, uint64_t b, uint64_t* sum, Failure& why) override {
        return real.checksum(d, a, b, sum, why);
    }
    bool checksumsOnHost() const override { return real.checksumsOnHost(); }
    bool freeze(uint8_t d, uint64_t a, uint64_t b, Failure& why) override {
        return real.freeze(d, a, b, why);
    }
    bool mapFilled(uint8_t d, uint64_t a, uint64_t b, Backup& from, uint64_t o,
                   Failure& why) override {
        if (failMap) return map(d, a, b, why);
        return real.mapFilled(d, a, b, from, o, why);
    }
};

// Regions recording into an engine whose stream the test reads.
struct Fixture {
    int fds[2];
    SocketSink sink;
    Engine engine;
    FlakyBackend backend;
    Regions* regions = new Regions();  // large (fixed tables): not on the stack
    std::string dir;
    explicit Fixture(std::string backups = tempDir()) : dir(std::move(backups)) {
        EXPECT_EQ(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, fds), 0);
        EngineOptions o;
        o.nativeStacks = o.pythonStacks = false;
        const char* why;
        engine.configure(o, &why);
        sink.adopt(fds[0]);
        StreamIdentity id;
        id.pid = 1;
        id.command = "test";
        id.commandBytes = 5;
        EXPECT_TRUE(engine.connect(sink, id));
        regions->setEngine(&engine);
        regions->setCpuBackend(&backend);
        regions->setBackupDirectory(dir.c_str());
    }
    ~Fixture() {
        delete regions;
        close(fds[1]);
    }
    // Allocates `bytes` in region `tag` (as the hook does for a thread inside it),
    // filled with a pattern of `seed`.
    uint8_t* allocate(const char* tag, core::BackupKind backup, uint64_t bytes, uint8_t seed) {
        Failure why;
        EXPECT_TRUE(regions->enter(tag, backup, why)) << why.text;
        auto* p = static_cast<uint8_t*>(regions->serve(core::kDeviceCpu, bytes, 64, why));
        regions->exit();
        EXPECT_NE(p, nullptr) << why.text;
        for (uint64_t i = 0; i < bytes; ++i) p[i] = static_cast<uint8_t>(seed + i * 7);
        return p;
    }
    static bool holds(const uint8_t* p, uint64_t bytes, uint8_t seed) {
        for (uint64_t i = 0; i < bytes; ++i)
            if (p[i] != static_cast<uint8_t>(seed + i * 7)) return false;
        return true;
    }
    core::Aggregator finish() {
        engine.finish(core::ExitKind::Normal);
        core::Aggregator agg;
        core::StreamDecoder d(agg);
        std::vector<uint8_t> buf(1 << 16);
        for (ssize_t n; (n = read(fds[1], buf.data(), buf.size())) > 0;)
            d.feed(buf.data(), static_cast<size_t>(n));
        return agg;
    }
};

}  // namespace

TEST(Regions, PauseReleasesPagesAndResumeBringsContentBackAtTheSameAddress) {
    Fixture f;
    uint8_t* w = f.allocate("weights", core::BackupKind::Disk, 8 * MiB, 3);
    EXPECT_EQ(residentBytes(w, 8 * MiB), 8 * MiB);
    OpResult paused = f.regions->pause("weights", core::ControlOrigin::Api);
    EXPECT_TRUE(paused.ok) << paused.message;
    EXPECT_TRUE(paused.changed);
    EXPECT_EQ(paused.bytes, 8 * MiB);
    EXPECT_EQ(paused.allocations, 1u);
    EXPECT_EQ(residentBytes(w, 8 * MiB), 0u);
    EXPECT_TRUE(filesIn(f.dir).empty());  // unlinked as soon as it was made
    ASSERT_EQ(heldBackupsIn(f.dir), 1u);  // the backup, while paused: its descriptor
    char tag[64];
    EXPECT_TRUE(f.regions->pausedAt(reinterpret_cast<uint64_t>(w) + 12345, tag, sizeof tag));
    EXPECT_STREQ(tag, "weights");

    OpResult again = f.regions->pause("weights", core::ControlOrigin::Api);
    EXPECT_TRUE(again.ok);
    EXPECT_FALSE(again.changed);
    EXPECT_STREQ(again.message,
                 "nothing to pause: region 'weights' holds no resident memory (paused already?)");

    OpResult resumed = f.regions->resume("weights", core::ControlOrigin::Ctl);
    EXPECT_TRUE(resumed.ok) << resumed.message;
    EXPECT_EQ(resumed.bytes, 8 * MiB);
    EXPECT_TRUE(Fixture::holds(w, 8 * MiB, 3));
    EXPECT_EQ(heldBackupsIn(f.dir), 0u);  // the backup is gone
    EXPECT_FALSE(f.regions->pausedAt(reinterpret_cast<uint64_t>(w), tag, sizeof tag));
    EXPECT_FALSE(f.regions->resume("weights", core::ControlOrigin::Api).changed);

    EXPECT_TRUE(f.regions->release(reinterpret_cast<uint64_t>(w)));
    core::Aggregator agg = f.finish();
    EXPECT_TRUE(agg.streamVerified());
    const auto& cpu = agg.devices().at(core::kDeviceCpu);
    EXPECT_EQ(cpu.peakBytes, 8 * MiB);
    EXPECT_EQ(cpu.allocCount, 1u);
    EXPECT_EQ(cpu.freeCount, 1u);
    ASSERT_EQ(agg.controls().size(), 2u);  // "nothing to do" records nothing
    EXPECT_EQ(agg.controls()[0].f.action, core::ControlAction::Pause);
    EXPECT_EQ(agg.controls()[0].f.backup, core::BackupKind::Disk);
    EXPECT_EQ(agg.controls()[1].f.origin, core::ControlOrigin::Ctl);
    ASSERT_EQ(agg.regions().size(), 1u);
    EXPECT_EQ(agg.regions().begin()->second.record.tag, "weights");
}

TEST(Regions, ABackupGoesWithAProcessKilledWhilePaused) {
    // Nobody is left to remove a file: a program killed while paused (SIGKILL,
    // the OOM killer), with memtool killed first, must not leave its backup.
    const std::string dir = tempDir();
    const pid_t child = fork();
    ASSERT_GE(child, 0);
    if (child == 0) {
        Fixture f(dir);
        f.allocate("w", core::BackupKind::Disk, 4 * MiB, 9);
        const bool paused = f.regions->pause("w", core::ControlOrigin::Api).ok;
        if (!paused || heldBackupsIn(dir) != 1) _exit(1);
        raise(SIGKILL);
        _exit(2);
    }
    int status = 0;
    ASSERT_EQ(waitpid(child, &status, 0), child);
    ASSERT_TRUE(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL)
        << "the child did not pause with its backup held: status " << status;
    EXPECT_TRUE(filesIn(dir).empty());
}

// Both ways of making a backup file: content written comes back whole, the
// file is held by its descriptor alone from the start, and discarding it lets go.
void expectAnonymousRoundTrip(bool named) {
    const std::string dir = tempDir();
    DiskBackup b;
    Failure why;
    char path[DiskBackup::kPathBytes];
    const bool opened =
        named ? b.openNamed(dir.c_str(), "memtool-1-w-cpu-1.pause", 2 * MiB, path, why)
              : b.open(dir.c_str(), "memtool-1-w-cpu-1.pause", 2 * MiB, path, why);
    ASSERT_TRUE(opened) << why.text;
    EXPECT_TRUE(filesIn(dir).empty());
    EXPECT_EQ(heldBackupsIn(dir), 1u);
    const std::string prefix = dir + "/memtool-1-w-cpu-1.pause";
    EXPECT_EQ(std::string(b.path()).rfind(prefix, 0), 0u) << b.path();
    // Direct I/O wants aligned buffers.
    void* out = nullptr;
    void* in = nullptr;
    ASSERT_EQ(posix_memalign(&out, 4096, 2 * MiB), 0);
    ASSERT_EQ(posix_memalign(&in, 4096, 2 * MiB), 0);
    for (uint64_t i = 0; i < 2 * MiB; ++i) static_cast<uint8_t*>(out)[i] = uint8_t(i * 7 + 3);
    ASSERT_TRUE(b.write(0, out, 2 * MiB, why)) << why.text;
    std::memset(in, 0, 2 * MiB);
    ASSERT_TRUE(b.read(0, in, 2 * MiB, why)) << why.text;
    EXPECT_EQ(std::memcmp(in, out, 2 * MiB), 0);
    b.discard();
    EXPECT_EQ(heldBackupsIn(dir), 0u);
    EXPECT_TRUE(filesIn(dir).empty());
    free(out);
    free(in);
}

TEST(Regions, ABackupFileIsNeverNamedInItsDirectory) { expectAnonymousRoundTrip(false); }

TEST(Regions, WithoutUnnamedFilesABackupIsUnlinkedBeforeItIsUsed) {
    expectAnonymousRoundTrip(true);
}

TEST(Regions, TagsArePausedAndResumedIndependently) {
    Fixture f;
    uint8_t* a = f.allocate("a", core::BackupKind::Disk, 1 * MiB, 1);
    uint8_t* b = f.allocate("b", core::BackupKind::None, 3 * MiB, 2);
    EXPECT_EQ(f.regions->pause("a", core::ControlOrigin::Api).bytes, 1 * MiB);
    EXPECT_EQ(residentBytes(a, MiB), 0u);
    EXPECT_TRUE(Fixture::holds(b, 3 * MiB, 2));  // b untouched
    EXPECT_EQ(f.regions->pause("b", core::ControlOrigin::Api).bytes, 3 * MiB);
    EXPECT_EQ(f.regions->resume("b", core::ControlOrigin::Api).bytes, 3 * MiB);
    EXPECT_EQ(residentBytes(a, MiB), 0u);  // a still paused
    EXPECT_EQ(b[0], 0);                    // backup "none": the content is gone (here: zero pages)
    EXPECT_EQ(f.regions->resume(nullptr, core::ControlOrigin::Api).bytes, 1 * MiB);  // every tag: a
    EXPECT_TRUE(Fixture::holds(a, MiB, 1));
    f.regions->release(reinterpret_cast<uint64_t>(a));
    f.regions->release(reinterpret_cast<uint64_t>(b));
    core::Aggregator agg = f.finish();
    // The trace's figures: b's pause and resume moved 3 MiB out and back in.
    const auto& cpu = agg.devices().at(core::kDeviceCpu);
    EXPECT_EQ(cpu.peakBytes, 4 * MiB);
    EXPECT_EQ(cpu.currentBytes, 0u);
    EXPECT_EQ(cpu.pausedBytes, 0u);
    EXPECT_EQ(agg.controls().size(), 4u);
}

TEST(Regions, AFailedBackupReleasesNothing) {
    Fixture f;
    uint8_t* w = f.allocate("w", core::BackupKind::Disk, 2 * MiB, 5);
    f.backend.failCopyOut = true;
    OpResult r = f.regions->pause("w", core::ControlOrigin::Api);
    EXPECT_FALSE(r.ok);
    EXPECT_FALSE(r.changed);
    EXPECT_STREQ(r.message, "pause failed, nothing was released: the test made the copy fail");
    EXPECT_TRUE(Fixture::holds(w, 2 * MiB, 5));
    EXPECT_TRUE(filesIn(f.dir).empty());
    EXPECT_EQ(heldBackupsIn(f.dir), 0u);
    f.regions->release(reinterpret_cast<uint64_t>(w));
    core::Aggregator agg = f.finish();
    ASSERT_EQ(agg.controls().size(), 1u);
    EXPECT_FALSE(agg.controls()[0].f.ok);
    EXPECT_EQ(agg.devices().at(core::kDeviceCpu).pausedBytes, 0u);
}

TEST(Regions, AFullDiskFailsThePauseBeforeAnythingIsReleased) {
    Fixture f;
    uint8_t* w = f.allocate("w", core::BackupKind::Disk, 4 * MiB, 9);
    // A file-size limit below the backup stands in for a full disk (EFBIG).
    struct rlimit old;
    getrlimit(RLIMIT_FSIZE, &old);
    struct rlimit small = old;
    small.rlim_cur = MiB;
    signal(SIGXFSZ, SIG_IGN);
    ASSERT_EQ(setrlimit(RLIMIT_FSIZE, &small), 0);
    OpResult r = f.regions->pause("w", core::ControlOrigin::Api);
    setrlimit(RLIMIT_FSIZE, &old);
    signal(SIGXFSZ, SIG_DFL);
    EXPECT_FALSE(r.ok);
    EXPECT_NE(std::string(r.message).find("nothing was released: no room for the backup in"),
              std::string::npos)
        << r.message;
    EXPECT_EQ(residentBytes(w, 4 * MiB), 4 * MiB);
    EXPECT_TRUE(Fixture::holds(w, 4 * MiB, 9));
    EXPECT_TRUE(filesIn(f.dir).empty());
    EXPECT_EQ(heldBackupsIn(f.dir), 0u);
    f.regions->release(reinterpret_cast<uint64_t>(w));
}

TEST(Regions, AResumeThatCannotMapKeepsTheRegionPausedWithItsContent) {
    Fixture f;
    uint8_t* w = f.allocate("w", core::BackupKind::Disk, MiB, 4);
    ASSERT_TRUE(f.regions->pause("w", core::ControlOrigin::Api).ok);
    f.backend.failMap = true;
    OpResult r = f.regions->resume("w", core::ControlOrigin::Api);
    EXPECT_FALSE(r.ok);
    EXPECT_STREQ(r.message,
                 "1 region(s) could not be resumed and stay paused, their content kept: 'w': the "
                 "test made mapping fail");
    EXPECT_EQ(heldBackupsIn(f.dir), 1u);
    f.backend.failMap = false;
    ASSERT_TRUE(f.regions->resume("w", core::ControlOrigin::Api).ok);
    EXPECT_TRUE(Fixture::holds(w, MiB, 4));
    f.regions->release(reinterpret_cast<uint64_t>(w));
}

TEST(Regions, FreeingPausedMemoryReleasesItsAddressesAndBackup) {
    Fixture f;
    uint8_t* a = f.allocate("w", core::BackupKind::Disk, MiB, 1);
    uint8_t* b = f.allocate("w", core::BackupKind::Disk, MiB, 2);
    const OpResult paused = f.regions->pause("w", core::ControlOrigin::Api);
    ASSERT_TRUE(paused.ok);
    EXPECT_EQ(paused.bytes, 2 * MiB);
    EXPECT_TRUE(f.regions->release(reinterpret_cast<uint64_t>(a)));
    EXPECT_EQ(heldBackupsIn(f.dir), 1u);  // b's content is still in it
    // What the pause released: what the resume brings back, and what was freed.
    const OpResult resumed = f.regions->resume("w", core::ControlOrigin::Api);
    EXPECT_EQ(resumed.allocations, 1u);
    EXPECT_EQ(resumed.bytes, MiB);
    EXPECT_EQ(resumed.freedBytes, MiB);
    char json[1024];
    resumed.toJson("resume", json, sizeof json);
    EXPECT_NE(std::strstr(json, "\"freed_bytes\":1048576"), nullptr) << json;
    EXPECT_TRUE(Fixture::holds(b, MiB, 2));
    ASSERT_TRUE(f.regions->pause("w", core::ControlOrigin::Api).ok);
    EXPECT_TRUE(
        f.regions->release(reinterpret_cast<uint64_t>(b)));  // the last one: the backup goes
    EXPECT_EQ(heldBackupsIn(f.dir), 0u);
    // Nothing left to resume: what was freed is still said, once.
    const OpResult nothing = f.regions->resume("w", core::ControlOrigin::Api);
    EXPECT_FALSE(nothing.changed);
    EXPECT_EQ(nothing.freedBytes, MiB);
    EXPECT_EQ(f.regions->resume("w", core::ControlOrigin::Api).freedBytes, 0u);
    EXPECT_FALSE(f.regions->release(0x1234));  // not a region address
    core::Aggregator agg = f.finish();
    const auto& cpu = agg.devices().at(core::kDeviceCpu);
    EXPECT_EQ(cpu.freeCount, 2u);
    EXPECT_EQ(cpu.pausedBytes, 0u);
    EXPECT_EQ(cpu.currentBytes, 0u);
}

TEST(Regions, APausedRegionPausedAgainAfterNewAllocationsKeepsBothBackups) {
    Fixture f;
    uint8_t* a = f.allocate("kv", core::BackupKind::Disk, MiB, 1);
    ASSERT_TRUE(f.regions->pause("kv", core::ControlOrigin::Api).ok);
    uint8_t* b = f.allocate("kv", core::BackupKind::Disk, MiB, 2);
    OpResult second = f.regions->pause("kv", core::ControlOrigin::Api);
    EXPECT_EQ(second.allocations, 1u);  // only b was resident
    EXPECT_EQ(heldBackupsIn(f.dir), 2u);
    EXPECT_EQ(f.regions->resume("kv", core::ControlOrigin::Api).allocations, 2u);
    EXPECT_TRUE(Fixture::holds(a, MiB, 1));
    EXPECT_TRUE(Fixture::holds(b, MiB, 2));
    EXPECT_EQ(heldBackupsIn(f.dir), 0u);
}

TEST(Regions, TagsAndBackupsAreChecked) {
    Fixture f;
    Failure why;
    EXPECT_FALSE(f.regions->enter("", core::BackupKind::None, why));
    EXPECT_FALSE(f.regions->enter(std::string(64, 'x').c_str(), core::BackupKind::None, why));
    EXPECT_STREQ(why.text, "a region tag is 1 to 63 bytes long");
    EXPECT_FALSE(f.regions->enter("w", core::BackupKind::Host,
                                  why));  // CPU only: no pinned host memory here
    EXPECT_NE(std::string(why.text).find("use backup='disk'"), std::string::npos) << why.text;
    ASSERT_TRUE(f.regions->enter("w", core::BackupKind::Disk, why));
    f.regions->exit();
    ASSERT_TRUE(f.regions->enter("w", core::BackupKind::None, why)) << why.text;  // a second kind
    f.regions->exit();
    EXPECT_FALSE(f.regions->pause("unknown", core::ControlOrigin::Api).ok);
}

// torch_memory_saver decides the backup per allocation, and its examples enter the
// default tag with one backup, then another: a tag once refused the second kind.
// Now each allocation keeps the kind it was made with, and a pause of the tag
// backs each up its own way.
TEST(Regions, ATagHoldsAllocationsOfEachBackupKindItWasEnteredWith) {
    Fixture f;
    uint8_t* kept = f.allocate("kv", core::BackupKind::Disk, MiB, 1);
    uint8_t* dropped = f.allocate("kv", core::BackupKind::None, 2 * MiB, 2);
    char json[1024];
    ASSERT_GT(f.regions->describe(json, sizeof json), 0u);
    EXPECT_STREQ(json,
                 "[{\"tag\":\"kv\",\"device\":\"cpu\",\"bytes\":1048576,\"resident_bytes\":1048576,"
                 "\"paused_bytes\":0,\"state\":\"resident\",\"backup\":\"disk\"},"
                 "{\"tag\":\"kv\",\"device\":\"cpu\",\"bytes\":2097152,\"resident_bytes\":2097152,"
                 "\"paused_bytes\":0,\"state\":\"resident\",\"backup\":\"none\"}]");
    OpResult paused = f.regions->pause("kv", core::ControlOrigin::Api);
    ASSERT_TRUE(paused.ok) << paused.message;
    EXPECT_EQ(paused.allocations, 2u);
    EXPECT_EQ(paused.bytes, 3 * MiB);
    EXPECT_EQ(paused.regions, 2u);
    EXPECT_EQ(heldBackupsIn(f.dir), 1u);  // the disk one's file; none keeps nothing
    EXPECT_EQ(residentBytes(kept, MiB) + residentBytes(dropped, 2 * MiB), 0u);
    OpResult resumed = f.regions->resume("kv", core::ControlOrigin::Api);
    ASSERT_TRUE(resumed.ok) << resumed.message;
    EXPECT_EQ(resumed.allocations, 2u);
    EXPECT_TRUE(Fixture::holds(kept, MiB, 1));
    EXPECT_EQ(heldBackupsIn(f.dir), 0u);
}

// torch_memory_saver's regions serve only the device allocator: a CPU tensor made
// inside one stayed the program's own. A device-only region lets CPU allocations
// pass by to where they would go outside it (an enclosing region, or the heap),
// and takes a host backup in a process without CUDA (nothing of it is CPU memory).
TEST(Regions, ADeviceOnlyRegionLetsCpuAllocationsPassBy) {
    Fixture f;
    Failure why;
    ASSERT_TRUE(f.regions->enter("outer", core::BackupKind::Disk, why)) << why.text;
    ASSERT_TRUE(f.regions->enter("gpu", core::BackupKind::None, why, true)) << why.text;
    EXPECT_TRUE(f.regions->threadInRegion());           // a CUDA allocation would be the region's
    EXPECT_TRUE(f.regions->threadInRegionForCpu(256));  // the enclosing region takes it
    void* p = f.regions->serve(core::kDeviceCpu, 4096, 64, why);
    ASSERT_NE(p, nullptr) << why.text;
    f.regions->exit();
    f.regions->exit();
    char tag[64];
    ASSERT_TRUE(f.regions->tagOf(reinterpret_cast<uint64_t>(p), tag, sizeof tag));
    EXPECT_STREQ(tag, "outer");

    ASSERT_TRUE(f.regions->enter("gpu", core::BackupKind::Host, why, true)) << why.text;
    EXPECT_FALSE(f.regions->threadInRegionForCpu(1 << 20));  // the heap's
    EXPECT_EQ(f.regions->serve(core::kDeviceCpu, 4096, 64, why), nullptr);
    EXPECT_STREQ(why.text, "not in a region");
    f.regions->exit();
    EXPECT_FALSE(f.regions->enter("gpu", core::BackupKind::Host, why));  // CPU memory: refused
}

TEST(Regions, NestedRegionsGoToTheInnermost) {
    Fixture f;
    Failure why;
    ASSERT_TRUE(f.regions->enter("outer", core::BackupKind::None, why));
    ASSERT_TRUE(f.regions->enter("inner", core::BackupKind::None, why));
    void* p = f.regions->serve(core::kDeviceCpu, 4096, 64, why);
    f.regions->exit();
    void* q = f.regions->serve(core::kDeviceCpu, 4096, 64, why);
    f.regions->exit();
    EXPECT_FALSE(f.regions->threadInRegion());
    EXPECT_EQ(f.regions->pause("inner", core::ControlOrigin::Api).allocations, 1u);
    EXPECT_EQ(f.regions->pause("outer", core::ControlOrigin::Api).allocations, 1u);
    char tag[64];
    ASSERT_TRUE(f.regions->pausedAt(reinterpret_cast<uint64_t>(p), tag, sizeof tag));
    EXPECT_STREQ(tag, "inner");
    ASSERT_TRUE(f.regions->pausedAt(reinterpret_cast<uint64_t>(q), tag, sizeof tag));
    EXPECT_STREQ(tag, "outer");
    char json[1024];
    ASSERT_GT(f.regions->describe(json, sizeof json), 0u);
    // In the order the regions first served memory: inner first.
    EXPECT_STREQ(
        json,
        "[{\"tag\":\"inner\",\"device\":\"cpu\",\"bytes\":4096,\"resident_bytes\":0,\"paused_"
        "bytes\":4096,"
        "\"state\":\"paused\",\"backup\":\"none\"},{\"tag\":\"outer\",\"device\":\"cpu\",\"bytes\":"
        "4096,"
        "\"resident_bytes\":0,\"paused_bytes\":4096,\"state\":\"paused\",\"backup\":\"none\"}]");
}

// The control thread: a request down the socket, its reply up the stream.
TEST(ControlChannel, AnswersRequestsFromTheStream) {
    Fixture f;
    f.allocate("w", core::BackupKind::None, MiB, 0);
    RegionCommands commands(*f.regions);
    // The control thread is detached (in a target it lives as long as the process);
    // here it must be over before the fixture it reads goes away: closing the CLI's
    // end ends its stream, and streamEnded() is the last thing it does with them.
    struct EndAware final : CommandHandler {
        CommandHandler& inner;
        std::promise<void> ended;
        explicit EndAware(CommandHandler& h) : inner(h) {}
        uint8_t handle(size_t argc, const char* const* argv, char* out, size_t size) override {
            return inner.handle(argc, argv, out, size);
        }
        void streamEnded() override {
            inner.streamEnded();
            ended.set_value();
        }
    } handler(commands);
    std::future<void> ended = handler.ended.get_future();
    ASSERT_TRUE(startControlThread(f.sink, f.engine, handler, /*atOnce=*/true));
    auto request = [&](uint64_t id, std::vector<std::string> argv) {
        size_t bytes = 0;
        for (const auto& a : argv) bytes += a.size();
        std::vector<uint8_t> buf(core::requestBytes(argv.size(), bytes));
        uint8_t* p = core::encodeRequestHead(buf.data(), id, argv.size());
        for (const auto& a : argv) p = core::putString(p, a.data(), a.size());
        ASSERT_EQ(write(f.fds[1], buf.data(), static_cast<size_t>(p - buf.data())), p - buf.data());
    };
    // Replies come in order; read records until the third one.
    struct Replies : core::Aggregator {
        size_t wanted = 0;
    } agg;
    core::StreamDecoder d(agg);
    request(1, {"status"});
    request(2, {"pause", "w"});
    request(3, {"frobnicate"});
    std::vector<uint8_t> buf(1 << 16);
    while (agg.replies().size() < 3) {
        ssize_t n = read(f.fds[1], buf.data(), buf.size());
        ASSERT_GT(n, 0);
        d.feed(buf.data(), static_cast<size_t>(n));
    }
    EXPECT_EQ(agg.replies()[0].status, core::ReplyStatus::Ok);
    EXPECT_EQ(agg.replies()[0].body,
              "{\"regions\":[{\"tag\":\"w\",\"device\":\"cpu\",\"bytes\":1048576,\"resident_"
              "bytes\":1048576,"
              "\"paused_bytes\":0,\"state\":\"resident\",\"backup\":\"none\"}],"
              "\"host_pool_bytes\":0,\"memory_margin_bytes\":0,\"threads_waiting\":0}");
    EXPECT_EQ(agg.replies()[1].id, 2u);
    EXPECT_NE(agg.replies()[1].body.find("\"ok\":true,\"changed\":true,\"bytes\":1048576"),
              std::string::npos)
        << agg.replies()[1].body;
    EXPECT_EQ(agg.replies()[2].status, core::ReplyStatus::Unknown);
    ASSERT_EQ(agg.controls().size(), 1u);
    EXPECT_EQ(agg.controls()[0].f.origin, core::ControlOrigin::Ctl);
    shutdown(f.fds[1], SHUT_RDWR);
    ended.wait();
}

TEST(ControlChannel, RejectsBytesThatAreNoRequests) {
    struct Count {
        int calls = 0;
        std::vector<std::pair<uint64_t, std::string>> refused;
    } count;
    auto cb = [](void* c, uint64_t, size_t, const char* const*) {
        ++static_cast<Count*>(c)->calls;
    };
    auto refuse = [](void* c, uint64_t id, const char* why) {
        static_cast<Count*>(c)->refused.emplace_back(id, why);
    };
    uint8_t junk[] = {'Z', 1, 2};
    EXPECT_EQ(decodeRequests(junk, sizeof junk, cb, refuse, &count), -1);
    uint8_t partial[] = {'Q', 5, 1, 6, 's', 't'};  // a string cut short: wait for more
    EXPECT_EQ(decodeRequests(partial, sizeof partial, cb, refuse, &count), 0);
    // Framed, but no command: answered as refused, and what follows is read.
    uint8_t nul[] = {'Q', 5, 1, 3, 'a', 0, 'b', 'Q', 6, 0};
    EXPECT_EQ(decodeRequests(nul, sizeof nul, cb, refuse, &count), 10);
    EXPECT_EQ(count.calls, 0);
    ASSERT_EQ(count.refused.size(), 2u);
    EXPECT_EQ(count.refused[0],
              std::make_pair(uint64_t{5}, std::string("a word with a NUL byte in it")));
    EXPECT_EQ(count.refused[1],
              std::make_pair(uint64_t{6}, std::string("a request with no command")));
}

// Over a limit, a request is still framed: refused with the limit, and the channel
// reads on (a `ctl pause` of 65 tags used to leave the channel deaf for the run).
TEST(ControlChannel, ARequestOverALimitIsRefusedAndTheNextOneRead) {
    struct Seen {
        std::vector<std::vector<std::string>> requests;
        std::vector<std::pair<uint64_t, std::string>> refused;
    } seen;
    auto cb = [](void* c, uint64_t, size_t argc, const char* const* argv) {
        static_cast<Seen*>(c)->requests.emplace_back(argv, argv + argc);
    };
    auto refuse = [](void* c, uint64_t id, const char* why) {
        static_cast<Seen*>(c)->refused.emplace_back(id, why);
    };
    auto encode = [](std::vector<uint8_t>& out, uint64_t id, const std::vector<std::string>& argv) {
        std::vector<uint8_t> record(core::requestBytes(argv.size(), 70000));
        uint8_t* p = core::encodeRequestHead(record.data(), id, argv.size());
        for (const auto& a : argv) p = core::putString(p, a.data(), a.size());
        out.insert(out.end(), record.data(), p);
    };
    std::vector<std::string> tags66{"pause"}, tags65{"pause"};
    for (int i = 0; i < 65; ++i) tags66.push_back("t" + std::to_string(i));
    for (int i = 0; i < 64; ++i) tags65.push_back("t" + std::to_string(i));
    std::vector<uint8_t> wire;
    encode(wire, 1, tags66);
    encode(wire, 2, {"pause", std::string(4097, 'x')});
    encode(wire, 3, tags65);
    encode(wire, 4, {"pause", std::string(4096, 'y')});
    encode(wire, 5, {"status"});
    EXPECT_EQ(decodeRequests(wire.data(), wire.size(), cb, refuse, &seen),
              static_cast<long>(wire.size()));
    ASSERT_EQ(seen.refused.size(), 2u);
    EXPECT_EQ(
        seen.refused[0],
        std::make_pair(uint64_t{1}, std::string("a request of more than 65 words (64 tags)")));
    EXPECT_EQ(seen.refused[1],
              std::make_pair(uint64_t{2}, std::string("a word of more than 4096 bytes")));
    ASSERT_EQ(seen.requests.size(), 3u);
    EXPECT_EQ(seen.requests[0], tags65);
    EXPECT_EQ(seen.requests[1], (std::vector<std::string>{"pause", std::string(4096, 'y')}));
    EXPECT_EQ(seen.requests[2], std::vector<std::string>{"status"});
}

// ---- free-block cache, --pausable all, courtesy, safe points -------------------------

// A freed region allocation is kept (CPU pages) and handed out again for the same
// size: same address, no system call. A pause lets the cached blocks go without a
// backup, and says so.
TEST(Regions, FreedBlocksAreReusedAndAPauseLetsThemGo) {
    Fixture f;
    uint8_t* a = f.allocate("kv", core::BackupKind::Disk, MiB, 1);
    uint8_t* keep = f.allocate("kv", core::BackupKind::Disk, 2 * MiB, 2);
    ASSERT_TRUE(f.regions->release(reinterpret_cast<uint64_t>(a)));
    uint8_t* again = f.allocate("kv", core::BackupKind::Disk, MiB, 3);
    EXPECT_EQ(again, a);  // the cached block
    ASSERT_TRUE(f.regions->release(reinterpret_cast<uint64_t>(again)));
    EXPECT_EQ(residentBytes(a, MiB), MiB);  // cached: still the program's pages

    OpResult paused = f.regions->pause("kv", core::ControlOrigin::Api);
    ASSERT_TRUE(paused.ok) << paused.message;
    EXPECT_EQ(paused.bytes, 3 * MiB);  // 2 MiB paused, 1 MiB let go
    EXPECT_EQ(paused.cachedBytes, MiB);
    char json[1024];
    paused.toJson("pause", json, sizeof json);
    EXPECT_NE(std::strstr(json, "\"cached_bytes\":1048576"), nullptr) << json;
    EXPECT_EQ(paused.allocations, 1u);
    EXPECT_STREQ(paused.message,
                 "paused 2097152 bytes in 1 allocation, and let go of 1048576 bytes of free "
                 "blocks kept for reuse (no backup needed)");
    OpResult resumed = f.regions->resume("kv", core::ControlOrigin::Api);
    EXPECT_EQ(resumed.bytes, 2 * MiB);  // the cached block is not brought back
    EXPECT_EQ(resumed.freedBytes, 0u);
    EXPECT_TRUE(Fixture::holds(keep, 2 * MiB, 2));
    core::Aggregator agg = f.finish();
    const auto& cpu = agg.devices().at(core::kDeviceCpu);
    EXPECT_EQ(cpu.allocCount, 3u);
    EXPECT_EQ(cpu.freeCount, 2u);
    EXPECT_EQ(cpu.currentBytes, 2 * MiB);
}

// torch_memory_saver's TMS_INIT_ENABLE: device memory outside explicit regions is
// the "default" region's, with the backup its variables name; CPU memory is not.
TEST(Regions, AnImplicitDeviceOnlyRegionTakesNoCpuMemory) {
    Fixture f;
    f.regions->setPausableAll(core::BackupKind::Host, true);
    EXPECT_TRUE(f.regions->threadInRegion());
    EXPECT_FALSE(f.regions->threadInRegionForCpu(1 << 20));
    Failure why;
    EXPECT_EQ(f.regions->serve(core::kDeviceCpu, 1 << 20, 64, why), nullptr);
    ASSERT_TRUE(f.regions->enter("cpu", core::BackupKind::None, why)) << why.text;
    EXPECT_TRUE(f.regions->threadInRegionForCpu(256));  // an explicit region still takes it
    f.regions->exit();
}

// --pausable all: CPU storages of 64 KiB and more go to the "default" region;
// smaller ones stay in the heap, unless an explicit region asks for them.
TEST(Regions, PausableAllTakesCpuStoragesFrom64KiB) {
    Fixture f;
    EXPECT_FALSE(f.regions->threadInRegionForCpu(1 << 20));
    f.regions->setPausableAll();
    EXPECT_TRUE(f.regions->pausableAll());
    EXPECT_FALSE(f.regions->threadInRegionForCpu(Regions::kImplicitMinCpuBytes - 1));
    EXPECT_TRUE(f.regions->threadInRegionForCpu(Regions::kImplicitMinCpuBytes));
    Failure why;
    ASSERT_TRUE(f.regions->enter("small", core::BackupKind::None, why)) << why.text;
    EXPECT_TRUE(f.regions->threadInRegionForCpu(256));
    ASSERT_TRUE(f.regions->enterNone(why));
    EXPECT_FALSE(f.regions->threadInRegionForCpu(1 << 20));
    f.regions->exit();
    f.regions->exit();
    auto* p = static_cast<uint8_t*>(f.regions->serve(core::kDeviceCpu, 100000, 64, why));
    ASSERT_NE(p, nullptr) << why.text;
    char json[512];
    ASSERT_GT(f.regions->describe(json, sizeof json), 0u);
    EXPECT_STREQ(json,
                 "[{\"tag\":\"default\",\"device\":\"cpu\",\"bytes\":100000,\"resident_bytes\":"
                 "100000,\"paused_bytes\":0,\"state\":\"resident\",\"backup\":\"none\"}]");
    EXPECT_TRUE(f.regions->release(reinterpret_cast<uint64_t>(p)));
}

// Courtesy from inside: every region paused with a backup whatever its own says
// (a "none" region's content comes back too); yield twice and restore twice are
// said plainly.
TEST(Courtesy, YieldBacksUpEveryRegionAndRestoreBringsItBack) {
    Fixture f;
    SafePoint safePoint;
    Courtesy courtesy(*f.regions, safePoint);
    uint8_t* scratch = f.allocate("scratch", core::BackupKind::None, 3 * MiB, 5);
    uint8_t* weights = f.allocate("weights", core::BackupKind::Disk, MiB, 6);

    OpResult y = courtesy.yieldHere(core::BackupKind::Host);
    ASSERT_TRUE(y.ok) << y.message;
    EXPECT_TRUE(y.changed);
    EXPECT_EQ(y.bytes, 4 * MiB);
    EXPECT_EQ(y.regions, 2u);
    ASSERT_EQ(y.deviceCount, 1);
    EXPECT_EQ(y.devices[0].device, core::kDeviceCpu);
    EXPECT_EQ(y.devices[0].bytes, 4 * MiB);
    EXPECT_EQ(residentBytes(scratch, 3 * MiB), 0u);
    EXPECT_EQ(heldBackupsIn(f.dir), 2u);  // CPU memory goes to disk, both regions
    OpResult twice = courtesy.yieldHere(core::BackupKind::Host);
    EXPECT_FALSE(twice.changed);
    EXPECT_STREQ(twice.message, "the program has yielded already; nothing done");

    OpResult r = courtesy.restoreHere();
    ASSERT_TRUE(r.ok) << r.message;
    EXPECT_EQ(r.bytes, 4 * MiB);
    EXPECT_TRUE(Fixture::holds(scratch, 3 * MiB, 5));
    EXPECT_TRUE(Fixture::holds(weights, MiB, 6));
    EXPECT_EQ(heldBackupsIn(f.dir), 0u);
    EXPECT_STREQ(courtesy.restoreHere().message, "the program has not yielded; nothing to restore");

    core::Aggregator agg = f.finish();
    ASSERT_EQ(agg.controls().size(), 4u);  // one per region, each way
    EXPECT_EQ(agg.controls()[0].f.action, core::ControlAction::Yield);
    EXPECT_EQ(agg.controls()[0].f.backup, core::BackupKind::Disk);
    EXPECT_EQ(agg.controls()[3].f.action, core::ControlAction::Restore);
}

TEST(Courtesy, NothingToYieldSaysHowToGetSomething) {
    Fixture f;
    SafePoint safePoint;
    Courtesy courtesy(*f.regions, safePoint);
    OpResult y = courtesy.yieldHere(core::BackupKind::Disk);
    EXPECT_TRUE(y.ok);
    EXPECT_FALSE(y.changed);
    EXPECT_STREQ(y.message,
                 "nothing to yield: no region holds resident memory (under `memtool run "
                 "--pausable all` every allocation is in one)");
}

namespace {

// The answer of a courtesy command that moved nothing: every field of one that
// did, zero where nothing moved.
std::string nothingMoved(bool ok, const char* action, bool parked, const char* message) {
    const bool restore = std::strcmp(action, "restore") == 0;
    return std::string("{\"ok\":") + (ok ? "true" : "false") + ",\"action\":\"" + action +
           "\",\"changed\":false,\"bytes\":0,\"" + (restore ? "freed_bytes" : "cached_bytes") +
           "\":0," +
           (restore ? "\"verify_failed\":false,"
                    : "\"to_host_bytes\":0,\"to_disk_bytes\":0,\"over_budget_bytes\":0,") +
           "\"allocations\":0,\"seconds\":0.000000,\"park_seconds\":0.000000,\"parked\":" +
           (parked ? "true" : "false") + ",\"message\":\"" + message + "\",\"devices\":[]" +
           (restore ? "" : ",\"nccl\":\"no NCCL in this process\"") + "}";
}

}  // namespace

// From outside: without an interpreter (this test binary has none) and without
// marks, yield is refused; with marks, the program is parked at its next one.
TEST(Courtesy, CtlYieldParksAProgramAtTheSafePointsItMarks) {
    Fixture f;
    SafePoint safePoint;
    Courtesy courtesy(*f.regions, safePoint);
    uint8_t* w = f.allocate("w", core::BackupKind::None, MiB, 9);
    const char* yieldArgs[] = {"yield", "--wait", "5"};
    const char* shortYield[] = {"yield", "--wait", "0.2"};
    char out[4096];
    EXPECT_EQ(courtesy.yieldCommand(3, shortYield, out, sizeof out),
              static_cast<uint8_t>(core::ReplyStatus::Refused));
    EXPECT_EQ(out, nothingMoved(false, "yield", false,
                                "this program runs no Python interpreter and marked no safe point "
                                "within 0.2 s (memtool_safe_point() in the collector's C API); "
                                "yield is refused"));
    // Refused before anything is done, each: a wait must read whole (atof took
    // "inf" as forever and "5s" as 5).
    for (const char* bad : {"--to=tape", "inf", "5s", "0", "-1", "nan", "1e8", ""}) {
        const char* badArgs[] = {"yield", "--to", "tape"};
        const char* badWait[] = {"yield", "--wait", bad};
        const char* const* args = std::strcmp(bad, "--to=tape") == 0 ? badArgs : badWait;
        EXPECT_EQ(courtesy.yieldCommand(3, args, out, sizeof out),
                  static_cast<uint8_t>(core::ReplyStatus::Refused))
            << bad;
        EXPECT_EQ(out, nothingMoved(false, "yield", false,
                                    "yield takes [--to host|disk] [--wait SECONDS] (seconds above "
                                    "0, at most 10000000)"))
            << bad;
    }
    // Every answer has the fields of one that moved memory, zero where none moved:
    // a restore before any yield too.
    ASSERT_EQ(courtesy.restoreCommand(out, sizeof out), static_cast<uint8_t>(core::ReplyStatus::Ok))
        << out;
    EXPECT_EQ(out, nothingMoved(true, "restore", false,
                                "the program has not yielded; nothing to restore"));

    // The "program": a loop of safe points on another thread, counting its steps.
    std::atomic<bool> stop{false};
    std::atomic<uint64_t> steps{0};
    safePoint.reached();  // it marks safe points from now on
    std::thread program([&] {
        while (!stop.load()) {
            safePoint.reached();
            steps.fetch_add(1);
        }
    });
    ASSERT_EQ(courtesy.yieldCommand(3, yieldArgs, out, sizeof out),
              static_cast<uint8_t>(core::ReplyStatus::Ok))
        << out;
    EXPECT_TRUE(safePoint.parked());
    const uint64_t parkedAt = steps.load();
    EXPECT_EQ(residentBytes(w, MiB), 0u);
    EXPECT_NE(std::strstr(out, "\"changed\":true,\"bytes\":1048576"), nullptr) << out;
    EXPECT_EQ(steps.load(), parkedAt);  // it does not run while yielded
    // Asked again: nothing moves, and the answer says the program is parked.
    ASSERT_EQ(courtesy.yieldCommand(3, yieldArgs, out, sizeof out),
              static_cast<uint8_t>(core::ReplyStatus::Ok))
        << out;
    EXPECT_EQ(out, nothingMoved(true, "yield", true,
                                "the program has yielded already; nothing done (restore gives its "
                                "memory back)"));
    ASSERT_EQ(courtesy.restoreCommand(out, sizeof out), static_cast<uint8_t>(core::ReplyStatus::Ok))
        << out;
    EXPECT_TRUE(Fixture::holds(w, MiB, 9));  // a "none" region's content, backed up anyway
    stop.store(true);
    program.join();  // it was let go: the loop ends
    EXPECT_FALSE(safePoint.parked());
}

// A program without Python that has not marked a safe point yet (a LibTorch program
// in its first half second, before its loop) was refused at once: the park now
// waits for its first mark, within the wait.
TEST(Courtesy, AParkWaitsForTheFirstSafePointOfAProgramThatHasMarkedNone) {
    SafePoint safePoint;
    SafePoint::Outcome outcome = SafePoint::Outcome::Busy;
    std::thread asker([&] { outcome = safePoint.park(60ull * 1000000000); });
    while (!safePoint.asked()) std::this_thread::yield();
    std::thread program([&] { safePoint.reached(); });  // its first mark: parks there
    while (!safePoint.parked()) std::this_thread::yield();
    asker.join();
    EXPECT_EQ(outcome, SafePoint::Outcome::Parked);
    EXPECT_TRUE(safePoint.release());
    program.join();
    EXPECT_FALSE(safePoint.parked());
}

// A yield from outside runs on the control thread, which records nothing of its
// own; what emptying PyTorch's cache frees is the program's memory all the same.
TEST(Courtesy, WhatEmptyingTheCacheFreesIsRecordedFromTheControlThread) {
    Fixture f;
    SafePoint safePoint;
    Courtesy courtesy(*f.regions, safePoint);
    f.allocate("w", core::BackupKind::None, MiB, 1);
    static Engine* engine;
    engine = &f.engine;
    f.engine.alloc(core::kDeviceCpu, 0x10000, 4096);  // a block the "cache" holds
    courtesy.setCacheEmptier([] { engine->free(0x10000); });
    std::thread control([&] {
        RecursionGuard ours;  // as the control thread runs
        EXPECT_TRUE(courtesy.yieldHere(core::BackupKind::Disk).ok);
        EXPECT_TRUE(courtesy.restoreHere().ok);
    });
    control.join();
    core::Aggregator agg = f.finish();
    EXPECT_TRUE(agg.streamVerified());  // nothing missed
    ASSERT_TRUE(agg.end().has_value());
    EXPECT_EQ(agg.end()->missedEvents, 0u);
    EXPECT_EQ(agg.freesReceived(), 1u);
}

// A policy's gc runs on the control thread too: what emptying the cache frees is
// recorded as the program's, and the answer says what it did.
TEST(Collection, WhatAGcEmptiesFromTheCacheIsRecordedFromTheControlThread) {
    Fixture f;
    SafePoint safePoint;
    Collection collection(safePoint);
    static Engine* engine;
    engine = &f.engine;
    f.engine.alloc(core::kDeviceCpu, 0x10000, 4096);
    collection.setCacheEmptier([] { engine->free(0x10000); });
    char out[1024] = "";
    std::thread control([&] {
        RecursionGuard ours;
        const char* argv[] = {"gc"};
        EXPECT_EQ(collection.command(1, argv, out, sizeof out),
                  static_cast<uint8_t>(core::ReplyStatus::Ok));
    });
    control.join();
    EXPECT_NE(std::string(out).find("\"ok\":true,\"action\":\"gc\""), std::string::npos) << out;
    EXPECT_NE(std::string(out).find("\"torch_cache_asked\":true"), std::string::npos) << out;
    core::Aggregator agg = f.finish();
    EXPECT_TRUE(agg.streamVerified());
    ASSERT_TRUE(agg.end().has_value());
    EXPECT_EQ(agg.end()->missedEvents, 0u);
    EXPECT_EQ(agg.freesReceived(), 1u);
}

// A yield backs up memory no thread can write meanwhile; a pause the program asked
// for leaves it as it is (its program does not touch what it pauses).
TEST(Courtesy, AYieldBacksUpMemoryThatNoThreadCanWrite) {
    Fixture f;
    SafePoint safePoint;
    Courtesy courtesy(*f.regions, safePoint);
    uint8_t* w = f.allocate("w", core::BackupKind::Disk, MiB, 4);
    ASSERT_TRUE(f.regions->pause("w", core::ControlOrigin::Api).ok);
    EXPECT_EQ(f.backend.copiesOfWritableMemory, 1);
    ASSERT_TRUE(f.regions->resume("w", core::ControlOrigin::Api).ok);
    ASSERT_TRUE(courtesy.yieldHere(core::BackupKind::Disk).ok);
    EXPECT_EQ(f.backend.copiesOfReadOnlyMemory, 1);
    EXPECT_EQ(f.backend.copiesOfWritableMemory, 1);
    ASSERT_TRUE(courtesy.restoreHere().ok);
    EXPECT_TRUE(Fixture::holds(w, MiB, 4));
    w[0] = 1;  // writable again
    // A yield that cannot back up leaves the memory writable, as it was.
    f.backend.failCopyOut = true;
    EXPECT_FALSE(courtesy.yieldHere(core::BackupKind::Disk).ok);
    w[1] = 2;
    EXPECT_EQ(w[1], 2);
}

// From outside: a thread of the program that runs on while its main thread is
// parked (inside an op, the GIL released) and writes into yielded memory waits
// for restore, then its write lands.
TEST(Courtesy, AThreadThatTouchesYieldedMemoryWaitsForRestore) {
    // The handler outlives every fixture: it looks paused addresses up here.
    static Regions* const lookups = new Regions();
    installPausedAccessHandler(*lookups);
    Fixture f;
    SafePoint safePoint;
    Courtesy courtesy(*f.regions, safePoint);
    uint8_t* w = f.allocate("w", core::BackupKind::None, MiB, 8);
    std::atomic<bool> stop{false};
    safePoint.reached();
    std::thread program([&] {
        while (!stop.load()) safePoint.reached();
    });
    const char* yieldArgs[] = {"yield"};
    char out[4096];
    ASSERT_EQ(courtesy.yieldCommand(1, yieldArgs, out, sizeof out),
              static_cast<uint8_t>(core::ReplyStatus::Ok))
        << out;
    EXPECT_EQ(residentBytes(w, MiB), 0u);
    std::atomic<bool> wrote{false};
    std::thread op([&] {
        w[100] = 0xAB;
        wrote.store(true);
    });
    while (threadsHeld() == 0) std::this_thread::yield();
    EXPECT_FALSE(wrote.load());  // it waits
    ASSERT_EQ(courtesy.restoreCommand(out, sizeof out), static_cast<uint8_t>(core::ReplyStatus::Ok))
        << out;
    op.join();
    EXPECT_TRUE(wrote.load());
    EXPECT_NE(std::strstr(out, "\"threads_waited\":1"), nullptr) << out;
    EXPECT_NE(std::strstr(out, "1 thread that touched yielded memory waited for it and went on"),
              nullptr)
        << out;
    EXPECT_EQ(w[100], 0xAB);
    w[100] = static_cast<uint8_t>(8 + 100 * 7);  // the pattern's byte: the rest is restored
    EXPECT_TRUE(Fixture::holds(w, MiB, 8));
    stop.store(true);
    program.join();

    // A child forked while the hold is on is not held: a fault of its own ends it.
    holdFaultsWhileYielded(true);
    const pid_t child = fork();
    if (child == 0) {
        void* page = mmap(nullptr, 4096, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        *static_cast<volatile char*>(page) = 1;
        _exit(0);
    }
    holdFaultsWhileYielded(false);
    int status = 0;
    ASSERT_EQ(waitpid(child, &status, 0), child);  // held, it would never return
    // The fault goes on to the handler before memtool's: the default (SIGSEGV), or
    // AddressSanitizer's, which reports it and exits 1.
    EXPECT_TRUE((WIFSIGNALED(status) && WTERMSIG(status) == SIGSEGV) ||
                (WIFEXITED(status) && WEXITSTATUS(status) != 0))
        << status;
}

// A program whose marks stop coming (it blocks elsewhere): the park times out and
// is withdrawn, and a late safe point goes straight on.
TEST(Courtesy, AParkThatTimesOutIsWithdrawn) {
    SafePoint safePoint;
    safePoint.reached();  // marks safe points, but none comes during the park
    EXPECT_EQ(safePoint.park(20 * 1000 * 1000), SafePoint::Outcome::TimedOut);
    EXPECT_FALSE(safePoint.parked());
    safePoint.reached();  // returns at once: nothing is asked for
    EXPECT_FALSE(safePoint.release());
}

// What a fork child finds in its table is its copy of its parent's allocations:
// not its regions' (not listed, not paused), freed the usual way; its own
// allocations make its regions. (The fork handler's step, run in this process.)
TEST(Regions, AForkChildsInheritedAllocationsAreNotItsRegions) {
    Fixture f;
    uint8_t* a = f.allocate("kv", core::BackupKind::Disk, MiB, 1);
    uint8_t* p = f.allocate("old", core::BackupKind::Disk, MiB, 2);
    uint8_t* c = f.allocate("kv", core::BackupKind::Disk, 2 * MiB, 3);
    ASSERT_TRUE(f.regions->pause("old", core::ControlOrigin::Api).ok);
    EXPECT_TRUE(f.regions->release(reinterpret_cast<uint64_t>(c)));  // kept for reuse
    ASSERT_EQ(heldBackupsIn(f.dir), 1u);

    f.regions->lockTableForFork();
    f.regions->childAfterFork();
    f.regions->unlockTableAfterFork();

    char list[4096];
    ASSERT_GT(f.regions->describe(list, sizeof list), 0u);
    EXPECT_STREQ(list, "[]");
    const OpResult nothing = f.regions->pause(nullptr, core::ControlOrigin::Ctl);
    EXPECT_TRUE(nothing.ok);
    EXPECT_FALSE(nothing.changed) << nothing.message;
    EXPECT_TRUE(Fixture::holds(a, MiB, 1));  // its copy, untouched
    char tag[64];
    EXPECT_TRUE(f.regions->pausedAt(reinterpret_cast<uint64_t>(p), tag, sizeof tag));
    EXPECT_TRUE(f.regions->release(reinterpret_cast<uint64_t>(a)));
    EXPECT_TRUE(f.regions->release(reinterpret_cast<uint64_t>(p)));
    EXPECT_FALSE(f.regions->pausedAt(reinterpret_cast<uint64_t>(p), tag, sizeof tag));
    EXPECT_EQ(heldBackupsIn(f.dir), 0u);  // its copy of the parent's backup: closed

    uint8_t* own = f.allocate("kv", core::BackupKind::Disk, 2 * MiB, 4);
    ASSERT_GT(f.regions->describe(list, sizeof list), 0u);
    EXPECT_STREQ(list, R"([{"tag":"kv","device":"cpu","bytes":2097152,"resident_bytes":2097152,)"
                       R"("paused_bytes":0,"state":"resident","backup":"disk"}])");
    const OpResult paused = f.regions->pause(nullptr, core::ControlOrigin::Ctl);
    EXPECT_TRUE(paused.ok) << paused.message;
    EXPECT_EQ(paused.bytes, 2 * MiB);
    EXPECT_EQ(paused.allocations, 1u);
    ASSERT_TRUE(f.regions->resume(nullptr, core::ControlOrigin::Ctl).ok);
    EXPECT_TRUE(Fixture::holds(own, 2 * MiB, 4));
    EXPECT_TRUE(f.regions->release(reinterpret_cast<uint64_t>(own)));
}

// A verified region (enter's verify, or --verify for every tag): each pause
// checksums what it backs up, each resume checks what came back. A backup the
// test spoils while paused fails the resume loudly, naming the allocation; the
// same spoiled backup of a region not verified comes back wrong in silence.
TEST(Regions, AVerifiedResumeFindsContentThatCameBackDifferent) {
    Fixture f;
    Failure why;
    auto allocate = [&](const char* tag, bool verify, uint64_t bytes, uint8_t seed) {
        EXPECT_TRUE(f.regions->enter(tag, core::BackupKind::Disk, why, false, verify)) << why.text;
        auto* p = static_cast<uint8_t*>(f.regions->serve(core::kDeviceCpu, bytes, 64, why));
        f.regions->exit();
        for (uint64_t i = 0; p && i < bytes; ++i) p[i] = static_cast<uint8_t>(seed + i * 7);
        return p;
    };
    uint8_t* a = allocate("v", true, 16 * MiB, 1);  // summed beside its copy (8 MiB or more)
    uint8_t* b = allocate("v", false, 2 * MiB, 2);  // the tag is verified: b is too
    uint8_t* plain = allocate("plain", false, 2 * MiB, 3);
    ASSERT_TRUE(a && b && plain);

    // Intact: verified and resumed.
    ASSERT_TRUE(f.regions->pause("v", core::ControlOrigin::Api).ok);
    OpResult resumed = f.regions->resume("v", core::ControlOrigin::Api);
    EXPECT_TRUE(resumed.ok) << resumed.message;
    EXPECT_FALSE(resumed.verifyFailed);
    EXPECT_STREQ(resumed.message, "resumed 18874368 bytes in 2 allocations");

    // Spoiled: b's byte 100 (b follows a's 16 MiB in the region's backup).
    ASSERT_TRUE(f.regions->pause("v", core::ControlOrigin::Api).ok);
    ASSERT_TRUE(corruptBackupIn(f.dir, 16 * MiB + 100));
    resumed = f.regions->resume("v", core::ControlOrigin::Api);
    EXPECT_FALSE(resumed.ok);
    EXPECT_TRUE(resumed.verifyFailed);
    EXPECT_EQ(resumed.bytes, 18 * MiB);  // resumed, with what came back
    char address[32];
    std::snprintf(address, sizeof address, "0x%llx",
                  static_cast<unsigned long long>(reinterpret_cast<uint64_t>(b)));
    const std::string said = resumed.message;
    EXPECT_EQ(said.rfind("verify: region 'v' on cpu came back different from what was paused: 1 "
                         "of 2 allocations, the first at " +
                             std::string(address) + " (2097152 bytes; checksum ",
                         0),
              0u)
        << said;
    EXPECT_NE(said.find(" after the resume); it is resumed with that content"), std::string::npos)
        << said;
    EXPECT_TRUE(Fixture::holds(a, 16 * MiB, 1));
    EXPECT_EQ(b[100], static_cast<uint8_t>((2 + 100 * 7) ^ 0xff));
    char answer[2048];
    resumed.toJson("resume", answer, sizeof answer);
    EXPECT_NE(std::string(answer).find("\"verify_failed\":true"), std::string::npos) << answer;

    // Not verified: the same spoiling comes back unnoticed.
    ASSERT_TRUE(f.regions->pause("plain", core::ControlOrigin::Api).ok);
    ASSERT_TRUE(corruptBackupIn(f.dir, 100));
    resumed = f.regions->resume("plain", core::ControlOrigin::Api);
    EXPECT_TRUE(resumed.ok);
    EXPECT_FALSE(resumed.verifyFailed);
    EXPECT_EQ(plain[100], static_cast<uint8_t>((3 + 100 * 7) ^ 0xff));
    // ...unless every tag is verified (memtool run --verify).
    f.regions->setVerifyAll(true);
    ASSERT_TRUE(f.regions->pause("plain", core::ControlOrigin::Api).ok);
    ASSERT_TRUE(corruptBackupIn(f.dir, 2 * MiB - 1));
    resumed = f.regions->resume("plain", core::ControlOrigin::Api);
    EXPECT_TRUE(resumed.verifyFailed);
    EXPECT_EQ(std::string(resumed.message)
                  .rfind("verify: region 'plain' on cpu came back different from what was paused: "
                         "1 of 1 allocations",
                         0),
              0u)
        << resumed.message;

    for (uint8_t* p : {a, b, plain}) EXPECT_TRUE(f.regions->release(reinterpret_cast<uint64_t>(p)));
    core::Aggregator agg = f.finish();
    // Said in the trace, and each failed resume's event says it failed.
    size_t warned = 0;
    for (const auto& n : agg.notes()) warned += n.text.rfind("verify: region '", 0) == 0;
    EXPECT_EQ(warned, 2u);
    size_t failedResumes = 0;
    for (const auto& c : agg.controls())
        failedResumes += c.f.action == core::ControlAction::Resume && !c.f.ok;
    EXPECT_EQ(failedResumes, 2u);
}
