/*
 * kinds/registry.h: the registry of layer kinds every program links, three literal tables:
 *   LAYER_KINDS    each kind's name in layer tables and its two stages, one row per code of
 *                  kinds/list.h (llmc/layer_kind.h)
 *   KIND_OPTIONS   the options the kinds own: flags, roles, checkpoint bits (llmc/kind_option.h);
 *                  a value's index in GPT2Config.opt and TrainArgs.kind_opt is its row
 *   KIND_SLOTS     the parameter slots the kinds own, in file order after llm.c's 16
 *                  (llmc/param_layout.h); row r is slot 16 + r
 * Include it in exactly one translation unit of a program (its main file): it defines the tables.
 */
#ifndef KINDS_REGISTRY_H
#define KINDS_REGISTRY_H

#include "../llmc/layer_kind.h"
#include "../sd_attention/stages.h"
#include "list.h"

extern const LayerKind LAYER_KINDS[];
const LayerKind LAYER_KINDS[] = {
    /* code          name     projection        mixer */
    /* ATTN_MHA   */ {"mha", &QKV_PROJECTION, &SOFTMAX_MIXER},
    /* ATTN_SD    */ {"sd", &SD_PROJECTION, &SOFTMAX_MIXER},
    /* ATTN_LIN   */ {"lin", &QKV_PROJECTION, &LINEAR_MIXER},
    /* ATTN_SDLIN */ {"sdlin", &SD_PROJECTION, &LINEAR_MIXER},
};
KINDS_ROWS_CHECK(LAYER_KINDS, LAYER_KINDS);
extern const int N_LAYER_KINDS;
const int N_LAYER_KINDS = ATTN_NUM_KINDS;

/* in the order of the trainers' --help and flags.txt */
extern const KindOption *const KIND_OPTIONS[];
const KindOption *const KIND_OPTIONS[] = {
    &SD_SCALAR_D, &SD_SIGN, &SD_INIT_S, &SD_INIT_THETA, &SD_INIT_U, &LIN_PRESCALE, &SD_DECAY_S,
};
extern const int N_KIND_OPTIONS;
const int N_KIND_OPTIONS = (int)(sizeof(KIND_OPTIONS) / sizeof(KIND_OPTIONS[0]));
typedef char KIND_OPTIONS_fit[(sizeof(KIND_OPTIONS) / sizeof(KIND_OPTIONS[0]) <= LLMC_MAX_KIND_OPTIONS) ? 1 : -1];

extern const KindSlot *const KIND_SLOTS[];
const KindSlot *const KIND_SLOTS[] = {
    /* slot 16 */ &SD_SKEW_SLOT,
    /* slot 17 */ &SD_THETA_SLOT,
};
extern const int N_KIND_SLOTS;
const int N_KIND_SLOTS = (int)(sizeof(KIND_SLOTS) / sizeof(KIND_SLOTS[0]));
typedef char KIND_SLOTS_fit[(NUM_LLMC_SLOTS + sizeof(KIND_SLOTS) / sizeof(KIND_SLOTS[0]) <= LLMC_MAX_PARAM_SLOTS) ? 1 : -1];

#endif /* KINDS_REGISTRY_H */
