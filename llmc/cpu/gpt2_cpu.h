/*
 * llmc/cpu/gpt2_cpu.h: the fp32 CPU GPT-2 with a per-layer attention table: build, forward, backward,
 * AdamW. The reference implementation every other path (PyTorch, CUDA) is compared with.
 *
 * Defines:
 *   GPT2                  config, parameter layout, and one allocation each for parameters,
 *                         gradients, AdamW moments and activations
 *   gpt2_init_weights     GPT-2 init drawn exactly like train_gpt2.py (llmc/param_init.h)
 *   gpt2_build_from_config / gpt2_build_from_checkpoint / gpt2_free
 *   gpt2_forward          logits and (with targets) the mean loss
 *   gpt2_stream_sq_accumulate   the residual stream's mean square per layer (-ln 0 diagnostics)
 *   gpt2_zero_grad / gpt2_backward   accumulating gradients (gradient accumulation)
 *   gpt2_grad_norm        global L2 norm, summed in a fixed order (bit-reproducible)
 *   gpt2_update           AdamW with clipping and decay on 2-D tensors only (doc/formats.md "Optimization semantics")
 *
 * Per-layer attention (doc/formats.md "Per-layer heads"): layer l has h_l heads of size d_l (width A_l = h_l d_l)
 * and a kind, whose projection and mixer (llmc/cpu/kind_cpu.h, registered by kinds/registry_cpu.h)
 * make the attention sub-block; everything else is GPT-2's block. mha is softmax(q k^T / sqrt(d))
 * v, with Prism varying h_l; the S-D and linear kinds are in sd_attention/. -ln 0 drops ln_1 and
 * ln_2 (doc/methods.md "Training without LayerNorm").
 */
#ifndef LLMC_GPT2_CPU_H
#define LLMC_GPT2_CPU_H

#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "../checkpoint.h"
#include "../config.h"
#include "../layer_kind.h"
#include "../optimizer.h"
#include "../param_init.h"
#include "../param_layout.h"
#include "../rand.h"
#include "../utils.h"
#include "kernels.h"
#include "kind_cpu.h"

/* Activation views for one (B, T). Per-layer tensors have per-layer widths, hence arrays; a
 * tensor a layer's kind does not use is empty. */
typedef struct {
    float *encoded;                                /* (B, T, C) */
    float *ln1[LLMC_MAX_LAYERS];                   /* (B, T, C); -ln 0: the block input itself */
    float *ln1_mean[LLMC_MAX_LAYERS];              /* (B, T) */
    float *ln1_rstd[LLMC_MAX_LAYERS];              /* (B, T) */
    float *qkv[LLMC_MAX_LAYERS];                   /* (B, T, 3 A_l): Q | K | V; S-D: U | U L^T | V */
    float *att[LLMC_MAX_LAYERS];                   /* (B, h_l, T, T) attention weights (softmax or
                                                      normalized linear scores) */
    float *proj_state[LLMC_MAX_LAYERS];            /* the projection's state (S-D: the generators
                                                      L, h_l x d_l x d_l); empty for mha */
    float *mix_state[LLMC_MAX_LAYERS];             /* the mixer's state (linear: phi(q), phi(k),
                                                      Z); empty for softmax */
    float *atty[LLMC_MAX_LAYERS];                  /* (B, T, A_l) attention output, heads concatenated */
    float *residual2[LLMC_MAX_LAYERS];             /* (B, T, C) after the attention residual */
    float *ln2[LLMC_MAX_LAYERS];                   /* (B, T, C); -ln 0: residual2 itself */
    float *ln2_mean[LLMC_MAX_LAYERS];              /* (B, T) */
    float *ln2_rstd[LLMC_MAX_LAYERS];              /* (B, T) */
    float *fch[LLMC_MAX_LAYERS];                   /* (B, T, 4C) */
    float *fch_gelu[LLMC_MAX_LAYERS];              /* (B, T, 4C) */
    float *residual3[LLMC_MAX_LAYERS];             /* (B, T, C) block output */
    float *lnf;                                    /* (B, T, C) */
    float *lnf_mean, *lnf_rstd;                    /* (B, T) */
    float *logits;                                 /* (B, T, V): becomes dlogits in backward */
    float *lse;                                    /* (B, T) logsumexp of each logits row */
    float *losses;                                 /* (B, T) */
    /* backward scratch, reused by every layer */
    float *dresidual;                              /* (B, T, C) gradient flowing down the stream */
    float *dln;                                    /* (B, T, C) */
    float *dwide;                                  /* (B, T, max(4C, 3 A_max)): dfch_gelu, dqkv */
    float *dmid;                                   /* (B, T, max(4C, A_max)): dfch, datty */
    float *proj_scratch;                           /* the projections' backward scratch (S-D: dL) */
} Activations;

