/*
 * dev/cuda/check_common.h: what the standalone GPU checks share (attention_check.cu,
 * sd_fold_check.cu, linear_attention_check.cu); its host part also serves the CPU emulation of the
 * same device routines (test/test_sd_fold_emul.c), so both measure errors the same way.
 *
 * Defines:
 *   HEAD_SIZES, N_HEAD_SIZES   the head sizes every check runs: 8..256, and 12, 20, which are
 *                              not multiples of 8 (vector loads and tiles must not assume it)
 *   CheckArgs, check_args_parse   the flags every check takes (-d -B -T -h -time -tB -tT -tC),
 *                              --help from the same table
 *   rand_unit, fill_random_bf16   reproducible inputs: xorshift, uniform in [-1, 1), as bf16
 *   widen                      bf16 -> a new fp32 buffer (what the CPU reference reads)
 *   rel_err_bf, rel_err_bf_floor, rel_err_f   the error metric (below)
 *   count_nan_bf16, omp_threads
 * and, compiled by nvcc only:
 *   poison                     fill a device buffer with NaN before a call
 *   time_steps, print_time     mean milliseconds of forward and backward, the "TIME" line
 *                              dev/gpu_check.sh reads
 * Pass/fail lines and the closing "N passed, N failed" come from test/harness.h (CHECK,
 * test_finish), as in every test of the project.
 *
 * Error metric: max |a - b| / max(max |b|, floor) over a matrix taken with row strides, a the
 * tested (bf16 or fp32) values, b the fp32 reference. A NaN anywhere in a gives +inf: the buffers
 * are poisoned with NaN before each call, so a value the kernel failed to write fails the check.
 */
#ifndef DEV_CUDA_CHECK_COMMON_H
#define DEV_CUDA_CHECK_COMMON_H

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#ifdef _OPENMP
#include <omp.h>
#endif

#include "../../llmc/scalar_math.h"
#include "../../llmc/utils.h"
#include "../../test/harness.h"

static const int HEAD_SIZES[] = {8, 16, 32, 64, 128, 256, 12, 20};
#define N_HEAD_SIZES 8

/* ----------------------------------------------------------------------------------------------
 * Flags: the correctness shape (B, T, h), one head size only (-d), and the benchmark shape
 * (tB, tT, h = tC / d) timed with -time 1. The caller sets its defaults before parsing. */
typedef struct {
    int only_d, B, T, h, timing, tB, tT, tC;
} CheckArgs;

/* Returns 1 to run, else the exit status: 0 after --help, 2 after an error (one line on stderr);
 * main does `if (r != 1) return r;`. */
static inline int check_args_parse(CheckArgs *a, int argc, char **argv, const char *prog) {
    struct {
        const char *flag;
        int *value;
        int lo, hi;
        const char *what;
    } f[] = {
        {"-d", &a->only_d, 0, 1000000, "check only this head size (0: all)"},
        {"-B", &a->B, 1, 1000000, "batch of the correctness checks"},
        {"-T", &a->T, 1, 1000000, "sequence length of the correctness checks"},
        {"-h", &a->h, 1, 1000000, "heads of the correctness checks"},
        {"-time", &a->timing, 0, 1, "1: time forward and backward at the benchmark shape"},
        {"-tB", &a->tB, 1, 1000000, "benchmark batch"},
        {"-tT", &a->tT, 1, 1000000, "benchmark sequence length"},
        {"-tC", &a->tC, 1, 1000000, "benchmark width C (h = C / d)"},
    };
    const int nf = (int)(sizeof(f) / sizeof(f[0]));
    for (int i = 1; i < argc; i += 2) {
        if (!strcmp(argv[i], "--help")) {
            printf("usage: %s [flag value]...\n", prog);
            for (int k = 0; k < nf; k++) printf("  %-6s %s (default %d)\n", f[k].flag, f[k].what, *f[k].value);
            return 0;
        }
        int k = 0;
        while (k < nf && strcmp(argv[i], f[k].flag)) k++;
        if (k == nf) {
            fprintf(stderr, "error: %s: unknown flag (expected -d -B -T -h -time -tB -tT -tC or --help)\n", argv[i]);
            return 2;
        }
        if (i + 1 >= argc) {
            fprintf(stderr, "error: %s: expected a value\n", argv[i]);
            return 2;
        }
        char *end = NULL;
        const long v = strtol(argv[i + 1], &end, 10);
        if (*end != '\0' || end == argv[i + 1] || v < f[k].lo || v > f[k].hi) {
            fprintf(stderr, "error: %s '%s': expected an integer %d..%d\n", argv[i], argv[i + 1], f[k].lo, f[k].hi);
            return 2;
        }
        *f[k].value = (int)v;
    }
    return 1;
}

