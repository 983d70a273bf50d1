#pragma once
// Open-addressing hash tables whose storage comes from mmap, so that hooks can
// insert without touching the heap of the process they observe. None is
// thread-safe: their owners serialize access.

#include <sys/mman.h>

#include <cstddef>
#include <cstdint>
#include <cstring>

namespace memtool::collectors {

inline uint64_t mixHash(uint64_t x) {
    // splitmix64 finalizer: pointers and return addresses share low bits.
    x ^= x >> 30;
    x *= 0xbf58476d1ce4e5b9ULL;
    x ^= x >> 27;
    x *= 0x94d049bb133111ebULL;
    return x ^ (x >> 31);
}

// Slots a hash table starts with. Small: a hash spreads even a handful of keys
// over every page of its table, and each page's first touch is a page fault
// (~10 us where memory is lent lazily to a virtual machine): at 16,384 slots the
// collector's eight tables touched ~300 pages in a run of small_tensors. They
// double at half full, so a big table costs a few more rehashes.
inline constexpr size_t kFirstSlots = 256;

inline void* mapZeroed(size_t bytes) {
    void* p = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    return p == MAP_FAILED ? nullptr : p;
}

// Zeroes memory from mapZeroed by giving its pages back (they read as zero after):
// clearing a table releases memory rather than touching every page of it, which
// matters when the clearing is part of a pause.
inline void rezeroMapped(void* p, size_t bytes) {
    if (madvise(p, bytes, MADV_DONTNEED) != 0) std::memset(p, 0, bytes);
}

// The slots of an open-addressing table with linear probing: a power of two of
// them in memory from mapZeroed, an all-zero Slot being empty. Slot says whether
// it holds an entry (used()) and where its probe run starts (hash(), masked).
template <typename Slot>
class MappedSlots {
public:
    MappedSlots() = default;
    MappedSlots(const MappedSlots&) = delete;
    MappedSlots& operator=(const MappedSlots&) = delete;
    ~MappedSlots() {
        if (slots_) munmap(slots_, bytes());
    }

    Slot& operator[](size_t i) { return slots_[i]; }
    const Slot& operator[](size_t i) const { return slots_[i]; }
    size_t capacity() const { return capacity_; }
    size_t bytes() const { return capacity_ * sizeof(Slot); }

    // Twice the slots (kFirstSlots at first), every entry rehashed into them.
    // False when memory ran out: the slots are as they were.
    bool grow() {
        const size_t newCap = capacity_ ? capacity_ * 2 : kFirstSlots;
        auto* fresh = static_cast<Slot*>(mapZeroed(newCap * sizeof(Slot)));
        if (!fresh) return false;
        for (size_t j = 0; j < capacity_; ++j) {
            const Slot& s = slots_[j];
            if (!s.used()) continue;
            for (size_t i = s.hash() & (newCap - 1);; i = (i + 1) & (newCap - 1)) {
                if (!fresh[i].used()) {
                    fresh[i] = s;
                    break;
                }
            }
        }
        if (slots_) munmap(slots_, bytes());
        slots_ = fresh;
        capacity_ = newCap;
        return true;
    }
    // Every slot empty again, its pages given back (rezeroMapped); the capacity stays.
    void rezero() {
        if (slots_) rezeroMapped(slots_, bytes());
    }

private:
    Slot* slots_ = nullptr;
    size_t capacity_ = 0;
};

// (parent node, key) -> child node id; ids are dense from 1 in insertion order,
// matching the implicit ids of the wire protocol's node records.
class FrameTrie {
public:
    FrameTrie() = default;
    FrameTrie(const FrameTrie&) = delete;
    FrameTrie& operator=(const FrameTrie&) = delete;

    // Returns the node id, 0 when memory ran out. *created tells whether it is new.
    uint32_t findOrInsert(uint32_t parent, uint64_t key, bool* created) {
        *created = false;
        if ((count_ + 1) * 2 > slots_.capacity() && !slots_.grow()) return 0;
        size_t mask = slots_.capacity() - 1;
        for (size_t i = Slot::home(key, parent) & mask;; i = (i + 1) & mask) {
            Slot& s = slots_[i];
            if (s.id == 0) {
                s = Slot{key, parent, ++count_};
                *created = true;
                return s.id;
            }
            if (s.key == key && s.parent == parent) return s.id;
        }
    }

    uint32_t size() const { return count_; }
    void clear() {
        if (count_) slots_.rezero();
        count_ = 0;
    }

private:
    struct Slot {
        uint64_t key;
        uint32_t parent;
        uint32_t id;
        static uint64_t home(uint64_t key, uint32_t parent) { return mixHash(key * 31 + parent); }
        bool used() const { return id != 0; }
        uint64_t hash() const { return home(key, parent); }
    };

