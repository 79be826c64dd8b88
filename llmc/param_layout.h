/*
 * llmc/param_layout.h: where every parameter lives in the one flat parameter buffer.
 *
 * Defines:
 *   ParamSlot         the 16 tensors of llm.c's checkpoint, then the 2 S-D tensors, in file order
 *   ParamLayout       per slot: total size and offset; per per-layer slot: each layer's offset
 *   param_layout_init sizes from a GPT2Config (layer l's attention width A_l = h_l * d_l)
 *   LayerParams / layer_params   named views of layer l's tensors (float or any element type
 *                     through the offsets), so the model code reads like llm.c's
 *   slot_has_weight_decay        wte, wpe, qkvw, attprojw, fcw, fcprojw (doc/formats.md 11)
 *   model_matmul_flops_per_token forward FLOPs of every matmul, for the neutrality test
 *
 * Layout rule (doc/formats.md): slots in file order; inside a per-layer slot the layers' blocks
 * are concatenated, layer 0 first, each with its own shape; a tensor a layer does not have is
 * empty (ln1/ln2 with -ln 0; the S-D slots of non-S-D layers). With A_l = C for every layer and
 * no S-D layers this is exactly llm.c's layout, so a uniform model and a Prism model have
 * identical buffers.
 */
#ifndef LLMC_PARAM_LAYOUT_H
#define LLMC_PARAM_LAYOUT_H

#include <stddef.h>

#include "config.h"
#include "layer_kind.h"

typedef enum {
    P_WTE = 0,  /* (Vp, C)       token embedding, tied LM head                */
    P_WPE,      /* (maxT, C)     position embedding                           */
    P_LN1W,     /* L x (C)       ln_1 weight                                  */
    P_LN1B,     /* L x (C)       ln_1 bias                                    */
    P_QKVW,     /* L x (3A, C)   Q rows, K rows, V rows; head k: rows k*d..    */
                /*   S-D layers: (2A, C), the shared projection U rows, then V    */
    P_QKVB,     /* L x (3A), S-D layers (2A)                                   */
    P_ATTPROJW, /* L x (C, A)    attention output projection                   */
    P_ATTPROJB, /* L x (C)                                                     */
    P_LN2W,     /* L x (C)                                                     */
    P_LN2B,     /* L x (C)                                                     */
    P_FCW,      /* L x (4C, C)                                                 */
    P_FCB,      /* L x (4C)                                                    */
    P_FCPROJW,  /* L x (C, 4C)                                                 */
    P_FCPROJB,  /* L x (C)                                                     */
    P_LNFW,     /* (C)           final LayerNorm                               */
    P_LNFB,     /* (C)                                                         */
    P_SDSKEW,   /* L x (h, d(d-1)/2) S-D layers: per head the strict upper triangle of S,
                   row-major (i < j); S_ij = s, S_ji = -s (doc/methods.md 3.4)           */
    P_SDTHETA,  /* L x (h, d) S-D layers: D = diag(softplus(theta)); (h) with scalar D */
    NUM_PARAM_SLOTS
} ParamSlot;

#define NUM_LLMC_SLOTS 16 /* the slots an llm.c checkpoint holds */

static const char *const PARAM_SLOT_NAMES[NUM_PARAM_SLOTS] = {
    "wte", "wpe", "ln1w", "ln1b", "qkvw", "qkvb", "attprojw", "attprojb",
    "ln2w", "ln2b", "fcw", "fcb", "fcprojw", "fcprojb", "lnfw", "lnfb", "sdskew", "sdtheta"};

static inline int slot_is_per_layer(int slot) {
    return (slot >= P_LN1W && slot <= P_FCPROJB) || slot == P_SDSKEW || slot == P_SDTHETA;
}

/* AdamW decays the matrices only; biases, LayerNorm parameters and theta never. The packed skew
 * parameters are decayed only on request (decay_sd_skew; doc/methods.md 3.7 asks for both runs). */
static inline int slot_has_weight_decay(int slot, int decay_sd_skew) {
    return slot == P_WTE || slot == P_WPE || slot == P_QKVW || slot == P_ATTPROJW ||
           slot == P_FCW || slot == P_FCPROJW || (slot == P_SDSKEW && decay_sd_skew);
}

typedef struct {
    size_t slot_size[NUM_PARAM_SLOTS];   /* elements in the slot (all layers) */
    size_t slot_offset[NUM_PARAM_SLOTS]; /* element offset of the slot in the flat buffer */
    /* element offset of layer l inside a per-layer slot; [L] = slot_size */
    size_t layer_offset[NUM_PARAM_SLOTS][LLMC_MAX_LAYERS + 1];
    size_t total;                        /* elements in the buffer */
} ParamLayout;

