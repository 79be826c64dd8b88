/*
 * llmc/layer_kind.h: the seam between the model and a layer kind (doc/design.md "The layer-kind seam").
 *
 * The attention sub-block of layer l maps its input x (B, T, C) to atty (B, T, A), A = h d, in
 * two stages, and a kind is a pair of them:
 *
 *   projection   x -> qkv (B, T, 3A) = Q | K | V, head k in columns [k d, (k+1) d) of each third;
 *                it owns the layer's qkvw / qkvb rows and any parameters of its own
 *   mixer        qkv -> atty: causal attention of some form; no parameters
 *
 * S-D attention (arXiv 2605.18826) changes the projection, ELU+1 linear attention the mixer; Prism
 * (arXiv 2606.27449) changes neither, only the table's head counts. The framework has the
 * standard stage of each: QKV_PROJECTION (Q | K | V = x W^T + b) and
 * SOFTMAX_MIXER (softmax(q k^T / sqrt(d)) v), which make GPT-2's kind "mha". A method defines its
 * stages in its own folder (sd_attention/: the S-D projection and the ELU+1 linear mixer), and
 * the registry tables of kinds/ pair them, one row per kind.
 *
 * Defines:
 *   Projection, Mixer     what every program knows of a stage: parameter shapes, init, FLOPs,
 *                         buffer sizes, the start-up description; plain C, no kernels
 *   LayerKind             a name and its two stages
 *   LAYER_KINDS, N_LAYER_KINDS   the registry, indexed by the kind's code in checkpoints; declared
 *                         here, defined once per program by kinds/registry.h
 *   layer_kind_of         the kind of a code, or NULL; layer_kind_code (by name), layer_kind_find
 *                         (by stages), layer_kind_list (the names)
 *   QKV_PROJECTION, SOFTMAX_MIXER, LAYER_KIND_MHA (code 0, the only kind llm.c has)
 *   kind_* helpers        a stage's optional entries with their defaults (0, nothing)
 *   config_validate       structural checks of a GPT2Config with a one-line reason
 *   config_is_llmc_uniform   true when llm.c itself could run this model (checkpoint v3/v5)
 *   config_print          the start-up table, one line per run of equal layers
 * The CPU and the GPU behaviour of the stages are registered next to these:
 * llmc/cpu/kind_cpu.h and llmc/gpu/kind_gpu.cuh.
 */
#ifndef LLMC_LAYER_KIND_H
#define LLMC_LAYER_KIND_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "config.h"
#include "rand.h"

typedef struct LayerParams LayerParams; /* llmc/param_layout.h: named views of a layer's tensors */

typedef struct {
    const char *name;
    /* qkvw is (qkv_rows A, C) and qkvb (qkv_rows A): 3 for Q | K | V, 2 for S-D's U | V */
    int qkv_rows;
    /* elements of layer ls's block of a per-layer slot other than qkvw / qkvb that the stage
     * owns (its KindSlots, llmc/param_layout.h; doc/formats.md "Per-layer heads"); NULL: none */
    size_t (*slot_size)(const GPT2Config *c, const LayerSpec *ls, int slot);
    /* forward matmul FLOPs per token beyond the projection GEMM; NULL: none */
    double (*extra_flops)(const LayerSpec *ls);
    /* GPT-2's init of the stage's parameters, drawn from g right after qkvw (train_gpt2.py's module
     * order); may rescale qkvw's rows. NULL: nothing beyond qkvw */
    void (*init)(const GPT2Config *c, const LayerSpec *ls, const LayerParams *p, TorchGenerator *g);
    /* appends its model options to the start-up model line ("S-D logits u (S - D) u^T"); NULL: none */
    void (*describe)(const GPT2Config *c, FILE *out);
    /* buffers, in elements: CPU per-layer state (forward to backward) and backward scratch shared
     * by all layers; GPU per-layer fp32 state, shared bf16 and fp32 scratch, for N = B T tokens.
     * NULL: none */
    size_t (*cpu_state)(const LayerSpec *ls, size_t N);
    size_t (*cpu_scratch)(const LayerSpec *ls, size_t N);
    size_t (*gpu_state_f32)(const LayerSpec *ls);
    size_t (*gpu_scratch_bf16)(const LayerSpec *ls, size_t N);
    size_t (*gpu_scratch_f32)(const LayerSpec *ls, size_t N);
} Projection;

typedef struct {
    const char *name;
    /* 1: softmax attention, which the GPU model runs on one of its softmax paths (cuDNN, own,
     * flash, mma; llmc/attention/paths.h); 0: the mixer's own kernels */
    int softmax;
    /* forward matmul FLOPs per token of a sequence of T, counting softmax over the full T x T */
    double (*flops)(const LayerSpec *ls, int T);
    /* the share of those FLOPs a causal kernel performs (the MFU's count, llmc/cuda/mfu.h):
     * softmax computes the lower half of the square, 0.5; a linear scan all of its work, 1 */
    double causal_share;
    void (*describe)(const GPT2Config *c, FILE *out);
    /* CPU per-layer state, GPU fp32 scratch shared by all layers, as for Projection; NULL: none */
    size_t (*cpu_state)(const LayerSpec *ls, int B, int T);
    size_t (*gpu_scratch_f32)(const LayerSpec *ls, size_t N);
} Mixer;

