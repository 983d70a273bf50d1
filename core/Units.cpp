#include "core/Units.h"

#include <cctype>
#include <cmath>
#include <cstdio>
#include <cstdlib>

#include "core/Protocol.h"
#include "trace/TraceModel.h"

namespace memtool::core {

std::string deviceName(uint8_t device) {
    if (device == kDeviceCpu) return "cpu";
    if (device == kDevicePinnedHost) return "pinned";
    if (device == kDeviceShared) return "shared";
    if (int npu = npuOrdinal(device); npu >= 0) return "npu:" + std::to_string(npu);
    int ordinal = cudaOrdinal(device);
    if (ordinal < 0) return "device" + std::to_string(device);
    std::string name = "cuda:" + std::to_string(ordinal);
    const char* pool = poolKey(device);
    return *pool ? name + "." + pool : name;
}

const char* poolKey(uint8_t device) {
    switch (devicePool(device)) {
        case DevicePool::Active:
            return kPoolActive;
        case DevicePool::Reserved:
            return kPoolReserved;
        case DevicePool::Graphs:
            return kPoolGraphs;
        case DevicePool::GraphsActive:
            return kPoolGraphsActive;
        case DevicePool::Device:
            return "";
    }
    return "";
}

namespace {

// "1.50 KiB": bytes in the largest of `units` (each `base` times the last) that
// leaves at least 1; plain bytes below the first.
std::string scaled(uint64_t bytes, double base, const char* const (&units)[5]) {
    if (static_cast<double>(bytes) < base) return std::to_string(bytes) + " B";
    double v = static_cast<double>(bytes);
    int u = -1;
    while (v >= base && u < 4) {
        v /= base;
        ++u;
    }
    char buf[32];
    std::snprintf(buf, sizeof buf, "%.2f %s", v, units[u]);
    return buf;
}

}  // namespace

std::string groupDigits(uint64_t n) {
    std::string digits = std::to_string(n);
    for (size_t at = digits.size(); at > 3; at -= 3) digits.insert(at - 3, ",");
    return digits;
}

std::string formatBytes(uint64_t bytes) {
    static const char* const units[] = {"KiB", "MiB", "GiB", "TiB", "PiB"};
    return scaled(bytes, 1024.0, units);
}

std::optional<ByteUnits> parseByteUnits(std::string_view text) {
    if (text == "iec") return ByteUnits::Iec;
    if (text == "si") return ByteUnits::Si;
    if (text == "exact") return ByteUnits::Exact;
    return std::nullopt;
}

std::string formatBytes(uint64_t bytes, ByteUnits units) {
    if (units == ByteUnits::Iec) return formatBytes(bytes);
    if (units == ByteUnits::Exact) return groupDigits(bytes) + " B";
    static const char* const si[] = {"kB", "MB", "GB", "TB", "PB"};
    return scaled(bytes, 1000.0, si);
}

size_t byteColumnWidth(ByteUnits units) { return units == ByteUnits::Exact ? 17 : 12; }

std::string formatBytesDelta(int64_t bytes, ByteUnits units) {
    if (bytes == 0) return "0 B";
    uint64_t mag =
        bytes < 0 ? static_cast<uint64_t>(-(bytes + 1)) + 1 : static_cast<uint64_t>(bytes);
    return (bytes < 0 ? "-" : "+") + formatBytes(mag, units);
}

std::optional<uint64_t> parseSize(std::string_view text) {
    size_t i = 0;
    while (i < text.size() && (std::isdigit(static_cast<unsigned char>(text[i])) || text[i] == '.'))
        ++i;
    std::string_view number = text.substr(0, i);
    std::string_view unit = text.substr(i);
    if (number.empty() || number.front() == '.' || number.back() == '.') return std::nullopt;
    if (number.find('.') != number.rfind('.')) return std::nullopt;
    struct Unit {
        const char* name;
        double factor;
    };
    static const Unit units[] = {
        {"", 1},
        {"B", 1},
        {"KiB", 1024.0},
        {"MiB", 1048576.0},
        {"GiB", 1073741824.0},
        {"TiB", 1099511627776.0},
        {"KB", 1e3},
        {"kB", 1e3},
        {"MB", 1e6},
        {"GB", 1e9},
        {"TB", 1e12},
    };
    const Unit* found = nullptr;
    for (const auto& u : units) {
        if (unit == u.name) found = &u;
    }
    if (!found) return std::nullopt;
    bool fractional = number.find('.') != std::string_view::npos;
    // Bytes come whole: "1.5" or "1.5B" is a typo for a unit, not 2 bytes.
    if (fractional && found->factor == 1 &&
        number.find_first_not_of('0', number.find('.') + 1) != std::string_view::npos)
        return std::nullopt;
    if (!fractional) {
        uint64_t v = 0;
        for (char c : number) {
            if (v > (UINT64_MAX - 9) / 10) return std::nullopt;
            v = v * 10 + static_cast<uint64_t>(c - '0');
        }
        uint64_t f = static_cast<uint64_t>(found->factor);
        if (f != 0 && v > UINT64_MAX / f) return std::nullopt;
        return v * f;
    }
    double v = std::strtod(std::string(number).c_str(), nullptr) * found->factor;
    if (!std::isfinite(v) || v >= 1.8e19) return std::nullopt;
    return static_cast<uint64_t>(std::llround(v));
}

}  // namespace memtool::core