typedef struct {
    GPT2Config config;
    ParamLayout layout;
    float *params; /* (layout.total) */
    float *grads;  /* (layout.total), allocated on the first backward */
    float *m, *v;  /* AdamW moments, allocated on the first update */
    /* activations, allocated for the largest (B, T) seen so far */
    int cap_B, cap_T;
    float *acts_memory;
    Activations acts;
    int B, T; /* shape of the last forward */
    int *inputs, *targets; /* copies of the last forward's tokens (B*T) */
    int has_targets;
    float mean_loss;
    float *wt_scratch;  /* transposed weights for matmul_forward: max IC*OC */
    float *att_scratch; /* attention backward rows: att_threads * maxT */
    int att_threads;
} GPT2;

static inline int gpt2_max_attn_width(const GPT2Config *c) {
    int a = 0;
    for (int l = 0; l < c->num_layers; l++) a = LLMC_MAX(a, attn_width(&c->layer[l]));
    return a;
}

/* Assigns the activation views for (B, T) from `base`; returns the floats needed. With base NULL
 * it only counts. Each call lays tensors out tightly for its own (B, T), so one allocation for the
 * largest shape serves any smaller forward (sampling runs with B = 1). */
static inline size_t gpt2_assign_acts(const GPT2Config *c, int B, int T, Activations *a, float *base) {
    const size_t N = (size_t)B * T, C = (size_t)c->channels;
    const size_t Amax = (size_t)gpt2_max_attn_width(c);
    const size_t ln = c->use_ln ? 1 : 0;
    size_t off = 0, proj_scratch = 0;
#define TAKE(ptr, n)                                \
    do {                                            \
        (ptr) = base ? base + off : (float *)NULL; \
        off += (n);                                 \
    } while (0)
    TAKE(a->encoded, N * C);
    for (int l = 0; l < c->num_layers; l++) {
        const LayerSpec *ls = &c->layer[l];
        const LayerKind *k = layer_kind_of(ls->kind);
        const size_t A = (size_t)attn_width(ls), h = (size_t)ls->n_head;
        proj_scratch = LLMC_MAX(proj_scratch, kind_cpu_proj_scratch(k, ls, N));
        TAKE(a->ln1[l], ln * N * C);
        TAKE(a->ln1_mean[l], ln * N);
        TAKE(a->ln1_rstd[l], ln * N);
        TAKE(a->qkv[l], N * 3 * A);
        TAKE(a->att[l], (size_t)B * h * T * T);
        TAKE(a->proj_state[l], kind_cpu_proj_state(k, ls, N));
        TAKE(a->mix_state[l], kind_cpu_mix_state(k, ls, B, T));
        TAKE(a->atty[l], N * A);
        TAKE(a->residual2[l], N * C);
        TAKE(a->ln2[l], ln * N * C);
        TAKE(a->ln2_mean[l], ln * N);
        TAKE(a->ln2_rstd[l], ln * N);
        TAKE(a->fch[l], N * 4 * C);
        TAKE(a->fch_gelu[l], N * 4 * C);
        TAKE(a->residual3[l], N * C);
    }
    TAKE(a->lnf, N * C);
    TAKE(a->lnf_mean, N);
    TAKE(a->lnf_rstd, N);
    TAKE(a->logits, N * (size_t)c->vocab_size);
    TAKE(a->lse, N);
    TAKE(a->losses, N);
    TAKE(a->dresidual, N * C);
    TAKE(a->dln, N * C);
    TAKE(a->dwide, N * LLMC_MAX(4 * C, 3 * Amax));
    TAKE(a->dmid, N * LLMC_MAX(4 * C, Amax));
    TAKE(a->proj_scratch, proj_scratch);
#undef TAKE
    return off;
}

/* GPT-2's init for the model's config (llmc/param_init.h): train_gpt2.py's weights for the seed. */
static inline void gpt2_init_weights(GPT2 *model, uint32_t seed) {
    param_init_gpt2(&model->config, &model->layout, model->params, seed);
}

