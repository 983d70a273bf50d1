#include "collectors/stacks/CfiUnwinder.h"

#include <link.h>
#include <pthread.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <atomic>
#include <cstring>

#include "collectors/engine/ThreadState.h"
#include "core/SourceHash.h"

extern "C" void* __libc_stack_end;  // glibc: the top of the main thread's stack

namespace memtool::collectors {

// FrameRule bits, whole bytes so that unpacking is a few moves: 0-7 kind,
// 8 cfaFromRbp, 9 rbpSaved, 16-31 rbpSlot, 32-63 cfaOffset.
uint64_t FrameRule::pack() const {
    return uint64_t(kind) | uint64_t(cfaFromRbp) << 8 | uint64_t(rbpSaved) << 9 |
           uint64_t(rbpSlot & 0xffff) << 16 | uint64_t(cfaOffset) << 32;
}

FrameRule FrameRule::unpack(uint64_t bits) {
    FrameRule r;
    r.kind = Kind(bits & 0xff);
    r.cfaFromRbp = (bits >> 8) & 1;
    r.rbpSaved = (bits >> 9) & 1;
    r.rbpSlot = uint32_t(bits >> 16) & 0xffff;
    r.cfaOffset = uint32_t(bits >> 32);
    return r;
}

namespace {

std::atomic<uint64_t> gUnloads{0};
std::atomic<uint64_t> gRuleReads{0};      // rules read from .eh_frame (ruleReads)
std::atomic<uint64_t> gModuleLookups{0};  // the loader asked by a walk (moduleLookups)

// ---- reading .eh_frame ---------------------------------------------------------
// The formats are the LSB's (.eh_frame, .eh_frame_hdr) and DWARF's call frame
// instructions. Everything read lies in the module's own loaded segments.

constexpr int kRegRbp = 6, kRegRsp = 7, kRegRa = 16;  // DWARF numbers, x86-64

template <typename T>
T load(const uint8_t* p) {
    T v;
    std::memcpy(&v, p, sizeof v);
    return v;
}

struct Reader {
    const uint8_t* p;
    const uint8_t* end;
    bool ok = true;

