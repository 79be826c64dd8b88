/*
 * llmc/cpu/kind_cpu.h: how the CPU model runs a layer kind's two stages (llmc/layer_kind.h).
 *
 * Defines:
 *   CpuStageArgs     everything a stage reads and writes for one layer and one (B, T)
 *   CpuStage         a stage's forward and backward
 *   CpuKind          a kind's two stages
 *   CPU_KINDS        indexed by kind code; declared here, defined by kinds/registry_cpu.h
 *   QKV_PROJECTION_CPU   Q | K | V = x W^T + b
 *   SOFTMAX_MIXER_CPU    causal softmax attention (llmc/cpu/kernels.h)
 *
 * A projection's forward fills qkv (B, T, 3A) = Q | K | V from x; its backward turns dqkv into dx
 * (overwritten) and its parameter gradients (accumulated). A mixer's forward fills atty (B, T, A)
 * and att (B, h, T, T), the mixing weights the analysis tools read; its backward writes dqkv
 * (overwritten) from datty. The stages' buffers are sized by llmc/layer_kind.h (cpu_state,
 * cpu_scratch) and laid out by llmc/cpu/gpt2_cpu.h.
 */
#ifndef LLMC_KIND_CPU_H
#define LLMC_KIND_CPU_H

#include <stddef.h>

#include "../config.h"
#include "../layer_kind.h"
#include "../param_layout.h"
#include "kernels.h"

typedef struct {
    const GPT2Config *c;
    const LayerSpec *ls;
    int B, T;
    const LayerParams *p;  /* the layer's parameters */
    const LayerParams *dp; /* and gradients (backward only) */
    const float *x;        /* (B, T, C) the sub-block's input */
    float *dx;             /* (B, T, C) backward: its gradient, overwritten */
    float *qkv;            /* (B, T, 3A) Q | K | V */
    float *dqkv;           /* (B, T, 3A) backward */
    float *att;            /* (B, h, T, T) mixing weights, row t holds keys 0..t */
    float *atty;           /* (B, T, A) heads concatenated */
    const float *datty;    /* (B, T, A) backward */
    float *proj_state;     /* this layer's: Projection cpu_state floats */
    float *mix_state;      /* this layer's: Mixer cpu_state floats */
    float *proj_scratch;   /* backward scratch shared by all layers: Projection cpu_scratch */
    float *wt_scratch;     /* matmul_forward's transposed weights */
    float *row_scratch;    /* T floats per OpenMP thread (the mixers' backward) */
} CpuStageArgs;

typedef struct {
    void (*forward)(const CpuStageArgs *a);
    void (*backward)(const CpuStageArgs *a);
} CpuStage;

typedef struct {
    const char *name; /* the registry's (LAYER_KINDS) name of this row */
    const CpuStage *proj, *mix;
} CpuKind;

extern const CpuKind CPU_KINDS[];

/* ----------------------------------------------------------------------------------------------
 * The framework's stages. */
static inline void qkv_projection_forward(const CpuStageArgs *a) {
    const int N = a->B * a->T, C = a->c->channels, A3 = 3 * attn_width(a->ls);
    matmul_forward(a->qkv, a->x, a->p->qkvw, a->p->qkvb, N, C, A3, A3, a->wt_scratch);
}

static inline void qkv_projection_backward(const CpuStageArgs *a) {
    const int N = a->B * a->T, C = a->c->channels, A3 = 3 * attn_width(a->ls);
    matmul_backward(a->dx, a->dp->qkvw, a->dp->qkvb, a->dqkv, a->x, a->p->qkvw, N, C, A3, A3);
}

static inline void softmax_mixer_forward(const CpuStageArgs *a) {
    attention_forward(a->atty, a->att, a->qkv, a->B, a->T, a->ls->n_head, a->ls->head_size);
}

static inline void softmax_mixer_backward(const CpuStageArgs *a) {
    attention_backward(a->dqkv, a->datty, a->qkv, a->att, a->B, a->T, a->ls->n_head, a->ls->head_size,
                       a->row_scratch);
}

static const CpuStage QKV_PROJECTION_CPU = {qkv_projection_forward, qkv_projection_backward};
static const CpuStage SOFTMAX_MIXER_CPU = {softmax_mixer_forward, softmax_mixer_backward};

#endif /* LLMC_KIND_CPU_H */