/* ----------------------------------------------------------------------------------------------
 * Inputs and metrics (host code, C and C++). */

/* xorshift64: reproducible inputs, uniform in [-1, 1) (24 random bits) */
static inline float rand_unit(uint64_t *s) {
    *s ^= *s << 13;
    *s ^= *s >> 7;
    *s ^= *s << 17;
    return (float)((*s >> 40) / 8388608.0 - 1.0);
}

static inline void fill_random_bf16(uint16_t *x, size_t n, uint64_t seed) {
    uint64_t s = seed * 2654435761ull + 1;
    for (size_t i = 0; i < n; i++) x[i] = f32_to_bf16(rand_unit(&s));
}

static inline float *widen(const uint16_t *x, size_t n) {
    float *f = (float *)xmalloc(n * sizeof(float));
    for (size_t i = 0; i < n; i++) f[i] = bf16_to_f32(x[i]);
    return f;
}

/* The metric above over rows x cols, a (bf16) with row stride lda, b with ldb. The floor keeps a
 * reference that is zero in exact arithmetic (a gradient that vanishes) from dividing rounding by
 * zero; 0 for plain relative error. */
static inline double rel_err_bf_floor(const uint16_t *a, size_t lda, const float *b, size_t ldb, size_t rows,
                                      size_t cols, double floor) {
    double e = 0.0, m = floor;
    for (size_t r = 0; r < rows; r++)
        for (size_t c = 0; c < cols; c++) {
            const double x = bf16_to_f32(a[r * lda + c]), y = b[r * ldb + c];
            if (x != x || y != y) return INFINITY; /* a NaN on either side is a failure */
            e = fmax(e, fabs(x - y));
            m = fmax(m, fabs(y));
        }
    return m > 0 ? e / m : e;
}

static inline double rel_err_bf(const uint16_t *a, size_t lda, const float *b, size_t ldb, size_t rows, size_t cols) {
    return rel_err_bf_floor(a, lda, b, ldb, rows, cols, 0.0);
}

/* the same for n contiguous fp32 values (test/harness.h: a NaN on either side gives +inf) */
static inline double rel_err_f(const float *a, const float *b, size_t n) {
    const double e = max_abs_diff(a, b, n), m = max_abs(b, n);
    return m > 0 ? e / m : e;
}

/* test_finish, except that -d naming a head size for which no check ran (not in this program's
 * list, or n/a on this GPU) is an error instead of a silent "0 passed, 0 failed". */
static inline int check_finish(const CheckArgs *a) {
    if (a->only_d != 0 && g_test_passed + g_test_failed == 0) {
        fprintf(stderr, "error: -d %d: no check ran for this head size (not one this program checks, or n/a "
                        "here: see above)\n", a->only_d);
        return 2;
    }
    return test_finish();
}

static inline size_t count_nan_bf16(const uint16_t *x, size_t n) {
    size_t c = 0;
    for (size_t i = 0; i < n; i++) c += (x[i] & 0x7f80u) == 0x7f80u && (x[i] & 0x7fu) != 0;
    return c;
}

