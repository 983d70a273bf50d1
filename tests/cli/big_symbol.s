# An object no compiler makes: a function whose symbol claims more than 4 GiB
# (st_size 0x100000010), between two ordinary ones. ModuleSymbolsTest names
# addresses in it, past 4 GiB too, as libdw does.
    .text
    .globl before
    .type before, @function
before:
    ret
    .size before, 1
    .globl huge
    .type huge, @function
huge:
    ret
    .size huge, 0x100000010
    .globl after
    .type after, @function
after:
    ret
    .size after, 1
    .section .note.GNU-stack,"",@progbits
