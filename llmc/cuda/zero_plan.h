/*
 * llmc/cuda/zero_plan.h: which optimizer state each process owns under ZeRO-0/1 (doc/formats.md "Optimizer/DataLoader state",
 * 14), in plain C so that it is unit-tested on the CPU (test/test_cuda_host.c).
 *
 * Defines: ShardSeg, ShardPlan, shard_plan_init   segments per (tensor, layer) in llm.c's
 *          state-file order
 */
#ifndef LLMC_ZERO_PLAN_H
#define LLMC_ZERO_PLAN_H

#include <stddef.h>
#include <stdio.h>
#include <string.h>

#include "../config.h"
#include "../param_layout.h"

/* ----------------------------------------------------------------------------------------------
 * ZeRO shard plan (doc/formats.md "Optimizer/DataLoader state", "Multi-GPU"). The optimizer state (m, v, fp32 master weights) is a list of
 * segments, one per (tensor slot, layer) in checkpoint order: with ZeRO-0 each segment is the whole
 * block; with ZeRO-1 it is this rank's contiguous 1/nproc slice of the block. The rank's state
 * buffers hold the segments back to back, which is exactly llm.c's state-file body. */
typedef struct {
    int slot, layer;   /* layer 0 for wte, wpe, lnfw, lnfb */
    size_t block_off;  /* offset of the whole (slot, layer) block in the parameter buffer */
    size_t block_size; /* elements of the block */
    size_t global_off; /* offset of this rank's part in the parameter buffer */
    size_t count;      /* elements this rank updates */
    size_t shard_off;  /* offset in this rank's m / v / master buffers */
} ShardSeg;

#define SHARD_MAX_SEGS (LLMC_MAX_PARAM_SLOTS * LLMC_MAX_LAYERS)

typedef struct {
    int zero_stage, nproc, rank;
    int nseg;
    ShardSeg seg[SHARD_MAX_SEGS];
    size_t shard_total; /* elements of this rank's optimizer buffers */
} ShardPlan;

/* Returns 1, or 0 with the reason in err (ZeRO-1 needs every block divisible by nproc). */
static inline int shard_plan_init(ShardPlan *s, const ParamLayout *pl, const GPT2Config *c,
                                  int zero_stage, int nproc, int rank, char *err, size_t cap) {
    memset(s, 0, sizeof(*s));
    s->zero_stage = zero_stage;
    s->nproc = nproc;
    s->rank = rank;
    if (nproc < 1 || rank < 0 || rank >= nproc) {
        snprintf(err, cap, "rank %d of %d processes: expected 0 <= rank < processes", rank, nproc);
        return 0;
    }
    const int sharded = zero_stage == 1 && nproc > 1;
    size_t shard_off = 0;
    for (int slot = 0; slot < param_slot_count(); slot++) {
        const int layers = slot_is_per_layer(slot) ? c->num_layers : 1;
        for (int l = 0; l < layers; l++) {
            const size_t block_off = param_offset(pl, slot, l);
            const size_t size = slot_is_per_layer(slot) ? layer_slot_size(c, l, slot) : pl->slot_size[slot];
            if (size == 0) continue;
            if (sharded && size % (size_t)nproc != 0) {
                snprintf(err, cap, "-z 1: tensor %s, layer %d: %zu elements are not divisible by %d "
                         "processes (ZeRO-1 shards every tensor evenly); use -z 0",
                         param_slot_name(slot), l, size, nproc);
                return 0;
            }
            ShardSeg *g = &s->seg[s->nseg++];
            g->slot = slot;
            g->layer = l;
            g->block_off = block_off;
            g->block_size = size;
            g->count = sharded ? size / (size_t)nproc : size;
            g->global_off = block_off + (sharded ? (size_t)rank * g->count : 0);
            g->shard_off = shard_off;
            shard_off += g->count;
        }
    }
    s->shard_total = shard_off;
    return 1;
}

#endif /* LLMC_ZERO_PLAN_H */
