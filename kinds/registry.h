/*
 * kinds/registry.h: the registry of layer kinds every program links (llmc/layer_kind.h
 * LAYER_KINDS): each kind's name in layer tables and its two stages, one row per code of
 * kinds/list.h. Include it in exactly one translation unit of a program (its main file): it
 * defines the table.
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

#endif /* KINDS_REGISTRY_H */
