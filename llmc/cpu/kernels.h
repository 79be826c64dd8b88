/*
 * llmc/cpu/kernels.h: the fp32 CPU layers of GPT-2, forward and backward, parallel with OpenMP.
 *
 * Defines (shapes in comments; N = B*T rows, row-major):
 *   gemm_nn / gemm_tn             C (+)= A B  and  C += A^T B  (the only two matmul kernels)
 *   matmul_forward / _backward    y = x W^T + b  with W stored (OC, IC) like nn.Linear
 *   encoder_forward / _backward   token + position embeddings
 *   layernorm_forward / _backward
 *   gelu_forward / _backward      tanh approximation
 *   residual_forward              y = a + b
 *   attention_forward / _backward causal softmax attention with h heads of size d on a
 *                                 (B, T, 3A) qkv buffer, A = h*d, scale 1/sqrt(d)
 *   crossentropy_forward / _backward_inplace   loss over the V real logits; the backward turns
 *                                 the logits into dlogits in place (no second (N, V) buffer)
 *   blas_print_config             USE_BLAS only: OpenBLAS's kernel set, and a note when it is
 *                                 one without AVX2 on a CPU that has it
 *
 * Determinism: every output element is produced by one thread in a fixed summation order, so
 * results are bit-identical whatever the thread count. Resume (-y 1) relies on this.
 * These kernels are the reference the CUDA kernels are checked against: keep them plain.
 *
 * USE_BLAS (make USE_BLAS=1, doc/verification.md "The BLAS build"): the three matmuls go to
 * cblas_sgemm (OpenBLAS built for OpenMP) instead of the register-tile loops below. Its results
 * differ from the default build's in the last bits (another summation order) and are reproducible
 * at a fixed thread count (OpenBLAS splits rows and columns among threads, never the k sum), which
 * is what resume needs; the default build stays the reference.
 */
#ifndef LLMC_CPU_KERNELS_H
#define LLMC_CPU_KERNELS_H

#include <math.h>
#include <stddef.h>
#include <string.h>
#ifdef _OPENMP
#include <omp.h>
#endif

#include "../scalar_math.h" /* gelu_tanhf, gelu_tanh_gradf: shared with the GPU kernels */
#include "../utils.h"
#ifdef USE_BLAS
#include <cblas.h>
#endif

#ifdef USE_BLAS
#include <stdio.h>
#include <strings.h>
/* OpenBLAS chooses its kernel set once, when it is loaded, from the CPU model (OPENBLAS_CORETYPE
 * overrides the choice). A library older than the CPU does not know the model and falls back to
 * its SSE3 set ("Prescott"), which is slower than this file's own loops: the BLAS build then runs
 * slower than the default one. Prints the set in use and, on x86-64 with AVX2 when the set has no
 * AVX2 kernels, a note naming the override. */
static inline void blas_print_config(FILE *f) {
    const char *core = openblas_get_corename();
    fprintf(f, "blas: OpenBLAS, kernels for %s (%s)\n", core ? core : "?", openblas_get_config());
#if defined(__x86_64__) && defined(__GNUC__)
    static const char *const avx2_sets[] = {"Haswell", "Zen", "SkylakeX", "Cooperlake", "SapphireRapids"};
    int has_avx2_set = 0;
    for (size_t i = 0; i < sizeof avx2_sets / sizeof avx2_sets[0]; i++)
        if (core && strcasecmp(core, avx2_sets[i]) == 0) has_avx2_set = 1;
    __builtin_cpu_init();
    if (!has_avx2_set && __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma")) {
        const int avx512 = __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
                           __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512dq");
        fprintf(f, "note: OpenBLAS uses its %s kernels on a CPU with %s (a CPU model this OpenBLAS does not "
                   "know): run with OPENBLAS_CORETYPE=%s for its %s kernels, or the default build\n",
                core ? core : "generic", avx512 ? "AVX-512" : "AVX2", avx512 ? "SkylakeX" : "Haswell",
                avx512 ? "AVX-512" : "AVX2");
    }
#endif
}
#endif

