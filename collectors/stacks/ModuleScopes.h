#pragma once
// `memtool run --modules`: the nn.Module a thread's allocations belong to now
// (python/memtool/_modules.py sets it around a module's forward and around the
// backward work of the autograd nodes that forward made). While a thread has
// one, its Python stack ends in one frame more, innermost, that names it: file
// core::kModuleScopeFile, function the module's label ("layer1.0.conv1 (Conv2d)"),
// line core::kModuleScopeForward or kModuleScopeBackward (core/Protocol.h). The frame stands
// for a scope, not for code: its "code object" is an address in this table.

#include <cstddef>
#include <cstdint>

namespace memtool::collectors::moduleScopes {

inline constexpr uint32_t kMaxScopes = 1u << 16;  // labels of a process; more get none

// A scope's id (1..kMaxScopes-1) for `label` in `phase` (1 forward, 2 backward);
// 0 when the table is full or the arguments are not one. Registering the same
// pair twice gives two ids (the Python side keeps each pair's).
uint32_t add(const char* label, int phase);

// Scopes are named while they are on (memtool_module_scopes_on): a thread's scope
// counts only if set in the current epoch, which each start begins, so a scope a
// thread was left in when an earlier track ended names nothing later.
void start();
void stop();
uint32_t epoch();  // 0 while off

// The address standing for scope `id` in a stack walk, and the way back.
const void* codeOf(uint32_t id);
bool isScope(const void* code);
// For an address isScope() accepts: the label and its length, and the phase.
const char* labelOf(const void* code, size_t* bytes);
uint32_t phaseOf(const void* code);

}  // namespace memtool::collectors::moduleScopes
