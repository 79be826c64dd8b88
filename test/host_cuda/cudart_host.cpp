/*
 * test/host_cuda/cudart_host.cpp: the part of the CUDA runtime API the trainer's host code calls,
 * implemented on host memory, so that the GPU trainer's host side (llmc/gpu/gpt2_gpu.cu,
 * train_gpt2.cu, test/test_gpt2_gpu.cu, eval_gpt2.cu) links and runs on a machine without a GPU.
 * The kernels' side is test/host_cuda/kernels_host.cpp; why both exist: test/host_cuda/README.md.
 *
 * "Device" memory is host memory here: cudaMalloc fills it with 0xff bytes (NaN in bf16 and fp32),
 * so a buffer the model reads before anything wrote it shows up in the results, as an
 * uninitialized device buffer would on a GPU. Streams and events are synchronous: every call
 * has finished when it returns. Declarations come from the toolkit's cuda_runtime_api.h, so a
 * signature that drifts from the real API fails to compile instead of failing at run time.
 *
 * Since host and "device" memory are the same here, a copy in the wrong direction or past the end
 * of a buffer would go unnoticed; so every cudaMalloc is recorded, and cudaMemcpy(Async) and
 * cudaMemsetAsync check that each side is device or host memory as their kind says and lies
 * inside one allocation; cudaFree of anything else is an error. The launchers check their buffers
 * the same way (host_cuda_need_device, test/host_cuda/host_cuda.h).
 */
#include <cuda_runtime_api.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <map>

#include "host_cuda.h"

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

static std::map<uintptr_t, size_t> &device_allocs(void) { /* start -> bytes */
    static std::map<uintptr_t, size_t> m;
    return m;
}

static void fail(const char *what, const void *p, size_t bytes, const char *why) {
    fflush(stdout);
    fprintf(stderr, "error: test/host_cuda: %s: %zu bytes at %p %s\n", what, bytes, p, why);
    exit(1);
}

/* 1 when [p, p + bytes) lies in one cudaMalloc allocation, 0 when p is in none; past the end of
 * the allocation that holds p is an error. */
static int in_device(const void *p, size_t bytes, const char *what) {
    const std::map<uintptr_t, size_t> &m = device_allocs();
    const uintptr_t a = (uintptr_t)p;
    std::map<uintptr_t, size_t>::const_iterator it = m.upper_bound(a);
    if (it == m.begin()) return 0;
    --it;
    if (a >= it->first + it->second) return 0;
    if (a + bytes > it->first + it->second) fail(what, p, bytes, "run past the end of their device allocation");
    return 1;
}

void host_cuda_need_device(const void *p, size_t bytes, const char *what) {
    if (bytes > 0 && !in_device(p, bytes, what)) fail(what, p, bytes, "are not device memory");
}

static void check_copy(void *dst, const void *src, size_t count, enum cudaMemcpyKind kind) {
    if (count == 0 || kind == cudaMemcpyDefault) return;
    const int dst_dev = in_device(dst, count, "cudaMemcpy destination");
    const int src_dev = in_device(src, count, "cudaMemcpy source");
    const int want_dst = kind == cudaMemcpyHostToDevice || kind == cudaMemcpyDeviceToDevice;
    const int want_src = kind == cudaMemcpyDeviceToHost || kind == cudaMemcpyDeviceToDevice;
    if (dst_dev != want_dst) fail("cudaMemcpy destination", dst, count, want_dst ? "are not device memory" : "are device memory, the kind says host");
    if (src_dev != want_src) fail("cudaMemcpy source", src, count, want_src ? "are not device memory" : "are device memory, the kind says host");
}

extern "C" {

cudaError_t cudaMalloc(void **devPtr, size_t size) {
    const cudaError_t e = alloc_poisoned(devPtr, size);
    if (e == cudaSuccess) device_allocs()[(uintptr_t)*devPtr] = size;
    return e;
}
cudaError_t cudaMallocHost(void **ptr, size_t size) { return alloc_poisoned(ptr, size); }
cudaError_t cudaFree(void *devPtr) {
    if (devPtr == NULL) return cudaSuccess;
    if (device_allocs().erase((uintptr_t)devPtr) != 1) fail("cudaFree", devPtr, 0, "were not returned by cudaMalloc");
    free(devPtr);
    return cudaSuccess;
}
cudaError_t cudaFreeHost(void *ptr) { free(ptr); return cudaSuccess; }

cudaError_t cudaMemcpy(void *dst, const void *src, size_t count, enum cudaMemcpyKind kind) {
    check_copy(dst, src, count, kind);
    if (count) memmove(dst, src, count);
    return cudaSuccess;
}
cudaError_t cudaMemcpyAsync(void *dst, const void *src, size_t count, enum cudaMemcpyKind kind, cudaStream_t) {
    return cudaMemcpy(dst, src, count, kind);
}
cudaError_t cudaMemsetAsync(void *devPtr, int value, size_t count, cudaStream_t) {
    host_cuda_need_device(devPtr, count, "cudaMemsetAsync");
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