/* origin: where the config came from (a file name or "model config"), for the error message. */
static inline void gpt2_alloc(GPT2 *model, const GPT2Config *c, const char *origin) {
    memset(model, 0, sizeof(*model));
    model->config = *c;
    char msg[256];
    if (!config_validate(c, msg, sizeof(msg))) llmc_die("%s: %s", origin, msg); /* kinds too */
    for (int k = 0; k < N_LAYER_KINDS; k++) { /* the CPU table's rows are the registry's */
        if (strcmp(CPU_KINDS[k].name, LAYER_KINDS[k].name) != 0) {
            llmc_die("CPU_KINDS row %d is '%s', the registry's is '%s' (kinds/registry_cpu.h)", k,
                     CPU_KINDS[k].name, LAYER_KINDS[k].name);
        }
    }
    param_layout_init(&model->layout, c);
    model->params = (float *)xmalloc(model->layout.total * sizeof(float));
    size_t wt = (size_t)c->channels * c->vocab_size;
    for (int l = 0; l < c->num_layers; l++) {
        wt = LLMC_MAX(wt, layer_slot_size(c, l, P_QKVW));
        wt = LLMC_MAX(wt, layer_slot_size(c, l, P_FCW));
    }
    model->wt_scratch = (float *)xmalloc(wt * sizeof(float));
    model->mean_loss = -1.0f;
}

static inline void gpt2_build_from_config(GPT2 *model, const GPT2Config *c, uint32_t seed) {
    gpt2_alloc(model, c, "model config");
    gpt2_init_weights(model, seed);
}

static inline void gpt2_build_from_checkpoint(GPT2 *model, const char *path) {
    GPT2Config c;
    int is_bf16 = 0;
    checkpoint_read_header(path, &c, &is_bf16);
    gpt2_alloc(model, &c, path);
    checkpoint_read_fp32(path, &c, is_bf16, model->params);
}

static inline void gpt2_free(GPT2 *model) {
    free(model->params);
    free(model->grads);
    free(model->m);
    free(model->v);
    free(model->acts_memory);
    free(model->inputs);
    free(model->targets);
    free(model->wt_scratch);
    free(model->att_scratch);
    memset(model, 0, sizeof(*model));
}

/* ----------------------------------------------------------------------------------------------
 * One layer's attention sub-block: its kind's projection and mixer (llmc/cpu/kind_cpu.h).
 * x (B, T, C) -> atty (B, T, A); the backward goes from datty to dx (overwritten). */
static inline CpuStageArgs attention_stage_args(GPT2 *model, int l, const LayerParams *p,
                                                const LayerParams *dp, const float *x, float *dx,
                                                const float *datty, int B, int T) {
    Activations *a = &model->acts;
    CpuStageArgs s;
    s.c = &model->config;
    s.ls = &model->config.layer[l];
    s.B = B;
    s.T = T;
    s.p = p;
    s.dp = dp;
    s.x = x;
    s.dx = dx;
    s.qkv = a->qkv[l];
    s.dqkv = a->dwide; /* (B, T, 3A) */
    s.att = a->att[l];
    s.atty = a->atty[l];
    s.datty = datty;
    s.proj_state = a->proj_state[l];
    s.mix_state = a->mix_state[l];
    s.proj_scratch = a->proj_scratch;
    s.wt_scratch = model->wt_scratch;
    s.row_scratch = model->att_scratch;
    return s;
}

static inline void attention_block_forward(GPT2 *model, int l, const float *x, int B, int T) {
    const LayerParams p = layer_params(model->params, &model->layout, l);
    const CpuStageArgs s = attention_stage_args(model, l, &p, NULL, x, NULL, NULL, B, T);
    const CpuKind *k = &CPU_KINDS[model->config.layer[l].kind];
    k->proj->forward(&s);
    k->mix->forward(&s);
}

static inline void attention_block_backward(GPT2 *model, int l, const float *x, float *dx,
                                            const float *datty, int B, int T) {
    const LayerParams p = layer_params(model->params, &model->layout, l);
    const LayerParams dp = layer_params(model->grads, &model->layout, l);
    const CpuStageArgs s = attention_stage_args(model, l, &p, &dp, x, dx, datty, B, T);
    const CpuKind *k = &CPU_KINDS[model->config.layer[l].kind];
    k->mix->backward(&s);
    k->proj->backward(&s);
}

/* ----------------------------------------------------------------------------------------------
 * Forward. inputs, targets: (B, T) token ids; targets may be NULL (then no loss).
 * gpt2_forward_blocks runs the embeddings and the L blocks only (acts.residual3[L-1] and every
 * layer's activations, attention included): for analyses that never read the logits, which at
 * GPT-2's vocabulary cost more than the blocks of a small model. */
