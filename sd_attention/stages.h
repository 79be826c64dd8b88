/*
 * sd_attention/stages.h: the S-D projection and the ELU+1 linear mixer as every program sees
 * them (llmc/layer_kind.h): parameter shapes, init, FLOPs, buffer sizes, the start-up line. Their
 * CPU kernels are in sd_cpu.h and linear_cpu.h, their GPU kernels in sd_fold.cu and
 * linear_scan.cu; the registry tables of kinds/ pair them into the kinds sd, lin and sdlin.
 *
 * SD_PROJECTION (Jamil and Kapadia, arXiv 2605.18826; doc/methods.md "Formulation A", "Parameter counts", "Realization with the standard attention kernels"): per head one
 * projection u = x W_U + b_U serves as query, and the key is the fold k' = u L^T with the
 * generator L = S -/+ D (generator.h), so that q k'^T = u L u^T. Parameters of layer l: qkvw
 * (2A, C) = U rows then V rows, qkvb (2A), sdskew (h, d(d-1)/2), sdtheta (h, d) or (h).
 *
 * LINEAR_MIXER (Katharopoulos et al. 2020, arXiv 2006.16236; doc/methods.md "ELU+1 causal linear attention"): causal
 * attention with the positive feature map phi = ELU + 1 instead of the softmax,
 * o_t = sum_{s<=t} (phi(q_t) . phi(k_s)) v_s / (sum_{s<=t} phi(q_t) . phi(k_s) + eps).
 *
 * The options and parameter slots they own, listed by kinds/registry.h (llmc/kind_option.h,
 * llmc/param_layout.h KindSlot; doc/formats.md "Per-layer heads" for the header bits and slots):
 *   SD_SCALAR_D     -sd_scalar_d   1: one filtering value per head, D_h = softplus(theta_h) I (header[9] & 2)
 *   SD_SIGN         -sd_sign       logits u (S + sign D) u^T: -1, or +1 for the ablation (header[9] & 4)
 *   SD_INIT_S, SD_INIT_THETA, SD_INIT_U   -sd_init_*: the init of S, theta and U (doc/methods.md "Parameter counts")
 *   LIN_PRESCALE    -lin_prescale  1: the linear mixer scales q, k by d^(-1/4) before phi (header[9] & 8)
 *   SD_DECAY_S      -sd_decay_s    1: AdamW decays the packed skew too
 *   P_SDSKEW, P_SDTHETA   slots 16 and 17: per head the strict upper triangle of S (row-major,
 *                   i < j; S_ij = s, S_ji = -s), and theta, (h, d) or (h) with scalar D
 *   sd_opt_* / lin_opt_prescale   the values of a config
 *
 * Also: sd_layer, linear_layer   whether a layer uses these stages (the S-D tools ask).
 */
#ifndef SD_STAGES_H
#define SD_STAGES_H

#include <stddef.h>
#include <stdio.h>
#include <string.h>

#include "../llmc/config.h"
#include "../llmc/kind_option.h"
#include "../llmc/layer_kind.h"
#include "../llmc/param_layout.h"
#include "../llmc/rand.h"
#include "generator.h"
#include "linear_scan.h" /* lin_scratch_floats */

/* ----------------------------------------------------------------------------------------------
 * The options and slots. */
static const KindOption SD_SCALAR_D = {
    .cli = KIND_FLAG(CLI_TYPE_INT, "-sd_scalar_d", 0, 1,
                     "1: S-D filtering D = softplus(theta_h) I, one value per head"),
    .dflt = 0, .role = KIND_OPT_MODEL, .header_bit = 2, .bit_value = 1};
static const KindOption SD_SIGN = {
    .cli = KIND_FLAG(CLI_TYPE_INT, "-sd_sign", -1, 1,
                     "S-D logits u (S + sign D) u^T: -1 (stable, the default) or +1"),
    .dflt = -1, .role = KIND_OPT_MODEL, .header_bit = 4, .bit_value = 1};
