/*
 * test/toy_kind.h: a toy layer kind, written as a method folder would write one, to show and test
 * what adding a kind takes (doc/design.md "Adding a kind: a walk-through"). It is not a method:
 * test/test_layer_kind.c registers it beside mha and checks every place the framework reads it.
 *
 * The kind "toy" is softmax attention whose queries are scaled per head by a learned gain:
 * q_k <- s_k q_k with s_k = g_k, or g_k^2 with -toy_square 1. It owns
 *   TOY_GAIN_SLOT    a parameter tensor, slot 16 in a program whose registry lists it first:
 *                    (h) per toy layer, empty in other layers, never weight-decayed
 *   TOY_GAIN_INIT    -toy_gain_init: the gains' initial value (an init option: not stored)
 *   TOY_SQUARE       -toy_square: s = g^2 instead of g (a model option: stored as bit 16 of the
 *                    checkpoint's header[9])
 *   TOY_PROJECTION, TOY_PROJECTION_CPU   its projection: what every program knows of it, and its
 *                    CPU forward and backward; the mixer is the framework's softmax
 */
#ifndef TEST_TOY_KIND_H
#define TEST_TOY_KIND_H

#include <stdio.h>
#include <string.h>

#include "../llmc/config.h"
#include "../llmc/cpu/kind_cpu.h"
#include "../llmc/kind_option.h"
#include "../llmc/layer_kind.h"
#include "../llmc/param_layout.h"

/* 1. Its options and its parameter slot. */
static const KindOption TOY_GAIN_INIT = {
    .cli = KIND_FLAG(CLI_TYPE_FLOAT, "-toy_gain_init", -10.0, 10.0,
                     "toy init: the query gains' initial value"),
    .dflt = 1.0, .role = KIND_OPT_INIT, .header_bit = 0, .bit_value = 0};
static const KindOption TOY_SQUARE = {
    .cli = KIND_FLAG(CLI_TYPE_INT, "-toy_square", 0, 1,
                     "1: toy layers scale their queries by g^2 instead of g"),
    .dflt = 0, .role = KIND_OPT_MODEL, .header_bit = 16, .bit_value = 1};
enum { P_TOYGAIN = NUM_LLMC_SLOTS };
static const KindSlot TOY_GAIN_SLOT = {P_TOYGAIN, "toygain", 0, NULL};

static inline int toy_opt_square(const GPT2Config *c) { return kind_opt_int(c->opt, &TOY_SQUARE); }

/* 2. The projection as every program sees it: shapes, init, buffers, start-up line. */
static inline size_t toy_slot_size(const GPT2Config *c, const LayerSpec *ls, int slot) {
    (void)c;
    return slot == P_TOYGAIN ? (size_t)ls->n_head : 0;
}

/* the gains are set, not drawn: the random stream is mha's, so a toy layer with gain 1 is an mha
 * layer with the same weights */
static inline void toy_init(const GPT2Config *c, const LayerSpec *ls, const LayerParams *p, TorchGenerator *g) {
    (void)g;
    for (int k = 0; k < ls->n_head; k++) p->slot[P_TOYGAIN][k] = kind_opt_float(c->opt, &TOY_GAIN_INIT);
}

static inline void toy_describe(const GPT2Config *c, FILE *out) {
    fprintf(out, ", toy query gain %s", toy_opt_square(c) ? "g^2" : "g");
}

/* the queries before the gain (B T, A), for the backward */
static inline size_t toy_cpu_state(const LayerSpec *ls, size_t N) { return N * (size_t)attn_width(ls); }

static const Projection TOY_PROJECTION = {"toy", 3, toy_slot_size, NULL, toy_init, toy_describe,
                                          toy_cpu_state, NULL, NULL, NULL, NULL};

/* 3. Its CPU forward and backward (llmc/cpu/kind_cpu.h). */
static inline float toy_scale(const GPT2Config *c, float g) { return toy_opt_square(c) ? g * g : g; }

static inline void toy_projection_forward(const CpuStageArgs *a) {
    qkv_projection_forward(a);
    const int h = a->ls->n_head, d = a->ls->head_size, A = h * d;
    const size_t N = (size_t)a->B * a->T;
    const float *gain = a->p->slot[P_TOYGAIN];
    for (size_t n = 0; n < N; n++) {
        float *q = a->qkv + n * 3 * A;
        memcpy(a->proj_state + n * A, q, (size_t)A * sizeof(float));
        for (int i = 0; i < A; i++) q[i] *= toy_scale(a->c, gain[i / d]);
    }
}

static inline void toy_projection_backward(const CpuStageArgs *a) {
    const int h = a->ls->n_head, d = a->ls->head_size, A = h * d;
    const size_t N = (size_t)a->B * a->T;
    const float *gain = a->p->slot[P_TOYGAIN];
    for (int k = 0; k < h; k++) {
        double ds = 0.0; /* dL/ds_k = sum dq . q_raw over the head's columns */
        for (size_t n = 0; n < N; n++) {
            float *dq = a->dqkv + n * 3 * A + (size_t)k * d;
            const float *q = a->proj_state + n * A + (size_t)k * d;
            for (int j = 0; j < d; j++) {
                ds += (double)dq[j] * q[j];
                dq[j] *= toy_scale(a->c, gain[k]);
            }
        }
        a->dp->slot[P_TOYGAIN][k] += (float)(ds * (toy_opt_square(a->c) ? 2.0 * gain[k] : 1.0));
    }
    qkv_projection_backward(a);
}

static const CpuStage TOY_PROJECTION_CPU = {toy_projection_forward, toy_projection_backward};

#endif /* TEST_TOY_KIND_H */