/* ----------------------------------------------------------------------------------------------
 * GEMM. A register tile of GEMM_RB rows x GEMM_NB columns is accumulated over k with the B row
 * read once per k and broadcast A values: the compiler vectorizes the inner j loop and keeps the
 * tile in registers (16 AVX-512 registers for 4 x 64). */
#define GEMM_RB 4
#define GEMM_NB 64

/* C[M][N] = (accumulate ? C : 0) + sum_k A[m][k] * B[k][n]; A has row stride lda, B ldb, C ldc. */
static inline void gemm_nn(float *C, const float *A, const float *B, int M, int K, int N, int lda,
                           int ldb, int ldc, int accumulate) {
#ifdef USE_BLAS
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, M, N, K, 1.0f, A, lda, B, ldb,
                accumulate ? 1.0f : 0.0f, C, ldc);
    return;
#endif
    const int nmb = (M + GEMM_RB - 1) / GEMM_RB;
    const int nnb = (N + GEMM_NB - 1) / GEMM_NB;
#pragma omp parallel for collapse(2) schedule(static)
    for (int jb = 0; jb < nnb; jb++) {
        for (int ib = 0; ib < nmb; ib++) {
            const int i0 = ib * GEMM_RB, j0 = jb * GEMM_NB;
            if (i0 + GEMM_RB <= M && j0 + GEMM_NB <= N) {
                float acc[GEMM_RB][GEMM_NB];
                for (int r = 0; r < GEMM_RB; r++)
                    for (int j = 0; j < GEMM_NB; j++)
                        acc[r][j] = accumulate ? C[(size_t)(i0 + r) * ldc + j0 + j] : 0.0f;
                for (int k = 0; k < K; k++) {
                    const float *b = B + (size_t)k * ldb + j0;
                    for (int r = 0; r < GEMM_RB; r++) {
                        const float a = A[(size_t)(i0 + r) * lda + k];
                        for (int j = 0; j < GEMM_NB; j++) acc[r][j] += a * b[j];
                    }
                }
                for (int r = 0; r < GEMM_RB; r++)
                    for (int j = 0; j < GEMM_NB; j++) C[(size_t)(i0 + r) * ldc + j0 + j] = acc[r][j];
            } else { /* ragged edge: same summation order, one element at a time */
                const int ie = LLMC_MIN(i0 + GEMM_RB, M), je = LLMC_MIN(j0 + GEMM_NB, N);
                for (int i = i0; i < ie; i++) {
                    for (int j = j0; j < je; j++) {
                        float s = accumulate ? C[(size_t)i * ldc + j] : 0.0f;
                        for (int k = 0; k < K; k++) s += A[(size_t)i * lda + k] * B[(size_t)k * ldb + j];
                        C[(size_t)i * ldc + j] = s;
                    }
                }
            }
        }
    }
}

/* C[M][N] += sum_k A[k][m] * B[k][n]  (A stored K x M with row stride lda): weight gradients. */
static inline void gemm_tn(float *C, const float *A, const float *B, int M, int K, int N, int lda,
                           int ldb, int ldc) {
#ifdef USE_BLAS
    cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, M, N, K, 1.0f, A, lda, B, ldb, 1.0f, C, ldc);
    return;
#endif
    const int nmb = (M + GEMM_RB - 1) / GEMM_RB;
    const int nnb = (N + GEMM_NB - 1) / GEMM_NB;