/* threads of the CPU reference: its backward kernels take T floats of scratch per thread */
static inline int omp_threads(void) {
#ifdef _OPENMP
    return omp_get_max_threads();
#else
    return 1;
#endif
}

#ifdef __CUDACC__
/* ----------------------------------------------------------------------------------------------
 * Device helpers (nvcc). */
#include "../../llmc/cuda/cuda_common.cuh"

/* 0xff bytes are a NaN in bf16 and fp32: whatever a kernel fails to write stays NaN and fails the
 * metric. cudaMemset runs on the legacy stream, which the kernels' non-blocking stream does not
 * wait for (nor for the DMA of a preceding pageable cudaMemcpy): wait for the device after it. */
static inline void poison(void *dev, size_t bytes) {
    CUDA_CHECK(cudaMemset(dev, 0xff, bytes));
    CUDA_CHECK(cudaDeviceSynchronize());
}

/* Random bf16 values into a device buffer (the benchmark inputs: only their range matters). */
static inline void upload_random_bf16(void *dev, size_t n, uint64_t seed) {
    uint16_t *x = (uint16_t *)xmalloc(n * sizeof(uint16_t));
    fill_random_bf16(x, n, seed);
    CUDA_CHECK(cudaMemcpy(dev, x, n * sizeof(uint16_t), cudaMemcpyHostToDevice));
    free(x);
}

/* step(arg, 0) runs the forward, step(arg, 1) the backward, both on `stream`. */
typedef void (*CheckStep)(void *arg, int backward);

/* Mean milliseconds of one forward and one backward: `warmup` calls of each first (graph builds,
 * cuBLAS heuristics), then `iters` timed ones, measured with events on the stream. ms_bwd NULL:
 * a forward-only path, whose backward is never called. */
static inline void time_steps(CheckStep step, void *arg, cudaStream_t stream, int warmup, int iters, float *ms_fwd,
                              float *ms_bwd) {
    cudaEvent_t e0, e1;
    CUDA_CHECK(cudaEventCreate(&e0));
    CUDA_CHECK(cudaEventCreate(&e1));
    for (int pass = 0; pass < 2; pass++) {
        const int n = pass == 0 ? warmup : iters;
        for (int backward = 0; backward < (ms_bwd != NULL ? 2 : 1); backward++) {
            CUDA_CHECK(cudaEventRecord(e0, stream));
            for (int i = 0; i < n; i++) step(arg, backward);
            CUDA_CHECK(cudaEventRecord(e1, stream));
            CUDA_CHECK(cudaEventSynchronize(e1));
            float ms = 0.0f;
            CUDA_CHECK(cudaEventElapsedTime(&ms, e0, e1));
            *(backward ? ms_bwd : ms_fwd) = ms / n;
        }
    }
    CUDA_CHECK(cudaGetLastError());
    CUDA_CHECK(cudaEventDestroy(e0));
    CUDA_CHECK(cudaEventDestroy(e1));
}

/* The line dev/gpu_check.sh reads (fields 3 path, 5 d, 11 h, 13 fwd_ms, 15 bwd_ms); flops of one
 * forward and one backward give the rates. */
static inline void print_time(const char *path, int d, int B, int T, int h, float ms_fwd, float ms_bwd,
                              double flops_fwd, double flops_bwd) {
    /* a forward-only path has ms_bwd 0: its backward rate prints as 0 */
    printf("TIME path %s d %d B %d T %d h %d fwd_ms %.3f bwd_ms %.3f fwd_tflops %.2f bwd_tflops %.2f\n", path, d, B,
           T, h, ms_fwd, ms_bwd, flops_fwd / ms_fwd / 1e9, ms_bwd > 0 ? flops_bwd / ms_bwd / 1e9 : 0.0);
    fflush(stdout);
}
#endif /* __CUDACC__ */

#endif /* DEV_CUDA_CHECK_COMMON_H */
