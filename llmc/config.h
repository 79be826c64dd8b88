/*
 * llmc/config.h: the model description both trainers share: shape plus a per-layer table.
 *
 * Defines:
 *   LayerSpec     one layer: heads h, head size d, kind (a code of llmc/layer_kind.h's registry).
 *                 Attention width A = h*d.
 *   GPT2Config    maxT, V, Vp, L, C, base heads, per-block LayerNorm flag, the input scale, the
 *                 values of the kinds' options (llmc/kind_option.h), layer table
 *   EMB_SCALE_MAX the largest input scale a flag or a header may give
 *   config_from_descriptor   "d12", "gpt2:d24", "gpt3:c768", "tiny", "L6C128H2T256",
 *                            "L4C128H4T256V256" (V: the vocabulary, 50257 unless given)
 *   config_set_vocab         V and the padded Vp
 *   config_set_uniform       every layer h heads of size C/h (llm.c's model)
 * What needs the kinds (validation, printing, llm.c compatibility) is in llmc/layer_kind.h.
 *
 * The layer table is the seam for both methods: Prism varies h per layer (d = C/h), S-D
 * attention adds kinds and explicit head sizes (doc/formats.md "Per-layer heads").
 */
#ifndef LLMC_CONFIG_H
#define LLMC_CONFIG_H

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kind_option.h"
#include "utils.h"

#define LLMC_MAX_LAYERS 80 /* the checkpoint header holds 3 ints per layer from slot 16 */
/* Bounds of a model's shape (doc/formats.md "Header"). Inside them every size computed from a config
 * (parameters below 2^44, their bytes, activations of a bounded (B, T)) fits in 64 bits and every
 * per-layer width h*d in an int; a header field, flag or table entry outside them is an error
 * before any arithmetic. GPT-3 175B (C 12288, 96 heads of 128, V 50257) is well inside. */
#define LLMC_MAX_CHANNELS 65536
#define LLMC_MAX_SEQ_LEN 1048576
#define LLMC_MAX_VOCAB 16777216 /* V and the padded Vp */
#define LLMC_MAX_HEADS 4096
#define LLMC_MAX_HEAD_SIZE 4096
#define LLMC_MAX_ATTN_WIDTH 65536 /* h_l * d_l */
#define EMB_SCALE_MAX 1e4f /* -emb_scale and header[10]: 0 < F <= this */
#define GPT2_VOCAB 50257
#define GPT2_EOT 50256

typedef struct LayerSpec {
    int n_head;    /* h_l */
    int head_size; /* d_l; the attention scale is 1/sqrt(d_l) */
    int kind;      /* the layer kind's code: index into LAYER_KINDS (llmc/layer_kind.h) */
} LayerSpec;

typedef struct GPT2Config {
    int max_seq_len;       /* maxT: rows of wpe */
    int vocab_size;        /* V: 50257 (GPT-2), 256 (bytes), or a descriptor's V<vocab> */
    int padded_vocab_size; /* Vp = ceil(V/128)*128 */
    int num_layers;        /* L */
    int channels;          /* C */
    int num_heads;         /* base heads: the uniform model's count, header[5] */
    int use_ln;            /* 1: per-block ln_1/ln_2; 0: -ln 0, blocks without them (ln_f kept) */
    float emb_scale;       /* F: the blocks' input is F (wte[x] + wpe[t]); the tied head reads wte
                            * unscaled (-emb_scale; 1 is GPT-2; doc/methods.md "Training without LayerNorm": the input scale) */
    /* the kinds' options, KIND_OPTIONS[i] in opt[i] (llmc/kind_option.h): the stored ones from
     * the checkpoint or the command line, the init ones from the command line */
    KindOptValue opt[LLMC_MAX_KIND_OPTIONS];
    LayerSpec layer[LLMC_MAX_LAYERS];
} GPT2Config;

static inline int attn_width(const LayerSpec *ls) { return ls->n_head * ls->head_size; }

static inline void config_set_uniform(GPT2Config *c, int heads) {
    c->num_heads = heads;
    for (int l = 0; l < c->num_layers; l++) {
        c->layer[l].n_head = heads;
        c->layer[l].head_size = heads > 0 ? c->channels / heads : 0;
        c->layer[l].kind = 0; /* mha (LAYER_KIND_MHA) */
    }
}

/* V and the padded Vp = ceil(V/128)*128 (doc/formats.md "Header"); V in [2, LLMC_MAX_VOCAB]. */
static inline void config_set_vocab(GPT2Config *c, int V) {
    c->vocab_size = V;
    c->padded_vocab_size = (int)(((long long)V + 127) / 128 * 128);
}

/* ----------------------------------------------------------------------------------------------
 * Descriptors (doc/formats.md "The 16 parameter tensors" for dN and gpt3:cC, "The byte vocabulary and its shards" for V<vocab>). Returns 1 on success; on failure
 * writes the reason to msg. */
static inline void config_shape(GPT2Config *c, int maxT, int L, int C, int NH) {
    memset(c, 0, sizeof(*c));
    c->max_seq_len = maxT;
    config_set_vocab(c, GPT2_VOCAB);
    c->num_layers = L;
    c->channels = C;
    c->use_ln = 1;
    c->emb_scale = 1.0f;
    kind_options_defaults(c->opt);
    config_set_uniform(c, NH);
}

