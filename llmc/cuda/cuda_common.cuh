/*
 * llmc/cuda/cuda_common.cuh: what every CUDA file of the trainer shares.
 *
 * Defines:
 *   floatX                 the activation/parameter type, bf16 (the trainer is bf16-only)
 *   cuda_check / CUDA_CHECK, CUBLAS_CHECK   one-line "error: file:line: ..." and exit(1)
 *   GpuCtx                 the explicit context passed to every launcher: the trainer's stream
 *                          (never the legacy default stream), cuBLAS/cuBLASLt handles and
 *                          workspace, SM count and version, and what launchers compute once
 *                          (cuBLASLt algorithms, the scan's shared-memory opt-in). No globals
 *                          (doc/formats.md "Upstream weak spots" #13).
 *   gpu_ctx_init / gpu_ctx_free
 *   Pack128<T>             16 bytes of T for vectorized loads/stores (load128 / store128)
 *   bf / to_bf             bf16 -> fp32 and fp32 -> bf16 (round to nearest even)
 *   ceil_div, grid_stride_blocks   block counts of plain and grid-stride launches
 *   warp_sum, warp_max
 *   SoftmaxAcc             the online softmax's running (max, sum of exp): softmax_acc_push one
 *                          value, softmax_acc_merge two partial ones, warp_softmax_acc a warp's
 */
#ifndef LLMC_CUDA_COMMON_CUH
#define LLMC_CUDA_COMMON_CUH

#include <cublasLt.h>
#include <cublas_v2.h>
#include <cuda_bf16.h>
#include <cuda_runtime.h>
#include <math.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

typedef __nv_bfloat16 floatX;

static inline void cuda_check(cudaError_t err, const char *file, int line) {
    if (err != cudaSuccess) {
        fflush(stdout);
        fprintf(stderr, "error: %s:%d: CUDA: %s (%s)\n", file, line, cudaGetErrorString(err),
                cudaGetErrorName(err));
        exit(EXIT_FAILURE);
    }
}
#define CUDA_CHECK(x) cuda_check((x), __FILE__, __LINE__)

static inline void cublas_check(cublasStatus_t st, const char *file, int line) {
    if (st != CUBLAS_STATUS_SUCCESS) {
        fflush(stdout);
        fprintf(stderr, "error: %s:%d: cuBLAS status %d (%s)\n", file, line, (int)st,
                cublasGetStatusString(st));
        exit(EXIT_FAILURE);
    }
}
#define CUBLAS_CHECK(x) cublas_check((x), __FILE__, __LINE__)

/* A launch error is reported at the launch site, not at the next synchronizing call. */
#define CUDA_CHECK_LAUNCH() CUDA_CHECK(cudaGetLastError())

typedef struct {
    int device;
    int sm;           /* 10*major + minor */
    int sm_count;
    size_t smem_optin;   /* shared memory a block may opt in to (the linear-attention scan) */
    char name[256];
    size_t total_mem;
    cudaStream_t stream; /* every kernel, copy, cuBLAS and cuDNN call of the trainer runs here */
    cublasHandle_t blas;  /* strided-batched GEMMs of the own attention path */
    cublasLtHandle_t lt;  /* every other matmul */
    void *lt_workspace;
    size_t lt_workspace_size;
    /* Host-side memos that launchers fill in through a const GpuCtx * (hence mutable; they only
     * save repeated work): cuBLASLt's algorithm per matmul problem (matmul.cu, created on the
     * first matmul, freed by gpu_ctx_free), and the largest dynamic shared memory the three flash
     * attention kernels have been allowed so far (llmc/attention/flash.cu). */
    mutable struct LtAlgoCache *lt_algos;
    mutable size_t flash_smem_set[3];
} GpuCtx;

/* Selects `device`, creates the stream and handles. Declared here, defined in matmul.cu. */
void gpu_ctx_init(GpuCtx *ctx, int device);
void gpu_ctx_free(GpuCtx *ctx);