#pragma omp parallel for collapse(2) schedule(static)
    for (int jb = 0; jb < nnb; jb++) {
        for (int ib = 0; ib < nmb; ib++) {
            const int i0 = ib * GEMM_RB, j0 = jb * GEMM_NB;
            if (i0 + GEMM_RB <= M && j0 + GEMM_NB <= N) {
                float acc[GEMM_RB][GEMM_NB];
                for (int r = 0; r < GEMM_RB; r++)
                    for (int j = 0; j < GEMM_NB; j++) acc[r][j] = C[(size_t)(i0 + r) * ldc + j0 + j];
                for (int k = 0; k < K; k++) {
                    const float *b = B + (size_t)k * ldb + j0;
                    const float *a = A + (size_t)k * lda + i0;
                    for (int r = 0; r < GEMM_RB; r++) {
                        const float ar = a[r];
                        for (int j = 0; j < GEMM_NB; j++) acc[r][j] += ar * b[j];
                    }
                }
                for (int r = 0; r < GEMM_RB; r++)
                    for (int j = 0; j < GEMM_NB; j++) C[(size_t)(i0 + r) * ldc + j0 + j] = acc[r][j];
            } else {
                const int ie = LLMC_MIN(i0 + GEMM_RB, M), je = LLMC_MIN(j0 + GEMM_NB, N);
                for (int i = i0; i < ie; i++) {
                    for (int j = j0; j < je; j++) {
                        float s = C[(size_t)i * ldc + j];
                        for (int k = 0; k < K; k++) s += A[(size_t)k * lda + i] * B[(size_t)k * ldb + j];
                        C[(size_t)i * ldc + j] = s;
                    }
                }
            }
        }
    }
}

/* Out-of-place transpose: dst (cols, rows) = src (rows, cols)^T, src row stride lds. */
static inline void transpose(float *dst, const float *src, int rows, int cols, int lds) {
#pragma omp parallel for schedule(static)
    for (int c0 = 0; c0 < cols; c0 += 32) {
        for (int r0 = 0; r0 < rows; r0 += 32) {
            const int ce = LLMC_MIN(c0 + 32, cols), re = LLMC_MIN(r0 + 32, rows);
            for (int c = c0; c < ce; c++)
                for (int r = r0; r < re; r++) dst[(size_t)c * rows + r] = src[(size_t)r * lds + c];
        }
    }
}

/*
 * y (N, OC) = x (N, IC) W^T + b, W (OC, IC), b (OC) or NULL; y has row stride ldy (>= OC).
 * wt_scratch: IC*OC floats; W is transposed into it so the GEMM streams contiguous rows.
 */
static inline void matmul_forward(float *y, const float *x, const float *W, const float *b, int N,
                                  int IC, int OC, int ldy, float *wt_scratch) {
#ifdef USE_BLAS
    (void)wt_scratch; /* BLAS reads W transposed in place */
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, N, OC, IC, 1.0f, x, IC, W, IC, 0.0f, y, ldy);
#else
    transpose(wt_scratch, W, OC, IC, IC);
    gemm_nn(y, x, wt_scratch, N, IC, OC, IC, OC, ldy, 0);
#endif
    if (b != NULL) {
#pragma omp parallel for schedule(static)
        for (int n = 0; n < N; n++)
            for (int o = 0; o < OC; o++) y[(size_t)n * ldy + o] += b[o];
    }
}

/*
 * Given dy (N, OC) (row stride ldy): dx (N, IC) = dy W (overwritten; skipped when dx is NULL),
 * dW (OC, IC) += dy^T x, db (OC) += column sums of dy (skipped when NULL).
 */
static inline void matmul_backward(float *dx, float *dW, float *db, const float *dy, const float *x,
                                   const float *W, int N, int IC, int OC, int ldy) {
    if (dx != NULL) gemm_nn(dx, dy, W, N, OC, IC, ldy, IC, IC, 0);
    gemm_tn(dW, dy, x, OC, N, IC, ldy, IC, IC);
    if (db != NULL) {
#pragma omp parallel for schedule(static)
        for (int o = 0; o < OC; o++) {
            float s = 0.0f;
            for (int n = 0; n < N; n++) s += dy[(size_t)n * ldy + o];
            db[o] += s;
        }
    }
}

