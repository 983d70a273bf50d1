// Found only through its caller's run path (tests/fakes/dlopen/Caller.cpp).
extern "C" __attribute__((visibility("default"))) int dlopen_sibling_value() { return 42; }