/* Lets `kernel` launch with `bytes` of dynamic shared memory (above the 48 KiB default): the limit
 * is raised once to the largest size asked so far, which *memo (a GpuCtx field) remembers; a
 * host-side attribute, not stream work, so a smaller launch needs nothing. Defined in matmul.cu. */
void gpu_allow_smem(const void *kernel, size_t bytes, size_t *memo);

static inline size_t ceil_div(size_t a, size_t b) { return (a + b - 1) / b; }

/* Blocks of a grid-stride launch over n elements: one element per thread up to 2^20 blocks, which
 * fills any GPU; beyond that each thread loops (the results do not depend on the grid size). */
static inline unsigned grid_stride_blocks(size_t n, unsigned threads) {
    const size_t blocks = ceil_div(n, threads), cap = (size_t)1 << 20;
    return (unsigned)(blocks < cap ? blocks : cap);
}

__device__ __forceinline__ float bf(floatX x) { return __bfloat162float(x); }
__device__ __forceinline__ floatX to_bf(float x) { return __float2bfloat16_rn(x); }

/* ----------------------------------------------------------------------------------------------
 * 16-byte packs: 8 bf16 or 4 fp32 per load, the unit of every memory-bound kernel. */
template <class T>
struct alignas(16) Pack128 {
    static constexpr int size = (int)(16 / sizeof(T));
    T v[16 / sizeof(T)];
};

template <class T>
__device__ __forceinline__ Pack128<T> load128(const T *p) {
    Pack128<T> r;
    *reinterpret_cast<int4 *>(&r) = *reinterpret_cast<const int4 *>(p);
    return r;
}

template <class T>
__device__ __forceinline__ void store128(T *p, const Pack128<T> &x) {
    *reinterpret_cast<int4 *>(p) = *reinterpret_cast<const int4 *>(&x);
}

#ifdef __CUDACC__ /* warp collectives: device code only (test/host_cuda compiles the host side alone) */
__device__ __forceinline__ float warp_sum(float x) {
    for (int o = 16; o > 0; o >>= 1) x += __shfl_xor_sync(0xffffffffu, x, o);
    return x;
}

__device__ __forceinline__ float warp_max(float x) {
    for (int o = 16; o > 0; o >>= 1) x = fmaxf(x, __shfl_xor_sync(0xffffffffu, x, o));
    return x;
}

/* ----------------------------------------------------------------------------------------------
 * Online softmax (Milakov & Gimelshein 2018): a running maximum m and the sum s of exp(x - m) over
 * the values seen, so a softmax row needs one pass for its normalizer. The merge rule is
 * commutative, so a butterfly leaves the same (m, s) in every lane; an empty accumulator
 * (m = -inf) merged with another empty one stays empty instead of producing NaN. */
struct SoftmaxAcc {
    float m, s;
};

__device__ __forceinline__ SoftmaxAcc softmax_acc_push(SoftmaxAcc a, float x) {
    if (x > a.m) {
        a.s = a.s * expf(a.m - x) + 1.0f;
        a.m = x;
    } else {
        a.s += expf(x - a.m);
    }
    return a;
}

__device__ __forceinline__ SoftmaxAcc softmax_acc_merge(SoftmaxAcc a, SoftmaxAcc b) {
    const float m = fmaxf(a.m, b.m);
    if (m == -INFINITY) return a;
    SoftmaxAcc r;
    r.m = m;
    r.s = a.s * expf(a.m - m) + b.s * expf(b.m - m);
    return r;
}

__device__ __forceinline__ SoftmaxAcc warp_softmax_acc(SoftmaxAcc a) {
    for (int o = 16; o > 0; o >>= 1) {
        SoftmaxAcc b;
        b.m = __shfl_xor_sync(0xffffffffu, a.m, o);
        b.s = __shfl_xor_sync(0xffffffffu, a.s, o);
        a = softmax_acc_merge(a, b);
    }
    return a;
}
#endif /* __CUDACC__ */

#endif /* LLMC_CUDA_COMMON_CUH */