/* As matmul_backward, but dx += dy W (S-D layers project x twice, to U and to V). */
static inline void matmul_backward_acc(float *dx, float *dW, float *db, const float *dy,
                                       const float *x, const float *W, int N, int IC, int OC,
                                       int ldy) {
    gemm_nn(dx, dy, W, N, OC, IC, ldy, IC, IC, 1);
    gemm_tn(dW, dy, x, OC, N, IC, ldy, IC, IC);
    if (db != NULL) {
#pragma omp parallel for schedule(static)
        for (int o = 0; o < OC; o++) {
            float s = 0.0f;
            for (int n = 0; n < N; n++) s += dy[(size_t)n * ldy + o];
            db[o] += s;
        }
    }
}

/* ----------------------------------------------------------------------------------------------
 * Embeddings. out (B, T, C) = scale (wte[token] + wpe[t]); scale is the model's input scale F
 * (-emb_scale, doc/methods.md "Training without LayerNorm": the input scale), and F = 1 is exact: x * 1.0f == x. */
static inline void encoder_forward(float *out, const int *tokens, const float *wte, const float *wpe,
                                   int B, int T, int C, float scale) {
#pragma omp parallel for schedule(static)
    for (int bt = 0; bt < B * T; bt++) {
        const float *we = wte + (size_t)tokens[bt] * C;
        const float *pe = wpe + (size_t)(bt % T) * C;
        float *o = out + (size_t)bt * C;
        for (int c = 0; c < C; c++) o[c] = (we[c] + pe[c]) * scale;
    }
}

/* dwte[token] and dwpe[t] += scale dout. Repeated tokens make wte rows collide, so parallelize over
 * channels, not rows. */
static inline void encoder_backward(float *dwte, float *dwpe, const float *dout, const int *tokens,
                                    int B, int T, int C, float scale) {
#pragma omp parallel for schedule(static)
    for (int c0 = 0; c0 < C; c0 += 16) {
        const int ce = LLMC_MIN(c0 + 16, C);
        for (int bt = 0; bt < B * T; bt++) {
            const float *d = dout + (size_t)bt * C;
            float *we = dwte + (size_t)tokens[bt] * C;
            float *pe = dwpe + (size_t)(bt % T) * C;
            for (int c = c0; c < ce; c++) {
                const float dc = d[c] * scale;
                we[c] += dc;
                pe[c] += dc;
            }
        }
    }
}

/* ----------------------------------------------------------------------------------------------
 * LayerNorm over C with eps 1e-5; mean and rstd (N) are kept for the backward. */
static inline void layernorm_forward(float *out, float *mean, float *rstd, const float *x,
                                     const float *w, const float *b, int N, int C) {
#pragma omp parallel for schedule(static)
    for (int n = 0; n < N; n++) {
        const float *xr = x + (size_t)n * C;
        float m = 0.0f;
        for (int c = 0; c < C; c++) m += xr[c];
        m /= (float)C;
        float var = 0.0f;
        for (int c = 0; c < C; c++) var += (xr[c] - m) * (xr[c] - m);
        var /= (float)C;
        const float s = 1.0f / sqrtf(var + 1e-5f);
        float *o = out + (size_t)n * C;
        for (int c = 0; c < C; c++) o[c] = (xr[c] - m) * s * w[c] + b[c];
        mean[n] = m;
        rstd[n] = s;
    }
}

/* dx (N, C) += LN backward; dw, db (C) += (column sums, done per column to stay race-free). */
static inline void layernorm_backward(float *dx, float *dw, float *db, const float *dout,
                                      const float *x, const float *w, const float *mean,
                                      const float *rstd, int N, int C) {
#pragma omp parallel for schedule(static)
    for (int n = 0; n < N; n++) {
        const float *d = dout + (size_t)n * C;
        const float *xr = x + (size_t)n * C;
        const float m = mean[n], s = rstd[n];
        /* dx = s * (g - mean(g) - xhat * mean(g * xhat)),  g = dout * w */
        float gsum = 0.0f, gxsum = 0.0f;
        for (int c = 0; c < C; c++) {
            const float g = d[c] * w[c];
            gsum += g;
            gxsum += g * (xr[c] - m) * s;
        }
        gsum /= (float)C;
        gxsum /= (float)C;
        float *o = dx + (size_t)n * C;
        for (int c = 0; c < C; c++) {
            const float xhat = (xr[c] - m) * s;
            o[c] += s * (d[c] * w[c] - gsum - xhat * gxsum);
        }
    }
#pragma omp parallel for schedule(static)
    for (int c0 = 0; c0 < C; c0 += 16) {
        const int ce = LLMC_MIN(c0 + 16, C);
        for (int n = 0; n < N; n++) {
            const float *d = dout + (size_t)n * C;
            const float *xr = x + (size_t)n * C;
            for (int c = c0; c < ce; c++) {
                dw[c] += d[c] * (xr[c] - mean[n]) * rstd[n];
                db[c] += d[c];
            }
        }
    }
}

