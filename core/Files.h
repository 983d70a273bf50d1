#pragma once
// Reading and writing the files memtool is handed, with the care input from
// someone else needs: only regular files are read (a FIFO would block, a device
// never end), never more than a limit, and a file is replaced through a temporary
// that no one else can have planted.

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>

namespace memtool::core {

// The whole of a regular file of at most `maxBytes` bytes. nullopt, with `why` set
// to a reason that completes "cannot read PATH: ...", for anything else: a missing
// file, a directory, a FIFO or device (never opened), a larger file.
//
// With `anonymousPipes`, also a pipe that a shell hands over as /dev/stdin or
// /dev/fd/N (`memtool diff <(git show ...) new.json`), read to its end or to the
// limit. Its writer is the user's own command; a FIFO in the file system is still
// refused, as one without a writer would block.
std::optional<std::string> readRegularFile(const std::string& path, uint64_t maxBytes,
                                           std::string* why, bool anonymousPipes = false);

// Opens a regular file for reading without waiting (O_NONBLOCK | O_CLOEXEC), after
// checking that it is one: a FIFO or a device is never opened. -1 with `why` set
// (as readRegularFile) otherwise.
int openRegularFile(const std::string& path, std::string* why);

// Replaces `path` with `text` atomically: written to a fresh temporary file in the
// same directory (created exclusively, so a symbolic link planted there is never
// followed), given the mode a new file gets (0666 less the umask), then renamed
// over `path`. Throws core::Error(`exitCode`) when it cannot; no temporary is left.
void replaceFile(const std::string& path, const std::string& text, int exitCode);
// The same with the file's text in pieces, written one after another.
void replaceFile(const std::string& path, std::span<const std::string_view> pieces, int exitCode);

// Throws core::Error(`exitCode`) when replaceFile(path, ...) could not work now:
// `path` is a directory or other non-regular file, or no file can be made in its
// directory (missing, not writable). Checked before work that would be lost.
void checkReplaceable(const std::string& path, int exitCode);

}  // namespace memtool::core
