#include "collectors/control/Backups.h"

#include <fcntl.h>
#include <pthread.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "collectors/engine/HighDescriptor.h"
#include "collectors/engine/OwnDescriptors.h"

namespace memtool::collectors::control {

void Failure::set(const char* a, const char* b, const char* c, const char* d) {
    // Concatenated and cut at the buffer's end: a message, not data.
    size_t n = 0;
    for (const char* part : {a, b, c, d})
        for (const char* p = part; *p && n + 1 < sizeof text; ++p) text[n++] = *p;
    text[n] = '\0';
}

namespace {

// An unnamed file in `directory` (O_TMPFILE): no name ever appears there, for
// anyone to find, pre-create or leave behind. -1 with errno set where the file
// system has none.
int openUnnamed(const char* directory, bool* direct) {
    int fd = ::open(directory, O_TMPFILE | O_RDWR | O_CLOEXEC | O_DIRECT, 0600);
    *direct = fd >= 0;
    if (fd < 0 && errno == EINVAL)  // tmpfs: no O_DIRECT
        fd = ::open(directory, O_TMPFILE | O_RDWR | O_CLOEXEC, 0600);
    return fd;
}

}  // namespace

bool DiskBackup::open(const char* directory, const char* name, uint64_t bytes, char* pathBuffer,
                      Failure& why) {
    discard();
    // Only the descriptor holds the file: its space goes back to the disk when
    // the process lets go of it, however it ends (SIGKILL, the OOM killer, memtool
    // killed first). path_ is for the messages.
    fd_ = openUnnamed(directory, &direct_);
    if (fd_ < 0) {
        const int error = errno;
        if (error == EOPNOTSUPP || error == EISDIR)
            return openNamed(directory, name, bytes, pathBuffer, why);
        why.set("cannot create the backup file in ", directory, ": ", std::strerror(error));
        return false;
    }
    path_ = pathBuffer;
    std::snprintf(path_, kPathBytes, "%s/%s", directory, name);
    return claim(bytes, why);
}

bool DiskBackup::openNamed(const char* directory, const char* name, uint64_t bytes,
                           char* pathBuffer, Failure& why) {
    discard();
    path_ = pathBuffer;
    const int n = std::snprintf(path_, kPathBytes, "%s/%s.XXXXXX", directory, name);
    if (n < 0 || static_cast<size_t>(n) >= kPathBytes) {
        why.set("cannot create the backup file in ", directory, ": ", std::strerror(ENAMETOOLONG));
        discard();
        return false;
    }
    // mkostemp: a fresh random name, exclusive, 0600, never through a file or link
    // someone else put there; unlinked before anything is written.
    const size_t suffix = static_cast<size_t>(n) - 6;
    fd_ = mkostemp(path_, O_CLOEXEC | O_DIRECT);
    direct_ = fd_ >= 0;
    if (fd_ < 0 && errno == EINVAL) {  // tmpfs: no O_DIRECT
        std::memcpy(path_ + suffix, "XXXXXX", 6);
        fd_ = mkostemp(path_, O_CLOEXEC);
    }
    if (fd_ < 0) {
        why.set("cannot create the backup file ", path_, ": ", std::strerror(errno));
        discard();
        return false;
    }
    if (unlink(path_) != 0) {
        why.set("cannot unlink the backup file ", path_, ": ", std::strerror(errno));
        discard();
        return false;
    }
    return claim(bytes, why);
}

bool DiskBackup::claim(uint64_t bytes, Failure& why) {
    // High in the table, as the socket is: the lowest free number (3 in a small
    // program) is the one a program's next open() or dup2() takes.
    fd_ = moveHigh(fd_);
    own::keep(fd_);  // the program's closing every descriptor must not lose it
    struct stat st {};
    if (fstat(fd_, &st) != 0) {
        why.set("cannot read the backup file ", path_, ": ", std::strerror(errno));
        discard();
        return false;
    }
    device_ = st.st_dev;
    inode_ = st.st_ino;
    // The space now: a full disk fails the pause before anything is released.
    int rc = bytes ? posix_fallocate(fd_, 0, static_cast<off_t>(bytes)) : 0;
    if (rc != 0 && rc != EOPNOTSUPP && rc != EINVAL) {
        char detail[160];
        std::snprintf(detail, sizeof detail, " (%llu bytes): %s",
                      static_cast<unsigned long long>(bytes), std::strerror(rc));
        why.set("no room for the backup in ", path_, detail);
        discard();
        return false;
    }
    return true;
}

bool DiskBackup::stillOurs() const {
    struct stat st {};
    return fd_ >= 0 && fstat(fd_, &st) == 0 && st.st_dev == device_ && st.st_ino == inode_;
}

bool DiskBackup::checkOurs(Failure& why) const {
    if (stillOurs()) return true;
    char detail[160];
    std::snprintf(detail, sizeof detail,
                  ": its descriptor %d no longer holds it (the program closed it, or put a file "
                  "of its own there with dup2); its content is lost",
                  fd_);
    why.set("the backup file ", path_, detail);
    return false;
}

bool DiskBackup::write(uint64_t offset, const void* data, uint64_t bytes, Failure& why) {
    if (!checkOurs(why)) return false;
    const char* p = static_cast<const char*>(data);
    while (bytes > 0) {
        ssize_t n = pwrite(fd_, p, bytes, static_cast<off_t>(offset));
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) {
            why.set("cannot write the backup file ", path_, ": ",
                    n < 0 ? std::strerror(errno) : "short write");
            return false;
        }
        p += n;
        offset += static_cast<uint64_t>(n);
        bytes -= static_cast<uint64_t>(n);
    }
    return true;
}

