// A program whose main thread holds known values in fifteen 256-bit vector
// registers and five general ones (callee-saved: rbx, r12-r15), checking them in a
// loop it never leaves until SIGUSR1: memtool attach stops it there, wherever it
// is, and every register must be as it was when it goes on. It links libc10
// (something memtool tracks, so that the attach is not refused) and prints
// "ready PID", then "intact" (or "register N changed") and exits 0. x86-64 with
// AVX2; without it, "no avx2".
#include <c10/core/impl/alloc_cpu.h>
#include <signal.h>
#include <unistd.h>

#include <cstdint>
#include <cstdio>

namespace {

volatile sig_atomic_t gStop = 0;

void onStop(int) { gStop = 1; }

// 0 when every register held its value until gStop, else which one changed
// (1-15: ymm0-14; 16-20: r12-r15, rbx).
__attribute__((noinline, target("avx2"))) long keepRegisters() {
    alignas(32) uint64_t save[15 * 4];
    long which = 0;
    asm volatile(
        "mov $0x0101010101010101, %%rax\n\t"
        "vmovq %%rax, %%xmm15\n\t"
        "vpbroadcastq %%xmm15, %%ymm15\n\t"
        "vmovdqa %%ymm15, %%ymm0\n\t"
        "vpaddb %%ymm15, %%ymm0, %%ymm1\n\t"
        "vpaddb %%ymm15, %%ymm1, %%ymm2\n\t"
        "vpaddb %%ymm15, %%ymm2, %%ymm3\n\t"
        "vpaddb %%ymm15, %%ymm3, %%ymm4\n\t"
        "vpaddb %%ymm15, %%ymm4, %%ymm5\n\t"
        "vpaddb %%ymm15, %%ymm5, %%ymm6\n\t"
        "vpaddb %%ymm15, %%ymm6, %%ymm7\n\t"
        "vpaddb %%ymm15, %%ymm7, %%ymm8\n\t"
        "vpaddb %%ymm15, %%ymm8, %%ymm9\n\t"
        "vpaddb %%ymm15, %%ymm9, %%ymm10\n\t"
        "vpaddb %%ymm15, %%ymm10, %%ymm11\n\t"
        "vpaddb %%ymm15, %%ymm11, %%ymm12\n\t"
        "vpaddb %%ymm15, %%ymm12, %%ymm13\n\t"
        "vpaddb %%ymm15, %%ymm13, %%ymm14\n\t"
        "vmovdqu %%ymm0, 0(%[save])\n\t"
        "vmovdqu %%ymm1, 32(%[save])\n\t"
        "vmovdqu %%ymm2, 64(%[save])\n\t"
        "vmovdqu %%ymm3, 96(%[save])\n\t"
        "vmovdqu %%ymm4, 128(%[save])\n\t"
        "vmovdqu %%ymm5, 160(%[save])\n\t"
        "vmovdqu %%ymm6, 192(%[save])\n\t"
        "vmovdqu %%ymm7, 224(%[save])\n\t"
        "vmovdqu %%ymm8, 256(%[save])\n\t"
        "vmovdqu %%ymm9, 288(%[save])\n\t"
        "vmovdqu %%ymm10, 320(%[save])\n\t"
        "vmovdqu %%ymm11, 352(%[save])\n\t"
        "vmovdqu %%ymm12, 384(%[save])\n\t"
        "vmovdqu %%ymm13, 416(%[save])\n\t"
        "vmovdqu %%ymm14, 448(%[save])\n\t"
        "mov $0x1212121212121212, %%r12\n\t"
        "mov $0x1313131313131313, %%r13\n\t"
        "mov $0x1414141414141414, %%r14\n\t"
        "mov $0x1515151515151515, %%r15\n\t"
        "mov $0x0b0b0b0b0b0b0b0b, %%rbx\n\t"
        "1:\n\t"
        "mov $1, %[which]\n\t"
        "vpcmpeqq 0(%[save]), %%ymm0, %%ymm15\n\t"
        "vpmovmskb %%ymm15, %%eax\n\t"
        "cmp $-1, %%eax\n\t"
        "jne 2f\n\t"
        "mov $2, %[which]\n\t"
        "vpcmpeqq 32(%[save]), %%ymm1, %%ymm15\n\t"
        "vpmovmskb %%ymm15, %%eax\n\t"
        "cmp $-1, %%eax\n\t"
        "jne 2f\n\t"
        "mov $3, %[which]\n\t"
        "vpcmpeqq 64(%[save]), %%ymm2, %%ymm15\n\t"
        "vpmovmskb %%ymm15, %%eax\n\t"
        "cmp $-1, %%eax\n\t"
        "jne 2f\n\t"
        "mov $4, %[which]\n\t"
        "vpcmpeqq 96(%[save]), %%ymm3, %%ymm15\n\t"
        "vpmovmskb %%ymm15, %%eax\n\t"
        "cmp $-1, %%eax\n\t"
        "jne 2f\n\t"
        "mov $5, %[which]\n\t"
        "vpcmpeqq 128(%[save]), %%ymm4, %%ymm15\n\t"
        "vpmovmskb %%ymm15, %%eax\n\t"
        "cmp $-1, %%eax\n\t"
        "jne 2f\n\t"
        "mov $6, %[which]\n\t"
        "vpcmpeqq 160(%[save]), %%ymm5, %%ymm15\n\t"
        "vpmovmskb %%ymm15, %%eax\n\t"
        "cmp $-1, %%eax\n\t"
        "jne 2f\n\t"
        "mov $7, %[which]\n\t"
        "vpcmpeqq 192(%[save]), %%ymm6, %%ymm15\n\t"
        "vpmovmskb %%ymm15, %%eax\n\t"
        "cmp $-1, %%eax\n\t"
        "jne 2f\n\t"
        "mov $8, %[which]\n\t"
        "vpcmpeqq 224(%[save]), %%ymm7, %%ymm15\n\t"
        "vpmovmskb %%ymm15, %%eax\n\t"
        "cmp $-1, %%eax\n\t"
        "jne 2f\n\t"
        "mov $9, %[which]\n\t"
        "vpcmpeqq 256(%[save]), %%ymm8, %%ymm15\n\t"
        "vpmovmskb %%ymm15, %%eax\n\t"
        "cmp $-1, %%eax\n\t"
        "jne 2f\n\t"
        "mov $10, %[which]\n\t"
        "vpcmpeqq 288(%[save]), %%ymm9, %%ymm15\n\t"
        "vpmovmskb %%ymm15, %%eax\n\t"
        "cmp $-1, %%eax\n\t"
        "jne 2f\n\t"
        "mov $11, %[which]\n\t"
        "vpcmpeqq 320(%[save]), %%ymm10, %%ymm15\n\t"
        "vpmovmskb %%ymm15, %%eax\n\t"
        "cmp $-1, %%eax\n\t"
        "jne 2f\n\t"
        "mov $12, %[which]\n\t"
        "vpcmpeqq 352(%[save]), %%ymm11, %%ymm15\n\t"
        "vpmovmskb %%ymm15, %%eax\n\t"
        "cmp $-1, %%eax\n\t"
        "jne 2f\n\t"
        "mov $13, %[which]\n\t"
        "vpcmpeqq 384(%[save]), %%ymm12, %%ymm15\n\t"
        "vpmovmskb %%ymm15, %%eax\n\t"
        "cmp $-1, %%eax\n\t"
        "jne 2f\n\t"
        "mov $14, %[which]\n\t"
        "vpcmpeqq 416(%[save]), %%ymm13, %%ymm15\n\t"
        "vpmovmskb %%ymm15, %%eax\n\t"
        "cmp $-1, %%eax\n\t"
        "jne 2f\n\t"
        "mov $15, %[which]\n\t"
        "vpcmpeqq 448(%[save]), %%ymm14, %%ymm15\n\t"
        "vpmovmskb %%ymm15, %%eax\n\t"
        "cmp $-1, %%eax\n\t"
        "jne 2f\n\t"
        "mov $16, %[which]\n\t"
        "mov $0x1212121212121212, %%rax\n\t"
        "cmp %%rax, %%r12\n\t"
        "jne 2f\n\t"
        "mov $17, %[which]\n\t"
        "mov $0x1313131313131313, %%rax\n\t"
        "cmp %%rax, %%r13\n\t"
        "jne 2f\n\t"
        "mov $18, %[which]\n\t"
        "mov $0x1414141414141414, %%rax\n\t"
        "cmp %%rax, %%r14\n\t"
        "jne 2f\n\t"
        "mov $19, %[which]\n\t"
        "mov $0x1515151515151515, %%rax\n\t"
        "cmp %%rax, %%r15\n\t"
        "jne 2f\n\t"
        "mov $20, %[which]\n\t"
        "mov $0x0b0b0b0b0b0b0b0b, %%rax\n\t"
        "cmp %%rax, %%rbx\n\t"
        "jne 2f\n\t"
        "cmpl $0, (%[stop])\n\t"
        "je 1b\n\t"
        "xor %[which], %[which]\n\t"
        "2:\n\t"
        "vzeroupper\n\t"
        : [which] "=&r"(which)
        : [stop] "r"(&gStop), [save] "r"(save)
        : "rax", "rbx", "r12", "r13", "r14", "r15", "xmm0", "xmm1", "xmm2", "xmm3", "xmm4", "xmm5",
          "xmm6", "xmm7", "xmm8", "xmm9", "xmm10", "xmm11", "xmm12", "xmm13", "xmm14", "xmm15",
          "memory", "cc");
    return which;
}

}  // namespace

int main() {
    if (!__builtin_cpu_supports("avx2")) {
        std::printf("no avx2\n");
        return 0;
    }
    c10::free_cpu(c10::alloc_cpu(64));  // libc10 is loaded, and used
    struct sigaction sa {};
    sa.sa_handler = onStop;
    sigaction(SIGUSR1, &sa, nullptr);
    std::printf("ready %d\n", static_cast<int>(getpid()));
    std::fflush(stdout);
    const long changed = keepRegisters();
    if (changed == 0)
        std::printf("intact\n");
    else
        std::printf("register %ld changed\n", changed);
    return 0;
}
