/*
 * llmc/attention_own.cu: causal multi-head attention for any head size and any T.
 *
 * Per layer with h heads of size d (A = h d), batched over the B h (batch, head) pairs:
 *   forward   q, k, v <- split heads of qkv;  att <- q k^T (bf16, full T x T);
 *             att <- causal softmax(att / sqrt(d)) in place (zeros above the diagonal);
 *             o <- att v;  out <- merge heads of o
 *   backward  dO <- split heads of dout;  datt <- dO v^T;  dv <- att^T dO;
 *             dS <- att (datt - rowsum(att datt)) / sqrt(d) in place;  dq <- dS k;  dk <- dS^T q;
 *             dqkv <- merge heads of dq | dk | dv
 * The GEMMs are cuBLAS strided-batched calls on the trainer's stream (cuBLAS results are
 * reproducible run to run on the same GPU and stream); the softmax kernels give one warp per row
 * and reduce in a fixed order. Column-major views for cuBLAS (a row-major (R, K) matrix is a
 * column-major (K, R) one) are worked out next to each call.
 */
#include <math.h>

#include "attention_own.cuh"

/* dst (B, h, T, d) <- the head columns of src rows (B*T rows of row_stride elements). */
__global__ void split_heads_kernel(floatX *dst, const floatX *src, size_t row_stride, int B, int T,
                                   int h, int d) {
    const size_t total = (size_t)B * h * T * d;
    for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < total; i += (size_t)gridDim.x * blockDim.x) {
        const size_t j = i % (size_t)d;
        const size_t t = (i / (size_t)d) % (size_t)T;
        const size_t hh = (i / ((size_t)d * T)) % (size_t)h;
        const size_t b = i / ((size_t)d * T * h);
        dst[i] = src[(b * T + t) * row_stride + hh * d + j];
    }
}

/* dst rows (B*T rows of row_stride elements), head columns <- src (B, h, T, d). */
__global__ void merge_heads_kernel(floatX *dst, size_t row_stride, const floatX *src, int B, int T,
                                   int h, int d) {
    const size_t A = (size_t)h * d, total = (size_t)B * T * A;
    for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < total; i += (size_t)gridDim.x * blockDim.x) {
        const size_t col = i % A, bt = i / A;
        const size_t hh = col / (size_t)d, j = col % (size_t)d;
        const size_t b = bt / (size_t)T, t = bt % (size_t)T;
        dst[bt * row_stride + col] = src[((b * h + hh) * T + t) * d + j];
    }
}

static void split_heads(floatX *dst, const floatX *src, size_t row_stride, int B, int T, int h, int d,
                        cudaStream_t s) {
    split_heads_kernel<<<grid_stride_blocks((size_t)B * h * T * d, 256), 256, 0, s>>>(dst, src, row_stride, B, T, h, d);
    CUDA_CHECK_LAUNCH();
}

static void merge_heads(floatX *dst, size_t row_stride, const floatX *src, int B, int T, int h, int d,
                        cudaStream_t s) {
    merge_heads_kernel<<<grid_stride_blocks((size_t)B * h * T * d, 256), 256, 0, s>>>(dst, row_stride, src, B, T, h, d);
    CUDA_CHECK_LAUNCH();
}

/* ----------------------------------------------------------------------------------------------
 * Causal softmax, one warp per row of (B h T) rows of length T; row r is query t = r mod T.
 * Online (max, sum) per lane (SoftmaxAcc, cuda_common.cuh), merged by a butterfly that leaves the
 * same value in every lane, then a second pass writes the probabilities and the zeros above the
 * diagonal. */
__global__ void causal_softmax_forward_kernel(floatX *att, size_t rows, int T, float scale) {
    const size_t r = (size_t)blockIdx.x * (blockDim.x / 32) + threadIdx.x / 32;
    const int lane = threadIdx.x % 32;
    if (r >= rows) return;
    const int t = (int)(r % (size_t)T);
    floatX *row = att + r * (size_t)T;
    SoftmaxAcc acc = {-INFINITY, 0.0f};
    for (int j = lane; j <= t; j += 32) acc = softmax_acc_push(acc, scale * bf(row[j]));
    acc = warp_softmax_acc(acc);
    const float inv = 1.0f / acc.s;
    for (int j = lane; j < T; j += 32) {
        row[j] = j <= t ? to_bf(expf(scale * bf(row[j]) - acc.m) * inv) : to_bf(0.0f);
    }
}

/* datt (row) <- scale * P (dP - sum_j P_j dP_j) for keys <= t, 0 beyond. */
__global__ void causal_softmax_backward_kernel(floatX *datt, const floatX *att, size_t rows, int T,
                                               float scale) {
    const size_t r = (size_t)blockIdx.x * (blockDim.x / 32) + threadIdx.x / 32;
    const int lane = threadIdx.x % 32;
    if (r >= rows) return;
    const int t = (int)(r % (size_t)T);
    floatX *drow = datt + r * (size_t)T;
    const floatX *prow = att + r * (size_t)T;
    float dot = 0.0f;
    for (int j = lane; j <= t; j += 32) dot += bf(prow[j]) * bf(drow[j]);
    dot = warp_sum(dot);
    for (int j = lane; j < T; j += 32) {
        drow[j] = j <= t ? to_bf(scale * bf(prow[j]) * (bf(drow[j]) - dot)) : to_bf(0.0f);
    }
}

