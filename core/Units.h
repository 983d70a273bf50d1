#pragma once
// Byte counts for people: IEC formatting (KiB, MiB, GiB) and parsing of sizes
// written as bytes, IEC or SI units ("512MiB", "2GB", "1.5GiB", "123456").

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace memtool::core {

// 1536 -> "1.50 KiB"; below 1 KiB plain bytes: "512 B".
std::string formatBytes(uint64_t bytes);
// Signed variant for deltas: "+1.50 KiB", "-512 B", "0 B".
std::string formatBytesDelta(int64_t bytes);

// nullopt when the text is not a size, or a fraction of a byte without a unit
// ("1.5", "1.5B"). Fractions of a unit are rounded to the nearest byte.
std::optional<uint64_t> parseSize(std::string_view text);

}  // namespace memtool::core
