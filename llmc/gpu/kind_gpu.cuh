/*
 * llmc/gpu/kind_gpu.cuh: how the GPU model runs a layer kind's two stages (llmc/layer_kind.h),
 * the GPU twin of llmc/cpu/kind_cpu.h.
 *
 * Defines:
 *   GpuStageArgs      everything a stage reads and writes for one layer and one (B, T), bf16
 *                     unless marked fp32
 *   GpuStage          a stage's forward, backward and whether it can run a layer here
 *   GpuKind, GPU_KINDS   a kind's two stages, indexed by kind code; defined by kinds/registry_gpu.cu
 *   QKV_PROJECTION_GPU   Q | K | V = x W^T + b on cuBLASLt (llmc/gpu/gpt2_gpu.cu)
 *   SOFTMAX_MIXER_GPU    causal softmax attention on the own kernels (llmc/attention/own.cu), which
 *                        run any head size: the softmax mixer of the kinds' table
 *   SOFTMAX_CUDNN_GPU, SOFTMAX_FLASH_GPU, SOFTMAX_MMA_GPU   the same attention on the other paths
 *                        of llmc/attention/ (doc/gpu.md says why each exists)
 *   softmax_stage        the stage of a path; the model takes each softmax layer's mixer from the
 *                        path llmc/attention/paths.h chose for it (-attn), once, at start-up
 * A projection's forward fills qkv from x and its backward turns dqkv into dx (overwritten) and
 * its parameter gradients (accumulated); a mixer's forward fills atty, its backward dqkv from
 * datty. Buffers are sized by the stages' gpu_* entries (llmc/gpu/act_plan.h lays them out).
 */
#ifndef LLMC_KIND_GPU_CUH
#define LLMC_KIND_GPU_CUH

#include <stddef.h>

#include "../attention/cudnn.h"
#include "../attention/paths.h"
#include "../config.h"
#include "../cuda/cuda_common.cuh"
#include "../param_layout.h"

typedef struct {
    /* the layer and the batch */
    const GPT2Config *c;
    const LayerSpec *ls;
    int B, T;
    size_t N;                      /* B T */
    /* its weights and gradients */
    floatX *w[LLMC_MAX_PARAM_SLOTS];    /* the layer's block of each parameter slot */
    floatX *g[LLMC_MAX_PARAM_SLOTS];    /* and of its gradient (backward only) */
    /* its activations */
    const floatX *x;               /* (N, C) the sub-block's input */
    floatX *qkv;                   /* (N, 3A) Q | K | V */
    floatX *atty;                  /* (N, A) */
    float *proj_state;             /* fp32, this layer's (gpu_state_f32) */
    float *stats;                  /* fp32 (B, h, T) row log-sum-exps, this layer's (cuDNN, flash, mma) */
    floatX *att;                   /* (B, h, T, T) attention weights, this layer's (own) */
    /* the backward's gradients of the activations */
    floatX *dx;                    /* (N, C) overwritten */
    floatX *dqkv;                  /* (N, 3A) */
    const floatX *datty;           /* (N, A) */
    /* scratch shared by all layers (llmc/gpu/act_plan.h) */
    floatX *proj_scratch;          /* gpu_scratch_bf16 */
    float *proj_scratch_f32;       /* gpu_scratch_f32 */
    float *mix_scratch;            /* fp32, Mixer gpu_scratch_f32 */
    floatX *att_scratch;           /* own */
    floatX *datt;                  /* backward (own) */
    float *flash_d;                /* fp32, backward (flash, mma) */
    float *colsum_scratch;         /* matmul_backward's bias-gradient partial sums */
    /* the library handles */
    CudnnAtt *cudnn;               /* the cuDNN graphs (cuDNN) */
    const GpuCtx *ctx;
} GpuStageArgs;

typedef struct GpuStage {
    void (*forward)(const GpuStageArgs *a);
    void (*backward)(const GpuStageArgs *a);
    /* 1 when the stage's kernels run layer ls on this GPU, else 0 with the reason; NULL: always */
    int (*supported)(const LayerSpec *ls, const GpuCtx *ctx, char *why, size_t cap);
} GpuStage;

typedef struct {
    const char *name; /* the registry's (LAYER_KINDS) name of this row */
    const GpuStage *proj, *mix;
} GpuKind;

extern const GpuKind GPU_KINDS[];
extern const GpuStage QKV_PROJECTION_GPU;
extern const GpuStage SOFTMAX_MIXER_GPU;
extern const GpuStage SOFTMAX_CUDNN_GPU, SOFTMAX_FLASH_GPU, SOFTMAX_MMA_GPU;

/* The mixer that runs a layer on path p: a softmax path's stage, or for ATT_PATH_MIXER the kind's
 * own mixer (kind_mix). */
static inline const GpuStage *softmax_stage(AttPath p, const GpuStage *kind_mix) {
    switch (p) {
    case ATT_PATH_CUDNN: return &SOFTMAX_CUDNN_GPU;
    case ATT_PATH_FLASH: return &SOFTMAX_FLASH_GPU;
    case ATT_PATH_MMA: return &SOFTMAX_MMA_GPU;
    case ATT_PATH_OWN: return &SOFTMAX_MIXER_GPU;
    default: return kind_mix;
    }
}

#endif /* LLMC_KIND_GPU_CUH */
