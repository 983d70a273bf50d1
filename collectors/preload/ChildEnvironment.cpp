#include "collectors/preload/ChildEnvironment.h"

#include <unistd.h>

#include <cstring>

#include "core/Protocol.h"

namespace memtool::collectors {

namespace {

// The first NAME=value entry of `env` whose NAME is `name` (`nameBytes` long), or null.
const char* entryNamed(char* const* env, const char* name, size_t nameBytes) {
    for (; env && *env; ++env)
        if (std::strncmp(*env, name, nameBytes) == 0 && (*env)[nameBytes] == '=') return *env;
    return nullptr;
}

// The value of `name` in `env`, or null.
const char* valueIn(char* const* env, const char* name) {
    const size_t n = std::strlen(name);
    const char* entry = entryNamed(env, name, n);
    return entry ? entry + n + 1 : nullptr;
}

// `list` (entries split by any of `separators`) holds `entry`.
bool listHolds(const char* list, const char* entry, const char* separators) {
    const size_t n = std::strlen(entry);
    while (*list) {
        const size_t length = std::strcspn(list, separators);
        if (length == n && std::strncmp(list, entry, n) == 0) return true;
        list += length;
        if (*list) ++list;
    }
    return false;
}

bool endsWith(const char* text, const char* tail) {
    const size_t t = std::strlen(text), n = std::strlen(tail);
    return t >= n && std::strcmp(text + t - n, tail) == 0;
}

}  // namespace

const char* ChildEnvironment::keep(const char* const* parts) {
    size_t bytes = 1;
    for (const char* const* p = parts; *p; ++p) bytes += std::strlen(*p);
    if (bytes > kTextBytes - used_) return nullptr;
    char* out = text_ + used_;
    char* at = out;
    for (const char* const* p = parts; *p; ++p) {
        const size_t n = std::strlen(*p);
        std::memcpy(at, *p, n);
        at += n;
    }
    *at = '\0';
    used_ += bytes;
    return out;
}

void ChildEnvironment::capture(char* const* env, const char* collectorPath) {
    count_ = 0;
    used_ = 0;
    auto add = [&](const char* name, const char* value, bool list, const char* separators) {
        if (!value || !*value || count_ == kMaxVariables) return;
        const char* parts[] = {name, "=", value, nullptr};
        const char* whole = keep(parts);
        if (!whole) return;
        Variable& v = variables_[count_++];
        v.whole = whole;
        v.nameBytes = std::strlen(name) + 1;
        v.entry = list ? whole + v.nameBytes : nullptr;
        v.separators = separators;
    };
    for (const char* name : {core::kEnvSocket, core::kEnvOptions, core::kEnvTorchBridge,
                             core::kEnvBackupDir, core::kEnvControlSocket})
        add(name, valueIn(env, name), false, ":");
    // CUDA's injection, when it is memtool's (a program's own is not passed on).
    const char* injection = valueIn(env, "CUDA_INJECTION64_PATH");
    if (injection && (endsWith(injection, "/libmemtool_cupti.so") ||
                      std::strcmp(injection, "libmemtool_cupti.so") == 0))
        add("CUDA_INJECTION64_PATH", injection, false, ":");
    // The loader splits LD_PRELOAD at colons and spaces.
    add("LD_PRELOAD", collectorPath, true, ": ");
    // memtool run puts the package first on PYTHONPATH: that entry, if it is one.
    if (const char* path = valueIn(env, "PYTHONPATH")) {
        char first[4096];
        const size_t n = std::strcspn(path, ":");
        static constexpr char kInit[] = "/memtool/__init__.py";
        if (n > 0 && n + sizeof kInit <= sizeof first) {
            std::memcpy(first, path, n);
            std::memcpy(first + n, kInit, sizeof kInit);
            if (access(first, R_OK) == 0) {
                first[n] = '\0';
                add("PYTHONPATH", first, true, ":");
            }
        }
    }
}

const char* ChildEnvironment::find(char* const* envp, const Variable& v) {
    return entryNamed(envp, v.whole, v.nameBytes - 1);  // v.whole begins NAME=
}

size_t ChildEnvironment::listBytes(const char* theirs, const Variable& v) {
    if (!theirs || !v.entry) return 0;
    const char* list = theirs + v.nameBytes;
    if (listHolds(list, v.entry, v.separators)) return 0;
    // NAME=entry, a colon and theirs when they have any, the null.
    return v.nameBytes + std::strlen(v.entry) + (*list ? 1 + std::strlen(list) : 0) + 1;
}

ChildEnvironment::Shape ChildEnvironment::shape(char* const* envp) const {
    Shape s;
    for (char* const* e = envp; e && *e; ++e) ++s.entries;
    for (size_t i = 0; i < count_; ++i) {
        const char* theirs = find(envp, variables_[i]);
        if (!theirs)
            ++s.added;
        else
            s.text += listBytes(theirs, variables_[i]);
    }
    return s;
}

size_t ChildEnvironment::roomFor(char* const* envp) const {
    const Shape s = shape(envp);
    if (s.added == 0 && s.text == 0) return 0;
    return (s.entries + s.added + 1) * sizeof(char*) + s.text;
}

char* const* ChildEnvironment::complete(char* const* envp, void* room) const {
    const Shape s = shape(envp);
    const size_t entries = s.entries;
    char** out = static_cast<char**>(room);
    char* text = reinterpret_cast<char*>(out + entries + s.added + 1);
    for (size_t k = 0; k < entries; ++k) out[k] = envp[k];
    size_t next = entries;
    for (size_t i = 0; i < count_; ++i) {
        const Variable& v = variables_[i];
        const char* theirs = find(envp, v);
        if (!theirs) {
            out[next++] = const_cast<char*>(v.whole);
            continue;
        }
        if (listBytes(theirs, v) == 0) continue;
        // The child's own list, memtool's entry first: in place of the first of
        // that name (the one the loader and getenv read).
        char* at = text;
        const char* list = theirs + v.nameBytes;
        const size_t head = v.nameBytes + std::strlen(v.entry);
        std::memcpy(at, v.whole, head);
        at += head;
        if (*list) {
            *at++ = ':';
            const size_t n = std::strlen(list);
            std::memcpy(at, list, n);
            at += n;
        }
        *at++ = '\0';
        for (size_t k = 0; k < entries; ++k)
            if (out[k] == theirs) {
                out[k] = text;
                break;
            }
        text = at;
    }
    out[next] = nullptr;
    return out;
}

}  // namespace memtool::collectors
