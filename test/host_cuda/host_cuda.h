/*
 * test/host_cuda/host_cuda.h: what test/host_cuda's files share (README.md there).
 *   host_cuda_need_device   dies with one line unless [p, p + bytes) lies inside one cudaMalloc
 *                           allocation (defined in cudart_host.cpp, which records them)
 */
#ifndef LLMC_TEST_HOST_CUDA_H
#define LLMC_TEST_HOST_CUDA_H

#include <stddef.h>

void host_cuda_need_device(const void *p, size_t bytes, const char *what);

#endif /* LLMC_TEST_HOST_CUDA_H */