/* S learned from zero by default: its spectrum is then training's (doc/sd_attention.md) */
static const KindOption SD_INIT_S = {
    .cli = KIND_FLAG(CLI_TYPE_FLOAT, "-sd_init_s", 0.0, 1e3,
                     "S-D init: std of the packed skew parameters (0: S starts at zero; the authors' code: 0.1)"),
    .dflt = 0.0, .role = KIND_OPT_INIT, .header_bit = 0, .bit_value = 0};
static const KindOption SD_INIT_THETA = {
    .cli = KIND_FLAG(CLI_TYPE_FLOAT, "-sd_init_theta", -1e3, 1e3,
                     "S-D init: theta (D = softplus(theta))"),
    .dflt = 0.1, .role = KIND_OPT_INIT, .header_bit = 0, .bit_value = 0};
static const KindOption SD_INIT_U = {
    .cli = KIND_FLAG(CLI_TYPE_FLOAT, "-sd_init_u", 1e-6, 1e3,
                     "S-D init: std of U, the query/key projection (logit scale ~ its square)"),
    .dflt = 0.02, .role = KIND_OPT_INIT, .header_bit = 0, .bit_value = 0};
static const KindOption LIN_PRESCALE = {
    .cli = KIND_FLAG(CLI_TYPE_INT, "-lin_prescale", 0, 1,
                     "1: linear layers scale q, k by d^-1/4 before ELU+1"),
    .dflt = 0, .role = KIND_OPT_MODEL, .header_bit = 8, .bit_value = 1};
static const KindOption SD_DECAY_S = {
    .cli = KIND_FLAG(CLI_TYPE_INT, "-sd_decay_s", 0, 1,
                     "1: weight decay on the packed S-D skew parameters"),
    .dflt = 0, .role = KIND_OPT_TRAIN, .header_bit = 0, .bit_value = 0};

enum { P_SDSKEW = NUM_LLMC_SLOTS, P_SDTHETA };
static const KindSlot SD_SKEW_SLOT = {P_SDSKEW, "sdskew", 0, &SD_DECAY_S};
static const KindSlot SD_THETA_SLOT = {P_SDTHETA, "sdtheta", 0, NULL};

static inline int sd_opt_scalar_d(const GPT2Config *c) { return kind_opt_int(c->opt, &SD_SCALAR_D); }
static inline int sd_opt_sign(const GPT2Config *c) { return kind_opt_int(c->opt, &SD_SIGN); }
static inline float sd_opt_init_s(const GPT2Config *c) { return kind_opt_float(c->opt, &SD_INIT_S); }
static inline float sd_opt_init_theta(const GPT2Config *c) { return kind_opt_float(c->opt, &SD_INIT_THETA); }
static inline float sd_opt_init_u(const GPT2Config *c) { return kind_opt_float(c->opt, &SD_INIT_U); }
static inline int lin_opt_prescale(const GPT2Config *c) { return kind_opt_int(c->opt, &LIN_PRESCALE); }

/* ----------------------------------------------------------------------------------------------
 * The S-D projection. */
static inline size_t sd_slot_size(const GPT2Config *c, const LayerSpec *ls, int slot) {
    const size_t h = (size_t)ls->n_head;
    if (slot == P_SDSKEW) return h * sd_pack_count(ls->head_size);
    if (slot == P_SDTHETA) return sd_opt_scalar_d(c) ? h : h * (size_t)ls->head_size;
    return 0;
}

/* K' = U L^T: per head a d x d product per token */
static inline double sd_extra_flops(const LayerSpec *ls) {
    return 2.0 * attn_width(ls) * ls->head_size;
}

/* After qkvw's draw (std 0.02): the U rows (the first A of the 2A) rescaled to std sd_init_u, so
 * that the generator's stream is the same whatever sd_init_u is; then S ~ N(0, sd_init_s^2) and
 * theta = sd_init_theta (doc/methods.md "Parameter counts"). */
