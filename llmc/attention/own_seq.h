/*
 * llmc/attention/own_seq.h: the own softmax attention's forward and backward as a sequence of
 * primitive operations (split / merge heads, strided-batched GEMM, causal softmax forward and
 * backward), written once and run by two sets of primitives:
 *   llmc/attention/own.cu           CUDA kernels and cuBLAS (cublasGemmStridedBatchedEx)
 *   test/host_cuda/kernels_host.cpp CPU loops, the GEMMs with cuBLAS's column-major semantics
 * so that which buffer goes into which GEMM, transposed or not, with which leading dimensions and
 * batch strides, is exercised by the CPU tests exactly as the GPU runs it.
 *
 * Buffers (llmc/attention/own.cuh): qkv (B, T, 3A), A = h d; att and datt (B, h, T, T); scratch 7 n bf16
 * with n = B T A: q, k, v, o|dO, dq, dk, dv, each (B, h, T, d). cuBLAS is column-major: a
 * row-major (R, K) matrix is a column-major (K, R) one with ld K, which is how each call below
 * reads its operands; C_i = op(A_i) op(B_i) for the B h (batch, head) pairs, fp32 sums, bf16 C.
 */
#ifndef LLMC_ATTENTION_OWN_SEQ_H
#define LLMC_ATTENTION_OWN_SEQ_H

#include <math.h>

#include "../cuda/cuda_common.cuh"
#include "../scalar_math.h" /* GemmDesc */

typedef struct {
    /* dst (B, h, T, d) <- the head columns of src rows (B T rows of row_stride elements) */
    void (*split)(const GpuCtx *ctx, floatX *dst, const floatX *src, size_t row_stride, int B, int T, int h, int d);
    /* dst rows (B T rows of row_stride elements), head columns <- src (B, h, T, d) */
    void (*merge)(const GpuCtx *ctx, floatX *dst, size_t row_stride, const floatX *src, int B, int T, int h, int d);
    /* C = op(A) op(B) per batch entry (GemmDesc, column-major), bf16 in and out */
    void (*gemm)(const GpuCtx *ctx, const GemmDesc *g, const floatX *A, const floatX *Bm, floatX *C);
    /* rows of length T, row r is query t = r mod T: P = softmax(scale x) over keys <= t, 0 beyond */
    void (*softmax_forward)(const GpuCtx *ctx, floatX *att, size_t rows, int T, float scale);
    /* datt <- scale P (dP - sum_j P_j dP_j) for keys <= t, 0 beyond (in place over dP) */
    void (*softmax_backward)(const GpuCtx *ctx, floatX *datt, const floatX *att, size_t rows, int T, float scale);
} OwnAttnOps;

/* One strided-batched product over the B h pairs: m x n = op(A) (m x k) op(B) (k x n). */
static inline GemmDesc own_gemm(int transa, int transb, int m, int n, int k, long long lda, long long sa,
                                long long ldb, long long sb, long long ldc, long long sc, int batch) {
    GemmDesc g;
    g.transa = transa;
    g.transb = transb;
    g.m = m;
    g.n = n;
    g.k = k;
    g.lda = lda;
    g.ldb = ldb;
    g.ldc = ldc;
    g.strideA = sa;
    g.strideB = sb;
    g.strideC = sc;
    g.batch = batch;
    return g;
}

/*   q, k, v <- split heads of qkv;  att <- q k^T (bf16, full T x T);
 *   att <- causal softmax(att / sqrt(d)) in place (zeros above the diagonal);
 *   o <- att v;  out <- merge heads of o */
