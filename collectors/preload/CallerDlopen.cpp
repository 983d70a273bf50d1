#include "collectors/preload/CallerDlopen.h"

#include <dlfcn.h>
#include <elf.h>
#include <link.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>

#include "collectors/stacks/NativeUnwinder.h"

namespace memtool::collectors {

namespace {

struct RunPaths {
    const char* rpath =
        nullptr;  // DT_RPATH: searched before LD_LIBRARY_PATH, when there is no RUNPATH
    const char* runpath = nullptr;  // DT_RUNPATH: searched after LD_LIBRARY_PATH
};

RunPaths runPathsOf(const link_map* lm) {
    RunPaths r;
    if (!lm || !lm->l_ld) return r;
    const char* strtab = nullptr;
    ElfW(Xword) rpath = 0, runpath = 0;
    bool hasRpath = false, hasRunpath = false;
    for (const ElfW(Dyn)* d = lm->l_ld; d->d_tag != DT_NULL; ++d) {
        switch (d->d_tag) {
            case DT_STRTAB:
                // Relocated in memory on x86-64; relative only on odd targets.
                strtab = reinterpret_cast<const char*>(
                    d->d_un.d_ptr < lm->l_addr ? lm->l_addr + d->d_un.d_ptr : d->d_un.d_ptr);
                break;
            case DT_RPATH:
                rpath = d->d_un.d_val;
                hasRpath = true;
                break;
            case DT_RUNPATH:
                runpath = d->d_un.d_val;
                hasRunpath = true;
                break;
            default:
                break;
        }
    }
    if (!strtab) return r;
    if (hasRunpath)
        r.runpath = strtab + runpath;  // a RUNPATH makes the RPATH ignored
    else if (hasRpath)
        r.rpath = strtab + rpath;
    return r;
}

// The caller object's directory, what $ORIGIN stands for.
bool originOf(const link_map* lm, char* out, size_t size) {
    const char* name = lm && lm->l_name && *lm->l_name ? lm->l_name : nullptr;
    char exe[4096];
    if (!name) {  // the main program
        ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
        if (n <= 0) return false;
        exe[n] = '\0';
        name = exe;
    }
    const char* slash = std::strrchr(name, '/');
    if (!slash) return false;
    const size_t len = static_cast<size_t>(slash - name);
    if (len + 1 > size) return false;
    std::memcpy(out, name, len);
    out[len] = '\0';
    return true;
}

// Expands $ORIGIN / ${ORIGIN} in one search directory; false for other tokens
// ($LIB, $PLATFORM: left to the real dlopen) or when it does not fit.
bool expand(const char* dir, size_t len, const char* origin, char* out, size_t size) {
    size_t o = 0;
    for (size_t i = 0; i < len;) {
        if (dir[i] == '$') {
            const char* rest = dir + i + 1;
            size_t skip = 0;
            if (len - i - 1 >= 6 && std::strncmp(rest, "ORIGIN", 6) == 0)
                skip = 7;
            else if (len - i - 1 >= 8 && std::strncmp(rest, "{ORIGIN}", 8) == 0)
                skip = 9;
            if (!skip || !origin) return false;
            const size_t n = std::strlen(origin);
            if (o + n >= size) return false;
            std::memcpy(out + o, origin, n);
            o += n;
            i += skip;
            continue;
        }
        if (o + 1 >= size) return false;
        out[o++] = dir[i++];
    }
    out[o] = '\0';
    return true;
}

// Tries `file` in each directory of a colon-separated list; the first that exists
// and loads wins.
void* tryList(const char* list, const char* file, int mode, const char* origin) {
    if (!list) return nullptr;
    for (const char* p = list; *p;) {
        const char* colon = std::strchr(p, ':');
        const size_t len = colon ? static_cast<size_t>(colon - p) : std::strlen(p);
        char dir[4096], path[4096 + 256];
        if (len > 0 && expand(p, len, origin, dir, sizeof dir)) {
            const size_t d = std::strlen(dir), f = std::strlen(file);
            if (d + 1 + f < sizeof path) {
                std::memcpy(path, dir, d);
                path[d] = '/';
                std::memcpy(path + d + 1, file, f + 1);
                if (access(path, F_OK) == 0)
                    if (void* h = realDlopen(path, mode))
                        return h;  // a wrong-class file: keep looking, as glibc does
            }
        }
        if (!colon) break;
        p = colon + 1;
    }
    return nullptr;
}

}  // namespace

void* dlopenForCaller(const char* file, int mode, const void* caller) {
    if (!file || std::strchr(file, '/')) return realDlopen(file, mode);
    // Loaded already (by soname): the real dlopen answers that from anywhere.
    if (void* h = realDlopen(file, mode | RTLD_NOLOAD)) return h;
    Dl_info info;
    void* extra = nullptr;
    if (!caller || !dladdr1(caller, &info, &extra, RTLD_DL_LINKMAP) || !extra)
        return realDlopen(file, mode);
    const auto* lm = static_cast<const link_map*>(extra);
    const RunPaths paths = runPathsOf(lm);
    if (!paths.rpath && !paths.runpath) return realDlopen(file, mode);
    char origin[4096];
    const char* o = originOf(lm, origin, sizeof origin) ? origin : nullptr;
    // glibc's order: RPATH, LD_LIBRARY_PATH, RUNPATH, then the cache and the
    // default directories (which the real dlopen searches the same from here).
    if (void* h = tryList(paths.rpath, file, mode, o)) return h;
    if (paths.runpath) {
        const char* env = secure_getenv("LD_LIBRARY_PATH");
        if (void* h = tryList(env, file, mode, nullptr)) return h;
        if (void* h = tryList(paths.runpath, file, mode, o)) return h;
    }
    return realDlopen(file, mode);
}

}  // namespace memtool::collectors
