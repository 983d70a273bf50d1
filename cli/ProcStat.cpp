#include "cli/ProcStat.h"

#include <unistd.h>

#include <sstream>

#include "reporters/Files.h"

namespace memtool::cli {

std::optional<ProcStat> readProcStat(pid_t pid) {
    std::string why;
    const std::optional<std::string> text =
        reporters::readRegularFile("/proc/" + std::to_string(pid) + "/stat", 4096, &why);
    // "PID (COMM) STATE PPID ...": COMM may hold spaces and parentheses, so the
    // fields are counted from the last ')'.
    const size_t close = text ? text->rfind(')') : std::string::npos;
    if (close == std::string::npos) return std::nullopt;
    std::istringstream fields(text->substr(close + 1));
    std::string state;
    ProcStat s;
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

}  // namespace memtool::cli
