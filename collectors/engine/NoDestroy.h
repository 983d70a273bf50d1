#pragma once
// Storage for collector objects that must outlive every hook: built at compile
// time when T allows it (constinit: no constructor order to get wrong, no race on
// first use), and never destroyed, since hooks run during and after static
// destruction (a daemon thread's allocation, an atexit handler's free).

namespace memtool::collectors {

template <typename T>
union NoDestroy {
    T value;
    constexpr NoDestroy() : value() {}
    template <typename... Args>
    constexpr explicit NoDestroy(Args&&... args) : value(static_cast<Args&&>(args)...) {}
    ~NoDestroy() {}
};

}  // namespace memtool::collectors