    bool has(size_t n) {
        if (!ok || size_t(end - p) < n) ok = false;
        return ok;
    }
    uint8_t u8() { return has(1) ? *p++ : 0; }
    bool skip(uint64_t n) {
        if (!has(n)) return false;
        p += n;
        return true;
    }
    template <typename T>
    T fixed() {
        if (!has(sizeof(T))) return 0;
        T v = load<T>(p);
        p += sizeof(T);
        return v;
    }
    uint64_t uleb() {
        uint64_t v = 0;
        for (int shift = 0; has(1); shift += 7) {
            const uint8_t b = *p++;
            if (shift < 64) v |= uint64_t(b & 0x7f) << shift;
            if (!(b & 0x80)) return v;
        }
        return 0;
    }
    int64_t sleb() {
        int64_t v = 0;
        int shift = 0;
        uint8_t b = 0;
        do {
            if (!has(1)) return 0;
            b = *p++;
            if (shift < 64) v |= int64_t(b & 0x7f) << shift;
            shift += 7;
        } while (b & 0x80);
        if (shift < 64 && (b & 0x40)) v |= -(int64_t(1) << shift);
        return v;
    }
    // A pointer in DW_EH_PE encoding `enc`: absolute, pc-relative or relative to
    // `dataBase`; false for the encodings code never uses here (and for omit).
    bool pointer(uint8_t enc, uint64_t dataBase, uint64_t* out) {
        if (enc == 0xff) return false;
        const uint64_t at = reinterpret_cast<uint64_t>(p);
        uint64_t v;
        switch (enc & 0x0f) {
            case 0x00:
                v = fixed<uint64_t>();
                break;
            case 0x01:
                v = uleb();
                break;
            case 0x02:
                v = fixed<uint16_t>();
                break;
            case 0x03:
                v = fixed<uint32_t>();
                break;
            case 0x04:
                v = fixed<uint64_t>();
                break;
            case 0x09:
                v = uint64_t(sleb());
                break;
            case 0x0a:
                v = uint64_t(int64_t(fixed<int16_t>()));
                break;
            case 0x0b:
                v = uint64_t(int64_t(fixed<int32_t>()));
                break;
            case 0x0c:
                v = fixed<uint64_t>();
                break;
            default:
                return ok = false;
        }
        switch (enc & 0x70) {
            case 0x00:
                break;
            case 0x10:
                v += at;
                break;
            case 0x30:
                v += dataBase;
                break;
            default:
                return ok = false;
        }
        // 0x80 (indirect) is used only for personality routines, which are skipped.
        *out = v;
        return ok;
    }
};

// Where a register's value in the caller is.
struct RegRule {
    enum Kind : uint8_t { Same, Undefined, AtCfa, Other } kind = Same;
    int64_t offset = 0;  // AtCfa: the value is at CFA + offset
};

struct CfiState {
    int cfaReg = kRegRsp;
    int64_t cfaOffset = 8;
    bool cfaOther = false;  // an expression, or a register we do not follow
    RegRule rbp, ra;
};

struct Cie {
    uint64_t codeAlign = 1;
    int64_t dataAlign = -8;
    uint64_t raReg = kRegRa;
    uint8_t fdeEncoding = 0;
    bool hasAugmentationData = false;
    bool signalFrame = false;
    const uint8_t* instructions = nullptr;
    const uint8_t* end = nullptr;
};

bool parseCie(const uint8_t* at, uint64_t dataBase, Cie* cie) {
    Reader r{at, at + 16};
    const uint32_t length = r.fixed<uint32_t>();
    if (!r.ok || length == 0 || length == 0xffffffffu) return false;  // no 64-bit CFI here
    r.end = r.p + length;
    cie->end = r.end;
    if (r.fixed<uint32_t>() != 0) return false;  // not a CIE
    const uint8_t version = r.u8();
    if (version != 1 && version != 3 && version != 4) return false;
    const char* augmentation = reinterpret_cast<const char*>(r.p);
    const size_t augLength = strnlen(augmentation, size_t(r.end - r.p));
    if (!r.has(augLength + 1)) return false;
    r.p += augLength + 1;
    if (version == 4) {
        if (r.u8() != 8 || r.u8() != 0) return false;  // address size, segment size
    }
    cie->codeAlign = r.uleb();
    cie->dataAlign = r.sleb();
    cie->raReg = version == 1 ? r.u8() : r.uleb();
    if (augmentation[0] == 'z') {
        cie->hasAugmentationData = true;
        const uint64_t dataLength = r.uleb();
        if (!r.has(dataLength)) return false;
        const uint8_t* after = r.p + dataLength;
        for (const char* a = augmentation + 1; *a; ++a) {
            if (*a == 'R') {
                cie->fdeEncoding = r.u8();
            } else if (*a == 'P') {
                uint64_t personality;
                r.pointer(r.u8(), dataBase, &personality);
            } else if (*a == 'L') {
                r.u8();
            } else if (*a == 'S') {
                cie->signalFrame = true;
            } else if (*a != 'B') {
                break;  // unknown: the augmentation data's length still lets us skip it
            }
        }
        r.p = after;
    } else if (augmentation[0] != '\0') {
        return false;
    }
    cie->instructions = r.p;
    return r.ok && cie->codeAlign != 0;
}

RegRule* ruleOf(CfiState& s, uint64_t reg) {
    if (reg == kRegRbp) return &s.rbp;
    if (reg == kRegRa) return &s.ra;
    return nullptr;
}

// Note [runCfi's one switch]: runCfi runs for every rule read (a thread's cache
// miss), and its pieces below are always inlined into it. The extended opcodes an
// FDE is made of (DW_CFA_def_cfa_offset above all, then nop, def_cfa, the
// advances and remember/restore_state; counted over libc's and libstdc++'s FDEs)
// share one switch, as one jump table: helpers that each switch over their own
// group and report whether they took the opcode cost 2-8% more instructions
// (the groups' switches are tried one after the other). Only the register-rule
// opcodes, which GCC's x86-64 code almost never has (its saved registers are all
// numbered below 64, so DW_CFA_offset serves), are tried after that switch.

[[gnu::always_inline]] inline void setOffset(CfiState& s, uint64_t reg, int64_t offset) {
    if (RegRule* rule = ruleOf(s, reg)) *rule = {RegRule::AtCfa, offset};
}

[[gnu::always_inline]] inline void setOther(CfiState& s, uint64_t reg, RegRule::Kind kind) {
    if (RegRule* rule = ruleOf(s, reg)) *rule = {kind, 0};
}

// `initial`: the CIE's state (null while running the CIE's own instructions).
[[gnu::always_inline]] inline void restore(CfiState& s, const CfiState* initial, uint64_t reg) {
    if (reg == kRegRbp) s.rbp = initial ? initial->rbp : RegRule{};
    if (reg == kRegRa) s.ra = initial ? initial->ra : RegRule{};
}

// Runs `op` if it is one of the extended opcodes that set one register's rule
// (only rbp's and the return address's are kept, the others' operands skipped);
// false if it is not one. A read past the instructions leaves r.ok false.
[[gnu::always_inline]] inline bool setRegisterRule(uint8_t op, Reader& r, const Cie& cie,
                                                   CfiState& s, const CfiState* initial) {
    switch (op) {
        case 0x05: {  // offset_extended
            const uint64_t reg = r.uleb();
            setOffset(s, reg, int64_t(r.uleb()) * cie.dataAlign);
            return true;
        }
        case 0x06:  // restore_extended
            restore(s, initial, r.uleb());
            return true;
        case 0x07:  // undefined
            setOther(s, r.uleb(), RegRule::Undefined);
            return true;
        case 0x08:  // same_value
            setOther(s, r.uleb(), RegRule::Same);
            return true;
        case 0x09: {  // register
            const uint64_t reg = r.uleb();
            r.uleb();
            setOther(s, reg, RegRule::Other);
            return true;
        }
        case 0x10:    // expression
        case 0x16: {  // val_expression
            const uint64_t reg = r.uleb();
            if (r.skip(r.uleb())) setOther(s, reg, RegRule::Other);
            return true;
        }
        case 0x11: {  // offset_extended_sf
            const uint64_t reg = r.uleb();
            setOffset(s, reg, r.sleb() * cie.dataAlign);
            return true;
        }
        case 0x14:  // val_offset
            setOther(s, r.uleb(), RegRule::Other);
            r.uleb();
            return true;
        case 0x15:  // val_offset_sf
            setOther(s, r.uleb(), RegRule::Other);
            r.sleb();
            return true;
        case 0x2f: {  // GNU_negative_offset_extended
            const uint64_t reg = r.uleb();
            setOffset(s, reg, -int64_t(r.uleb()) * cie.dataAlign);
            return true;
        }
    }
    return false;
}

// runCfi's state between instructions: what it reads, and the row it is at.
struct CfiRun {
    Reader r;
    const Cie& cie;
    uint64_t dataBase;
    uint64_t loc;  // the code address the row starts at
    uint64_t pc;   // the code address whose row is wanted
    CfiState& s;
    const CfiState* initial;  // the CIE's state (null while running the CIE's own)

