#pragma once
// Whether memtool's collector can load into the program a run starts: the
// dynamic loader maps LD_PRELOAD's libraries only into a dynamically linked
// program, and ignores it in one that runs setuid or setgid. A run whose program
// cannot take the collector says so, rather than that it allocated nothing.

#include <string>

namespace memtool::cli {

// Why the collector cannot load into `program` (as `memtool run` was given it:
// a path, or a name looked up in `path`, the child's PATH), following a script's
// "#!" line to its interpreter (through env); empty when it can, or when the file
// cannot be read to tell.
std::string preloadUnreachable(const std::string& program, const std::string& path);

}  // namespace memtool::cli