static inline void gpt2_forward_blocks(GPT2 *model, const int *inputs, const int *targets, int B, int T) {
    const GPT2Config *c = &model->config;
    const int C = c->channels, L = c->num_layers, V = c->vocab_size, N = B * T;
    if (B < 1 || T < 1 || T > c->max_seq_len) {
        llmc_die("forward: B = %d, T = %d; need B >= 1 and 1 <= T <= maxT = %d", B, T,
                 c->max_seq_len);
    }
    for (int i = 0; i < N; i++) {
        if (inputs[i] < 0 || inputs[i] >= V || (targets && (targets[i] < 0 || targets[i] >= V))) {
            llmc_die("forward: token %d at position %d is outside the vocabulary [0, %d)",
                     inputs[i] < 0 || inputs[i] >= V ? inputs[i] : targets[i], i, V);
        }
    }
    if (model->acts_memory == NULL || B > model->cap_B || T > model->cap_T) {
        const int nb = LLMC_MAX(B, model->cap_B), nt = LLMC_MAX(T, model->cap_T);
        free(model->acts_memory);
        free(model->inputs);
        free(model->targets);
        model->acts_memory = (float *)xmalloc(gpt2_assign_acts(c, nb, nt, &model->acts, NULL) *
                                              sizeof(float));
        model->inputs = (int *)xmalloc((size_t)nb * nt * sizeof(int));
        model->targets = (int *)xmalloc((size_t)nb * nt * sizeof(int));
        model->cap_B = nb;
        model->cap_T = nt;
    }
    Activations *a = &model->acts;
    gpt2_assign_acts(c, B, T, a, model->acts_memory);
    model->B = B;
    model->T = T;
    memcpy(model->inputs, inputs, (size_t)N * sizeof(int));
    model->has_targets = targets != NULL;
    if (targets) memcpy(model->targets, targets, (size_t)N * sizeof(int));

    float *w = model->params;
    const ParamLayout *pl = &model->layout;
    encoder_forward(a->encoded, inputs, w + pl->slot_offset[P_WTE], w + pl->slot_offset[P_WPE], B,
                    T, C, model->config.emb_scale);
    for (int l = 0; l < L; l++) {
        LayerParams p = layer_params(w, pl, l);
        float *residual = l == 0 ? a->encoded : a->residual3[l - 1];
        if (c->use_ln) {
            layernorm_forward(a->ln1[l], a->ln1_mean[l], a->ln1_rstd[l], residual, p.ln1w, p.ln1b, N, C);
        } else {
            a->ln1[l] = residual; /* -ln 0: the sub-blocks read the stream itself */
        }
        attention_block_forward(model, l, a->ln1[l], B, T);
        const int A = attn_width(&c->layer[l]);
        matmul_forward(a->residual2[l], a->atty[l], p.attprojw, p.attprojb, N, A, C, C,
                       model->wt_scratch);
        residual_forward(a->residual2[l], a->residual2[l], residual, (size_t)N * C);
        if (c->use_ln) {
            layernorm_forward(a->ln2[l], a->ln2_mean[l], a->ln2_rstd[l], a->residual2[l], p.ln2w,
                              p.ln2b, N, C);
        } else {
            a->ln2[l] = a->residual2[l];
        }
        matmul_forward(a->fch[l], a->ln2[l], p.fcw, p.fcb, N, C, 4 * C, 4 * C, model->wt_scratch);
        gelu_forward(a->fch_gelu[l], a->fch[l], (size_t)N * 4 * C);
        matmul_forward(a->residual3[l], a->fch_gelu[l], p.fcprojw, p.fcprojb, N, 4 * C, C, C,
                       model->wt_scratch);
        residual_forward(a->residual3[l], a->residual3[l], a->residual2[l], (size_t)N * C);
    }
}

static inline void gpt2_forward(GPT2 *model, const int *inputs, const int *targets, int B, int T) {
    gpt2_forward_blocks(model, inputs, targets, B, T);
    const GPT2Config *c = &model->config;
    const int C = c->channels, L = c->num_layers, V = c->vocab_size, N = B * T;
    Activations *a = &model->acts;
    float *w = model->params;
    const ParamLayout *pl = &model->layout;
    layernorm_forward(a->lnf, a->lnf_mean, a->lnf_rstd, a->residual3[L - 1],
                      w + pl->slot_offset[P_LNFW], w + pl->slot_offset[P_LNFB], N, C);
    /* LM head tied to wte; only the V real rows: padded logits are never used. */
    matmul_forward(a->logits, a->lnf, w + pl->slot_offset[P_WTE], NULL, N, C, V, V,
                   model->wt_scratch);
    if (targets) {
        crossentropy_forward(a->losses, a->lse, a->logits, targets, N, V);
        double sum = 0.0;
        for (int i = 0; i < N; i++) sum += a->losses[i];
        model->mean_loss = (float)(sum / N);
    } else {
        model->mean_loss = -1.0f;
    }
}

