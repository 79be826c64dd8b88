/*
 * llmc/gpu/act_plan.h: every activation and scratch buffer of the GPU model, sized from the layer
 * table, in plain C so that it is unit-tested on the CPU (test/test_cuda_host.c).
 *
 * Defines: ActTensor, ACT_NAMES, ActPlan, act_plan_init, act_plan_bytes, act_round_up
 *   per-layer attention state sums h_l over layers, scratch takes the max; each kind's stages
 *   size their own buffers (llmc/layer_kind.h); no LayerNorm buffers with -ln 0; per-layer prefix
 *   offsets; every size in 64-bit (B*h*T*T and 3*B*T*C pass 2^31 for realistic runs,
 *   doc/formats.md "Upstream weak spots").
 */
#ifndef LLMC_ACT_PLAN_H
#define LLMC_ACT_PLAN_H

#include <stddef.h>
#include <string.h>

#include "../attention/paths.h" /* AttPath */
#include "../config.h"
#include "../layer_kind.h"
#include "../utils.h"

/* ----------------------------------------------------------------------------------------------
 * Activation plan. Two arenas: bf16 (activations, scratch) and fp32 (LayerNorm statistics, cuDNN
 * softmax statistics, per-token losses). Every tensor, and every layer's block inside a per-layer
 * tensor, starts on a multiple of ACT_ALIGN elements (256 bytes for bf16), which keeps 16-byte
 * vector loads and cuBLASLt's alignment preferences valid whatever the head sizes are. */
#define ACT_ALIGN 128

static inline size_t act_round_up(size_t n) { return (n + ACT_ALIGN - 1) / ACT_ALIGN * ACT_ALIGN; }

typedef enum {
    /* bf16 arena */
    ACT_ENCODED = 0, /* (B, T, C) */
    ACT_LN1,         /* L or 1 (recompute >= 2) x (B, T, C) */
    ACT_QKV,         /* per layer (B, T, 3 A_l): Q | K | V, head k at columns k d_l */
    ACT_ATTY,        /* per layer (B, T, A_l) attention output */
    ACT_ATT,         /* per own-path layer (B, h_l, T, T) softmax probabilities */
    ACT_RESIDUAL2,   /* L x (B, T, C) */
    ACT_LN2,         /* L or 1 x (B, T, C) */
    ACT_FCH,         /* L x (B, T, 4C) pre-GELU */
    ACT_FCH_GELU,    /* L or 1 (recompute >= 1) x (B, T, 4C) */
    ACT_RESIDUAL3,   /* L x (B, T, C) */
    ACT_LNF,         /* (B, T, C) */
    ACT_LOGITS,      /* (B, T, Vp): logits, then dlogits in place */
    ACT_OUT,         /* (B, T, C) forward scratch: projection outputs before the residual add */
    ACT_DRESIDUAL,   /* (B, T, C) gradient of the residual stream */
    ACT_DBIG,        /* (B, T, max(4C, 3 A_max)): d fch_gelu / d fch, d qkv */
    ACT_DSMALL,      /* (B, T, max(C, A_max)): d ln, d atty */
    ACT_ATT_SCRATCH, /* own path: 7 x (B, T, A_own_max): q k v, dO, dq dk dv in (B, h, T, d) */
    ACT_DATT,        /* own path: max over own layers of (B, h_l, T, T): d att, d preatt */
    ACT_PROJ_SCRATCH, /* the projections' bf16 scratch, max over layers (S-D: U | V, then d(U | V)) */
    /* fp32 arena */
    ACT_LN1_MEAN,    /* L x (B, T) */
    ACT_LN1_RSTD,
    ACT_LN2_MEAN,
    ACT_LN2_RSTD,
    ACT_LNF_MEAN,    /* (B, T) */
    ACT_LNF_RSTD,
    ACT_STATS,       /* per cuDNN- or flash-path layer (B, h_l, T): logsumexp of each softmax row */
    ACT_PROJ_STATE,  /* per layer, the projection's fp32 state (S-D: the generators L, h_l d_l^2) */
    ACT_PROJ_SCRATCH_F32, /* the projections' fp32 scratch, max over layers (S-D: dL) */
    ACT_MIX_SCRATCH, /* the kinds' own mixers' fp32 scratch, max over layers (linear: the scan's) */
    ACT_FLASH_D,     /* flash and mma layers: (B, max h_l, T): D = dO . O of the layer in the backward */
    /* last, always: the loss accumulator is addressed through the allocation plan while smaller
     * evaluation shapes lay out their own tensors, which then all end before it */
    ACT_LOSSES,      /* (B, T) per-token losses, accumulated over micro-steps */
    NUM_ACTS
} ActTensor;

