#include "collectors/preload/TorchVersion.h"

#include <fcntl.h>
#include <unistd.h>

#include <cstring>

namespace memtool::collectors {
namespace {

// Copies [from, to) into out, cut to fit.
void copy(const char* from, const char* to, char* out, size_t outSize) {
    size_t n = static_cast<size_t>(to - from);
    if (n >= outSize) n = outSize - 1;
    std::memcpy(out, from, n);
    out[n] = '\0';
}

// "libc10.so.1.13": what follows ".so.".
bool fromFileName(const char* path, char* out, size_t outSize) {
    const char* slash = std::strrchr(path, '/');
    const char* name = slash ? slash + 1 : path;
    const char* so = std::strstr(name, ".so.");
    if (!so || !so[4]) return false;
    copy(so + 4, so + std::strlen(so), out, outSize);
    return true;
}

// __version__ = '2.14.1+cu130' in <package>/version.py, <package>/lib/ holding the library.
bool fromVersionFile(const char* path, char* out, size_t outSize) {
    char file[4096];
    const char* slash = std::strrchr(path, '/');
    if (!slash) return false;
    size_t dirLen = static_cast<size_t>(slash - path);
    while (dirLen > 0 && path[dirLen - 1] != '/') --dirLen;  // up from lib/
    static const char kName[] = "version.py";
    if (dirLen == 0 || dirLen + sizeof kName > sizeof file) return false;
    std::memcpy(file, path, dirLen);
    std::memcpy(file + dirLen, kName, sizeof kName);
    const int fd = open(file, O_RDONLY | O_CLOEXEC);
    if (fd < 0) return false;
    char text[2048];
    const ssize_t n = read(fd, text, sizeof text - 1);
    close(fd);
    if (n <= 0) return false;
    text[n] = '\0';
    const char* at = std::strstr(text, "__version__");
    if (!at) return false;
    at += std::strcspn(at, "'\"");
    if (!*at) return false;
    const char quote = *at++;
    const char* end = std::strchr(at, quote);
    if (!end || end == at) return false;
    copy(at, end, out, outSize);
    return true;
}

}  // namespace

bool torchVersionOf(const char* libraryPath, char* out, size_t outSize) {
    if (outSize == 0) return false;
    out[0] = '\0';
    return fromFileName(libraryPath, out, outSize) || fromVersionFile(libraryPath, out, outSize);
}

}  // namespace memtool::collectors
