#include "collectors/control/BackupSlots.h"

#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>

namespace memtool::collectors::control {

void BackupSlots::setDirectory(const char* directory) {
    std::snprintf(directory_, sizeof directory_, "%s", directory);
}

bool BackupSlots::checkDirectory(const char* directory, Failure& why) {
    struct stat st {};
    if (!directory || !*directory) {
        why.set("the backup directory is an empty path");
        return false;
    }
    if (std::strlen(directory) >= sizeof directory_) {
        why.set("the backup directory's path is too long");
        return false;
    }
    if (stat(directory, &st) != 0 || !S_ISDIR(st.st_mode)) {
        why.set("the backup directory ", directory, " is not a directory");
        return false;
    }
    if (access(directory, W_OK | X_OK) != 0) {
        why.set("the backup directory ", directory, " cannot be written: ", std::strerror(errno));
        return false;
    }
    return true;
}

int BackupSlots::open(const char* tag, uint8_t device, const char* deviceName, MemoryBackend* host,
                      core::BackupKind kind, uint64_t bytes, Failure& why) {
    int slot = 0;
    while (slot < kCapacity && slots_[slot].used) ++slot;
    if (slot == kCapacity) {
        why.set("at most 256 pauses may be held at once");
        return -1;
    }
    Slot& b = slots_[slot];
    bool opened = false;
    if (kind == core::BackupKind::Disk) {
        opened = openDisk(slot, tag, deviceName, bytes, why);
    } else if (kind == core::BackupKind::Host) {
        opened = host && b.host.open(*host, device, bytes, why);
    }
    if (!opened) return -1;
    b.used = true;
    b.kind = kind;
    b.users = 0;
    b.serial = ++opened_;
    return slot;
}

bool BackupSlots::openDisk(int slot, const char* tag, const char* deviceName, uint64_t bytes,
                           Failure& why) {
    char name[160], file[16];
    std::snprintf(file, sizeof file, "%s", deviceName);
    for (char* c = file; *c; ++c)
        if (*c == ':') *c = '-';
    // The tag is the user's text: keep only file-name-safe characters of it.
    char safe[core::kMaxTagBytes + 1];
    size_t n = 0;
    for (const char* c = tag; *c && n < core::kMaxTagBytes; ++c) {
        const char ch = *c;
        const bool ok = (ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') ||
                        (ch >= '0' && ch <= '9') || ch == '-' || ch == '_' || ch == '.';
        safe[n++] = ok ? ch : '_';
    }
    safe[n] = '\0';
    std::snprintf(name, sizeof name, "memtool-%d-%s-%s-%llu.pause", static_cast<int>(getpid()),
                  safe, file, static_cast<unsigned long long>(++pauses_));
    return slots_[slot].disk.open(directory_[0] ? directory_ : "/tmp", name, bytes, paths_[slot],
                                  why);
}

bool BackupSlots::toDisk(int slot, const char* tag, const char* deviceName, uint64_t bytes,
                         Failure& why) {
    Slot& b = slots_[slot];
    if (!b.used || b.kind != core::BackupKind::Host) {
        why.set("not a host backup");
        return false;
    }
    if (!openDisk(slot, tag, deviceName, bytes, why)) return false;
    if (!b.disk.write(0, b.host.directView(0, bytes), bytes, why)) {
        b.disk.discard();
        return false;
    }
    b.host.discard();
    b.kind = core::BackupKind::Disk;
    return true;
}

uint64_t BackupSlots::hostBytes() const {
    uint64_t bytes = 0;
    for (const Slot& b : slots_)
        if (b.used && b.kind == core::BackupKind::Host) bytes += b.host.bytes();
    return bytes;
}

void BackupSlots::unuse(uint16_t slotPlusOne) {
    if (slotPlusOne == 0) return;
    Slot& b = slots_[slotPlusOne - 1];
    if (b.users > 0 && --b.users > 0) return;
    b.disk.discard();
    b.host.discard();
    b.used = false;
}

void BackupSlots::warm() {
    for (volatile uint8_t* p = reinterpret_cast<volatile uint8_t*>(&slots_[0]);
         p < reinterpret_cast<volatile uint8_t*>(&slots_[1]); p += 1024)
        *p = *p;
    paths_[0][0] = '\0';
}

}  // namespace memtool::collectors::control