/* ----------------------------------------------------------------------------------------------
 * GELU, tanh approximation: 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))) (llmc/scalar_math.h
 * gelu_tanhf and its derivative gelu_tanh_gradf: the GPU kernels' formulas). */
static inline void gelu_forward(float *out, const float *x, size_t n) {
#pragma omp parallel for schedule(static)
    for (size_t i = 0; i < n; i++) out[i] = gelu_tanhf(x[i]);
}

static inline void gelu_backward(float *dx, const float *x, const float *dout, size_t n) {
#pragma omp parallel for schedule(static)
    for (size_t i = 0; i < n; i++) dx[i] = dout[i] * gelu_tanh_gradf(x[i]);
}

static inline void residual_forward(float *out, const float *a, const float *b, size_t n) {
#pragma omp parallel for schedule(static)
    for (size_t i = 0; i < n; i++) out[i] = a[i] + b[i];
}

/* ----------------------------------------------------------------------------------------------
 * Causal softmax attention for one layer with h heads of size d (A = h*d):
 *   qkv (B, T, 3A): Q at [0, A), K at [A, 2A), V at [2A, 3A); head k uses columns [k d, (k+1) d)
 *   att (B, h, T, T): softmax probabilities, row t holds keys 0..t (the rest is left unset)
 *   out (B, T, A): head k's output in columns [k d, (k+1) d)
 * logit(t, s) = q_t . k_s / sqrt(d) for s <= t (doc/prism.md "Definition"). */
static inline void attention_forward(float *out, float *att, const float *qkv, int B, int T, int h,
                                     int d) {
    const int A = h * d, A3 = 3 * h * d;
    const float scale = 1.0f / sqrtf((float)d);
    /* chunk 1 deals rows round-robin, which balances the triangular (causal) work */
#pragma omp parallel for collapse(3) schedule(static, 1)
    for (int b = 0; b < B; b++) {
        for (int k = 0; k < h; k++) {
            for (int t = 0; t < T; t++) {
                const float *q = qkv + ((size_t)b * T + t) * A3 + (size_t)k * d;
                float *p = att + (((size_t)b * h + k) * T + t) * T;
                float mx = -INFINITY;
                for (int s = 0; s <= t; s++) {
                    const float *key = qkv + ((size_t)b * T + s) * A3 + A + (size_t)k * d;
                    float dot = 0.0f;
                    for (int i = 0; i < d; i++) dot += q[i] * key[i];
                    p[s] = dot * scale;
                    mx = p[s] > mx ? p[s] : mx;
                }
                float sum = 0.0f;
                for (int s = 0; s <= t; s++) {
                    p[s] = expf(p[s] - mx);
                    sum += p[s];
                }
                const float inv = 1.0f / sum;
                float *o = out + ((size_t)b * T + t) * A + (size_t)k * d;
                for (int i = 0; i < d; i++) o[i] = 0.0f;
                for (int s = 0; s <= t; s++) {
                    p[s] *= inv;
                    const float *v = qkv + ((size_t)b * T + s) * A3 + 2 * A + (size_t)k * d;
                    for (int i = 0; i < d; i++) o[i] += p[s] * v[i];
                }
            }
        }
    }
}

