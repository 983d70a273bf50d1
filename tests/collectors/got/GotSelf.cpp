// A library that calls a function it exports itself, through its own GOT (the
// definition may be interposed), among ninety other exports: the name is found
// through the GNU hash table's buckets and chains, not among the imports.
// clang-format reflows these lines differently on every run: they are left as written.
// clang-format off
#define GOT_SELF_FILLER(n) \
    extern "C" __attribute__((visibility("default"))) int got_self_filler_##n(void) { return n; }
#define GOT_SELF_TEN(n) \
    GOT_SELF_FILLER(n##0) GOT_SELF_FILLER(n##1) GOT_SELF_FILLER(n##2) GOT_SELF_FILLER(n##3) \
    GOT_SELF_FILLER(n##4) GOT_SELF_FILLER(n##5) GOT_SELF_FILLER(n##6) GOT_SELF_FILLER(n##7) \
    GOT_SELF_FILLER(n##8) GOT_SELF_FILLER(n##9)
// clang-format on
GOT_SELF_TEN(1)
GOT_SELF_TEN(2)
GOT_SELF_TEN(3)
GOT_SELF_TEN(4)
GOT_SELF_TEN(5)
GOT_SELF_TEN(6)
GOT_SELF_TEN(7)
GOT_SELF_TEN(8)
GOT_SELF_TEN(9)

extern "C" __attribute__((visibility("default"), noinline)) int got_self_value(void) { return 1; }

extern "C" __attribute__((visibility("default"))) int got_self_call(void) {
    return got_self_value();
}