typedef struct {
    const char *name; /* the word of layer tables ("12:sd") and start-up lines */
    const Projection *proj;
    const Mixer *mix;
} LayerKind;

/* The registry, indexed by code (doc/formats.md "Per-layer heads"); defined by kinds/registry.h. */
extern const LayerKind LAYER_KINDS[];
extern const int N_LAYER_KINDS;

#define LAYER_KIND_MHA 0 /* GPT-2's softmax attention: QKV_PROJECTION + SOFTMAX_MIXER */

static inline const LayerKind *layer_kind_of(int code) {
    return code >= 0 && code < N_LAYER_KINDS ? &LAYER_KINDS[code] : NULL;
}

/* The code of a kind's name, or -1. */
static inline int layer_kind_code(const char *name) {
    for (int k = 0; k < N_LAYER_KINDS; k++)
        if (strcmp(name, LAYER_KINDS[k].name) == 0) return k;
    return -1;
}

/* The code of the kind made of the projection and mixer named so, or -1 (a surgery that keeps a
 * layer's projection and swaps its mixer asks this). */
static inline int layer_kind_find(const char *proj, const char *mix) {
    for (int k = 0; k < N_LAYER_KINDS; k++)
        if (strcmp(LAYER_KINDS[k].proj->name, proj) == 0 && strcmp(LAYER_KINDS[k].mix->name, mix) == 0) return k;
    return -1;
}

/* "mha, sd, lin or sdlin": the known names, for error messages. */
static inline void layer_kind_list(char *buf, size_t cap) {
    size_t n = 0;
    buf[0] = '\0';
    for (int k = 0; k < N_LAYER_KINDS && n < cap; k++) {
        const char *sep = k == 0 ? "" : (k + 1 == N_LAYER_KINDS ? " or " : ", ");
        n += (size_t)snprintf(buf + n, cap - n, "%s%s", sep, LAYER_KINDS[k].name);
    }
}

/* ----------------------------------------------------------------------------------------------
 * The optional entries with their defaults. */
static inline size_t kind_slot_size(const LayerKind *k, const GPT2Config *c, const LayerSpec *ls, int slot) {
    return k->proj->slot_size ? k->proj->slot_size(c, ls, slot) : 0;
}
static inline size_t kind_cpu_proj_state(const LayerKind *k, const LayerSpec *ls, size_t N) {
    return k->proj->cpu_state ? k->proj->cpu_state(ls, N) : 0;
}
static inline size_t kind_cpu_proj_scratch(const LayerKind *k, const LayerSpec *ls, size_t N) {
    return k->proj->cpu_scratch ? k->proj->cpu_scratch(ls, N) : 0;
}
static inline size_t kind_cpu_mix_state(const LayerKind *k, const LayerSpec *ls, int B, int T) {
    return k->mix->cpu_state ? k->mix->cpu_state(ls, B, T) : 0;
}
static inline size_t kind_gpu_proj_state(const LayerKind *k, const LayerSpec *ls) {
    return k->proj->gpu_state_f32 ? k->proj->gpu_state_f32(ls) : 0;
}
static inline size_t kind_gpu_proj_scratch_bf16(const LayerKind *k, const LayerSpec *ls, size_t N) {
    return k->proj->gpu_scratch_bf16 ? k->proj->gpu_scratch_bf16(ls, N) : 0;
}
static inline size_t kind_gpu_proj_scratch_f32(const LayerKind *k, const LayerSpec *ls, size_t N) {
    return k->proj->gpu_scratch_f32 ? k->proj->gpu_scratch_f32(ls, N) : 0;
}
static inline size_t kind_gpu_mix_scratch(const LayerKind *k, const LayerSpec *ls, size_t N) {
    return k->mix->gpu_scratch_f32 ? k->mix->gpu_scratch_f32(ls, N) : 0;
}

/* ----------------------------------------------------------------------------------------------
 * The framework's stages. Softmax attention's products per token over the full T x T square
 * (the causal half is a constant factor for every schedule): Q K^T and att V, 2 T A FLOPs each. */
static inline double softmax_mixer_flops(const LayerSpec *ls, int T) {
    return 2.0 * 2.0 * (double)T * attn_width(ls);
}

static const Projection QKV_PROJECTION = {"qkv", 3, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL};
static const Mixer SOFTMAX_MIXER = {"softmax", 1, softmax_mixer_flops, 0.5, NULL, NULL, NULL};

/* ----------------------------------------------------------------------------------------------
 * The model description checked and printed against the registry. */

/* Returns 1 when the config is well formed; else 0 with the reason in msg (the caller adds the
 * file or flag it came from). */
