/*
 * llmc/param_layout.h: where every parameter lives in the one flat parameter buffer.
 *
 * Defines:
 *   ParamSlot         the 16 tensors of llm.c's checkpoint, in file order
 *   KindSlot, KIND_SLOTS   the slots that follow them, one per tensor a kind owns (S-D: 16 and 17),
 *                     declared here and listed by the registry (kinds/registry.h): number, name,
 *                     weight decay; param_slot_count, param_slot_name
 *   ParamLayout       per slot: total size and offset; per per-layer slot: each layer's offset
 *   param_layout_init sizes from a GPT2Config (layer l's attention width A_l = h_l * d_l)
 *   LayerParams / layer_params   named views of layer l's tensors (float or any element type
 *                     through the offsets), so the model code reads like llm.c's
 *   param_decay_mask  the slots AdamW decays: wte, wpe, qkvw, attprojw, fcw, fcprojw
 *                     (doc/formats.md "Optimization semantics") and the kind slots whose rule says so;
 *                     slot_has_weight_decay reads it
 *   model_matmul_flops_per_token forward FLOPs of every matmul, for the neutrality test
 *
 * Layout rule (doc/formats.md): slots in file order; inside a per-layer slot the layers' blocks
 * are concatenated, layer 0 first, each with its own shape; a tensor a layer does not have is
 * empty (ln1/ln2 with -ln 0; a kind's slots in the layers of other kinds). With A_l = C for every
 * layer and no kind slots filled this is exactly llm.c's layout, so a uniform model and a Prism model have
 * identical buffers.
 */
#ifndef LLMC_PARAM_LAYOUT_H
#define LLMC_PARAM_LAYOUT_H

#include <stddef.h>
#include <string.h>

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
    NUM_LLMC_SLOTS /* the slots an llm.c checkpoint holds */
} ParamSlot;

#define LLMC_MAX_PARAM_SLOTS 32

/* A tensor a kind owns, stored after llm.c's 16 (doc/formats.md "Per-layer heads"): per layer, sized by the
 * layer's projection (Projection.slot_size); empty in layers of other kinds. */
typedef struct {
    int slot;                 /* its number in the file: NUM_LLMC_SLOTS + its row in KIND_SLOTS */
    const char *name;         /* "sdskew" */
    int decays;               /* 1: AdamW decays it (a matrix) */
    const KindOption *decay_if; /* or: decayed when this option is nonzero; NULL: not */
} KindSlot;

/* The registry's list, defined once per program by kinds/registry.h. */
extern const KindSlot *const KIND_SLOTS[];
extern const int N_KIND_SLOTS;

static inline int param_slot_count(void) { return NUM_LLMC_SLOTS + N_KIND_SLOTS; }

static inline const char *param_slot_name(int slot) {
    static const char *const llmc[NUM_LLMC_SLOTS] = {
        "wte", "wpe", "ln1w", "ln1b", "qkvw", "qkvb", "attprojw", "attprojb",
        "ln2w", "ln2b", "fcw", "fcb", "fcprojw", "fcprojb", "lnfw", "lnfb"};
    return slot < NUM_LLMC_SLOTS ? llmc[slot] : KIND_SLOTS[slot - NUM_LLMC_SLOTS]->name;
}

static inline int slot_is_per_layer(int slot) {
    return (slot >= P_LN1W && slot <= P_FCPROJB) || slot >= NUM_LLMC_SLOTS;
}

/* AdamW decays the matrices only; biases, LayerNorm parameters never; a kind slot as its rule says
 * (S-D's packed skew only on request, doc/methods.md "Parameter counts"). opt: the kinds' option values. */
static inline unsigned param_decay_mask(const KindOptValue *opt) {
    unsigned m = (1u << P_WTE) | (1u << P_WPE) | (1u << P_QKVW) | (1u << P_ATTPROJW) | (1u << P_FCW) |
                 (1u << P_FCPROJW);
    for (int i = 0; i < N_KIND_SLOTS; i++) {
        const KindSlot *k = KIND_SLOTS[i];
        if (k->decays || (k->decay_if != NULL && kind_opt_int(opt, k->decay_if) != 0)) m |= 1u << k->slot;
    }
    return m;
}

static inline int slot_has_weight_decay(int slot, unsigned decay_mask) { return (decay_mask >> slot) & 1u; }

typedef struct {
    size_t slot_size[LLMC_MAX_PARAM_SLOTS];   /* elements in the slot (all layers) */
    size_t slot_offset[LLMC_MAX_PARAM_SLOTS]; /* element offset of the slot in the flat buffer */
    /* element offset of layer l inside a per-layer slot; [L] = slot_size */
    size_t layer_offset[LLMC_MAX_PARAM_SLOTS][LLMC_MAX_LAYERS + 1];
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
    case P_ATTPROJW: return C * A;
    case P_ATTPROJB: return C;
    case P_FCW: return 4 * C * C;
    case P_FCB: return 4 * C;
    case P_FCPROJW: return C * 4 * C;
    case P_FCPROJB: return C;
    default: return slot >= NUM_LLMC_SLOTS ? kind_slot_size(k, c, ls, slot) : 0;
    }
}

static inline void param_layout_init(ParamLayout *p, const GPT2Config *c) {
    size_t C = (size_t)c->channels;
    size_t off = 0;
    memset(p, 0, sizeof(*p));
    for (int i = 0; i < N_KIND_SLOTS; i++)
        if (KIND_SLOTS[i]->slot != NUM_LLMC_SLOTS + i)
            llmc_die("KIND_SLOTS row %d (%s) says slot %d: expected %d (kinds/registry.h)", i, KIND_SLOTS[i]->name,
                     KIND_SLOTS[i]->slot, NUM_LLMC_SLOTS + i);
    for (int s = 0; s < param_slot_count(); s++) {
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
    float *slot[LLMC_MAX_PARAM_SLOTS]; /* every slot's view by number; a kind's own: slot[P_SDSKEW] */
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
    for (int s = 0; s < LLMC_MAX_PARAM_SLOTS; s++) lp.slot[s] = s < param_slot_count() ? base + param_offset(p, s, l) : NULL;
    return lp;
}

/*
 * Forward matmul FLOPs per token of a sequence of length T (2 per multiply-add), counting the
 * softmax attention products over the full T x T square (the causal half is a constant factor for
 * every schedule) and linear attention by its O(d^2) state (doc/methods.md "ELU+1 causal linear attention"). Parameter- and
 * FLOP-neutrality of Prism (doc/prism.md "Parameter and FLOP neutrality") is the statement that this number and
 * param_layout_init's total do not depend on the per-layer head counts.
 */
static inline double model_matmul_flops_per_token(const GPT2Config *c, int T) {
    double C = c->channels;
    double flops = 0.0;
    for (int l = 0; l < c->num_layers; l++) {
        const LayerSpec *ls = &c->layer[l];
        const LayerKind *k = layer_kind_of(ls->kind);
        const double A = attn_width(ls);
        flops += 2.0 * C * k->proj->qkv_rows * A;              /* qkv projection (or a kind's own) */
        if (k->proj->extra_flops) flops += k->proj->extra_flops(ls); /* beyond it (a kind's own) */
        flops += k->mix->flops(ls, T);                         /* mixing: Q K^T and att V, or linear */
        flops += 2.0 * A * C;                                 /* output projection */
        flops += 2.0 * C * 4.0 * C * 2.0;                     /* MLP up and down */
    }
    flops += 2.0 * C * c->vocab_size; /* LM head */
    return flops;
}

#endif /* LLMC_PARAM_LAYOUT_H */
