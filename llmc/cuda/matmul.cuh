/*
 * llmc/cuda/matmul.cuh: the model's linear layers on cuBLASLt (llmc/cuda/matmul.cu).
 *
 * Row-major shapes, as nn.Linear: W is (OC, IC), y (N, OC) = x (N, IC) W^T + b.
 *   matmul_forward   bias fused in the epilogue; with pre_gelu != NULL (-ge >= 1) the epilogue
 *                    also applies GELU: out = gelu(x W^T + b) and pre_gelu = x W^T + b; a bias
 *                    that is not 16-byte aligned is added by a separate kernel instead (matmul.cu)
 *   matmul_backward  dinp = dout W (overwritten), dW += dout^T x (accumulated: gradient
 *                    accumulation), db += column sums of dout (own deterministic kernel, never
 *                    cuBLASLt's overwriting BGRAD epilogue; doc/formats.md "Upstream weak spots" #1). With
 *                    dgelu_aux != NULL (-ge 2) the dinp epilogue multiplies by gelu'(aux).
 *   gpu_ctx_init / gpu_ctx_free (declared in cuda_common.cuh) live in matmul.cu too.
 */
#ifndef LLMC_MATMUL_CUH
#define LLMC_MATMUL_CUH

#include "cuda_common.cuh"

void matmul_forward(floatX *out, const floatX *inp, const floatX *W, const floatX *bias, size_t N,
                    int IC, int OC, floatX *pre_gelu, const GpuCtx *ctx);

/* dinp may be NULL (no input gradient); dbias may be NULL; scratch: colsum_scratch_floats(N, OC). */
void matmul_backward(floatX *dinp, floatX *dW, floatX *dbias, float *scratch, const floatX *dout,
                     const floatX *inp, const floatX *W, size_t N, int IC, int OC,
                     const floatX *dgelu_aux, const GpuCtx *ctx);

#endif /* LLMC_MATMUL_CUH */
