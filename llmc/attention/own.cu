/*
 * llmc/attention/own.cu: causal multi-head attention for any head size and any T.
 *
 * The sequence (split heads, q k^T, causal softmax, P v, merge; and the backward's five products)
 * is llmc/attention/own_seq.h, shared with the CPU run of test/host_cuda; this file supplies its
 * primitives on the GPU: the split/merge and causal softmax kernels (one warp per row, reductions
 * in a fixed order) and cuBLAS strided-batched GEMMs on the trainer's stream.
 */
#include <math.h>

#include "own.cuh"
#include "own_seq.h"

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

/* ----------------------------------------------------------------------------------------------
 * The primitives of the shared sequence (llmc/attention/own_seq.h) on the trainer's stream. */
static void split_heads(const GpuCtx *ctx, floatX *dst, const floatX *src, size_t row_stride, int B, int T, int h,
                        int d) {
    split_heads_kernel<<<grid_stride_blocks((size_t)B * h * T * d, 256), 256, 0, ctx->stream>>>(dst, src, row_stride, B, T, h, d);
    CUDA_CHECK_LAUNCH();
}

static void merge_heads(const GpuCtx *ctx, floatX *dst, size_t row_stride, const floatX *src, int B, int T, int h,
                        int d) {
    merge_heads_kernel<<<grid_stride_blocks((size_t)B * h * T * d, 256), 256, 0, ctx->stream>>>(dst, row_stride, src, B, T, h, d);
    CUDA_CHECK_LAUNCH();
}

/* one warp per row, 8 rows per 256-thread block */
static void softmax_forward(const GpuCtx *ctx, floatX *att, size_t rows, int T, float scale) {
    causal_softmax_forward_kernel<<<(unsigned)ceil_div(rows, 8), 256, 0, ctx->stream>>>(att, rows, T, scale);
    CUDA_CHECK_LAUNCH();
}

static void softmax_backward(const GpuCtx *ctx, floatX *datt, const floatX *att, size_t rows, int T, float scale) {
    causal_softmax_backward_kernel<<<(unsigned)ceil_div(rows, 8), 256, 0, ctx->stream>>>(datt, att, rows, T, scale);
    CUDA_CHECK_LAUNCH();
}

/* cuBLAS strided-batched GEMM on bf16 with fp32 accumulation (reproducible run to run on the same
 * GPU and stream) */
static void gemm_batched(const GpuCtx *ctx, const GemmDesc *g, const floatX *A, const floatX *Bm, floatX *C) {
    const float alpha = 1.0f, beta = 0.0f;
    CUBLAS_CHECK(cublasGemmStridedBatchedEx(ctx->blas, g->transa ? CUBLAS_OP_T : CUBLAS_OP_N,
                                            g->transb ? CUBLAS_OP_T : CUBLAS_OP_N, g->m, g->n, g->k, &alpha, A,
                                            CUDA_R_16BF, (int)g->lda, g->strideA, Bm, CUDA_R_16BF, (int)g->ldb,
                                            g->strideB, &beta, C, CUDA_R_16BF, (int)g->ldc, g->strideC, g->batch,
                                            CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT));
}

static const OwnAttnOps CUDA_OPS = {split_heads, merge_heads, gemm_batched, softmax_forward, softmax_backward};

void attention_own_forward(floatX *out, floatX *att, floatX *scratch, const floatX *qkv, int B,
                           int T, int h, int d, const GpuCtx *ctx) {
    own_attention_forward_seq(&CUDA_OPS, ctx, out, att, scratch, qkv, B, T, h, d);
}

void attention_own_backward(floatX *dqkv, floatX *datt, floatX *scratch, const floatX *dout,
                            const floatX *qkv, const floatX *att, int B, int T, int h, int d,
                            const GpuCtx *ctx) {
    own_attention_backward_seq(&CUDA_OPS, ctx, dqkv, datt, scratch, dout, qkv, att, B, T, h, d);
}
