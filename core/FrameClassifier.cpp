#include "core/FrameClassifier.h"

#include <cctype>
#include <cstring>

#include "core/Frame.h"

namespace memtool::core {

namespace {
bool startsWith(const std::string& s, const char* prefix) { return s.rfind(prefix, 0) == 0; }
}  // namespace

// A Python installation's own tree: the standard library and its lib-dynload
// extension modules (/usr/lib/python3.11/, ~/.pyenv/versions/3.12.1/lib/python3.12/):
// a directory /lib/ or /lib64/, then python3/ or python3.N/. Read by hand: the
// std::regex it replaced took ~650,000 instructions of the CLI's run, most of
// them to compile it.
bool inPythonLibDir(const std::string& path) {
    const char* s = path.c_str();
    for (const char* at = std::strstr(s, "/lib"); at; at = std::strstr(at + 1, "/lib")) {
        const char* p = at + 4;
        if (std::strncmp(p, "64", 2) == 0) p += 2;
        if (std::strncmp(p, "/python3", 8) != 0) continue;
        p += 8;
        if (*p == '.' && std::isdigit(static_cast<unsigned char>(p[1]))) {
            ++p;
            while (std::isdigit(static_cast<unsigned char>(*p))) ++p;
        }
        if (*p == '/') return true;
    }
    return false;
}

namespace {
// memtool's own Python code that runs the user's: the track, the IPython magics,
// the pytest plugin (wherever the package is, an installed copy or a source tree).
bool isMemtoolRunner(const std::string& file) {
    for (const char* name : {"/memtool/_track.py", "/memtool/_ipython.py", "/memtool/_pytest.py"})
        if (file.ends_with(name)) return true;
    return false;
}
}  // namespace

bool isLibraryPythonFile(const std::string& file) {
    // A terminal IPython's cells are the user's code, synthetic names or not.
    if (file.starts_with("<ipython-input-")) return false;
    return file.empty() || file[0] == '<' || file.find("/site-packages/") != std::string::npos ||
           file.find("/dist-packages/") != std::string::npos || inPythonLibDir(file) ||
           isMemtoolRunner(file);
}

bool isInterpreterModule(const std::string& modulePath) {
    std::string b = baseName(modulePath);
    return startsWith(b, "python") || startsWith(b, "libpython");
}

// NVIDIA's driver and CUDA libraries, wherever they were installed: a container's
// driver mount (/usr/local/nvidia/lib64/libcuda.so.1), pip's nvidia-* wheels, a
// cluster's module tree. A CUDA allocation seen through CUPTI has them all on its
// stack, between the user's call and memtool's callback.
namespace {
bool isNvidiaLibrary(const std::string& base) {
    static const char* const prefixes[] = {
        "libcuda.so",   "libnvidia-",  "libcudart.so", "libcupti.so",   "libcublas",
        "libcudnn",     "libnccl.so",  "libnvrtc",     "libnvJitLink",  "libcufft",
        "libcurand.so", "libcusparse", "libcusolver",  "libnvToolsExt", "libnvshmem"};
    for (const char* p : prefixes)
        if (startsWith(base, p)) return true;
    return false;
}
}  // namespace

bool isLibraryModule(const std::string& path) {
    if (path.empty() || path[0] != '/') return true;  // unknown, the vDSO
    static const char* systemDirs[] = {"/usr/lib/",
                                       "/lib/",
                                       "/usr/lib64/",
                                       "/lib64/",
                                       "/usr/local/cuda",
                                       "/usr/local/nvidia/",
                                       "/usr/local/lib/python"};
    for (const char* d : systemDirs)
        if (startsWith(path, d)) return true;
    if (isNvidiaLibrary(baseName(path))) return true;
    return path.find("/site-packages/") != std::string::npos ||
           path.find("/dist-packages/") != std::string::npos || inPythonLibDir(path) ||
           baseName(path).find("libmemtool_") != std::string::npos || isInterpreterModule(path);
}

bool isMemtoolModule(const std::string& modulePath) {
    return startsWith(baseName(modulePath), "libmemtool_");
}

bool isAllocatorModule(const std::string& modulePath) {
    std::string b = baseName(modulePath);
    return isMemtoolModule(modulePath) || startsWith(b, "libc.so") || startsWith(b, "libc10.so");
}

bool isLibrarySource(const std::string& file) {
    static const char* const systemDirs[] = {"/usr/include/", "/usr/lib/", "/usr/local/include/",
                                             "/usr/local/cuda"};
    for (const char* d : systemDirs)
        if (startsWith(file, d)) return true;
    // The top directories of LibTorch's headers (its include/ holds these and no
    // other), and the C++ standard library's from any compiler's tree.
    static const char* const headerTrees[] = {
        "/include/ATen/", "/include/c10/",   "/include/torch/", "/include/caffe2/",
        "/include/c++/",  "/site-packages/", "/dist-packages/"};
    for (const char* t : headerTrees)
        if (file.find(t) != std::string::npos) return true;
    return false;
}

}  // namespace memtool::core
