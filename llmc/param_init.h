/*
 * llmc/param_init.h: GPT-2's weight init, from (config, layout, buffer) alone, so that the CPU
 * model, the GPU trainer and the tools draw exactly the same weights as train_gpt2.py for a seed.
 *
 * Defines:
 *   param_init_gpt2   one torch-identical normal_ draw per tensor in PyTorch's module order
 *                     (doc/formats.md "Random init and RNG order"): wte (its first V rows), wpe, then per layer qkvw, the
 *                     projection stage's own parameters (llmc/layer_kind.h init: S-D's packed skew
 *                     and theta), attprojw, fcw, fcprojw. Residual projections use std
 *                     0.02/sqrt(2L); LayerNorm weights are 1, everything else 0.
 */
#ifndef LLMC_PARAM_INIT_H
#define LLMC_PARAM_INIT_H

#include <math.h>
#include <stdint.h>
#include <string.h>

#include "config.h"
#include "layer_kind.h"
#include "param_layout.h"
#include "rand.h"

static inline void param_init_gpt2(const GPT2Config *c, const ParamLayout *p, float *w, uint32_t seed) {
    memset(w, 0, p->total * sizeof(float));
    TorchGenerator g;
    torch_generator_seed(&g, seed);
    const float std = 0.02f;
    const float resid_std = 0.02f / sqrtf(2.0f * (float)c->num_layers);
    torch_normal_(w + p->slot_offset[P_WTE], (size_t)c->vocab_size * c->channels, 0.0f, std, &g);
    torch_normal_(w + p->slot_offset[P_WPE], p->slot_size[P_WPE], 0.0f, std, &g);
    for (int l = 0; l < c->num_layers; l++) {
        const LayerSpec *ls = &c->layer[l];
        const LayerParams lp = layer_params(w, p, l);
        torch_normal_(lp.qkvw, layer_slot_size(c, l, P_QKVW), 0.0f, std, &g);
        const LayerKind *k = layer_kind_of(ls->kind);
        if (k->proj->init) k->proj->init(c, ls, &lp, &g);
        torch_normal_(lp.attprojw, layer_slot_size(c, l, P_ATTPROJW), 0.0f, resid_std, &g);
        torch_normal_(lp.fcw, layer_slot_size(c, l, P_FCW), 0.0f, std, &g);
        torch_normal_(lp.fcprojw, layer_slot_size(c, l, P_FCPROJW), 0.0f, resid_std, &g);
    }
    const int ones[] = {P_LN1W, P_LN2W, P_LNFW};
    for (int i = 0; i < 3; i++)
        for (size_t k = 0; k < p->slot_size[ones[i]]; k++) w[p->slot_offset[ones[i]] + k] = 1.0f;
}

#endif /* LLMC_PARAM_INIT_H */
