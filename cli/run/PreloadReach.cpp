#include "cli/run/PreloadReach.h"

#include <fcntl.h>
#include <gelf.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <fstream>
#include <optional>
#include <sstream>
#include <vector>

namespace memtool::cli {

namespace {

// Only a regular file is read: a FIFO or a device in its place must not block.
bool regularFile(const std::string& file) {
    struct stat st {};
    return !file.empty() && stat(file.c_str(), &st) == 0 && S_ISREG(st.st_mode);
}

// `name` as execvp finds it: itself when it holds a slash, else the first
// executable file of that name along `path` (an empty entry is the current directory).
std::string resolve(const std::string& name, const std::string& path) {
    if (name.empty() || name.find('/') != std::string::npos) return name;
    std::stringstream dirs(path);
    std::string dir;
    while (std::getline(dirs, dir, ':')) {
        const std::string candidate = (dir.empty() ? "." : dir) + "/" + name;
        if (regularFile(candidate) && access(candidate.c_str(), X_OK) == 0) return candidate;
    }
    return {};
}

// The interpreter a "#!" line names, through env (its first word that is not an
// option or an assignment); empty when `file` is not a script.
std::string interpreterOf(const std::string& file, const std::string& path) {
    // The kernel reads the "#!" line from the file's first 256 bytes.
    if (!regularFile(file)) return {};
    std::ifstream in(file, std::ios::binary);
    char head[256];
    in.read(head, sizeof head);
    std::string line(head, static_cast<size_t>(in.gcount()));
    if (line.rfind("#!", 0) != 0) return {};
    line.resize(std::min(line.find('\n'), line.size()));
    std::istringstream words(line.substr(2));
    std::string interpreter;
    if (!(words >> interpreter)) return {};
    if (interpreter.size() < 4 || interpreter.compare(interpreter.size() - 4, 4, "/env") != 0)
        return interpreter;
    std::string word;
    while (words >> word)
        if (word[0] != '-' && word.find('=') == std::string::npos) return resolve(word, path);
    return {};
}

// Whether the ELF file at `file` asks for a dynamic loader (a PT_INTERP header);
// nullopt when it is not an ELF file one can read.
std::optional<bool> dynamicallyLinked(const std::string& file) {
    const int fd = open(file.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) return std::nullopt;
    elf_version(EV_CURRENT);
    Elf* elf = elf_begin(fd, ELF_C_READ, nullptr);
    std::optional<bool> dynamic;
    size_t headers = 0;
    if (elf && elf_kind(elf) == ELF_K_ELF && elf_getphdrnum(elf, &headers) == 0) {
        dynamic = false;
        for (size_t i = 0; i < headers && !*dynamic; ++i) {
            GElf_Phdr h;
            if (gelf_getphdr(elf, static_cast<int>(i), &h) && h.p_type == PT_INTERP) dynamic = true;
        }
    }
    if (elf) elf_end(elf);
    close(fd);
    return dynamic;
}

}  // namespace

std::string preloadUnreachable(const std::string& program, const std::string& path) {
    std::string file = resolve(program, path);
    // A script's interpreter is what runs; one level, as the kernel follows it.
    if (std::string interpreter = interpreterOf(file, path); !interpreter.empty())
        file = interpreter;
    struct stat st {};
    if (file.empty() || stat(file.c_str(), &st) != 0 || !S_ISREG(st.st_mode)) return {};
    if (((st.st_mode & S_ISUID) && st.st_uid != geteuid()) ||
        ((st.st_mode & S_ISGID) && st.st_gid != getegid()))
        return file +
               " runs setuid or setgid: the dynamic loader ignores LD_PRELOAD in it, so memtool's "
               "collector cannot load into it";
    if (dynamicallyLinked(file) == false)
        return file +
               " is statically linked: memtool's collector (LD_PRELOAD) cannot load into it; link "
               "it dynamically against LibTorch";
    return {};
}

}  // namespace memtool::cli
