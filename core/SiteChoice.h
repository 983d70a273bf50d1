#pragma once
// Which frame of a stack a hotspot is named after (its site), and which frames
// below it say what happened there. Shared by `memtool run` (the site it
// records) and the reports (`report --site`, `--depth`, `--group-by`), which
// choose again from the frames a trace keeps.

#include <cstddef>
#include <optional>
#include <string>
#include <vector>

#include "core/Frame.h"

namespace memtool::core {

// user: the innermost frame of the user's own code; all: the innermost frame;
// library: what the user's code called that says what happened (the module's
// forward, Adam.step, the torch operator), wrappers skipped. Without a user
// frame, user and library name the torch operator (or the first frame outside
// the allocator).
enum class SiteMode { User, All, Library };

// Parses "user" | "all" | "library"; nullopt otherwise.
std::optional<SiteMode> parseSiteMode(const std::string& text);
const char* siteModeName(SiteMode mode);  // what parseSiteMode reads

// A library frame that only passes a call on: a decorator's or dispatcher's
// wrapper (Module._call_impl, ...<locals>.wrapper, _use_grad), or a native frame
// no symbol names. Never the user's own code.
bool isPassThroughFrame(const Frame& f);

// "aten::linear" for at::_ops::linear::call(...); empty for any other frame.
std::string torchOperator(const Frame& f);

// The position of the site in `stack` (innermost first); none for an empty stack.
std::optional<size_t> chooseSite(const std::vector<Frame>& stack, SiteMode mode);

// Up to `depth` positions below `site` (towards the allocation) that say what
// happened there, outermost first: pass-through frames skipped.
std::vector<size_t> framesBelow(const std::vector<Frame>& stack, size_t site, size_t depth);

}  // namespace memtool::core
