#include "cli/run/ProcStat.h"

#include <dirent.h>
#include <unistd.h>

#include <cstdlib>
#include <sstream>

#include "core/Files.h"

namespace memtool::cli {

std::optional<ProcStat> readProcStat(pid_t pid) {
    std::string why;
    const std::optional<std::string> text =
        core::readRegularFile("/proc/" + std::to_string(pid) + "/stat", 4096, &why);
    // "PID (COMM) STATE PPID ...": COMM may hold spaces and parentheses, so the
    // fields are counted from the last ')'.
    const size_t open = text ? text->find('(') : std::string::npos;
    const size_t close = text ? text->rfind(')') : std::string::npos;
    if (open == std::string::npos || close == std::string::npos || close < open)
        return std::nullopt;
    std::istringstream fields(text->substr(close + 1));
    std::string state;
    ProcStat s;
    s.name = text->substr(open + 1, close - open - 1);
    fields >> state >> s.ppid;
    for (int field = 5; field < 22 && fields; ++field) {
        std::string skipped;
        fields >> skipped;
    }
    fields >> s.startTicks;
    if (!fields) return std::nullopt;
    return s;
}

std::string pidNamespace() {
    char link[64] = {};
    return readlink("/proc/self/ns/pid", link, sizeof link - 1) > 0 ? link : "";
}

bool descendsFrom(pid_t pid, pid_t ancestor, pid_t adopter) {
    // A chain is short; the bound only guards against a /proc that changes under us.
    for (int step = 0; step < 4096 && pid > 1; ++step) {
        if (pid == ancestor || pid == adopter) return true;
        const std::optional<ProcStat> s = readProcStat(pid);
        if (!s) return false;
        pid = s->ppid;
    }
    return false;
}

std::map<pid_t, std::string> childrenOf(pid_t parent) {
    std::map<pid_t, std::string> children;
    DIR* proc = opendir("/proc");
    if (!proc) return children;
    while (const dirent* entry = readdir(proc)) {
        char* end = nullptr;
        const long pid = std::strtol(entry->d_name, &end, 10);
        if (pid <= 0 || *end != '\0') continue;
        const std::optional<ProcStat> s = readProcStat(static_cast<pid_t>(pid));
        if (s && s->ppid == parent) children[static_cast<pid_t>(pid)] = s->name;
    }
    closedir(proc);
    return children;
}

}  // namespace memtool::cli
