#ifndef FFH_SYSCALL_H
#define FFH_SYSCALL_H

// System calls made with the processor's instruction, never through libc's `syscall()`:
// a program may hook `syscall` (or `getpid`, `futex`…) in every loaded object's import
// table, the library's own included, and the library must keep working while it does.
// Each returns what the kernel returns: a value, or -errno (-4095 to -1) on failure.

#include <stdint.h>

// Signal handlers call these at any instruction of any thread: no sanitizer hook may run in
// them, not even at their entry, where an unoptimised build does not inline them.
#if defined(__clang__) && defined(__has_attribute)
#if __has_attribute(disable_sanitizer_instrumentation)
#define FFH_SYSCALL_PLAIN __attribute__((disable_sanitizer_instrumentation, always_inline))
#endif
#endif
#ifndef FFH_SYSCALL_PLAIN
#define FFH_SYSCALL_PLAIN __attribute__((always_inline))
#endif

#if defined(__linux__) && defined(__x86_64__)

/// A system call with up to six arguments, by number, through the `syscall` instruction.
FFH_SYSCALL_PLAIN static inline long ffh_syscall6(long number, long a, long b, long c, long d, long e, long f) {
    long result;
    register long r10 __asm__("r10") = d;
    register long r8 __asm__("r8") = e;
    register long r9 __asm__("r9") = f;
    __asm__ __volatile__("syscall"
                         : "=a"(result)
                         : "a"(number), "D"(a), "S"(b), "d"(c), "r"(r10), "r"(r8), "r"(r9)
                         : "rcx", "r11", "memory");
    return result;
}

#elif defined(__linux__) && defined(__aarch64__)

/// A system call with up to six arguments, by number, through the `svc` instruction.
FFH_SYSCALL_PLAIN static inline long ffh_syscall6(long number, long a, long b, long c, long d, long e, long f) {
    register long x8 __asm__("x8") = number;
    register long x0 __asm__("x0") = a;
    register long x1 __asm__("x1") = b;
    register long x2 __asm__("x2") = c;
    register long x3 __asm__("x3") = d;
    register long x4 __asm__("x4") = e;
    register long x5 __asm__("x5") = f;
    __asm__ __volatile__("svc #0"
                         : "+r"(x0)
                         : "r"(x8), "r"(x1), "r"(x2), "r"(x3), "r"(x4), "r"(x5)
                         : "memory");
    return x0;
}

#else

#include <errno.h>
#include <unistd.h>

/// A system call through libc, where the library has no instruction sequence for it.
FFH_SYSCALL_PLAIN static inline long ffh_syscall6(long number, long a, long b, long c, long d, long e, long f) {
    long result = syscall(number, a, b, c, d, e, f);
    return result == -1 ? -(long)errno : result;
}

#endif

/// A system call with fewer arguments (the rest are passed as zero, which the kernel
/// ignores for calls that take fewer).
FFH_SYSCALL_PLAIN static inline long ffh_syscall0(long number) { return ffh_syscall6(number, 0, 0, 0, 0, 0, 0); }
FFH_SYSCALL_PLAIN static inline long ffh_syscall3(long number, long a, long b, long c) {
    return ffh_syscall6(number, a, b, c, 0, 0, 0);
}

#endif