static inline void sd_init(const GPT2Config *c, const LayerSpec *ls, const LayerParams *p,
                           TorchGenerator *g) {
    const float std = 0.02f, init_u = sd_opt_init_u(c);
    if (init_u != std) {
        const float f = init_u / std;
        const size_t n = (size_t)attn_width(ls) * c->channels;
        for (size_t k = 0; k < n; k++) p->qkvw[k] *= f;
    }
    torch_normal_(p->slot[P_SDSKEW], sd_slot_size(c, ls, P_SDSKEW), 0.0f, sd_opt_init_s(c), g);
    const size_t nt = sd_slot_size(c, ls, P_SDTHETA);
    const float theta = sd_opt_init_theta(c);
    for (size_t k = 0; k < nt; k++) p->slot[P_SDTHETA][k] = theta;
}

static inline void sd_describe(const GPT2Config *c, FILE *out) {
    fprintf(out, ", S-D logits u (S %c D) u^T%s", sd_opt_sign(c) < 0 ? '-' : '+',
            sd_opt_scalar_d(c) ? " with scalar D" : "");
}

/* the generators L (h, d, d): built in the forward, read by the backward; dL in the backward */
static inline size_t sd_generator_floats(const LayerSpec *ls) {
    return (size_t)ls->n_head * ls->head_size * ls->head_size;
}
static inline size_t sd_cpu_state(const LayerSpec *ls, size_t N) { (void)N; return sd_generator_floats(ls); }
static inline size_t sd_cpu_scratch(const LayerSpec *ls, size_t N) { (void)N; return sd_generator_floats(ls); }
/* the GPU's U | V projection (bf16, then its gradient) */
static inline size_t sd_gpu_scratch_bf16(const LayerSpec *ls, size_t N) { return N * 2 * (size_t)attn_width(ls); }
static inline size_t sd_gpu_scratch_f32(const LayerSpec *ls, size_t N) { (void)N; return sd_generator_floats(ls); }

static const Projection SD_PROJECTION = {
    "sd", 2, sd_slot_size, sd_extra_flops, sd_init, sd_describe,
    sd_cpu_state, sd_cpu_scratch, sd_generator_floats, sd_gpu_scratch_bf16, sd_gpu_scratch_f32};

/* ----------------------------------------------------------------------------------------------
 * The linear mixer. */

/* state += k~^T v and q~ . state: O(d^2) per head and token */
static inline double linear_flops(const LayerSpec *ls, int T) {
    (void)T;
    return 2.0 * 2.0 * attn_width(ls) * ls->head_size;
}

static inline void linear_describe(const GPT2Config *c, FILE *out) {
    if (lin_opt_prescale(c)) fprintf(out, ", linear q/k prescaled by d^-1/4");
}

/* the CPU reference keeps phi(q), phi(k) (B, T, 2A) and the normalizers Z (B, h, T) */
static inline size_t linear_cpu_state(const LayerSpec *ls, int B, int T) {
    const size_t N = (size_t)B * T;
    return N * 2 * (size_t)attn_width(ls) + N * (size_t)ls->n_head;
}
static inline size_t linear_gpu_scratch(const LayerSpec *ls, size_t N) {
    return lin_scratch_floats(N, ls->n_head, ls->head_size);
}

static const Mixer LINEAR_MIXER = {"linear", 0, linear_flops, 1.0, linear_describe, linear_cpu_state,
                                   linear_gpu_scratch};

/* ----------------------------------------------------------------------------------------------
 * Which layers use them (by name: the stages are static objects of every translation unit). */
static inline int sd_layer(const LayerSpec *ls) {
    const LayerKind *k = layer_kind_of(ls->kind);
    return k != NULL && strcmp(k->proj->name, SD_PROJECTION.name) == 0;
}
static inline int linear_layer(const LayerSpec *ls) {
    const LayerKind *k = layer_kind_of(ls->kind);
    return k != NULL && strcmp(k->mix->name, LINEAR_MIXER.name) == 0;
}

#endif /* SD_STAGES_H */