static inline void own_attention_forward_seq(const OwnAttnOps *op, const GpuCtx *ctx, floatX *out, floatX *att,
                                             floatX *scratch, const floatX *qkv, int B, int T, int h, int d) {
    const size_t A = (size_t)h * d, n = (size_t)B * T * A;
    const long long Td = (long long)T * d, TT = (long long)T * T;
    const int batch = B * h;
    floatX *q = scratch, *k = scratch + n, *v = scratch + 2 * n, *o = scratch + 3 * n;
    op->split(ctx, q, qkv, 3 * A, B, T, h, d);
    op->split(ctx, k, qkv + A, 3 * A, B, T, h, d);
    op->split(ctx, v, qkv + 2 * A, 3 * A, B, T, h, d);
    /* att[t][j] = q_t . k_j: column-major C (T_k x T_q) = K^T (T x d) . Q (d x T) */
    const GemmDesc qk = own_gemm(1, 0, T, T, d, d, Td, d, Td, T, TT, batch);
    op->gemm(ctx, &qk, k, q, att);
    op->softmax_forward(ctx, att, (size_t)batch * T, T, 1.0f / sqrtf((float)d));
    /* o[t][i] = sum_j att[t][j] v[j][i]: column-major O (d x T) = V (d x T) . P (T x T) */
    const GemmDesc pv = own_gemm(0, 0, d, T, T, d, Td, T, TT, d, Td, batch);
    op->gemm(ctx, &pv, v, att, o);
    op->merge(ctx, out, A, o, B, T, h, d);
}

/*   dO <- split heads of dout;  datt <- dO v^T;  dv <- att^T dO;
 *   dS <- att (datt - rowsum(att datt)) / sqrt(d) in place;  dq <- dS k;  dk <- dS^T q;
 *   dqkv <- merge heads of dq | dk | dv */
static inline void own_attention_backward_seq(const OwnAttnOps *op, const GpuCtx *ctx, floatX *dqkv, floatX *datt,
                                              floatX *scratch, const floatX *dout, const floatX *qkv,
                                              const floatX *att, int B, int T, int h, int d) {
    const size_t A = (size_t)h * d, n = (size_t)B * T * A;
    const long long Td = (long long)T * d, TT = (long long)T * T;
    const int batch = B * h;
    floatX *q = scratch, *k = scratch + n, *v = scratch + 2 * n, *dO = scratch + 3 * n;
    floatX *dq = scratch + 4 * n, *dk = scratch + 5 * n, *dv = scratch + 6 * n;
    op->split(ctx, q, qkv, 3 * A, B, T, h, d);
    op->split(ctx, k, qkv + A, 3 * A, B, T, h, d);
    op->split(ctx, v, qkv + 2 * A, 3 * A, B, T, h, d);
    op->split(ctx, dO, dout, A, B, T, h, d);
    /* datt[t][j] = dO_t . v_j (the shape of q k^T) */
    const GemmDesc dp = own_gemm(1, 0, T, T, d, d, Td, d, Td, T, TT, batch);
    op->gemm(ctx, &dp, v, dO, datt);
    /* dv[j][i] = sum_t att[t][j] dO[t][i]: column-major dV (d x T) = dO (d x T) . P^T */
    const GemmDesc pdo = own_gemm(0, 1, d, T, T, d, Td, T, TT, d, Td, batch);
    op->gemm(ctx, &pdo, dO, att, dv);
    op->softmax_backward(ctx, datt, att, (size_t)batch * T, T, 1.0f / sqrtf((float)d));
    /* dq = dS k (the shape of att v);  dk = dS^T q (the shape of att^T dO) */
    const GemmDesc dsk = own_gemm(0, 0, d, T, T, d, Td, T, TT, d, Td, batch);
    op->gemm(ctx, &dsk, k, datt, dq);
    const GemmDesc dsq = own_gemm(0, 1, d, T, T, d, Td, T, TT, d, Td, batch);
    op->gemm(ctx, &dsq, q, datt, dk);
    op->merge(ctx, dqkv, 3 * A, dq, B, T, h, d);
    op->merge(ctx, dqkv + A, 3 * A, dk, B, T, h, d);
    op->merge(ctx, dqkv + 2 * A, 3 * A, dv, B, T, h, d);
}

#endif /* LLMC_ATTENTION_OWN_SEQ_H */
