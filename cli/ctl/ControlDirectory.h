#pragma once
// Where `memtool ctl` finds the runs of its user: one private directory per user
// ($XDG_RUNTIME_DIR/memtool when that is the user's, else /tmp/memtool-UID;
// MEMTOOL_CONTROL_DIR overrides both), holding one socket per `memtool run`
// (run-PID.sock). Nobody else can connect or put something there: the directory
// must be the user's own and closed to others (0700), or memtool refuses it, and
// every connection's peer credentials are checked (acceptPeer). Anyone can make
// /tmp/memtool-UID first, so when it is not the user's private directory the
// user's cache directory serves instead ($XDG_CACHE_HOME, else ~/.cache, then
// memtool/control), with a warning that says what was wrong with /tmp's.

#include <string>

namespace memtool::cli {

// The directory, made (0700) when `create` and missing. Throws core::Error
// (`exitCode`) when it is not a private directory of this user (and, for /tmp's,
// there is no cache directory of the user's to use instead).
std::string controlDirectory(bool create, int exitCode);

// Accepts a waiting connection on `listenFd` and keeps it only when the peer runs
// as this user (SO_PEERCRED). -1 when none waits; kRefusedPeer when one was
// refused (its connection closed at once).
inline constexpr int kRefusedPeer = -2;
int acceptPeer(int listenFd);

}  // namespace memtool::cli
