/*
 * dev/cpu/bench_kernels.c: the CPU trainer's kernels (llmc/cpu/kernels.h) against plain OpenMP
 * loop implementations of the same layers, on the shapes the trainer runs. Prints, per kernel,
 * the time of each, the speed-up (plain / ours) and the max relative difference of the outputs.
 *
 *   make -C dev/cpu bench && ./dev/cpu/bench_kernels [N C T]     (default N 1024, C 256, T 256)
 *
 * "Plain" means the textbook loops with `#pragma omp parallel for` on the outer loop, which is
 * what the CPU reference must not be slower than.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "../../llmc/cpu/kernels.h"

static void fill(float *x, size_t n, unsigned seed) {
    for (size_t i = 0; i < n; i++) {
        seed = seed * 1664525u + 1013904223u;
        x[i] = ((seed >> 8) / 16777216.0f - 0.5f) * 0.2f;
    }
}

static double max_rel(const float *a, const float *b, size_t n) {
    double e = 0.0, r = 1e-30;
    for (size_t i = 0; i < n; i++) {
        e = fmax(e, fabs((double)a[i] - b[i]));
        r = fmax(r, fabs((double)b[i]));
    }
    return e / r;
}

/* plain y = x W^T + b */
static void plain_matmul(float *y, const float *x, const float *W, const float *b, int N, int IC, int OC) {
#pragma omp parallel for
    for (int n = 0; n < N; n++)
        for (int o = 0; o < OC; o++) {
            float s = b ? b[o] : 0.0f;
            for (int i = 0; i < IC; i++) s += x[(size_t)n * IC + i] * W[(size_t)o * IC + i];
            y[(size_t)n * OC + o] = s;
        }
}

/* plain dx = dy W, dW += dy^T x */
static void plain_matmul_backward(float *dx, float *dW, const float *dy, const float *x, const float *W,
                                  int N, int IC, int OC) {
#pragma omp parallel for
    for (int n = 0; n < N; n++)
        for (int i = 0; i < IC; i++) {
            float s = 0.0f;
            for (int o = 0; o < OC; o++) s += dy[(size_t)n * OC + o] * W[(size_t)o * IC + i];
            dx[(size_t)n * IC + i] = s;
        }
#pragma omp parallel for
    for (int o = 0; o < OC; o++)
        for (int i = 0; i < IC; i++) {
            float s = dW[(size_t)o * IC + i];
            for (int n = 0; n < N; n++) s += dy[(size_t)n * OC + o] * x[(size_t)n * IC + i];
            dW[(size_t)o * IC + i] = s;
        }
}

/* plain causal attention forward, one (b, head, t) row per iteration */
static void plain_attention(float *out, float *att, const float *qkv, int B, int T, int h, int d) {
    const int A = h * d;
    const float scale = 1.0f / sqrtf((float)d);
#pragma omp parallel for collapse(3)
    for (int b = 0; b < B; b++)
        for (int k = 0; k < h; k++)
            for (int t = 0; t < T; t++) {
                float *p = att + (((size_t)b * h + k) * T + t) * T;
                float mx = -INFINITY, sum = 0.0f;
                for (int s = 0; s <= t; s++) {
                    float dot = 0.0f;
                    for (int i = 0; i < d; i++)
                        dot += qkv[((size_t)b * T + t) * 3 * A + k * d + i] * qkv[((size_t)b * T + s) * 3 * A + A + k * d + i];
                    p[s] = dot * scale;
                    mx = fmaxf(mx, p[s]);
                }
                for (int s = 0; s <= t; s++) sum += (p[s] = expf(p[s] - mx));
                for (int i = 0; i < d; i++) {
                    float o = 0.0f;
                    for (int s = 0; s <= t; s++) o += p[s] / sum * qkv[((size_t)b * T + s) * 3 * A + 2 * A + k * d + i];
                    out[((size_t)b * T + t) * A + k * d + i] = o;
                }
            }
}

#define TIME(label, reps, stmt)                                \
    double label = 0.0;                                        \
    do {                                                       \
        stmt;                                                  \
        double t0_ = wall_seconds();                           \
        for (int r_ = 0; r_ < (reps); r_++) stmt;              \
        label = (wall_seconds() - t0_) / (reps) * 1e3;         \
    } while (0)

int main(int argc, char **argv) {
    int N = argc > 1 ? atoi(argv[1]) : 1024, C = argc > 2 ? atoi(argv[2]) : 256, T = argc > 3 ? atoi(argv[3]) : 256;
    if (N < T || N % T != 0 || C % 64 != 0) {
        fprintf(stderr, "error: need N a multiple of T and C a multiple of 64 (got N %d, C %d, T %d)\n", N, C, T);
        return 1;
    }
    const int B = N / T, OC = 4 * C;
    printf("kernels: N = B*T = %d (B %d, T %d), C %d, threads %d\n", N, B, T, C, omp_get_max_threads());
    float *x = (float *)xmalloc(sizeof(float) * N * OC), *W = (float *)xmalloc(sizeof(float) * OC * OC);
    float *b = (float *)xmalloc(sizeof(float) * OC), *y1 = (float *)xmalloc(sizeof(float) * N * OC);
    float *y2 = (float *)xmalloc(sizeof(float) * N * OC), *wt = (float *)xmalloc(sizeof(float) * OC * OC);
    float *dW1 = (float *)xcalloc((size_t)OC * OC, sizeof(float)), *dW2 = (float *)xcalloc((size_t)OC * OC, sizeof(float));
    fill(x, (size_t)N * OC, 1);
    fill(W, (size_t)OC * OC, 2);
    fill(b, OC, 3);
    printf("%-34s %10s %10s %8s %10s\n", "kernel", "plain ms", "ours ms", "speedup", "max rel");

    TIME(tp, 2, plain_matmul(y1, x, W, b, N, C, OC));
    TIME(to, 5, matmul_forward(y2, x, W, b, N, C, OC, OC, wt));
    printf("%-34s %10.2f %10.2f %7.1fx %10.1e\n", "matmul fwd (N,C)x(4C,C)^T", tp, to, tp / to, max_rel(y2, y1, (size_t)N * OC));

    TIME(tpb, 1, plain_matmul_backward(y1, dW1, x, x, W, N, C, OC));
    TIME(tob, 3, matmul_backward(y2, dW2, NULL, x, x, W, N, C, OC, OC));
    printf("%-34s %10.2f %10.2f %7.1fx %10s\n", "matmul bwd (dx, dW)", tpb, tob, tpb / tob, "-");

    const int h = C / 64, d = 64;
    float *qkv = x, *att1 = (float *)xmalloc(sizeof(float) * B * h * T * T), *att2 = (float *)xmalloc(sizeof(float) * B * h * T * T);
    TIME(tpa, 1, plain_attention(y1, att1, qkv, B, T, h, d));
    TIME(toa, 3, attention_forward(y2, att2, qkv, B, T, h, d));
    printf("%-34s %10.2f %10.2f %7.1fx %10.1e\n", "attention fwd (h x 64)", tpa, toa, tpa / toa, max_rel(y2, y1, (size_t)N * C));
    TIME(tpw, 1, plain_attention(y1, att1, qkv, B, T, 1, C));
    TIME(tow, 3, attention_forward(y2, att2, qkv, B, T, 1, C));
    printf("%-34s %10.2f %10.2f %7.1fx %10.1e\n", "attention fwd (1 x C, Prism wide)", tpw, tow, tpw / tow, max_rel(y2, y1, (size_t)N * C));
    return 0;
}
