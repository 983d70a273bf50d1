// A stand-in for libnvidia-ml.so.1 (memtool run loads it through
// MEMTOOL_NVML_LIBRARY) that plays a scripted usage curve:
//   FAKE_NVML_CURVE   a file: the devices' total bytes on its first line, then
//                     one line per round of the devices' used bytes; the last
//                     round is held once the curve is played
//   FAKE_NVML_ROUNDS  a file rewritten after every round with how many were read,
//                     so that a program can wait for the curve to be played
//   FAKE_NVML_START   (optional) a file the program makes when it is ready: until
//                     it exists, every read is of the first round, uncounted
// A round is a read of device 0's memory. Processes: none.
#include <unistd.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

namespace {

struct Memory {
    unsigned long long total, free, used;
};

std::vector<unsigned long long> gTotals;
std::vector<std::vector<unsigned long long>> gRounds;
size_t gRead = 0;

void load() {
    const char* path = std::getenv("FAKE_NVML_CURVE");
    std::ifstream in(path ? path : "");
    std::string line;
    bool first = true;
    while (std::getline(in, line)) {
        std::istringstream words(line);
        std::vector<unsigned long long> v;
        for (unsigned long long n; words >> n;) v.push_back(n);
        if (v.empty()) continue;
        if (first)
            gTotals = v;
        else
            gRounds.push_back(v);
        first = false;
    }
}

void noteRound() {
    const char* path = std::getenv("FAKE_NVML_ROUNDS");
    if (!path) return;
    const std::string tmp = std::string(path) + ".tmp";
    if (FILE* f = std::fopen(tmp.c_str(), "w")) {
        std::fprintf(f, "%zu\n", gRead);
        std::fclose(f);
        std::rename(tmp.c_str(), path);
    }
}

}  // namespace

extern "C" {

int nvmlInit_v2() {
    load();
    return gTotals.empty() ? 1 : 0;
}
int nvmlShutdown() { return 0; }
int nvmlDeviceGetCount_v2(unsigned* count) {
    *count = static_cast<unsigned>(gTotals.size());
    return 0;
}
int nvmlDeviceGetHandleByIndex_v2(unsigned index, void** device) {
    if (index >= gTotals.size()) return 2;
    *device = reinterpret_cast<void*>(static_cast<uintptr_t>(index + 1));
    return 0;
}
int nvmlDeviceGetMemoryInfo(void* device, Memory* m) {
    const size_t index = reinterpret_cast<uintptr_t>(device) - 1;
    const char* start = std::getenv("FAKE_NVML_START");
    const bool started = !start || access(start, F_OK) == 0;
    if (index == 0 && started) {
        ++gRead;
        noteRound();
    }
    const size_t round = gRead == 0 ? 0 : std::min(gRead, gRounds.size()) - 1;
    const unsigned long long used =
        round < gRounds.size() && index < gRounds[round].size() ? gRounds[round][index] : 0;
    m->total = gTotals[index];
    m->used = used;
    m->free = m->total - used;
    return 0;
}
int nvmlDeviceGetComputeRunningProcesses_v3(void*, unsigned* count, void*) {
    *count = 0;
    return 0;
}

}  // extern "C"
