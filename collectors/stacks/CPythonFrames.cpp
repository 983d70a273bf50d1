#include "collectors/stacks/CPythonFrames.h"

#include <cstdlib>
#include <cstring>

namespace memtool::collectors {

namespace {

// Measured with offsetof against each version's headers (Include/cpython/pystate.h,
// Include/internal/pycore_frame.h, Include/cpython/code.h, Include/cpython/
// unicodeobject.h; Py_BUILD_CORE), x86-64 and aarch64 alike (LP64, no packing),
// default builds (not --with-pydebug's Py_TRACE_REFS, not 3.13's free-threaded
// build). Patch releases keep them; the self-check says when one did not.

// 3.11: tstate->cframe->current_frame; _PyInterpreterFrame starts with f_func.
constexpr CPythonLayout k311 = {.minor = 11,
                                .viaCFrame = true,
                                .tstateFrame = 56,
                                .cframeCurrent = 8,
                                .frameCode = 32,
                                .framePrevious = 48,
                                .frameInstr = 56,
                                .frameOwner = 69,
                                .ownerGenerator = 1,
                                .ownerCStack = -1,
                                .codeFilename = 112,
                                .codeQualname = 128,
                                .codeFirstLine = 72,
                                .codeFirstTraceable = 168,
                                .codeAdaptive = 184,
                                .strAsciiData = 48,  // PyASCIIObject still has wstr
                                .strCompactData = 72,
                                .strUtf8 = 56,
                                .strUtf8Length = 48};
// 3.12: _PyCFrame loses use_tracing; the frame starts with f_code, then previous.
constexpr CPythonLayout k312 = {.minor = 12,
                                .viaCFrame = true,
                                .tstateFrame = 56,
                                .cframeCurrent = 0,
                                .frameCode = 0,
                                .framePrevious = 8,
                                .frameInstr = 56,
                                .frameOwner = 70,
                                .ownerGenerator = 1,
                                .ownerCStack = 3,
                                .codeFilename = 112,
                                .codeQualname = 128,
                                .codeFirstLine = 68,
                                .codeFirstTraceable = 176,
                                .codeAdaptive = 192,
                                .strAsciiData = 40,
                                .strCompactData = 56,
                                .strUtf8 = 48,
                                .strUtf8Length = 40};
// 3.13: no _PyCFrame (the thread state points at the frame: f_executable,
// instr_ptr); the code object grows.
constexpr CPythonLayout k313 = [] {
    CPythonLayout l = k312;
    l.minor = 13;
    l.viaCFrame = false;
    l.tstateFrame = 72;
    l.codeFirstTraceable = 184;
    l.codeAdaptive = 200;
    return l;
}();
constexpr CPythonLayout kLayouts[] = {k311, k312, k313};

// PyASCIIObject.state: interned:2, kind:3, compact:1, ascii:1 (the same bits in
// 3.11 to 3.13).
constexpr uint32_t kStateKindShift = 2, kStateKindMask = 7;
constexpr uint32_t kStateCompact = 1u << 5, kStateAscii = 1u << 6;

size_t copyOut(const char* from, size_t n, char* out, size_t capacity) {
    if (n > capacity) n = capacity;
    std::memcpy(out, from, n);
    return n;
}

// One code point of a UCS1/UCS2/UCS4 string as UTF-8; false when it does not fit.
bool putUtf8(uint32_t c, char* out, size_t capacity, size_t* at) {
    char bytes[4];
    size_t n;
    if (c < 0x80) {
        bytes[0] = static_cast<char>(c);
        n = 1;
    } else if (c < 0x800) {
        bytes[0] = static_cast<char>(0xC0 | c >> 6);
        bytes[1] = static_cast<char>(0x80 | (c & 0x3F));
        n = 2;
    } else if (c < 0x10000) {
        bytes[0] = static_cast<char>(0xE0 | c >> 12);
        bytes[1] = static_cast<char>(0x80 | (c >> 6 & 0x3F));
        bytes[2] = static_cast<char>(0x80 | (c & 0x3F));
        n = 3;
    } else {
        bytes[0] = static_cast<char>(0xF0 | c >> 18);
        bytes[1] = static_cast<char>(0x80 | (c >> 12 & 0x3F));
        bytes[2] = static_cast<char>(0x80 | (c >> 6 & 0x3F));
        bytes[3] = static_cast<char>(0x80 | (c & 0x3F));
        n = 4;
    }
    if (*at + n > capacity) return false;
    std::memcpy(out + *at, bytes, n);
    *at += n;
    return true;
}

}  // namespace

const CPythonLayout* CPythonLayout::forMinor(unsigned minor) {
    for (const CPythonLayout& l : kLayouts)
        if (l.minor == minor) return &l;
    return nullptr;
}

bool CPythonFrames::configure(const CPythonApi& api, const char** why) {
    if (!api.GetVersion) {
        *why = "this interpreter lacks functions that reading frames needs";
        return false;
    }
    // "3.11.2 (main, ...)"
    const char* version = api.GetVersion();
    char* end = nullptr;
    const long major = std::strtol(version, &end, 10);
    const long minor = *end == '.' ? std::strtol(end + 1, nullptr, 10) : -1;
    const CPythonLayout* layout =
        major == 3 && minor >= 0 ? CPythonLayout::forMinor(static_cast<unsigned>(minor)) : nullptr;
    if (!layout) {
        *why = "memtool does not know this Python version's frame layout";
        return false;
    }
    if (!api.GILStateGetThisThreadState || !api.IsInitialized || !api.IsFinalizing ||
        !api.CodeAddr2Line || !api.codeType || !api.unicodeType) {
        *why = "this interpreter lacks functions that reading frames needs";
        return false;
    }
    layout_ = *layout;
    threadState_ = api.GILStateGetThisThreadState;
    isInitialized_ = api.IsInitialized;
    isFinalizing_ = api.IsFinalizing;
    addr2line_ = api.CodeAddr2Line;
    codeType_ = api.codeType;
    unicodeType_ = api.unicodeType;
    return true;
}

uint32_t CPythonFrames::line(const PyFrameRef& f) const {
    if (!isCode(f.code)) return 0;
    // PyFrame_GetLineNumber: PyCode_Addr2Line(code, _PyInterpreterFrame_LASTI * 2),
    // where LASTI counts code units from the first; a frame that has not started
    // (-1) gets the first line.
    const char* first = static_cast<const char*>(f.code) + layout_.codeAdaptive;
    const long offset = static_cast<const char*>(f.instr) - first;
    const int line = addr2line_(const_cast<void*>(f.code), static_cast<int>(offset));
    return line < 0 ? 0 : static_cast<uint32_t>(line);
}

size_t CPythonFrames::utf8(const void* str, char* out, size_t capacity) const {
    if (!str || typeOf(str) != unicodeType_) return 0;
    const uint32_t state = load<uint32_t>(str, layout_.strState);
    const auto length = static_cast<size_t>(load<int64_t>(str, layout_.strLength));
    if ((state & kStateCompact) && (state & kStateAscii))
        return copyOut(static_cast<const char*>(str) + layout_.strAsciiData, length, out, capacity);
    // Non-ASCII (or a legacy string): its UTF-8 form if it was ever asked for.
    if (const char* cached = load<const char*>(str, layout_.strUtf8))
        return copyOut(cached, static_cast<size_t>(load<int64_t>(str, layout_.strUtf8Length)), out,
                       capacity);
    if (!(state & kStateCompact)) return 0;
    const char* data = static_cast<const char*>(str) + layout_.strCompactData;
    const uint32_t kind = state >> kStateKindShift & kStateKindMask;
    size_t at = 0;
    for (size_t i = 0; i < length; ++i) {
        uint32_t c = 0;
        if (kind == 1) {
            c = load<uint8_t>(data, static_cast<uint32_t>(i));
        } else if (kind == 2) {
            c = load<uint16_t>(data, static_cast<uint32_t>(2 * i));
        } else if (kind == 4) {
            c = load<uint32_t>(data, static_cast<uint32_t>(4 * i));
        } else {
            return 0;
        }
        if (!putUtf8(c, out, capacity, &at)) break;
    }
    return at;
}

}  // namespace memtool::collectors
