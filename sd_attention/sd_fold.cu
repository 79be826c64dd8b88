/*
 * sd_attention/sd_fold.cu: the S-D fold's kernels (interface in sd_attention/sd_fold.cuh). The arithmetic lives in
 * sd_attention/sd_fold.h, shared with the CPU emulation test (test/test_sd_fold_emul.c); this file launches it.
 *
 * Why a small kernel for K' = U L^T and dK' L rather than a cuBLAS GEMM: L is kept in fp32 (the
 * generator is built per step from the parameters, doc/methods.md "Realization with the standard attention kernels"), and cuBLAS has no bf16 x fp32
 * product; rounding L to bf16 would add a second rounding to every key. The kernel is a plain
 * shared-memory tile (64 rows x 64 columns of one head per block, inner chunks of 32) whose cost,
 * 2 N A d FLOPs, is a few percent of the QKV matmul. dL = dK'^T U reduces over all N rows: that
 * is a strided-batched cuBLAS GEMM with bf16 inputs and an fp32 result, which is reproducible run
 * to run (cuBLAS uses no atomics unless allowed) and sums in fp32.
 */
#include "sd_fold.h"
#include "sd_fold.cuh"

__global__ void copy_columns_kernel(floatX *dst, size_t ldd, const floatX *src, size_t lds, size_t N,
                                    int width) {
    const size_t total = N * (size_t)width;
    for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < total; i += (size_t)gridDim.x * blockDim.x) {
        const size_t n = i / (size_t)width, c = i % (size_t)width;
        dst[n * ldd + c] = src[n * lds + c];
    }
}

void copy_columns(floatX *dst, size_t ldd, const floatX *src, size_t lds, size_t N, int width,
                  cudaStream_t stream) {
    if (N == 0 || width == 0) return;
    copy_columns_kernel<<<grid_stride_blocks(N * (size_t)width, 256), 256, 0, stream>>>(dst, ldd, src, lds, N, width);
    CUDA_CHECK_LAUNCH();
}

void sd_gpu_scatter_uv(floatX *qkv, const floatX *uv, size_t N, int A, cudaStream_t stream) {
    copy_columns(qkv, 3 * (size_t)A, uv, 2 * (size_t)A, N, A, stream);                 /* U -> Q slot */
    copy_columns(qkv + 2 * (size_t)A, 3 * (size_t)A, uv + A, 2 * (size_t)A, N, A, stream); /* V -> V slot */
}

/* ---------------------------------------------------------------------------------------------- */
__global__ void sd_generator_kernel(float *L, const uint16_t *skew, const uint16_t *theta, int h, int d,
                                    int scalar_d, int sign) {
    const size_t total = (size_t)h * d * d;
    for (size_t e = (size_t)blockIdx.x * blockDim.x + threadIdx.x; e < total; e += (size_t)gridDim.x * blockDim.x) {
        const int j = (int)(e % (size_t)d), i = (int)((e / (size_t)d) % (size_t)d), k = (int)(e / ((size_t)d * d));
        L[e] = sd_generator_element(skew, theta, k, i, j, d, scalar_d, sign);
    }
}

void sd_gpu_build_generator(float *L, const floatX *skew, const floatX *theta, int h, int d, int scalar_d,
                        int sign, cudaStream_t stream) {
    const size_t total = (size_t)h * d * d;
    sd_generator_kernel<<<grid_stride_blocks(total, 256), 256, 0, stream>>>(L, reinterpret_cast<const uint16_t *>(skew),
                                                                  reinterpret_cast<const uint16_t *>(theta), h, d,
                                                                  scalar_d, sign);
    CUDA_CHECK_LAUNCH();
}

/* ---------------------------------------------------------------------------------------------- */
__global__ void __launch_bounds__(SD_THREADS) sd_rowmat_kernel(SdRowmat p) {
    extern __shared__ float sm[];
    sd_rowmat_block(&p, blockIdx.x, (int)blockIdx.y, (int)blockIdx.z, (int)threadIdx.x, (int)blockDim.x, sm);
}