namespace {

// A chunk of a backup read: a multiple of any direct-I/O block size.
constexpr uint64_t kReadChunk = uint64_t{8} << 20;

struct ReadJob {
    const DiskBackup* backup;
    uint64_t offset;
    char* data;
    uint64_t bytes;
    bool ok = false;
    Failure why;
};

// [offset, offset + bytes) of the file into p, whole.
bool readRange(int fd, const char* path, uint64_t offset, char* p, uint64_t bytes, Failure& why) {
    while (bytes > 0) {
        ssize_t n = pread(fd, p, bytes, static_cast<off_t>(offset));
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) {
            why.set("cannot read the backup file ", path, ": ",
                    n < 0 ? std::strerror(errno) : "it ended early");
            return false;
        }
        p += n;
        offset += static_cast<uint64_t>(n);
        bytes -= static_cast<uint64_t>(n);
    }
    return true;
}

}  // namespace

// Two readers over alternate chunks. Reading into released pages faults each one
// in, and the kernel zero-fills it first: CPU work that, with one reader, stops
// the disk (1 GiB: ~0.25 s of faults beside ~0.55 s of reading here). With two,
// one's pages fill while the other's I/O runs. One reader when no thread can be
// started, or for less than two chunks.
bool DiskBackup::read(uint64_t offset, void* data, uint64_t bytes, Failure& why) {
    // Another file's bytes must never come back as the region's content.
    if (!checkOurs(why)) return false;
    char* p = static_cast<char*>(data);
    if (bytes < 2 * kReadChunk) return readChunks(offset, p, bytes, 0, 1, why);
    ReadJob odd{this, offset, p, bytes, false, {}};
    pthread_t reader;
    auto run = [](void* arg) -> void* {
        auto* job = static_cast<ReadJob*>(arg);
        job->ok = job->backup->readChunks(job->offset, job->data, job->bytes, 1, 2, job->why);
        return nullptr;
    };
    if (pthread_create(&reader, nullptr, run, &odd) != 0)
        return readChunks(offset, p, bytes, 0, 1, why);
    const bool even = readChunks(offset, p, bytes, 0, 2, why);
    pthread_join(reader, nullptr);
    if (even && !odd.ok) why = odd.why;
    return even && odd.ok;
}

bool DiskBackup::readChunks(uint64_t offset, char* data, uint64_t bytes, uint64_t parity,
                            uint64_t stride, Failure& why) const {
    const uint64_t chunks = (bytes + kReadChunk - 1) / kReadChunk;
    for (uint64_t k = parity; k < chunks; k += stride) {
        const uint64_t at = k * kReadChunk;
        const uint64_t length = bytes - at < kReadChunk ? bytes - at : kReadChunk;
        if (!readRange(fd_, path_, offset + at, data + at, length, why)) return false;
    }
    return true;
}

void DiskBackup::discard() {
    // The file was unlinked when it was made. A descriptor the program took over
    // is its own now: let go of, not closed.
    if (stillOurs())
        own::release(fd_);
    else
        own::letGo(fd_);
    fd_ = -1;
    path_ = nullptr;
}

bool HostBackup::open(MemoryBackend& backend, uint8_t device, uint64_t bytes, Failure& why) {
    discard();
    backend_ = &backend;
    device_ = device;
    bytes_ = bytes;
    memory_ = backend.allocateHost(device, &bytes_, why);
    return memory_ != nullptr;
}

bool HostBackup::write(uint64_t offset, const void* data, uint64_t bytes, Failure&) {
    std::memcpy(static_cast<char*>(memory_) + offset, data, bytes);
    return true;
}

bool HostBackup::read(uint64_t offset, void* data, uint64_t bytes, Failure&) {
    std::memcpy(data, static_cast<char*>(memory_) + offset, bytes);
    return true;
}

void HostBackup::discard() {
    if (memory_ && backend_) backend_->freeHost(device_, memory_, bytes_);
    memory_ = nullptr;
    bytes_ = 0;
}

}  // namespace memtool::collectors::control
