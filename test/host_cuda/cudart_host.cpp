/*
 * test/host_cuda/cudart_host.cpp: the part of the CUDA runtime API the trainer's host code calls,
 * implemented on host memory, so that the GPU trainer's host side (llmc/gpt2_gpu.cu,
 * train_gpt2.cu, test/test_gpt2.cu, eval_gpt2.cu) links and runs on a machine without a GPU.
 * The kernels' side is test/host_cuda/kernels_host.cpp; why both exist: test/host_cuda/README.md.
 *
 * "Device" memory is host memory here: cudaMalloc fills it with 0xff bytes (NaN in bf16 and fp32),
 * so a buffer the model reads before anything wrote it shows up in the results, as an
 * uninitialized device buffer would on a GPU. Streams and events are synchronous: every call
 * has finished when it returns. Declarations come from the toolkit's cuda_runtime_api.h, so a
 * signature that drifts from the real API fails to compile instead of failing at run time.
 */
#include <cuda_runtime_api.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static double now_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1e3 + ts.tv_nsec * 1e-6;
}

static cudaError_t alloc_poisoned(void **p, size_t size) {
    *p = malloc(size ? size : 1);
    if (*p == NULL) return cudaErrorMemoryAllocation;
    memset(*p, 0xff, size);
    return cudaSuccess;
}

extern "C" {

cudaError_t cudaMalloc(void **devPtr, size_t size) { return alloc_poisoned(devPtr, size); }
cudaError_t cudaMallocHost(void **ptr, size_t size) { return alloc_poisoned(ptr, size); }
cudaError_t cudaFree(void *devPtr) { free(devPtr); return cudaSuccess; }
cudaError_t cudaFreeHost(void *ptr) { free(ptr); return cudaSuccess; }

cudaError_t cudaMemcpy(void *dst, const void *src, size_t count, enum cudaMemcpyKind) {
    if (count) memmove(dst, src, count);
    return cudaSuccess;
}
cudaError_t cudaMemcpyAsync(void *dst, const void *src, size_t count, enum cudaMemcpyKind kind, cudaStream_t) {
    return cudaMemcpy(dst, src, count, kind);
}
cudaError_t cudaMemsetAsync(void *devPtr, int value, size_t count, cudaStream_t) {
    if (count) memset(devPtr, value, count);
    return cudaSuccess;
}

cudaError_t cudaStreamSynchronize(cudaStream_t) { return cudaSuccess; }
cudaError_t cudaStreamCreateWithFlags(cudaStream_t *stream, unsigned int) {
    *stream = NULL; /* every call is synchronous: one implicit stream */
    return cudaSuccess;
}
cudaError_t cudaStreamDestroy(cudaStream_t) { return cudaSuccess; }
cudaError_t cudaStreamWaitEvent(cudaStream_t, cudaEvent_t, unsigned int) { return cudaSuccess; }
cudaError_t cudaGetLastError(void) { return cudaSuccess; }

/* an event is the time it was recorded (ms, heap-allocated) */
cudaError_t cudaEventCreate(cudaEvent_t *event) {
    double *t = (double *)calloc(1, sizeof(double));
    if (t == NULL) return cudaErrorMemoryAllocation;
    *event = (cudaEvent_t)t;
    return cudaSuccess;
}
cudaError_t cudaEventCreateWithFlags(cudaEvent_t *event, unsigned int) { return cudaEventCreate(event); }
cudaError_t cudaEventDestroy(cudaEvent_t event) { free((void *)event); return cudaSuccess; }
cudaError_t cudaEventRecord(cudaEvent_t event, cudaStream_t) {
    *(double *)event = now_ms();
    return cudaSuccess;
}
cudaError_t cudaEventSynchronize(cudaEvent_t) { return cudaSuccess; }
cudaError_t cudaEventElapsedTime(float *ms, cudaEvent_t start, cudaEvent_t end) {
    *ms = (float)(*(double *)end - *(double *)start);
    return cudaSuccess;
}

cudaError_t cudaGetDeviceCount(int *count) { *count = 1; return cudaSuccess; }
cudaError_t cudaMemGetInfo(size_t *free_bytes, size_t *total) {
    *total = (size_t)64 << 30;
    *free_bytes = *total;
    return cudaSuccess;
}
cudaError_t cudaRuntimeGetVersion(int *v) { *v = CUDART_VERSION; return cudaSuccess; }
cudaError_t cudaDriverGetVersion(int *v) { *v = 0; return cudaSuccess; } /* no driver */
const char *cudaGetErrorString(cudaError_t e) { return e == cudaSuccess ? "no error" : "host emulation error"; }
const char *cudaGetErrorName(cudaError_t e) { return e == cudaSuccess ? "cudaSuccess" : "cudaErrorHostEmulation"; }

} /* extern "C" */