static void rowmat(const SdRowmat *p, int h, cudaStream_t stream) {
    if (p->N == 0) return;
    const size_t smem = sd_rowmat_smem_floats() * sizeof(float); /* 33 KiB: under the 48 KiB default */
    const dim3 grid((unsigned)ceil_div(p->N, SD_TR), (unsigned)ceil_div((size_t)p->d, SD_TA), (unsigned)h);
    sd_rowmat_kernel<<<grid, SD_THREADS, smem, stream>>>(*p);
    CUDA_CHECK_LAUNCH();
}

static SdRowmat rowmat_args(floatX *Y, size_t ldy, const floatX *X, size_t ldx, const floatX *Add,
                            size_t ldadd, const float *M, size_t N, int d, int transpose) {
    SdRowmat p;
    p.Y = reinterpret_cast<uint16_t *>(Y);
    p.ldy = ldy;
    p.X = reinterpret_cast<const uint16_t *>(X);
    p.ldx = ldx;
    p.Add = reinterpret_cast<const uint16_t *>(Add);
    p.ldadd = ldadd;
    p.M = M;
    p.N = N;
    p.d = d;
    p.transpose = transpose;
    return p;
}

void sd_gpu_fold_forward(floatX *qkv, const float *L, size_t N, int h, int d, cudaStream_t stream) {
    const size_t A = (size_t)h * d;
    const SdRowmat p = rowmat_args(qkv + A, 3 * A, qkv, 3 * A, NULL, 0, L, N, d, 0); /* K' = U L^T */
    rowmat(&p, h, stream);
}

void sd_gpu_fold_backward(floatX *duv, float *dL, const floatX *dqkv, const floatX *qkv, const float *L,
                      size_t N, int h, int d, const GpuCtx *ctx) {
    const size_t A = (size_t)h * d;
    /* dU = dQ + dK' L into the U half of duv; dV into the V half */
    const SdRowmat p = rowmat_args(duv, 2 * A, dqkv + A, 3 * A, dqkv, 3 * A, L, N, d, 1);
    rowmat(&p, h, ctx->stream);
    copy_columns(duv + A, 2 * A, dqkv + 2 * A, 3 * A, N, (int)A, ctx->stream);
    /* dL = sum over rows of dK'^T U, per head (operand mapping: sd_dl_gemm_desc) */
    const GemmDesc g = sd_dl_gemm_desc(N, h, d);
    const float one = 1.0f, zero = 0.0f;
    CUBLAS_CHECK(cublasGemmStridedBatchedEx(ctx->blas, g.transa ? CUBLAS_OP_T : CUBLAS_OP_N,
                                            g.transb ? CUBLAS_OP_T : CUBLAS_OP_N, g.m, g.n, g.k, &one,
                                            qkv, CUDA_R_16BF, (int)g.lda, g.strideA, dqkv + A, CUDA_R_16BF,
                                            (int)g.ldb, g.strideB, &zero, dL, CUDA_R_32F, (int)g.ldc,
                                            g.strideC, g.batch, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT));
}

/* ---------------------------------------------------------------------------------------------- */
__global__ void sd_params_backward_kernel(uint16_t *dskew, uint16_t *dtheta, const float *dL,
                                          const uint16_t *theta, int h, int d, int scalar_d, int sign) {
    const size_t total = (size_t)h * d * d;
    for (size_t e = (size_t)blockIdx.x * blockDim.x + threadIdx.x; e < total; e += (size_t)gridDim.x * blockDim.x) {
        const int j = (int)(e % (size_t)d), i = (int)((e / (size_t)d) % (size_t)d), k = (int)(e / ((size_t)d * d));
        sd_params_backward_element(dskew, dtheta, dL, theta, k, i, j, d, scalar_d, sign);
    }
}

void sd_gpu_params_backward(floatX *dskew, floatX *dtheta, const float *dL, const floatX *theta, int h,
                        int d, int scalar_d, int sign, cudaStream_t stream) {
    const size_t total = (size_t)h * d * d;
    sd_params_backward_kernel<<<grid_stride_blocks(total, 256), 256, 0, stream>>>(
        reinterpret_cast<uint16_t *>(dskew), reinterpret_cast<uint16_t *>(dtheta), dL,
        reinterpret_cast<const uint16_t *>(theta), h, d, scalar_d, sign);
    CUDA_CHECK_LAUNCH();
}
