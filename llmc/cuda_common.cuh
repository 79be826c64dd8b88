/*
 * llmc/cuda_common.cuh: what every CUDA file of the trainer shares.
 *
 * Defines:
 *   floatX                 the activation/parameter type, bf16 (the trainer is bf16-only)
 *   cuda_check / CUDA_CHECK, CUBLAS_CHECK   one-line "error: file:line: ..." and exit(1)
 *   GpuCtx                 the explicit context passed to every launcher: the trainer's stream
 *                          (never the legacy default stream), cuBLAS/cuBLASLt handles and
 *                          workspace, SM count and version. No globals (FORMATS.md 18 #13).
 *   gpu_ctx_init / gpu_ctx_free
 *   Pack128<T>             16 bytes of T for vectorized loads/stores (load128 / store128)
 *   ceil_div, warp_sum, warp_max
 */
#ifndef LLMC_CUDA_COMMON_CUH
#define LLMC_CUDA_COMMON_CUH

#include <cublasLt.h>
#include <cublas_v2.h>
#include <cuda_bf16.h>
#include <cuda_runtime.h>
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
} GpuCtx;

/* Selects `device`, creates the stream and handles. Declared here, defined in matmul.cu. */
void gpu_ctx_init(GpuCtx *ctx, int device);
void gpu_ctx_free(GpuCtx *ctx);

static inline size_t ceil_div(size_t a, size_t b) { return (a + b - 1) / b; }

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

__device__ __forceinline__ float warp_sum(float x) {
    for (int o = 16; o > 0; o >>= 1) x += __shfl_xor_sync(0xffffffffu, x, o);
    return x;
}

__device__ __forceinline__ float warp_max(float x) {
    for (int o = 16; o > 0; o >>= 1) x = fmaxf(x, __shfl_xor_sync(0xffffffffu, x, o));
    return x;
}

#endif /* LLMC_CUDA_COMMON_CUH */
