#include <gtest/gtest.h>

#include <map>
#include <string>

#include "collectors/control/TmsEnvironment.h"

namespace memtool::collectors::control {
namespace {

std::map<std::string, std::string> gEnv;
const char* fakeEnv(const char* name) {
    auto it = gEnv.find(name);
    return it == gEnv.end() ? nullptr : it->second.c_str();
}

TmsInit read(const std::map<std::string, std::string>& env, std::string* why = nullptr) {
    gEnv = env;
    TmsInit init;
    char text[256] = "";
    const bool ok = readTmsInit(fakeEnv, &init, text, sizeof text);
    if (why) *why = ok ? "" : text;
    return init;
}

TEST(TmsEnvironment, UnsetIsOffAndEachBackupIsRead) {
    EXPECT_FALSE(read({}).enable);
    EXPECT_FALSE(read({{"TMS_INIT_ENABLE", "0"}}).enable);
    TmsInit on = read({{"TMS_INIT_ENABLE", "1"}});
    EXPECT_TRUE(on.enable);
    EXPECT_EQ(on.backup, core::BackupKind::None);
    on = read({{"TMS_INIT_ENABLE", "yes"}, {"TMS_INIT_ENABLE_CPU_BACKUP", "TRUE"}});
    EXPECT_TRUE(on.enable);
    EXPECT_EQ(on.backup, core::BackupKind::Host);
    on = read({{"TMS_INIT_ENABLE", "true"},
               {"TMS_INIT_ENABLE_CPU_BACKUP", "NO"},
               {"TMS_INIT_ENABLE_DISK_BACKUP", "YES"},
               {"TMS_INIT_CPU_BACKUP_BACKEND", "mmap"}});
    EXPECT_TRUE(on.enable);
    EXPECT_EQ(on.backup, core::BackupKind::Disk);
}

TEST(TmsEnvironment, TheDiskChunkIsInMibAndZeroIsTorchMemorySaversDefault) {
    EXPECT_EQ(read({}).diskChunkBytes, 0u);
    EXPECT_EQ(read({{"TMS_DISK_BACKUP_CHUNK_MB", "8"}}).diskChunkBytes, 8u << 20);
    EXPECT_EQ(read({{"TMS_DISK_BACKUP_CHUNK_MB", "0"}}).diskChunkBytes, 256u << 20);
    EXPECT_EQ(read({{"TMS_DISK_BACKUP_CHUNK_MB", "4096"}}).diskChunkBytes, 4096ull << 20);
    std::string why;
    for (const char* bad : {"4097", "", "-1", "8M", "99999999999999999999999"}) {
        read({{"TMS_DISK_BACKUP_CHUNK_MB", bad}}, &why);
        EXPECT_EQ(why, std::string("TMS_DISK_BACKUP_CHUNK_MB=") + bad +
                           " is not a number of MiB from 0 to 4096: torch_memory_saver's "
                           "settings are left off");
    }
}

TEST(TmsEnvironment, ValuesTorchMemorySaverRefusesLeaveItOffWithOneLine) {
    std::string why;
    EXPECT_FALSE(read({{"TMS_INIT_ENABLE", "on"}}, &why).enable);
    EXPECT_EQ(why,
              "TMS_INIT_ENABLE=on is not a value torch_memory_saver takes (1, true, yes or 0, "
              "false, no): TMS_INIT_ENABLE is left off");
    EXPECT_FALSE(
        read({{"TMS_INIT_ENABLE", "1"}, {"TMS_INIT_CPU_BACKUP_BACKEND", "cuda"}}, &why).enable);
    EXPECT_EQ(why,
              "TMS_INIT_CPU_BACKUP_BACKEND=cuda is neither 'pinned' nor 'mmap': TMS_INIT_ENABLE "
              "is left off");
    EXPECT_FALSE(read({{"TMS_INIT_ENABLE", "1"},
                       {"TMS_INIT_ENABLE_CPU_BACKUP", "1"},
                       {"TMS_INIT_ENABLE_DISK_BACKUP", "1"}},
                      &why)
                     .enable);
    EXPECT_EQ(why,
              "TMS_INIT_ENABLE_CPU_BACKUP and TMS_INIT_ENABLE_DISK_BACKUP are mutually exclusive: "
              "TMS_INIT_ENABLE is left off");
}

}  // namespace
}  // namespace memtool::collectors::control