/* The mean square of the residual stream entering each block (sq[l], l < L) and entering ln_f
 * (sq[L]), over the (B, T) positions of the last forward, accumulated into sq (L + 1 values).
 * Without LayerNorm in the blocks nothing bounds the stream, and an S-D layer's logits grow with
 * its square (doc/sd_attention.md "The residual stream"). */
static inline void gpt2_stream_sq_accumulate(const GPT2 *model, int B, int T, double *sq) {
    const int C = model->config.channels, L = model->config.num_layers;
    const size_t n = (size_t)B * T * C;
    for (int l = 0; l <= L; l++) {
        const float *x = l == 0 ? model->acts.encoded : model->acts.residual3[l - 1];
        double s = 0.0;
        for (size_t i = 0; i < n; i++) s += (double)x[i] * x[i];
        sq[l] += s / (double)n;
    }
}

static inline void gpt2_zero_grad(GPT2 *model) {
    if (model->grads == NULL) model->grads = (float *)xmalloc(model->layout.total * sizeof(float));
    memset(model->grads, 0, model->layout.total * sizeof(float));
}

/* dresidual += the gradient through a LayerNorm (or straight through with -ln 0). */
static inline void norm_backward_into(GPT2 *model, float *dresidual, float *dw, float *db,
                                      const float *dnormed, const float *x, const float *w,
                                      const float *mean, const float *rstd, int N) {
    const int C = model->config.channels;
    if (model->config.use_ln) {
        layernorm_backward(dresidual, dw, db, dnormed, x, w, mean, rstd, N, C);
    } else {
        for (size_t i = 0; i < (size_t)N * C; i++) dresidual[i] += dnormed[i];
    }
}

/*
 * Backward of the last forward, accumulating into model->grads (call gpt2_zero_grad first).
 * dloss: the gradient of the objective w.r.t. each token's loss, 1/(B*T*grad_accum) for the
 * mean over an accumulated batch. Mirrors gpt2_forward from the end.
 */
static inline void gpt2_backward(GPT2 *model, float dloss) {
    const GPT2Config *c = &model->config;
    const int B = model->B, T = model->T, C = c->channels, L = c->num_layers, V = c->vocab_size;
    const int N = B * T;
    if (!model->has_targets) llmc_die("backward: the last forward had no targets");
    if (model->grads == NULL) gpt2_zero_grad(model);
#ifdef _OPENMP
    const int threads = omp_get_max_threads();
#else
    const int threads = 1;
#endif
    if (threads > model->att_threads) { /* sized here: the thread count may change at run time */
        free(model->att_scratch);
        model->att_scratch = (float *)xmalloc((size_t)threads * c->max_seq_len * sizeof(float));
        model->att_threads = threads;
    }
    Activations *a = &model->acts;
    float *w = model->params, *g = model->grads;
    const ParamLayout *pl = &model->layout;

    /* classifier: dlogits in place, then dlnf = dlogits wte, dwte += dlogits^T lnf */
    crossentropy_backward_inplace(a->logits, a->lse, model->targets, dloss, N, V);
    float *dlnf = a->dln;
    matmul_backward(dlnf, g + pl->slot_offset[P_WTE], NULL, a->logits, a->lnf,
                    w + pl->slot_offset[P_WTE], N, C, V, V);
    memset(a->dresidual, 0, (size_t)N * C * sizeof(float));
    layernorm_backward(a->dresidual, g + pl->slot_offset[P_LNFW], g + pl->slot_offset[P_LNFB], dlnf,
                       a->residual3[L - 1], w + pl->slot_offset[P_LNFW], a->lnf_mean, a->lnf_rstd, N,
                       C);
    for (int l = L - 1; l >= 0; l--) {
        const int A = attn_width(&c->layer[l]);
        LayerParams p = layer_params(w, pl, l);
        LayerParams dp = layer_params(g, pl, l);
        const float *residual = l == 0 ? a->encoded : a->residual3[l - 1];
        /* MLP: residual3 = residual2 + fcproj(gelu(fc(ln2(residual2)))) */
        float *dfch_gelu = a->dwide, *dfch = a->dmid;
        matmul_backward(dfch_gelu, dp.fcprojw, dp.fcprojb, a->dresidual, a->fch_gelu[l], p.fcprojw,
                        N, 4 * C, C, C);
        gelu_backward(dfch, a->fch[l], dfch_gelu, (size_t)N * 4 * C);
        matmul_backward(a->dln, dp.fcw, dp.fcb, dfch, a->ln2[l], p.fcw, N, C, 4 * C, 4 * C);
        norm_backward_into(model, a->dresidual, dp.ln2w, dp.ln2b, a->dln, a->residual2[l], p.ln2w,
                           a->ln2_mean[l], a->ln2_rstd[l], N);
        /* attention: residual2 = residual + attproj(attention(ln1(residual))) */
        float *datty = a->dmid;
        matmul_backward(datty, dp.attprojw, dp.attprojb, a->dresidual, a->atty[l], p.attprojw, N, A,
                        C, C);
        attention_block_backward(model, l, a->ln1[l], a->dln, datty, B, T);
        norm_backward_into(model, a->dresidual, dp.ln1w, dp.ln1b, a->dln, residual, p.ln1w,
                           a->ln1_mean[l], a->ln1_rstd[l], N);
    }
    encoder_backward(g + pl->slot_offset[P_WTE], g + pl->slot_offset[P_WPE], a->dresidual,
                     model->inputs, B, T, C, model->config.emb_scale);
}