/* Elements of one layer's block of a per-layer slot. */
static inline size_t layer_slot_size(const GPT2Config *c, int l, int slot) {
    const size_t C = (size_t)c->channels;
    const LayerSpec *ls = &c->layer[l];
    const size_t A = (size_t)attn_width(ls);
    const LayerKind *k = layer_kind_of(ls->kind);
    const size_t rows = (size_t)k->proj->qkv_rows;
    const size_t ln = c->use_ln ? C : 0;
    switch (slot) {
    case P_LN1W: case P_LN1B: case P_LN2W: case P_LN2B: return ln;
    case P_QKVW: return rows * A * C;
    case P_QKVB: return rows * A;
    case P_SDSKEW: case P_SDTHETA: return kind_slot_size(k, c, ls, slot);
    case P_ATTPROJW: return C * A;
    case P_ATTPROJB: return C;
    case P_FCW: return 4 * C * C;
    case P_FCB: return 4 * C;
    case P_FCPROJW: return C * 4 * C;
    case P_FCPROJB: return C;
    default: return 0;
    }
}

static inline void param_layout_init(ParamLayout *p, const GPT2Config *c) {
    size_t C = (size_t)c->channels;
    size_t off = 0;
    for (int s = 0; s < NUM_PARAM_SLOTS; s++) {
        size_t n = 0;
        if (slot_is_per_layer(s)) {
            for (int l = 0; l < c->num_layers; l++) {
                p->layer_offset[s][l] = n;
                n += layer_slot_size(c, l, s);
            }
            p->layer_offset[s][c->num_layers] = n;
        } else {
            if (s == P_WTE) n = (size_t)c->padded_vocab_size * C;
            else if (s == P_WPE) n = (size_t)c->max_seq_len * C;
            else n = C; /* lnfw, lnfb */
            for (int l = 0; l <= c->num_layers; l++) p->layer_offset[s][l] = 0;
        }
        p->slot_size[s] = n;
        p->slot_offset[s] = off;
        off += n;
    }
    p->total = off;
}

/* Element offset of layer l's block of `slot` in the flat buffer. */
static inline size_t param_offset(const ParamLayout *p, int slot, int l) {
    return p->slot_offset[slot] + (slot_is_per_layer(slot) ? p->layer_offset[slot][l] : 0);
}

/* Named float views of one layer (the type is declared in llmc/layer_kind.h). */
struct LayerParams {
    float *ln1w, *ln1b;         /* (C), (C); empty with -ln 0 */
    float *qkvw, *qkvb;         /* (3A, C), (3A); S-D: (2A, C), (2A) */
    float *attprojw, *attprojb; /* (C, A), (C) */
    float *ln2w, *ln2b;         /* (C), (C) */
    float *fcw, *fcb;           /* (4C, C), (4C) */
    float *fcprojw, *fcprojb;   /* (C, 4C), (C) */
    float *sdskew;              /* (h, d(d-1)/2), S-D layers */
    float *sdtheta;             /* (h, d) or (h) with scalar D, S-D layers */
};

static inline LayerParams layer_params(float *base, const ParamLayout *p, int l) {
    LayerParams lp;
    lp.ln1w = base + param_offset(p, P_LN1W, l);
    lp.ln1b = base + param_offset(p, P_LN1B, l);
    lp.qkvw = base + param_offset(p, P_QKVW, l);
    lp.qkvb = base + param_offset(p, P_QKVB, l);
    lp.attprojw = base + param_offset(p, P_ATTPROJW, l);
    lp.attprojb = base + param_offset(p, P_ATTPROJB, l);
    lp.ln2w = base + param_offset(p, P_LN2W, l);
    lp.ln2b = base + param_offset(p, P_LN2B, l);
    lp.fcw = base + param_offset(p, P_FCW, l);
    lp.fcb = base + param_offset(p, P_FCB, l);
    lp.fcprojw = base + param_offset(p, P_FCPROJW, l);
    lp.fcprojb = base + param_offset(p, P_FCPROJB, l);
    lp.sdskew = base + param_offset(p, P_SDSKEW, l);
    lp.sdtheta = base + param_offset(p, P_SDTHETA, l);
    return lp;
}

/*
 * Forward matmul FLOPs per token of a sequence of length T (2 per multiply-add), counting the
 * softmax attention products over the full T x T square (the causal half is a constant factor for
 * every schedule) and linear attention by its O(d^2) state (doc/methods.md 3.12). Parameter- and
 * FLOP-neutrality of Prism (doc/methods.md 2.4) is the statement that this number and
 * param_layout_init's total do not depend on the per-layer head counts.
 */
static inline double model_matmul_flops_per_token(const GPT2Config *c, int T) {
    double C = c->channels;
    double flops = 0.0;
    for (int l = 0; l < c->num_layers; l++) {
        const LayerSpec *ls = &c->layer[l];
        const LayerKind *k = layer_kind_of(ls->kind);
        const double A = attn_width(ls);
        flops += 2.0 * C * k->proj->qkv_rows * A;              /* qkv (S-D: u, v) projection */
        if (k->proj->extra_flops) flops += k->proj->extra_flops(ls); /* S-D: K' = U L^T */
        flops += k->mix->flops(ls, T);                         /* mixing: Q K^T and att V, or linear */
        flops += 2.0 * A * C;                                 /* output projection */
        flops += 2.0 * C * 4.0 * C * 2.0;                     /* MLP up and down */
    }
    flops += 2.0 * C * c->vocab_size; /* LM head */
    return flops;
}

#endif /* LLMC_PARAM_LAYOUT_H */