static inline int config_validate(const GPT2Config *c, char *msg, size_t cap) {
    if (c->num_layers < 1 || c->num_layers > LLMC_MAX_LAYERS) {
        snprintf(msg, cap, "num_layers %d out of range [1, %d]", c->num_layers, LLMC_MAX_LAYERS);
        return 0;
    }
    const struct { const char *name; int v, max; } dims[] = {
        {"channels C", c->channels, LLMC_MAX_CHANNELS},
        {"maxT", c->max_seq_len, LLMC_MAX_SEQ_LEN},
        {"vocab V", c->vocab_size, LLMC_MAX_VOCAB},
        {"padded vocab Vp", c->padded_vocab_size, LLMC_MAX_VOCAB},
    };
    for (size_t i = 0; i < sizeof(dims) / sizeof(dims[0]); i++) {
        if (dims[i].v < 1 || dims[i].v > dims[i].max) {
            snprintf(msg, cap, "%s %d out of range [1, %d]", dims[i].name, dims[i].v, dims[i].max);
            return 0;
        }
    }
    if (c->padded_vocab_size < c->vocab_size) {
        snprintf(msg, cap, "padded vocab %d < vocab %d", c->padded_vocab_size, c->vocab_size);
        return 0;
    }
    if (!(c->emb_scale > 0.0f && c->emb_scale <= EMB_SCALE_MAX)) {
        snprintf(msg, cap, "emb_scale %g: expected 0 < F <= %g", (double)c->emb_scale, (double)EMB_SCALE_MAX);
        return 0;
    }
    for (int l = 0; l < c->num_layers; l++) {
        const LayerSpec *ls = &c->layer[l];
        if (ls->n_head < 1 || ls->n_head > LLMC_MAX_HEADS || ls->head_size < 1 ||
            ls->head_size > LLMC_MAX_HEAD_SIZE ||
            (int64_t)ls->n_head * ls->head_size > LLMC_MAX_ATTN_WIDTH) {
            snprintf(msg, cap, "layer %d: %d heads x %d: expected 1..%d heads of size 1..%d, at most "
                     "%d wide", l, ls->n_head, ls->head_size, LLMC_MAX_HEADS, LLMC_MAX_HEAD_SIZE,
                     LLMC_MAX_ATTN_WIDTH);
            return 0;
        }
        if (layer_kind_of(ls->kind) == NULL) {
            snprintf(msg, cap, "layer %d: unknown attention kind %d", l, ls->kind);
            return 0;
        }
    }
    return kind_options_validate(c->opt, msg, cap);
}

/* llm.c can run the model: LayerNorms, the input unscaled, every layer softmax attention with the
 * same h, h*d = C.
 * (The kinds' options are irrelevant without their layers.) */
static inline int config_is_llmc_uniform(const GPT2Config *c) {
    if (!c->use_ln || c->emb_scale != 1.0f) return 0;
    for (int l = 0; l < c->num_layers; l++) {
        const LayerSpec *ls = &c->layer[l];
        if (ls->kind != LAYER_KIND_MHA || ls->n_head != c->layer[0].n_head ||
            attn_width(ls) != c->channels)
            return 0;
    }
    return 1;
}

/* One line per run of equal layers, e.g. "layers 0-1: 3 heads x 256 (mha)". */
static inline void config_print(const GPT2Config *c, FILE *out) {
    fprintf(out, "model: L %d, C %d, maxT %d, V %d (padded %d), base heads %d%s", c->num_layers,
            c->channels, c->max_seq_len, c->vocab_size, c->padded_vocab_size, c->num_heads,
            c->use_ln ? "" : ", no per-block LayerNorm");
    if (c->emb_scale != 1.0f) fprintf(out, ", input x %g", (double)c->emb_scale);
    /* each stage present describes its options once: the projections' first, then the mixers' */
    for (int pass = 0; pass < 2; pass++) {
        for (int l = 0; l < c->num_layers; l++) {
            const LayerKind *k = layer_kind_of(c->layer[l].kind);
            void (*fn)(const GPT2Config *, FILE *) = pass == 0 ? k->proj->describe : k->mix->describe;
            int seen = 0;
            for (int e = 0; e < l && !seen; e++) {
                const LayerKind *ke = layer_kind_of(c->layer[e].kind);
                seen = (pass == 0 ? ke->proj->describe : ke->mix->describe) == fn;
            }
            if (fn && !seen) fn(c, out);
        }
    }
    fprintf(out, "\n");
    int start = 0;
    for (int l = 1; l <= c->num_layers; l++) {
        if (l < c->num_layers && c->layer[l].n_head == c->layer[start].n_head &&
            c->layer[l].head_size == c->layer[start].head_size &&
            c->layer[l].kind == c->layer[start].kind)
            continue;
        const LayerSpec *ls = &c->layer[start];
        if (l - 1 == start) fprintf(out, "  layer  %2d   ", start);
        else fprintf(out, "  layers %2d-%-2d", start, l - 1);
        fprintf(out, ": %3d heads x %3d (%s)\n", ls->n_head, ls->head_size,
                layer_kind_of(ls->kind)->name);
        start = l;
    }
}


#endif /* LLMC_LAYER_KIND_H */
