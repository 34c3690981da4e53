#include "CTestVectorFixtures.h"

#if defined(__x86_64__)

int vf_has_avx(void) {
    __builtin_cpu_init();
    return __builtin_cpu_supports("avx");
}

int vf_has_avx512(void) {
    __builtin_cpu_init();
    return __builtin_cpu_supports("avx512f");
}

/* vector_fixtures_x86_64.S. */
void vf_add256(void);
void vf_add512(void);
void vf_call256(const void *function, const double *a, const double *b, double *out);
void vf_call512(const void *function, const double *a, const double *b, double *out);

static void *vf_slot256_value = (void *)vf_add256;
static void *vf_slot512_value = (void *)vf_add512;

void **vf_slot256(void) { return &vf_slot256_value; }
void **vf_slot512(void) { return &vf_slot512_value; }

/* Calls the function in `slot` `rounds` times with `lanes` different doubles in each argument
   (the round number in the first lane of the first), by `call`; counts the wrong sums. In odd
   rounds every lane above the low 16 bytes is zero (the entries then keep nothing and clear
   those lanes again), in even rounds none is. */
static int vf_run(void **slot, int lanes, void (*call)(const void *, const double *, const double *, double *),
                  int rounds) {
    int wrong = 0;
    for (int round = 0; round < rounds; round++) {
        double a[8], b[8], sum[8];
        for (int lane = 0; lane < lanes; lane++) {
            int upper = lane >= 2;
            a[lane] = upper && round % 2 ? 0 : lane == 0 ? round : lane + 1;
            b[lane] = upper && round % 2 ? 0 : (lane + 1) * 10;
            sum[lane] = -1;
        }
        call(__atomic_load_n(slot, __ATOMIC_ACQUIRE), a, b, sum);
        for (int lane = 0; lane < lanes; lane++) {
            if (sum[lane] != a[lane] + b[lane]) {
                wrong++;
                break;
            }
        }
    }
    return wrong;
}

int vf_check256(int rounds) { return vf_has_avx() ? vf_run(&vf_slot256_value, 4, vf_call256, rounds) : -1; }
int vf_check512(int rounds) { return vf_has_avx512() ? vf_run(&vf_slot512_value, 8, vf_call512, rounds) : -1; }

__attribute__((target("avx512f"), noinline)) static void vf_clobber512(void) {
    __asm__ __volatile__(".irp index, 0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19, 20, 21, "
                         "22, 23, 24, 25, 26, 27, 28, 29, 30, 31\n\t"
                         "vpternlogd $0xff, %%zmm\\index, %%zmm\\index, %%zmm\\index\n\t"
                         ".endr" ::
                             : "xmm0", "xmm1", "xmm2", "xmm3", "xmm4", "xmm5", "xmm6", "xmm7", "xmm8", "xmm9",
                               "xmm10", "xmm11", "xmm12", "xmm13", "xmm14", "xmm15", "xmm16", "xmm17", "xmm18",
                               "xmm19", "xmm20", "xmm21", "xmm22", "xmm23", "xmm24", "xmm25", "xmm26", "xmm27",
                               "xmm28", "xmm29", "xmm30", "xmm31");
}

__attribute__((target("avx"), noinline)) static void vf_clobber256(void) {
    __asm__ __volatile__(".irp index, 0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15\n\t"
                         "vpcmpeqd %%ymm\\index, %%ymm\\index, %%ymm\\index\n\t"
                         ".endr" ::
                             : "xmm0", "xmm1", "xmm2", "xmm3", "xmm4", "xmm5", "xmm6", "xmm7", "xmm8", "xmm9",
                               "xmm10", "xmm11", "xmm12", "xmm13", "xmm14", "xmm15");
}

void vf_clobber(void) {
    if (vf_has_avx512()) {
        vf_clobber512();
    } else if (vf_has_avx()) {
        vf_clobber256();
    }
}

#else

int vf_has_avx(void) { return 0; }
int vf_has_avx512(void) { return 0; }
static void *vf_slot_value;
void **vf_slot256(void) { return &vf_slot_value; }
void **vf_slot512(void) { return &vf_slot_value; }
int vf_check256(int rounds) {
    (void)rounds;
    return -1;
}
int vf_check512(int rounds) {
    (void)rounds;
    return -1;
}
void vf_clobber(void) {}

#endif