    MappedSlots<Slot> slots_;
    uint32_t count_ = 0;
};

// Non-zero 64-bit keys (live tracked pointers) -> a trivially copyable value
// (PointerMap: 64 bits; the engine keeps a block's device, size and where its
// record is). Linear probing with backward-shift deletion, so there are no
// tombstones and lookups of untracked pointers stop at the first empty slot.
template <typename Value>
class BasicPointerMap {
public:
    BasicPointerMap() = default;
    BasicPointerMap(const BasicPointerMap&) = delete;
    BasicPointerMap& operator=(const BasicPointerMap&) = delete;

    bool insert(uint64_t ptr, Value value) {
        Value replaced;
        return put(ptr, value, &replaced) != kFailed;
    }

    // insert(), saying what it did: kFailed (out of memory), kAdded, or
    // kReplaced with the value ptr had in *replaced.
    static constexpr int kFailed = 0, kAdded = 1, kReplaced = 2;
    int put(uint64_t ptr, Value value, Value* replaced) {
        if ((count_ + 1) * 2 > slots_.capacity() && !slots_.grow()) return kFailed;
        size_t mask = slots_.capacity() - 1;
        for (size_t i = mixHash(ptr) & mask;; i = (i + 1) & mask) {
            if (slots_[i].ptr == 0) {
                ++count_;
                slots_[i] = Slot{ptr, value};
                return kAdded;
            }
            if (slots_[i].ptr == ptr) {
                *replaced = slots_[i].value;
                slots_[i].value = value;
                return kReplaced;
            }
        }
    }

    // The value stored for ptr; false when ptr is not in the map.
    bool find(uint64_t ptr, Value* value) const {
        if (count_ == 0) return false;
        size_t mask = slots_.capacity() - 1;
        for (size_t i = mixHash(ptr) & mask;; i = (i + 1) & mask) {
            if (slots_[i].ptr == ptr) {
                *value = slots_[i].value;
                return true;
            }
            if (slots_[i].ptr == 0) return false;
        }
    }

    // Removes ptr; returns its value through *value. False when ptr is not tracked.
    bool erase(uint64_t ptr, Value* value) {
        if (count_ == 0) return false;
        size_t mask = slots_.capacity() - 1;
        size_t i = mixHash(ptr) & mask;
        while (slots_[i].ptr != ptr) {
            if (slots_[i].ptr == 0) return false;
            i = (i + 1) & mask;
        }
        *value = slots_[i].value;
        // Backward shift: pull later entries of the probe run into the hole.
        size_t hole = i;
        for (size_t j = (i + 1) & mask; slots_[j].ptr != 0; j = (j + 1) & mask) {
            size_t home = mixHash(slots_[j].ptr) & mask;
            bool movable = hole <= j ? (home <= hole || home > j) : (home <= hole && home > j);
            if (movable) {
                slots_[hole] = slots_[j];
                hole = j;
            }
        }
        slots_[hole] = Slot{0, Value{}};
        --count_;
        return true;
    }

    size_t size() const { return count_; }
    // The memory its slots take (what a first touch of every page would fault in).
    size_t mappedBytes() const { return slots_.bytes(); }
    void clear() {
        if (count_) slots_.rezero();
        count_ = 0;
    }

private:
    struct Slot {
        uint64_t ptr;
        Value value;
        bool used() const { return ptr != 0; }
        uint64_t hash() const { return mixHash(ptr); }
    };

    MappedSlots<Slot> slots_;
    size_t count_ = 0;
};

using PointerMap = BasicPointerMap<uint64_t>;

// A growable array of trivially copyable T in memory from mmap.
template <typename T>
class MappedArray {
public:
    MappedArray() = default;
    MappedArray(const MappedArray&) = delete;
    MappedArray& operator=(const MappedArray&) = delete;
    ~MappedArray() {
        if (items_) munmap(items_, capacity_ * sizeof(T));
    }

    // False when memory ran out (the array is unchanged).
    bool push(const T& item) {
        if (count_ == capacity_ && !grow()) return false;
        items_[count_++] = item;
        return true;
    }
    size_t size() const { return count_; }
    T& operator[](size_t i) { return items_[i]; }
    const T& operator[](size_t i) const { return items_[i]; }
    T* data() { return items_; }
    void clear() { count_ = 0; }
    void truncate(size_t n) {
        if (n < count_) count_ = n;
    }

private:
    bool grow() {
        size_t newCap = capacity_ ? capacity_ * 2 : 4096 / sizeof(T) + 1;
        auto* fresh = static_cast<T*>(mapZeroed(newCap * sizeof(T)));
        if (!fresh) return false;
        if (items_) {
            std::memcpy(fresh, items_, count_ * sizeof(T));
            munmap(items_, capacity_ * sizeof(T));
        }
        items_ = fresh;
        capacity_ = newCap;
        return true;
    }

    T* items_ = nullptr;
    size_t capacity_ = 0;
    size_t count_ = 0;
};

}  // namespace memtool::collectors