#define ACT_FIRST_F32 ACT_LN1_MEAN

static const char *const ACT_NAMES[NUM_ACTS] = {
    "encoded", "ln1", "qkv", "atty", "att", "residual2", "ln2", "fch", "fch_gelu", "residual3",
    "lnf", "logits", "out", "dresidual", "dbig", "dsmall", "att_scratch", "datt", "proj_scratch",
    "ln1_mean", "ln1_rstd", "ln2_mean", "ln2_rstd", "lnf_mean", "lnf_rstd", "stats", "proj_state",
    "proj_scratch_f32", "mix_scratch", "flash_d", "losses"};

typedef struct {
    int B, T, recompute;
    size_t n[NUM_ACTS];   /* elements of each tensor (0: not needed) */
    size_t off[NUM_ACTS]; /* element offset in its arena */
    /* element offset of layer l's block inside the per-layer tensors; [L] = end */
    size_t qkv_off[LLMC_MAX_LAYERS + 1];
    size_t atty_off[LLMC_MAX_LAYERS + 1];
    size_t att_off[LLMC_MAX_LAYERS + 1];   /* own-path layers only (others: empty block) */
    size_t stats_off[LLMC_MAX_LAYERS + 1]; /* cuDNN- and flash-path layers only */
    size_t proj_state_off[LLMC_MAX_LAYERS + 1]; /* layers whose projection keeps a state */
    int A_max, A_own_max;
    size_t bf16_total, f32_total; /* arena sizes in elements */
} ActPlan;

static inline int act_is_f32(int t) { return t >= ACT_FIRST_F32; }

/* The per-layer tensors and the scratch that depends on the layers: one pass over the table,
 * each layer's block offsets and the sizes of the attention and stage buffers. */
static inline void act_plan_layers_(ActPlan *p, const GPT2Config *c, const AttPath *path) {
    const size_t B = (size_t)p->B, T = (size_t)p->T, N = B * T, L = (size_t)c->num_layers;
    size_t qkv = 0, atty = 0, att = 0, stats = 0, datt = 0, flash_d = 0;
    size_t proj_state = 0, proj_scratch = 0, proj_scratch_f32 = 0, mix_scratch = 0;
    for (int l = 0; l < c->num_layers; l++) {
        const LayerSpec *ls = &c->layer[l];
        const LayerKind *k = layer_kind_of(ls->kind);
        const size_t h = (size_t)ls->n_head;
        const int A = attn_width(ls);
        p->A_max = LLMC_MAX(p->A_max, A);
        p->qkv_off[l] = qkv;
        p->atty_off[l] = atty;
        p->att_off[l] = att;
        p->stats_off[l] = stats;
        p->proj_state_off[l] = proj_state;
        qkv += act_round_up(N * 3 * (size_t)A); /* S-D layers too: U | U L^T | V */
        atty += act_round_up(N * (size_t)A);
        proj_state += act_round_up(kind_gpu_proj_state(k, ls));
        proj_scratch = LLMC_MAX(proj_scratch, kind_gpu_proj_scratch_bf16(k, ls, N));
        proj_scratch_f32 = LLMC_MAX(proj_scratch_f32, kind_gpu_proj_scratch_f32(k, ls, N));
        if (path[l] == ATT_PATH_MIXER) {
            mix_scratch = LLMC_MAX(mix_scratch, kind_gpu_mix_scratch(k, ls, N));
        } else if (path[l] == ATT_PATH_OWN) {
            const size_t block = B * h * T * T;
            att += act_round_up(block);
            datt = LLMC_MAX(datt, block);
            p->A_own_max = LLMC_MAX(p->A_own_max, A);
        } else { /* cudnn, flash, mma: the logsumexp of each row */
            stats += act_round_up(B * h * T);
            if (path[l] == ATT_PATH_FLASH || path[l] == ATT_PATH_MMA) flash_d = LLMC_MAX(flash_d, B * h * T);
        }
    }
    p->qkv_off[L] = p->n[ACT_QKV] = qkv;
    p->atty_off[L] = p->n[ACT_ATTY] = atty;
    p->att_off[L] = p->n[ACT_ATT] = att;
    p->stats_off[L] = p->n[ACT_STATS] = stats;
    p->proj_state_off[L] = p->n[ACT_PROJ_STATE] = proj_state;
    p->n[ACT_DATT] = datt;
    p->n[ACT_FLASH_D] = flash_d;
    p->n[ACT_PROJ_SCRATCH] = proj_scratch;
    p->n[ACT_PROJ_SCRATCH_F32] = proj_scratch_f32;
    p->n[ACT_MIX_SCRATCH] = mix_scratch;
    p->n[ACT_ATT_SCRATCH] = 7 * N * (size_t)p->A_own_max;
}

