/*
 * kinds/registry.h: the registry of layer kinds every program links (llmc/layer_kind.h
 * LAYER_KINDS), expanded from kinds/list.h. Include it in exactly one translation unit of a
 * program (its main file): it defines the table.
 */
#ifndef KINDS_REGISTRY_H
#define KINDS_REGISTRY_H

#include "../llmc/layer_kind.h"
#include "../sd_attention/stages.h"
#include "list.h"

#define KINDS_ROW_(code, name, proj, mix) {name, &proj##_PROJECTION, &mix##_MIXER},
extern const LayerKind LAYER_KINDS[];
const LayerKind LAYER_KINDS[] = {LLMC_LAYER_KINDS(KINDS_ROW_)};
#undef KINDS_ROW_
extern const int N_LAYER_KINDS;
const int N_LAYER_KINDS = ATTN_NUM_KINDS;

#endif /* KINDS_REGISTRY_H */
