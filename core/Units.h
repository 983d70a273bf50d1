#pragma once
// Byte counts for people: IEC formatting (KiB, MiB, GiB) and parsing of sizes
// written as bytes, IEC or SI units ("512MiB", "2GB", "1.5GiB", "123456").

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace memtool::core {

// 4194304 -> "4,194,304": a count with thousands separators.
std::string groupDigits(uint64_t n);

// 1536 -> "1.50 KiB"; below 1 KiB plain bytes: "512 B".
std::string formatBytes(uint64_t bytes);

// How a report writes sizes: IEC units (1 KiB = 1,024 B, the default), SI units
// (1 kB = 1,000 B), or exact bytes with thousands separators ("40,000 B"), for
// comparing with documentation and other tools.
enum class ByteUnits { Iec, Si, Exact };
std::optional<ByteUnits> parseByteUnits(std::string_view text);  // "iec" | "si" | "exact"
std::string formatBytes(uint64_t bytes, ByteUnits units);
// Width of a table column of sizes: room for "1023.99 KiB", or "999,999,999,999 B".
size_t byteColumnWidth(ByteUnits units);
// Signed variant for deltas: "+1.50 KiB", "-512 B", "0 B" ("+1,536 B" exact).
std::string formatBytesDelta(int64_t bytes, ByteUnits units = ByteUnits::Iec);

// nullopt when the text is not a size, or a fraction of a byte without a unit
// ("1.5", "1.5B"). Fractions of a unit are rounded to the nearest byte.
std::optional<uint64_t> parseSize(std::string_view text);

}  // namespace memtool::core