    // Moves to the next row, `delta` code alignment units on; false once it is past pc.
    bool advance(uint64_t delta) {
        loc += delta * cie.codeAlign;
        return loc <= pc;
    }
};

// DW_CFA_remember_state's stack.
struct RememberedStates {
    static constexpr int kMax = 8;
    // Not initialized: a state is read only once remember_state has written it.
    // (Their default members' stores were an eighth of runCfi's instructions.)
    union {
        CfiState states[kMax];
    };
    int depth = 0;
    RememberedStates() {}
};

// After an extended instruction: run the next, stop at the row reached (runCfi
// gives true), or give up (false).
enum class CfiStep : uint8_t { Next, Stop, Fail };

// Runs extended instruction `op` (op < 0x40): the location, state and CFA
// opcodes here, the register-rule ones by setRegisterRule (Note [runCfi's one
// switch]). A read past the instructions leaves r.ok false.
[[gnu::always_inline]] inline CfiStep runExtended(uint8_t op, CfiRun& run,
                                                  RememberedStates& remembered) {
    Reader& r = run.r;
    CfiState& s = run.s;
    switch (op) {
        case 0x00:
            break;    // nop
        case 0x01: {  // set_loc
            uint64_t to;
            if (!r.pointer(run.cie.fdeEncoding, run.dataBase, &to)) return CfiStep::Fail;
            if (to > run.pc) return CfiStep::Stop;
            run.loc = to;
            break;
        }
        case 0x02:
            return run.advance(r.u8()) ? CfiStep::Next : CfiStep::Stop;
        case 0x03:
            return run.advance(r.fixed<uint16_t>()) ? CfiStep::Next : CfiStep::Stop;
        case 0x04:
            return run.advance(r.fixed<uint32_t>()) ? CfiStep::Next : CfiStep::Stop;
        case 0x0a:  // remember_state
            if (remembered.depth == RememberedStates::kMax) return CfiStep::Fail;
            remembered.states[remembered.depth++] = s;
            break;
        case 0x0b:  // restore_state: the CFA too (GCC's epilogues rely on it, as libgcc does)
            if (remembered.depth == 0) return CfiStep::Fail;
            s = remembered.states[--remembered.depth];
            break;
        case 0x0c:  // def_cfa
            s.cfaReg = int(r.uleb());
            s.cfaOffset = int64_t(r.uleb());
            s.cfaOther = false;
            break;
        case 0x0d:  // def_cfa_register
            s.cfaReg = int(r.uleb());
            break;
        case 0x0e:  // def_cfa_offset
            s.cfaOffset = int64_t(r.uleb());
            break;
        case 0x0f:  // def_cfa_expression: not followed
            if (r.skip(r.uleb())) s.cfaOther = true;
            break;
        case 0x12:  // def_cfa_sf
            s.cfaReg = int(r.uleb());
            s.cfaOffset = r.sleb() * run.cie.dataAlign;
            s.cfaOther = false;
            break;
        case 0x13:  // def_cfa_offset_sf
            s.cfaOffset = r.sleb() * run.cie.dataAlign;
            break;
        case 0x2e:  // GNU_args_size
            r.uleb();
            break;
        default:
            if (!setRegisterRule(op, r, run.cie, s, run.initial)) return CfiStep::Fail;
    }
    return CfiStep::Next;
}

// Runs call frame instructions [p, end) from code address `loc` until the row
// that covers `pc`. `initial`: the CIE's state, for DW_CFA_restore (null while
// running the CIE's own instructions). False on an instruction not understood.
bool runCfi(const uint8_t* p, const uint8_t* end, const Cie& cie, uint64_t dataBase, uint64_t loc,
            uint64_t pc, CfiState& s, const CfiState* initial) {
    CfiRun run{{p, end}, cie, dataBase, loc, pc, s, initial};
    RememberedStates remembered;
    Reader& r = run.r;
    while (r.ok && r.p < r.end) {
        const uint8_t op = r.u8();
        switch (op >> 6) {
            case 1:  // DW_CFA_advance_loc
                if (!run.advance(op & 0x3f)) return true;
                continue;
            case 2:  // DW_CFA_offset
                setOffset(s, op & 0x3f, int64_t(r.uleb()) * cie.dataAlign);
                continue;
            case 3:  // DW_CFA_restore
                restore(s, initial, op & 0x3f);
                continue;
        }
        switch (runExtended(op, run, remembered)) {
            case CfiStep::Next:
                continue;
            case CfiStep::Stop:
                return true;
            case CfiStep::Fail:
                return false;
        }
    }
    return r.ok;
}

// The module holding pc: its .eh_frame_hdr and its span, found through the
// program headers.
struct ModuleLookup {
    uint64_t pc;
    ModuleSpan span{};
    bool found = false;
};

// The module's build ID (an NT_GNU_BUILD_ID note, in a PT_NOTE segment: mapped
// with the module's first pages) folded to 64 bits by core::fnv1a64; 0: none.
uint64_t buildIdOf(const dl_phdr_info* info) {
    for (int i = 0; i < info->dlpi_phnum; ++i) {
        const auto& ph = info->dlpi_phdr[i];
        if (ph.p_type != PT_NOTE) continue;
        const uint64_t align = ph.p_align == 8 ? 8 : 4;
        auto padded = [align](uint64_t n) { return (n + align - 1) & ~(align - 1); };
        const uint8_t* p = reinterpret_cast<const uint8_t*>(info->dlpi_addr + ph.p_vaddr);
        const uint8_t* end = p + ph.p_memsz;
        while (end - p >= 12) {
            const uint32_t nameSize = load<uint32_t>(p), descSize = load<uint32_t>(p + 4),
                           type = load<uint32_t>(p + 8);
            const uint8_t* name = p + 12;
            const uint64_t descAt = padded(nameSize), after = descAt + padded(descSize);
            if (after > uint64_t(end - name)) break;
            const uint8_t* desc = name + descAt;
            if (type == 3 && nameSize == 4 && std::memcmp(name, "GNU", 4) == 0 && descSize >= 8) {
                const uint64_t h = core::fnv1a64({reinterpret_cast<const char*>(desc), descSize});
                return h ? h : 1;
            }
            p = name + after;
        }
    }
    return 0;
}

int findModule(dl_phdr_info* info, size_t, void* data) {
    auto* m = static_cast<ModuleLookup*>(data);
    const ElfW(Phdr)* hdr = nullptr;
    bool holds = false;
    uint64_t low = ~uint64_t(0), high = 0;
    for (int i = 0; i < info->dlpi_phnum; ++i) {
        const auto& ph = info->dlpi_phdr[i];
        if (ph.p_type == PT_LOAD) {
            const uint64_t start = info->dlpi_addr + ph.p_vaddr;
            if (m->pc >= start && m->pc < start + ph.p_memsz) holds = true;
            if (start < low) low = start;
            if (start + ph.p_memsz > high) high = start + ph.p_memsz;
        } else if (ph.p_type == PT_GNU_EH_FRAME) {
            hdr = &ph;
        }
    }
    if (!holds) return 0;
    m->found = true;
    m->span.low = low;
    m->span.high = high;
    m->span.base = info->dlpi_addr;
    m->span.identity = buildIdOf(info);
    if (hdr) m->span.ehFrameHdr = reinterpret_cast<const uint8_t*>(info->dlpi_addr + hdr->p_vaddr);
    return 1;
}

// The module holding pc (null: none), from the thread's spans when one holds
// pc, else from the loader. A slot found moves to the front (where the result
// points); a new one goes there and the last goes.
const ModuleSpan* moduleSpanFor(ThreadState& ts, uint64_t pc) {
    ModuleSpan* spans = ts.moduleSpans;
    int i = 0;
    while (i < kModuleSpans && !(pc >= spans[i].low && pc < spans[i].high)) ++i;
    ModuleSpan found;
    if (i < kModuleSpans) {
        found = spans[i];
    } else {
        ModuleLookup module{pc};
        dl_iterate_phdr(findModule, &module);
        gModuleLookups.fetch_add(1, std::memory_order_relaxed);
        if (!module.found) return nullptr;  // not kept: code may be loaded there later
        found = module.span;
        i = kModuleSpans - 1;
    }
    for (; i > 0; --i) spans[i] = spans[i - 1];
    spans[0] = found;
    return &spans[0];
}

// The FDE covering pc, by the binary search table of .eh_frame_hdr (the only
// layout linkers write: sorted pairs of 4-byte offsets from the header).
const uint8_t* findFde(const uint8_t* hdr, uint64_t pc) {
    Reader r{hdr, hdr + 4 + 8 + 8};
    if (r.u8() != 1) return nullptr;  // version
    const uint8_t frameEnc = r.u8();
    const uint8_t countEnc = r.u8();
    const uint8_t tableEnc = r.u8();
    const uint64_t base = reinterpret_cast<uint64_t>(hdr);
    uint64_t frame, count;
    if (!r.pointer(frameEnc, base, &frame) || !r.pointer(countEnc, base, &count)) return nullptr;
    if (tableEnc != 0x3b || count == 0) return nullptr;  // datarel | sdata4
    const uint8_t* table = r.p;
    uint64_t lo = 0, hi = count;  // the last entry whose start <= pc
    while (hi - lo > 1) {
        const uint64_t mid = lo + (hi - lo) / 2;
        if (base + int64_t(load<int32_t>(table + mid * 8)) <= pc)
            lo = mid;
        else
            hi = mid;
    }
    if (base + int64_t(load<int32_t>(table + lo * 8)) > pc) return nullptr;
    return reinterpret_cast<const uint8_t*>(base + int64_t(load<int32_t>(table + lo * 8 + 4)));
}

FrameRule unsupported() {
    FrameRule r;
    r.kind = FrameRule::Unsupported;
    return r;
}

// The rule for pc from the .eh_frame of the module whose header is ehFrameHdr
// (null: Unsupported).
FrameRule ruleIn(const uint8_t* ehFrameHdr, uint64_t pc);

// ---- rules shared across fork (shareRulesWithForks) ---------------------------------

// A slot is claimed once (module from 0, by compare-and-swap) and never changes
// after its rule is stored; rule 0 (no rule packs to 0) means not yet stored.
struct SharedRuleSlot {
    std::atomic<uint64_t> module, offset, rule;
};
constexpr uint64_t kSharedRuleSlots = 4096;  // 96 KiB
constexpr int kSharedRuleProbes = 16;
static_assert(std::atomic<uint64_t>::is_always_lock_free);

std::atomic<SharedRuleSlot*> gSharedRules{nullptr};

uint64_t sharedHome(uint64_t module, uint64_t offset) {
    return ((module ^ offset * 0x9e3779b97f4a7c15ull) * 0xff51afd7ed558ccdull) >> 52;  // 12 bits
}

// The rule kept for (module, offset), or 0.
uint64_t sharedRule(SharedRuleSlot* table, uint64_t module, uint64_t offset) {
    uint64_t i = sharedHome(module, offset);
    for (int n = 0; n < kSharedRuleProbes; ++n, i = (i + 1) % kSharedRuleSlots) {
        SharedRuleSlot& s = table[i];
        const uint64_t rule = s.rule.load(std::memory_order_acquire);
        if (rule == 0) {
            // Empty: inserts take the first empty slot, so it is nowhere further.
            if (s.module.load(std::memory_order_relaxed) == 0) return 0;
            continue;  // being stored
        }
        if (s.module.load(std::memory_order_relaxed) == module &&
            s.offset.load(std::memory_order_relaxed) == offset)
            return rule;
    }
    return 0;
}

void keepSharedRule(SharedRuleSlot* table, uint64_t module, uint64_t offset, uint64_t rule) {
    uint64_t i = sharedHome(module, offset);
    for (int n = 0; n < kSharedRuleProbes; ++n, i = (i + 1) % kSharedRuleSlots) {
        SharedRuleSlot& s = table[i];
        uint64_t expected = 0;
        if (s.module.load(std::memory_order_relaxed) == 0 &&
            s.module.compare_exchange_strong(expected, module, std::memory_order_relaxed)) {
            s.offset.store(offset, std::memory_order_relaxed);
            s.rule.store(rule, std::memory_order_release);
            return;
        }
    }
    // Its slots are all taken: the rule stays in the thread's own cache only.
}

// The rule for pc in `span`'s module (null: none holds pc): from the rules the
// fork tree shares when they have it, else read from .eh_frame (and shared).
uint64_t readRule(const ModuleSpan* span, uint64_t pc) {
    SharedRuleSlot* shared = gSharedRules.load(std::memory_order_acquire);
    const bool share = shared && span && span->identity;
    if (share)
        if (const uint64_t rule = sharedRule(shared, span->identity, pc - span->base)) return rule;
    const uint64_t rule = ruleIn(span ? span->ehFrameHdr : nullptr, pc).pack();
    gRuleReads.fetch_add(1, std::memory_order_relaxed);
    if (share) keepSharedRule(shared, span->identity, pc - span->base, rule);
    return rule;
}

// ---- the walk --------------------------------------------------------------------

// The calling thread's stack, [low, high): reads outside it are never made.
bool stackBounds(ThreadState& ts) {
    if (ts.stackHigh != 0) return ts.stackHigh != 1;
    ts.stackHigh = 1;  // tried
    if (syscall(SYS_gettid) == getpid()) {
        // The main thread: pthread_getattr_np would read /proc/self/maps.
        const uint64_t high = reinterpret_cast<uint64_t>(__libc_stack_end);
        rlimit limit{};
        getrlimit(RLIMIT_STACK, &limit);
        const uint64_t size =
            limit.rlim_cur == RLIM_INFINITY || limit.rlim_cur > (uint64_t(1) << 32)
                ? uint64_t(1) << 32
                : limit.rlim_cur;
        if (high <= size) return false;
        ts.stackLow = high - size;
        ts.stackHigh = high;
        return true;
    }
    pthread_attr_t attr;
    if (pthread_getattr_np(pthread_self(), &attr) != 0) return false;
    void* address = nullptr;
    size_t size = 0;
    const bool got = pthread_attr_getstack(&attr, &address, &size) == 0;
    pthread_attr_destroy(&attr);
    if (!got || !address) return false;
    ts.stackLow = reinterpret_cast<uint64_t>(address);
    ts.stackHigh = ts.stackLow + size;
    return true;
}

// The rule of the frame at `depth` whose code address is pc: first from the
// thread's previous walk at the same depth (consecutive stacks share most frames,
// and those few slots stay in cache), then from the thread's table by address,
// then from .eh_frame. The table is 4-way: with one slot per address hash, a
// model's 300-400 return addresses collided in dozens of pairs that evicted each
// other on every walk (4,181 reads of .eh_frame for a DataLoader's 2,049
// allocations, each a dl_iterate_phdr and an FDE search), and with 256 sets a
// few sets still overflowed (742 reads); with 512, each address is read once.
[[gnu::always_inline]] inline uint64_t cachedRule(ThreadState& ts, int depth, uint64_t pc) {
    UnwindRuleSlot* recent = depth < kRecentWalkDepth ? &ts.recentWalk[depth] : nullptr;
    if (recent && recent->pc == pc) return recent->rule;
    UnwindRuleSlot* set =
        &ts.unwindRules[((pc * 0x9e3779b97f4a7c15ull) >> (64 - kUnwindRuleSetBits)) *
                        kUnwindRuleWays];
    int way = 0;
    while (way < kUnwindRuleWays && (set[way].pc != pc || set[way].rule == 0)) ++way;
    UnwindRuleSlot found;
    if (way < kUnwindRuleWays) {
        found = set[way];
    } else {
        found = {pc, readRule(moduleSpanFor(ts, pc), pc)};
        way = kUnwindRuleWays - 1;  // the least recently read goes
    }
    for (; way > 0; --way) set[way] = set[way - 1];
    set[0] = found;
    if (recent) *recent = found;
    return found.rule;
}

}  // namespace

FrameRule frameRuleFor(uint64_t pc) {
    ModuleLookup module{pc};
    dl_iterate_phdr(findModule, &module);
    return ruleIn(module.span.ehFrameHdr, pc);
}

namespace {

FrameRule ruleIn(const uint8_t* ehFrameHdr, uint64_t pc) {
    if (!ehFrameHdr) return unsupported();
    const uint8_t* fde = findFde(ehFrameHdr, pc);
    if (!fde) return unsupported();
    const uint64_t dataBase = reinterpret_cast<uint64_t>(ehFrameHdr);
    Reader r{fde, fde + 8};
    const uint32_t length = r.fixed<uint32_t>();
    if (!r.ok || length == 0 || length == 0xffffffffu) return unsupported();
    const uint8_t* idField = r.p;
    const uint32_t cieOffset = r.fixed<uint32_t>();
    if (cieOffset == 0) return unsupported();  // a CIE, not an FDE
    r.end = idField + length;
    Cie cie;
    if (!parseCie(idField - cieOffset, dataBase, &cie) || cie.signalFrame || cie.raReg != kRegRa ||
        (cie.fdeEncoding & 0x80))
        return unsupported();
    uint64_t begin, range;
    if (!r.pointer(cie.fdeEncoding, dataBase, &begin) ||
        !r.pointer(cie.fdeEncoding & 0x0f, 0, &range))
        return unsupported();
    if (pc < begin || pc >= begin + range) return unsupported();
    if (cie.hasAugmentationData) {
        const uint64_t skip = r.uleb();
        if (!r.has(skip)) return unsupported();
        r.p += skip;
    }
    CfiState initial;
    if (!runCfi(cie.instructions, cie.end, cie, dataBase, 0, ~uint64_t(0), initial, nullptr))
        return unsupported();
    CfiState state = initial;
    if (!runCfi(r.p, r.end, cie, dataBase, begin, pc, state, &initial)) return unsupported();

    FrameRule rule;
    if (state.ra.kind == RegRule::Undefined) {
        rule.kind = FrameRule::Outermost;
        return rule;
    }
    if (state.cfaOther || (state.cfaReg != kRegRsp && state.cfaReg != kRegRbp) ||
        state.cfaOffset < 0 || state.cfaOffset > 0x0fffffff || state.ra.kind != RegRule::AtCfa ||
        state.ra.offset != -8)
        return unsupported();
    rule.kind = FrameRule::Frame;
    rule.cfaFromRbp = state.cfaReg == kRegRbp;
    rule.cfaOffset = uint32_t(state.cfaOffset);
    if (state.rbp.kind == RegRule::AtCfa) {
        if (state.rbp.offset >= 0 || state.rbp.offset % 8 != 0 || -state.rbp.offset / 8 > 0xffff)
            return unsupported();
        rule.rbpSaved = true;
        rule.rbpSlot = uint32_t(-state.rbp.offset / 8);
    } else if (state.rbp.kind != RegRule::Same) {
        return unsupported();
    }
    return rule;
}

}  // namespace

void codeUnloaded() { gUnloads.fetch_add(1, std::memory_order_relaxed); }

void shareRulesWithForks() {
    if (gSharedRules.load(std::memory_order_acquire)) return;
    // Populated: every page of the table then exists, and a child's first read of
    // it maps its neighbours too (the kernel's fault-around, ~16 pages a fault),
    // where pages made one at a time were a fault each in every worker (17 of its
    // 24 in a pool's).
    void* table = mmap(nullptr, kSharedRuleSlots * sizeof(SharedRuleSlot), PROT_READ | PROT_WRITE,
                       MAP_SHARED | MAP_ANONYMOUS | MAP_POPULATE, -1, 0);
    if (table == MAP_FAILED) return;
    SharedRuleSlot* expected = nullptr;
    if (!gSharedRules.compare_exchange_strong(expected, static_cast<SharedRuleSlot*>(table),
                                              std::memory_order_acq_rel))
        munmap(table, kSharedRuleSlots * sizeof(SharedRuleSlot));
}

uint64_t moduleIdentity(const void* address) {
    ModuleLookup module{reinterpret_cast<uint64_t>(address)};
    dl_iterate_phdr(findModule, &module);
    return module.found ? module.span.identity : 0;
}

uint64_t ruleReads() { return gRuleReads.load(std::memory_order_relaxed); }

uint64_t moduleLookups() { return gModuleLookups.load(std::memory_order_relaxed); }

// The walk proper, behind memtool_cfi_backtrace's register capture: regs holds
// its caller's return address (never null), stack pointer after the return, and
// rbp. Unsanitized: it reads other frames' stack slots by design.
extern "C"
    __attribute__((used, visibility("hidden"), no_sanitize("address", "undefined", "thread"))) int
    memtool_cfi_walk(void** out, int max, const uint64_t* regs, ThreadState* ts) {
    if (!ts || !stackBounds(*ts)) return -1;
    uint64_t ip = regs[0], sp = regs[1], bp = regs[2];
    if (sp < ts->stackLow || sp >= ts->stackHigh) return -1;  // a signal stack
    const uint64_t low = sp, high = ts->stackHigh;
    const uint64_t unloads = gUnloads.load(std::memory_order_relaxed);
    if (ts->unwindRulesGeneration != unloads) {
        std::memset(ts->unwindRules, 0, sizeof ts->unwindRules);
        std::memset(ts->recentWalk, 0, sizeof ts->recentWalk);
        std::memset(ts->moduleSpans, 0, sizeof ts->moduleSpans);
        ts->unwindRulesGeneration = unloads;
    }
    const uint64_t stopStart = ts->walkStopStart, stopEnd = ts->walkStopEnd;
    WalkMemo& memo = ts->walkMemo;
    if (memo.frames > 0 && memo.ip == ip && memo.sp == sp && (!memo.usesBp || memo.bp == bp) &&
        memo.max == max && memo.stopStart == stopStart && memo.stopEnd == stopEnd &&
        memo.rulesGeneration == unloads) {
        // Every slot is read (they are few, and almost always all equal): the
        // differences accumulated two at a time, and one branch at the end.
        auto differ = [&](int i) {
            return *reinterpret_cast<const uint64_t*>(memo.slot[i]) ^ memo.value[i];
        };
        uint64_t differs = 0, differsToo = 0;
        int i = 0;
        for (; i + 2 <= memo.reads; i += 2) {
            differs |= differ(i);
            differsToo |= differ(i + 1);
        }
        if (i < memo.reads) differs |= differ(i);
        if ((differs | differsToo) == 0) {
            ++memo.replays;
            memo.resultSerial = memo.serial;
            if (out != reinterpret_cast<void**>(memo.ips))
                std::memcpy(out, memo.ips, sizeof(uint64_t) * size_t(memo.frames));
            return memo.frames;
        }
    }
    // Walk, noting the slots the frames depend on for the next walk to check: every
    // return address, and a restored rbp only once a frame's CFA is computed from it
    // (most frames' are not; the next restore makes it irrelevant).
    memo.frames = 0;
    memo.resultSerial = 0;
    int reads = 0;
    bool usesBp = false, bpFromSlot = false;
    uint64_t bpSlot = 0;  // where the rbp in use was restored from, until a CFA uses it
    auto note = [&](uint64_t at, uint64_t value) {
        if (reads < 2 * kWalkMemoFrames) {
            memo.slot[reads] = at;
            memo.value[reads] = value;
        }
        ++reads;
    };
    auto keep = [&](int frames) {
        if (frames > kWalkMemoFrames || reads > 2 * kWalkMemoFrames) return frames;
        memo.ip = regs[0];
        memo.sp = regs[1];
        memo.bp = regs[2];
        memo.usesBp = usesBp;
        memo.stopStart = stopStart;
        memo.stopEnd = stopEnd;
        memo.rulesGeneration = unloads;
        memo.max = max;
        memo.reads = reads;
        if (out != reinterpret_cast<void**>(memo.ips))
            std::memcpy(memo.ips, out, sizeof(uint64_t) * size_t(frames));
        memo.frames = frames;
        memo.resultSerial = ++memo.serial;
        return frames;
    };
    int n = 0;
    while (n < max) {
        out[n] = reinterpret_cast<void*>(ip);
        if (ip > stopStart && ip <= stopEnd) return keep(n + 1);
        const FrameRule rule = FrameRule::unpack(cachedRule(*ts, n, ip - 1));
        ++n;
        if (rule.kind == FrameRule::Outermost) break;
        if (rule.kind != FrameRule::Frame) return -1;
        if (rule.cfaFromRbp) {
            if (!bpFromSlot) {
                usesBp = true;
            } else if (bpSlot) {
                note(bpSlot, bp);
                bpSlot = 0;  // noted once
            }
        }
        const uint64_t cfa = (rule.cfaFromRbp ? bp : sp) + rule.cfaOffset;
        if (cfa <= sp || cfa - 8 < low || cfa > high) return -1;
        if (rule.rbpSaved) {
            const uint64_t at = cfa - 8 * uint64_t(rule.rbpSlot);
            if (at < low || at + 8 > high) return -1;
            bp = *reinterpret_cast<const uint64_t*>(at);
            bpFromSlot = true;
            bpSlot = at;
        }
        ip = *reinterpret_cast<const uint64_t*>(cfa - 8);
        note(cfa - 8, ip);
        sp = cfa;
        if (ip == 0) break;  // the outermost frame says so by a null return address
    }
    return keep(n);
}

}  // namespace memtool::collectors

#if defined(__x86_64__)
// memtool_cfi_backtrace(out, max, ts): records its caller's return address, the
// stack pointer the caller will have after the return, and rbp (untouched so
// far), then walks from there: memtool_cfi_walk(out, max, regs, ts), with out
// and max left in rdi and rsi and ts moved from rdx to rcx.
asm(R"(
    .text
    .globl memtool_cfi_backtrace
    .hidden memtool_cfi_backtrace
    .type memtool_cfi_backtrace, @function
memtool_cfi_backtrace:
    .cfi_startproc
    sub $24, %rsp
    .cfi_def_cfa_offset 32
    mov 24(%rsp), %rax
    mov %rax, 0(%rsp)
    lea 32(%rsp), %rax
    mov %rax, 8(%rsp)
    mov %rbp, 16(%rsp)
    mov %rdx, %rcx
    mov %rsp, %rdx
    call memtool_cfi_walk
    add $24, %rsp
    .cfi_def_cfa_offset 8
    ret
    .cfi_endproc
    .size memtool_cfi_backtrace, .-memtool_cfi_backtrace
)");
#else
extern "C" int memtool_cfi_backtrace(void**, int, ThreadState*) { return -1; }
#endif