/*
 * Backward of attention_forward. dqkv (B, T, 3A) is overwritten. Per (b, head), in the order of
 * the forward:  dP = dO V^T,  dS = P * (dP - rowsum(P * dP)),  dQ = dS K / sqrt(d),
 * dK = dS^T Q / sqrt(d),  dV = P^T dO. One thread owns one (b, head), so dK and dV accumulate
 * without races. scratch: T floats per thread (omp_get_max_threads() * T).
 */
static inline void attention_backward(float *dqkv, const float *dout, const float *qkv,
                                      const float *att, int B, int T, int h, int d, float *scratch) {
    const int A = h * d, A3 = 3 * h * d;
    const float scale = 1.0f / sqrtf((float)d);
#pragma omp parallel for schedule(static)
    for (int bt = 0; bt < B * T; bt++) memset(dqkv + (size_t)bt * A3, 0, sizeof(float) * (size_t)A3);
#pragma omp parallel for collapse(2) schedule(static)
    for (int b = 0; b < B; b++) {
        for (int k = 0; k < h; k++) {
#ifdef _OPENMP
            float *dp = scratch + (size_t)omp_get_thread_num() * T;
#else
            float *dp = scratch;
#endif
            for (int t = 0; t < T; t++) {
                const float *p = att + (((size_t)b * h + k) * T + t) * T;
                const float *dor = dout + ((size_t)b * T + t) * A + (size_t)k * d;
                const float *q = qkv + ((size_t)b * T + t) * A3 + (size_t)k * d;
                float *dq = dqkv + ((size_t)b * T + t) * A3 + (size_t)k * d;
                float pdp = 0.0f;
                for (int s = 0; s <= t; s++) {
                    const float *v = qkv + ((size_t)b * T + s) * A3 + 2 * A + (size_t)k * d;
                    float *dv = dqkv + ((size_t)b * T + s) * A3 + 2 * A + (size_t)k * d;
                    float dot = 0.0f;
                    for (int i = 0; i < d; i++) {
                        dot += dor[i] * v[i];
                        dv[i] += p[s] * dor[i];
                    }
                    dp[s] = dot;
                    pdp += p[s] * dot;
                }
                for (int s = 0; s <= t; s++) {
                    const float ds = p[s] * (dp[s] - pdp) * scale;
                    const float *key = qkv + ((size_t)b * T + s) * A3 + A + (size_t)k * d;
                    float *dk = dqkv + ((size_t)b * T + s) * A3 + A + (size_t)k * d;
                    for (int i = 0; i < d; i++) {
                        dq[i] += ds * key[i];
                        dk[i] += ds * q[i];
                    }
                }
            }
        }
    }
}

/* ----------------------------------------------------------------------------------------------
 * Cross-entropy over the first V logits of each row (the Vp - V padded logits are never formed).
 * logits (N, V); lse (N) = logsumexp; losses (N) = lse - logit[target]. */
static inline void crossentropy_forward(float *losses, float *lse, const float *logits,
                                        const int *targets, int N, int V) {
#pragma omp parallel for schedule(static)
    for (int n = 0; n < N; n++) {
        const float *z = logits + (size_t)n * V;
        float mx = -INFINITY;
        for (int v = 0; v < V; v++) mx = z[v] > mx ? z[v] : mx;
        float sum = 0.0f;
        for (int v = 0; v < V; v++) sum += expf(z[v] - mx);
        lse[n] = mx + logf(sum);
        losses[n] = lse[n] - z[targets[n]];
    }
}

/* logits (N, V) <- dloss * (softmax(logits) - onehot(target)): the classifier's input gradient,
 * written over the logits so that training needs one (N, V) buffer, as llm.c's fused kernel. */
static inline void crossentropy_backward_inplace(float *logits, const float *lse, const int *targets,
                                                 float dloss, int N, int V) {
#pragma omp parallel for schedule(static)
    for (int n = 0; n < N; n++) {
        float *z = logits + (size_t)n * V;
        for (int v = 0; v < V; v++) z[v] = expf(z[v] - lse[n]) * dloss;
        z[targets[n]] -= dloss;
    }
}


#endif /* LLMC_CPU_KERNELS_H */
