/*
 * llmc/attention/cudnn.h: cuDNN flash attention (causal, bf16) for the layers that attn_select_paths
 * (llmc/attention/paths.h) puts on cuDNN. Implemented in llmc/attention/cudnn.cpp with the cuDNN C++ frontend
 * (header-only, pinned to 1.32.0; doc/gpu.md says why); a build without USE_CUDNN=1 compiles the
 * same file into stubs, so the trainer links either way.
 *
 * Layouts (all bf16 except the fp32 stats), read and written in place through strides, so no
 * permute kernels are needed:
 *   qkv   (B, T, 3, h, d)  Q, K, V of every head
 *   out   (B, T, h, d)     the layer's attention output
 *   stats (B, h, T)        logsumexp of each softmax row (fp32), written by every forward; the
 *                          backward reads it
 *   dqkv  (B, T, 3, h, d)  overwritten
 * One graph per (B, h, T, d, kind) is built on first use and cached in the CudnnAtt object; the
 * model's shapes are prepared when the attention paths are chosen (gpt2gpu_choose_paths), so that
 * no graph is built inside a timed step.
 */
#ifndef LLMC_CUDNN_ATT_H
#define LLMC_CUDNN_ATT_H

#include <cuda_runtime.h>
#include <stddef.h>

typedef struct CudnnAtt CudnnAtt;

int cudnn_att_built(void);     /* 1 in USE_CUDNN=1 builds */
long cudnn_att_version(void);  /* cudnnGetVersion() of the loaded library, 0 if not built */

CudnnAtt *cudnn_att_create(cudaStream_t stream);
void cudnn_att_destroy(CudnnAtt *ca);

/* Builds the forward graph with stats (the one the model runs, in training and evaluation) and,
 * with `backward`, the backward graph of this shape: 1 when they are built (and cached), else 0
 * with one line in err (-attn auto then serves the layer with the own kernels). */
int cudnn_att_try_prepare(CudnnAtt *ca, int B, int h, int T, int d, int backward, char *err, size_t cap);
size_t cudnn_att_workspace_bytes(const CudnnAtt *ca);

void cudnn_att_forward(CudnnAtt *ca, void *out, float *stats, const void *qkv, int B, int h, int T,
                       int d);
void cudnn_att_backward(CudnnAtt *ca, void *dqkv, const void *dout, const void *qkv,
                        const void *out, const float *stats, int B, int h, int T, int d);

#endif /* LLMC_CUDNN_ATT_H */