/* The block's tensors: the same for every layer kind, by C, L, the recompute level and -ln 0. */
static inline void act_plan_blocks_(ActPlan *p, const GPT2Config *c) {
    const size_t N = (size_t)p->B * (size_t)p->T, C = (size_t)c->channels, L = (size_t)c->num_layers;
    /* -ln 0: the sub-blocks read the residual stream itself; no ln1/ln2 tensors or statistics */
    const size_t ln = c->use_ln ? 1 : 0;
    const size_t ln_layers = p->recompute >= 2 ? 1 : L;
    const size_t gelu_layers = p->recompute >= 1 ? 1 : L;
    p->n[ACT_ENCODED] = N * C;
    p->n[ACT_LN1] = ln * ln_layers * N * C;
    p->n[ACT_RESIDUAL2] = L * N * C;
    p->n[ACT_LN2] = ln * ln_layers * N * C;
    p->n[ACT_FCH] = L * N * 4 * C;
    p->n[ACT_FCH_GELU] = gelu_layers * N * 4 * C;
    p->n[ACT_RESIDUAL3] = L * N * C;
    p->n[ACT_LNF] = N * C;
    p->n[ACT_LOGITS] = N * (size_t)c->padded_vocab_size;
    p->n[ACT_OUT] = N * C;
    p->n[ACT_DRESIDUAL] = N * C;
    p->n[ACT_DBIG] = N * LLMC_MAX(4 * C, 3 * (size_t)p->A_max);
    p->n[ACT_DSMALL] = N * LLMC_MAX(C, (size_t)p->A_max);
    p->n[ACT_LN1_MEAN] = ln * L * N;
    p->n[ACT_LN1_RSTD] = ln * L * N;
    p->n[ACT_LN2_MEAN] = ln * L * N;
    p->n[ACT_LN2_RSTD] = ln * L * N;
    p->n[ACT_LNF_MEAN] = N;
    p->n[ACT_LNF_RSTD] = N;
    p->n[ACT_LOSSES] = N;
}

/* Sizes every tensor for (B, T), the layer table (widths, kinds' stage buffers, -ln 0) and the
 * attention paths, then lays the tensors out in their arenas in ActTensor order. */
static inline void act_plan_init(ActPlan *p, const GPT2Config *c, int B, int T, int recompute,
                                 const AttPath *path) {
    memset(p, 0, sizeof(*p));
    p->B = B;
    p->T = T;
    p->recompute = recompute;
    act_plan_layers_(p, c, path);
    act_plan_blocks_(p, c);
    size_t b16 = 0, f32 = 0;
    for (int t = 0; t < NUM_ACTS; t++) {
        size_t *arena = act_is_f32(t) ? &f32 : &b16;
        p->off[t] = *arena;
        *arena += act_round_up(p->n[t]);
    }
    p->bf16_total = b16;
    p->f32_total = f32;
}

/* Bytes of both arenas. */
static inline size_t act_plan_bytes(const ActPlan *p) { return p->bf16_total * 2 + p->f32_total * 4; }

#endif /* LLMC_ACT_PLAN_H */