static inline int parse_positive_int(const char *s, const char **end, int *out) {
    long v = 0;
    const char *p = s;
    if (*p < '0' || *p > '9') return 0;
    while (*p >= '0' && *p <= '9') {
        v = v * 10 + (*p - '0');
        if (v > 1000000000L) return 0;
        p++;
    }
    if (v < 1) return 0;
    *out = (int)v;
    *end = p;
    return 1;
}

static inline int config_from_descriptor(const char *desc, GPT2Config *c, char *msg, size_t cap) {
    static const int gpt2_depth[] = {6, 12, 24, 36, 48, 60, 72, 84};
    static const int gpt2_width[] = {384, 768, 1024, 1280, 1600, 1920, 2880, 3456};
    static const int gpt2_heads[] = {6, 12, 16, 20, 25, 30, 30, 36};
    static const int gpt3_width[] = {384, 768, 1024, 1536, 2048, 2560, 4096, 5140, 12288};
    static const int gpt3_depth[] = {6, 12, 24, 24, 24, 32, 32, 40, 96};
    static const int gpt3_hsize[] = {64, 64, 64, 96, 128, 80, 128, 128, 128};
    const char *p = desc;
    const char *end = NULL;
    int v = 0;

    if (strcmp(desc, "tiny") == 0) {
        config_shape(c, 64, 4, 64, 4);
        return 1;
    }
    if (strncmp(p, "gpt2:", 5) == 0) p += 5;
    if (p[0] == 'd' && parse_positive_int(p + 1, &end, &v) && *end == '\0') {
        for (int i = 0; i < 8; i++) {
            if (gpt2_depth[i] == v) {
                config_shape(c, 1024, v, gpt2_width[i], gpt2_heads[i]);
                return 1;
            }
        }
        snprintf(msg, cap, "descriptor '%s': depth %d not in {6,12,24,36,48,60,72,84}", desc, v);
        return 0;
    }
    if (strncmp(desc, "gpt3:c", 6) == 0) {
        if (parse_positive_int(desc + 6, &end, &v) && *end == '\0') {
            for (int i = 0; i < 9; i++) {
                if (gpt3_width[i] == v) {
                    if (v % gpt3_hsize[i] != 0) {
                        snprintf(msg, cap, "descriptor '%s': C %d is not a multiple of head size %d",
                                 desc, v, gpt3_hsize[i]);
                        return 0;
                    }
                    config_shape(c, 2048, gpt3_depth[i], v, v / gpt3_hsize[i]);
                    return 1;
                }
            }
        }
        snprintf(msg, cap, "descriptor '%s': C not in llm.c's GPT-3 table "
                 "{384,768,1024,1536,2048,2560,4096,12288}", desc);
        return 0;
    }
    if (desc[0] == 'L') {
        int L = 0, C = 0, H = 0, T = 1024, V = GPT2_VOCAB;
        p = desc + 1;
        int ok = parse_positive_int(p, &end, &L) && *end == 'C' && parse_positive_int(end + 1, &end, &C) &&
                 *end == 'H' && parse_positive_int(end + 1, &end, &H);
        if (ok && *end == 'T') ok = parse_positive_int(end + 1, &end, &T);
        if (ok && *end == 'V') {
            /* the vocabulary: V = 256 is the byte vocabulary (doc/formats.md "The byte vocabulary and its shards") */
            if (!parse_positive_int(end + 1, &end, &V) || *end != '\0' || V < 2 || V > LLMC_MAX_VOCAB) {
                snprintf(msg, cap, "descriptor '%s': V<vocab> expects an integer in [2, %d] at the end, e.g. L2C64H2T64V256", desc,
                         LLMC_MAX_VOCAB);
                return 0;
            }
        }
        if (ok && *end == '\0') {
            if (L > LLMC_MAX_LAYERS) {
                snprintf(msg, cap, "descriptor '%s': %d layers, at most %d", desc, L, LLMC_MAX_LAYERS);
                return 0;
            }
            if (C % H != 0) {
                snprintf(msg, cap, "descriptor '%s': %d heads do not divide C = %d", desc, H, C);
                return 0;
            }
            config_shape(c, T, L, C, H);
            config_set_vocab(c, V);
            return 1;
        }
        snprintf(msg, cap, "descriptor '%s': expected L<layers>C<channels>H<heads>[T<maxT>][V<vocab>], "
                 "e.g. L6C128H2T256 or L4C128H4T256V256", desc);
        return 0;
    }
    snprintf(msg, cap, "descriptor '%s': expected a .bin checkpoint, dN, gpt2:dN, gpt3:cC, tiny "
             "or L<l>C<c>H<h>[T<t>][V<v>]", desc);
    return 0;
}

static inline int config_is_descriptor_like(const char *s) {
    size_t n = strlen(s);
    return !(n >= 4 && strcmp(s + n - 4, ".bin") == 0);
}

#endif /* LLMC_CONFIG_H */