/* Global L2 norm of the gradients. Fixed 64K-element chunks summed in double in a fixed order, so
 * the value (and hence clipping) is identical for any thread count. */
static inline float gpt2_grad_norm(const GPT2 *model) {
    const size_t n = model->layout.total, chunk = 1 << 16;
    const size_t nchunks = (n + chunk - 1) / chunk;
    double *part = (double *)xmalloc(nchunks * sizeof(double));
#pragma omp parallel for schedule(static)
    for (size_t i = 0; i < nchunks; i++) {
        const size_t lo = i * chunk, hi = LLMC_MIN(n, lo + chunk);
        double s = 0.0;
        for (size_t k = lo; k < hi; k++) s += (double)model->grads[k] * model->grads[k];
        part[i] = s;
    }
    double total = 0.0;
    for (size_t i = 0; i < nchunks; i++) total += part[i];
    free(part);
    return (float)sqrt(total);
}

/*
 * AdamW (doc/formats.md "Optimization semantics"), t = number of this update (1-based). grad_scale = min(1,
 * clip/norm) from the caller. Weight decay on the slots of h->decay_mask (llmc/param_layout.h
 * param_decay_mask).
 *   g <- s g;  m <- b1 m + (1-b1) g;  v <- b2 v + (1-b2) g^2
 *   p <- p - lr (mhat / (sqrt(vhat) + eps) + wd p)
 */
static inline void gpt2_update(GPT2 *model, const AdamWHyper *h, float grad_scale, int t) {
    const float lr = h->lr, beta1 = h->beta1, beta2 = h->beta2, eps = h->eps;
    if (model->m == NULL) {
        model->m = (float *)xcalloc(model->layout.total, sizeof(float));
        model->v = (float *)xcalloc(model->layout.total, sizeof(float));
    }
    const float bc1 = 1.0f - powf(beta1, (float)t);
    const float bc2 = 1.0f - powf(beta2, (float)t);
    for (int s = 0; s < param_slot_count(); s++) {
        const size_t off = model->layout.slot_offset[s], n = model->layout.slot_size[s];
        const float wd = slot_has_weight_decay(s, h->decay_mask) ? h->weight_decay : 0.0f;
        float *p = model->params + off, *gr = model->grads + off;
        float *m = model->m + off, *v = model->v + off;
#pragma omp parallel for schedule(static)
        for (size_t i = 0; i < n; i++) {
            const float gi = gr[i] * grad_scale;
            m[i] = beta1 * m[i] + (1.0f - beta1) * gi;
            v[i] = beta2 * v[i] + (1.0f - beta2) * gi * gi;
            const float mhat = m[i] / bc1, vhat = v[i] / bc2;
            p[i] -= lr * (mhat / (sqrtf(vhat) + eps) + wd * p[i]);
        }
    }
}

#endif /* LLMC_GPT2_CPU_H */
