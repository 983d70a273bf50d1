#include "collectors/control/TmsEnvironment.h"

#include <cstdio>
#include <cstring>

namespace memtool::collectors::control {

namespace {

// 1 true, 0 false or unset, -1 a value torch_memory_saver does not take.
int flag(const char* value) {
    if (!value) return 0;
    for (const char* yes : {"1", "true", "TRUE", "yes", "YES"})
        if (std::strcmp(value, yes) == 0) return 1;
    for (const char* no : {"0", "false", "FALSE", "no", "NO"})
        if (std::strcmp(value, no) == 0) return 0;
    return -1;
}

}  // namespace

bool readTmsInit(const char* (*lookup)(const char*), TmsInit* init, char* why, size_t size) {
    *init = TmsInit{};
    int values[3];
    const char* names[3] = {"TMS_INIT_ENABLE", "TMS_INIT_ENABLE_CPU_BACKUP",
                            "TMS_INIT_ENABLE_DISK_BACKUP"};
    for (int i = 0; i < 3; ++i) {
        values[i] = flag(lookup(names[i]));
        if (values[i] < 0) {
            std::snprintf(why, size,
                          "%s=%s is not a value torch_memory_saver takes (1, true, yes or 0, "
                          "false, no): TMS_INIT_ENABLE is left off",
                          names[i], lookup(names[i]));
            return false;
        }
    }
    const char* backend = lookup("TMS_INIT_CPU_BACKUP_BACKEND");
    if (backend && *backend && std::strcmp(backend, "pinned") != 0 &&
        std::strcmp(backend, "mmap") != 0) {
        std::snprintf(why, size,
                      "TMS_INIT_CPU_BACKUP_BACKEND=%s is neither 'pinned' nor 'mmap': "
                      "TMS_INIT_ENABLE is left off",
                      backend);
        return false;
    }
    if (const char* chunk = lookup("TMS_DISK_BACKUP_CHUNK_MB")) {
        uint64_t mib = 0;
        bool digits = *chunk != '\0';
        for (const char* c = chunk; *c && digits; ++c) {
            digits = *c >= '0' && *c <= '9' && mib <= 4096;
            mib = mib * 10 + static_cast<uint64_t>(*c - '0');
        }
        if (!digits || mib > 4096) {
            std::snprintf(why, size,
                          "TMS_DISK_BACKUP_CHUNK_MB=%s is not a number of MiB from 0 to 4096: "
                          "torch_memory_saver's settings are left off",
                          chunk);
            return false;
        }
        init->diskChunkBytes = (mib ? mib : 256) << 20;
    }
    if (values[1] && values[2]) {
        std::snprintf(why, size,
                      "TMS_INIT_ENABLE_CPU_BACKUP and TMS_INIT_ENABLE_DISK_BACKUP are mutually "
                      "exclusive: TMS_INIT_ENABLE is left off");
        return false;
    }
    init->enable = values[0] == 1;  // diskChunkBytes is set above
    init->backup = values[1]   ? core::BackupKind::Host
                   : values[2] ? core::BackupKind::Disk
                               : core::BackupKind::None;
    return true;
}

}  // namespace memtool::collectors::control