static void softmax_rows_grid(size_t rows, unsigned *blocks) { *blocks = (unsigned)ceil_div(rows, 8); }

/* ----------------------------------------------------------------------------------------------
 * cuBLAS strided-batched GEMM on bf16 with fp32 accumulation: C = op(A) op(B), batch = B h. */
static void gemm_batched(const GpuCtx *ctx, bool ta, bool tb, int m, int n, int k, const floatX *A,
                         int lda, long long sa, const floatX *Bm, int ldb, long long sb, floatX *C,
                         int ldc, long long sc, int batch) {
    const float alpha = 1.0f, beta = 0.0f;
    CUBLAS_CHECK(cublasGemmStridedBatchedEx(ctx->blas, ta ? CUBLAS_OP_T : CUBLAS_OP_N,
                                            tb ? CUBLAS_OP_T : CUBLAS_OP_N, m, n, k, &alpha, A,
                                            CUDA_R_16BF, lda, sa, Bm, CUDA_R_16BF, ldb, sb, &beta, C,
                                            CUDA_R_16BF, ldc, sc, batch, CUBLAS_COMPUTE_32F,
                                            CUBLAS_GEMM_DEFAULT));
}

void attention_own_forward(floatX *out, floatX *att, floatX *scratch, const floatX *qkv, int B,
                           int T, int h, int d, const GpuCtx *ctx) {
    const size_t A = (size_t)h * d, n = (size_t)B * T * A;
    const long long Td = (long long)T * d, TT = (long long)T * T;
    const int batch = B * h;
    floatX *q = scratch, *k = scratch + n, *v = scratch + 2 * n, *o = scratch + 3 * n;
    cudaStream_t s = ctx->stream;
    split_heads(q, qkv, 3 * A, B, T, h, d, s);
    split_heads(k, qkv + A, 3 * A, B, T, h, d, s);
    split_heads(v, qkv + 2 * A, 3 * A, B, T, h, d, s);
    /* att[t][j] = q_t . k_j: column-major C (T_k x T_q) = K^T (T x d) . Q (d x T) */
    gemm_batched(ctx, true, false, T, T, d, k, d, Td, q, d, Td, att, T, TT, batch);
    const size_t rows = (size_t)batch * T;
    unsigned blocks;
    softmax_rows_grid(rows, &blocks);
    causal_softmax_forward_kernel<<<blocks, 256, 0, s>>>(att, rows, T, 1.0f / sqrtf((float)d));
    CUDA_CHECK_LAUNCH();
    /* o[t][i] = sum_j att[t][j] v[j][i]: column-major O (d x T) = V (d x T) . P (T x T) */
    gemm_batched(ctx, false, false, d, T, T, v, d, Td, att, T, TT, o, d, Td, batch);
    merge_heads(out, A, o, B, T, h, d, s);
}

void attention_own_backward(floatX *dqkv, floatX *datt, floatX *scratch, const floatX *dout,
                            const floatX *qkv, const floatX *att, int B, int T, int h, int d,
                            const GpuCtx *ctx) {
    const size_t A = (size_t)h * d, n = (size_t)B * T * A;
    const long long Td = (long long)T * d, TT = (long long)T * T;
    const int batch = B * h;
    floatX *q = scratch, *k = scratch + n, *v = scratch + 2 * n, *dO = scratch + 3 * n;
    floatX *dq = scratch + 4 * n, *dk = scratch + 5 * n, *dv = scratch + 6 * n;
    cudaStream_t s = ctx->stream;
    split_heads(q, qkv, 3 * A, B, T, h, d, s);
    split_heads(k, qkv + A, 3 * A, B, T, h, d, s);
    split_heads(v, qkv + 2 * A, 3 * A, B, T, h, d, s);
    split_heads(dO, dout, A, B, T, h, d, s);
    /* datt[t][j] = dO_t . v_j (same shape as q k^T) */
    gemm_batched(ctx, true, false, T, T, d, v, d, Td, dO, d, Td, datt, T, TT, batch);
    /* dv[j][i] = sum_t att[t][j] dO[t][i]: column-major dV (d x T) = dO (d x T) . P^T */
    gemm_batched(ctx, false, true, d, T, T, dO, d, Td, att, T, TT, dv, d, Td, batch);
    const size_t rows = (size_t)batch * T;
    unsigned blocks;
    softmax_rows_grid(rows, &blocks);
    causal_softmax_backward_kernel<<<blocks, 256, 0, s>>>(datt, att, rows, T, 1.0f / sqrtf((float)d));
    CUDA_CHECK_LAUNCH();
    /* dq = dS k (the shape of att v);  dk = dS^T q (the shape of att^T dO) */
    gemm_batched(ctx, false, false, d, T, T, k, d, Td, datt, T, TT, dq, d, Td, batch);
    gemm_batched(ctx, false, true, d, T, T, q, d, Td, datt, T, TT, dk, d, Td, batch);
    merge_heads(dqkv, 3 * A, dq, B, T, h, d, s);
    merge_heads(dqkv + A, 3 * A, dk, B, T, h, d, s);
    merge_heads(dqkv + 2 * A, 3 * A, dv, B, T, h, d, s);
}
