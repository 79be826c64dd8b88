/*
 * sd_attention/stages_gpu.cu: the S-D projection and the linear mixer as GPU stages
 * (llmc/gpu/kind_gpu.cuh; the CPU references are sd_cpu.h and linear_cpu.h). Host code only: it
 * calls the launchers of sd_fold.cu, linear_scan.cu and llmc/cuda/matmul.cu, so the CPU build of
 * the GPU model's host side (test/host_cuda) compiles it unchanged.
 */
#include "../llmc/cuda/matmul.cuh"
#include "linear_scan.cuh"
#include "sd_fold.cuh"
#include "stages_gpu.cuh"

/* ----------------------------------------------------------------------------------------------
 * S-D projection (doc/methods.md "Formulation A", "Realization with the standard attention kernels"). Forward: uv = x W^T + b (2A wide: U, V) into the bf16
 * scratch, U and V scattered into the Q and V columns of qkv, the generators L (fp32, this layer's
 * state) built from the packed S and theta, and K' = U L^T written into the K columns. */
static void sd_projection_forward(const GpuStageArgs *a) {
    const GPT2Config *c = a->c;
    const int C = c->channels, A = attn_width(a->ls), h = a->ls->n_head, d = a->ls->head_size;
    cudaStream_t s = a->ctx->stream;
    matmul_forward(a->proj_scratch, a->x, a->w[P_QKVW], a->w[P_QKVB], a->N, C, 2 * A, NULL, a->ctx);
    sd_gpu_scatter_uv(a->qkv, a->proj_scratch, a->N, A, s);
    sd_gpu_build_generator(a->proj_state, a->w[P_SDSKEW], a->w[P_SDTHETA], h, d, sd_opt_scalar_d(c), sd_opt_sign(c), s);
    sd_gpu_fold_forward(a->qkv, a->proj_state, a->N, h, d, s);
}

/* Backward: dQ, dK', dV -> d(U | V) (bf16 scratch) and dL (fp32 scratch), dL -> the packed S and
 * theta gradients, then one GEMM for both halves: dx = dU W_U + dV W_V, dW = d(U | V)^T x. */
static void sd_projection_backward(const GpuStageArgs *a) {
    const GPT2Config *c = a->c;
    const int C = c->channels, A = attn_width(a->ls), h = a->ls->n_head, d = a->ls->head_size;
    sd_gpu_fold_backward(a->proj_scratch, a->proj_scratch_f32, a->dqkv, a->qkv, a->proj_state, a->N, h, d, a->ctx);
    sd_gpu_params_backward(a->g[P_SDSKEW], a->g[P_SDTHETA], a->proj_scratch_f32, a->w[P_SDTHETA], h, d,
                           sd_opt_scalar_d(c), sd_opt_sign(c), a->ctx->stream);
    matmul_backward(a->dx, a->g[P_QKVW], a->g[P_QKVB], a->colsum_scratch, a->proj_scratch, a->x, a->w[P_QKVW],
                    a->N, C, 2 * A, NULL, a->ctx);
}

const GpuStage SD_PROJECTION_GPU = {sd_projection_forward, sd_projection_backward, NULL};

/* ----------------------------------------------------------------------------------------------
 * The ELU+1 linear mixer (doc/methods.md "ELU+1 causal linear attention"): the chunked causal scan, fp32 scratch. */
static void linear_mixer_forward(const GpuStageArgs *a) {
    linear_attention_forward(a->atty, a->mix_scratch, a->qkv, a->B, a->T, a->ls->n_head, a->ls->head_size,
                             lin_opt_prescale(a->c), a->ctx);
}

static void linear_mixer_backward(const GpuStageArgs *a) {
    linear_attention_backward(a->dqkv, a->mix_scratch, a->datty, a->qkv, a->B, a->T, a->ls->n_head,
                              a->ls->head_size, lin_opt_prescale(a->c), a->ctx);
}

static int linear_mixer_supported(const LayerSpec *ls, const GpuCtx *ctx, char *why, size_t cap) {
    return linear_attention_supported(ls->head_size, ctx, why, cap);
}

const GpuStage LINEAR_MIXER_GPU = {linear_mixer_forward, linear_mixer_backward, linear_mixer_supported};
