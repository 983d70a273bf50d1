#pragma once
// The object files of a run, each opened and read once for every process that
// maps it. A DataLoader's workers, a fork pool or torchrun's ranks map the same
// libtorch; reading its symbol table (~250,000 symbols) and debug info anew for
// each process cost the CLI ~22 M instructions and four descriptors a process
// (measured on 50 fork children of a torch program: 88% of the CLI's
// instructions). A file is known by what it is (device, inode, size and
// modification time), not by its path, so a library rebuilt in place during a run
// is read again, and one file reached by two paths is read once.
//
// Frames are named by file address (a return address less its module's load
// bias), so processes that load a library at different addresses share its
// answers too. Callers on several threads: each file has its own lock.

#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <tuple>
#include <vector>

#include "core/Frame.h"

namespace memtool::cli {

class ObjectFiles {
public:
    class File;

    ObjectFiles() = default;
    ~ObjectFiles();
    ObjectFiles(const ObjectFiles&) = delete;
    ObjectFiles& operator=(const ObjectFiles&) = delete;

    // The regular file at `path` (never opened otherwise: a FIFO would block),
    // read or null when it cannot be.
    std::shared_ptr<File> open(const std::string& path);
    // The frames `fileAddress` in `file` stands for, innermost first, with no
    // module or offset (the caller's to add); empty when the file names nothing
    // there.
    static std::vector<core::Frame> frames(File& file, uint64_t fileAddress);

    // Lets go of every file (and what was read from it) once its last holder has
    // too; a later open() reads it again.
    void closeAll();
    // Files opened and read so far (tests).
    size_t opened() const;

    // The run's one store.
    static ObjectFiles& shared();

private:
    using Identity = std::tuple<uint64_t, uint64_t, int64_t, int64_t, int64_t>;
    mutable std::mutex mu_;
    std::map<Identity, std::shared_ptr<File>> files_;
    size_t opened_ = 0;
};

}  // namespace memtool::cli
