#include "collectors/stacks/PythonFrameWalker.h"

#include "collectors/engine/Engine.h"
#include "collectors/engine/MappedTable.h"
#include "collectors/engine/Mutex.h"
#include "collectors/engine/NoDestroy.h"
#include "collectors/engine/ThreadState.h"
#include "collectors/stacks/CPythonFrames.h"
#include "collectors/stacks/ModuleScopes.h"

namespace memtool::collectors {

namespace {

const CPythonFrames* gFrames = nullptr;
Engine* gEngine = nullptr;

// Code objects interned in this stream: code object -> identity << 32 | wire id,
// under gCodesMutex (threads intern without the GIL). A code object cannot die
// while a frame runs it, but one seen earlier may have died since and another
// taken its address: the identity (a hash of where its file name and qualified
// name live, and its first line) tells them apart, and equal names make the
// same wire record anyway.
Mutex gCodesMutex;
constinit NoDestroy<PointerMap> gCodes;
uint64_t gCodesGeneration = 0;
uint32_t gUnknownCode = 0;  // for a frame whose code is not a code object
// Names are read into these, under gCodesMutex.
char gFile[4096];
char gName[1024];

uint32_t identityOf(const void* code) {
    const CPythonLayout& l = gFrames->layout();
    uint64_t h = 0;
    __builtin_memcpy(&h, static_cast<const char*>(code) + l.codeFilename, sizeof h);
    uint64_t q = 0;
    __builtin_memcpy(&q, static_cast<const char*>(code) + l.codeQualname, sizeof q);
    h = mixHash(h ^ mixHash(q ^ static_cast<uint64_t>(gFrames->firstLine(code))));
    return static_cast<uint32_t>(h >> 32);
}

// The wire id of `code` in stream `generation`, sending its record when new.
uint32_t codeIdOf(const void* code, uint64_t generation) {
    LockGuard lock(gCodesMutex);
    if (gCodesGeneration != generation) {
        gCodes.value.clear();
        gCodesGeneration = generation;
        gUnknownCode = 0;
    }
    if (moduleScopes::isScope(code)) {  // no code object: interned by its address alone
        uint64_t entry = 0;
        if (gCodes.value.find(reinterpret_cast<uint64_t>(code), &entry))
            return static_cast<uint32_t>(entry);
        size_t labelBytes = 0;
        const char* label = moduleScopes::labelOf(code, &labelBytes);
        const uint32_t id = gEngine->pyCode(
            core::kModuleScopeFile, sizeof core::kModuleScopeFile - 1, label, labelBytes, 0);
        gCodes.value.insert(reinterpret_cast<uint64_t>(code), id);
        return id;
    }
    if (!gFrames->isCode(code)) {
        if (!gUnknownCode) gUnknownCode = gEngine->pyCode("", 0, "<unknown>", 9, 0);
        return gUnknownCode;
    }
    const uint32_t identity = identityOf(code);
    const uint64_t key = reinterpret_cast<uint64_t>(code);
    uint64_t entry = 0;
    if (gCodes.value.find(key, &entry) && entry >> 32 == identity)
        return static_cast<uint32_t>(entry);
    const size_t fileBytes = gFrames->filename(code, gFile, sizeof gFile);
    const size_t nameBytes = gFrames->qualname(code, gName, sizeof gName);
    const int firstLine = gFrames->firstLine(code);
    const uint32_t id = gEngine->pyCode(gFile, fileBytes, gName, nameBytes,
                                        static_cast<uint64_t>(firstLine < 0 ? 0 : firstLine));
    gCodes.value.insert(key, static_cast<uint64_t>(identity) << 32 | id);  // full: looked up again
    return id;
}

// Walks the calling thread's frames and keeps what did not change since its last
// allocation: a frame with the same code object at the same depth keeps its code
// id, one at the same instruction too keeps its line, and its node while every
// frame outside it kept theirs.
//
// A loop allocates at one depth, under frames that stay: the walk compares each
// frame with the one recorded at its place were the depth the same, in the same
// pass, and checks a frame for being complete only where it differs (one with
// the code object and instruction of a recorded frame was complete). Where the
// depth is the same, the frames outside the outermost difference are settled
// there; otherwise every frame is compared again by its place from the outermost.
ShadowStack* readFrames(ThreadState& ts, uint64_t generation, uint32_t* firstStale) {
    ShadowStack& s = ts.python;
    if (s.generation != generation) {
        for (uint32_t i = 0; i < s.recorded(); ++i) s.frames[i].code = nullptr;
        s.generation = generation;
    }
    const uint32_t before = s.recorded();
    uint32_t walked = 0;
    // The outermost recorded frame that differs or has no node, were the depth
    // the same (before: none).
    uint32_t settledBelow = before;
    // owner < 0: a module scope's frame, always complete (ModuleScopes.h).
    auto take = [&](const PyFrameRef& f, int owner) {
        const uint32_t at = before - 1 - walked;  // its place, were the depth the same
        const bool same =
            walked < before && s.frames[at].code == f.code && s.frames[at].instr == f.instr;
        if (!same && owner >= 0 && !gFrames->complete(f, owner)) return;
        if (!same || s.frames[at].node == 0) settledBelow = at;
        s.walked[walked % ShadowStack::kCapacity] = f;
        ++walked;
    };
    // The module scope, if any, is the innermost frame.
    const uint32_t epoch = moduleScopes::epoch();
    const bool scoped = epoch != 0 && ts.moduleScope != 0 && ts.moduleScopeEpoch == epoch;
    if (const void* scope = scoped ? moduleScopes::codeOf(ts.moduleScope) : nullptr)
        take(PyFrameRef{scope, scope}, -1);
    gFrames->walkRaw(take);
    s.depth = walked;
    const uint32_t n = s.recorded();
    // Frames [0, start) are what they were, nodes included (n == before where the
    // depth is the same: no more than kCapacity frames then).
    const uint32_t start = walked == before ? settledBelow : 0;
    uint32_t first = n;
    for (uint32_t i = start; i < n; ++i) {  // outermost first
        const PyFrameRef& w = s.walked[(walked - 1 - i) % ShadowStack::kCapacity];
        ShadowFrame& f = s.frames[i];
        bool changed = false;
        if (i >= before || f.code != w.code) {
            f.code = w.code;
            f.instr = w.instr;
            f.codeId = 0;
            f.line =
                moduleScopes::isScope(w.code) ? moduleScopes::phaseOf(w.code) : gFrames->line(w);
            changed = true;
        } else if (f.instr != w.instr) {
            f.instr = w.instr;
            const uint32_t line = gFrames->line(w);
            changed = line != f.line;
            f.line = line;
        }
        if (changed || f.node == 0 || first < n) {
            f.node = 0;
            if (first == n) first = i;
        }
    }
    for (uint32_t i = first; i < n; ++i)
        if (s.frames[i].codeId == 0) s.frames[i].codeId = codeIdOf(s.frames[i].code, generation);
    *firstStale = first;
    return walked > 0 ? &s : nullptr;
}

}  // namespace

void PythonFrameWalker::install(const CPythonFrames& frames, Engine& engine) {
    gFrames = &frames;
    gEngine = &engine;
    setPythonStackReader(readFrames);
}

}  // namespace memtool::collectors
