/*
 * test/flash_mma_emul.h: the register-tile attention kernels (llmc/attention/mma.h) run on the CPU,
 * every block of a kernel's grid in its launch order, every thread a coroutine of test/warp_emul
 * (PTX's mma.sync and shuffle semantics). Used by test/test_mma_emul.cpp and by the
 * trainer's host build (test/host_cuda/kernels_host.cpp), so both run exactly the kernels' code.
 *
 * Defines:
 *   fmma_emulate(a, kind)          one kernel (FMMA_FWD, FMMA_DKDV, FMMA_DQ, and above
 *                                  FMMA_SPLIT_D FMMA_EMUL_DK: then DKDV is dV, EMUL_DK dK) over
 *                                  its whole grid; every block's own tile (queries; dK/dV:
 *                                  keys) has a->BLK rows (64 or 128, at any d: the GPU build
 *                                  has 128 only up to FMMA_RW2_MAX_D);
 *                                  shared memory is NaN before every block and checked for races
 *                                  between barriers (warp_emul_shared)
 *   fmma_emul_thread_fn(d, kind, bq)   the per-thread entry of one kernel, NULL for another d or bq
 *   fmma_emulate_backward(a)       the backward's kernels after the D pass, as the launcher runs
 *                                  them
 */
#ifndef TEST_FLASH_MMA_EMUL_H
#define TEST_FLASH_MMA_EMUL_H

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../llmc/attention/mma.h"
#include "../llmc/utils.h"
#include "warp_emul.h"

struct FmmaBlockArgs {
    const FlashArgs *a;
    int tile, bh;
    char *smem;
};

template <int D, int KIND, int RW>
static inline void fmma_emul_run_thread(int tid, void *p) {
    const FmmaBlockArgs *ba = (const FmmaBlockArgs *)p;
    if (KIND == FMMA_FWD) fmma_fwd_block<D, RW>(ba->a, ba->tile, ba->bh, ba->smem, tid);
    else if (KIND == FMMA_DQ) fmma_dq_block<D, RW>(ba->a, ba->tile, ba->bh, ba->smem, tid);
    else if constexpr (D <= FMMA_SPLIT_D)
        fmma_dkdv_block<D, FMMA_PART_BOTH, RW>(ba->a, ba->tile, ba->bh, ba->smem, tid);
    else if (KIND == FMMA_DKDV) fmma_dkdv_block<D, FMMA_PART_DV, RW>(ba->a, ba->tile, ba->bh, ba->smem, tid);
    else fmma_dkdv_block<D, FMMA_PART_DK, RW>(ba->a, ba->tile, ba->bh, ba->smem, tid);
}

/* kind FMMA_EMUL_DK: the second dK/dV kernel above FMMA_SPLIT_D (dK; FMMA_DKDV is then dV) */
enum { FMMA_EMUL_DK = 3 };

/* the per-thread entry of kernel `kind` for head size D and RW groups per warp */
template <int D, int RW>
static inline WarpEmulFn fmma_emul_kind_fn(int kind) {
    if (kind == FMMA_FWD) return fmma_emul_run_thread<D, FMMA_FWD, RW>;
    if (kind == FMMA_DQ) return fmma_emul_run_thread<D, FMMA_DQ, RW>;
    if (kind == FMMA_DKDV) return fmma_emul_run_thread<D, FMMA_DKDV, RW>;
    return fmma_emul_run_thread<D, FMMA_EMUL_DK, RW>;
}

/* the per-thread entry of one kernel of head size d, the blocks' own tiles bq rows
 * (NULL for a d or bq the kernels do not take) */
static inline WarpEmulFn fmma_emul_thread_fn(int d, int kind, int bq) {
    if (bq != FMMA_BQ && bq != 2 * FMMA_BQ) return NULL;
    const bool two = bq == 2 * FMMA_BQ;
#define FMMA_CASE(D) \
    case D: return two ? fmma_emul_kind_fn<D, 2>(kind) : fmma_emul_kind_fn<D, 1>(kind);
    switch (d) {
        FMMA_CASE(16) FMMA_CASE(32) FMMA_CASE(48) FMMA_CASE(64) FMMA_CASE(80) FMMA_CASE(96) FMMA_CASE(112)
        FMMA_CASE(128) FMMA_CASE(144) FMMA_CASE(160) FMMA_CASE(176) FMMA_CASE(192) FMMA_CASE(208)
        FMMA_CASE(224) FMMA_CASE(240) FMMA_CASE(256)
    default: return NULL;
    }
#undef FMMA_CASE
}

/* Every block of one kernel's grid (B h sequence-heads x tiles) in its launch order: the longest
 * blocks first (forward and dQ: the last query tiles; dK, dV: the first key tiles). */
static inline void fmma_emulate(const FlashArgs *a, int kind) {
    const int nt = (a->T + a->BLK - 1) / a->BLK;
    const size_t bytes = fmma_smem_bytes_bq(kind == FMMA_EMUL_DK ? FMMA_DKDV : kind, a->d, a->BLK);
    WarpEmulFn fn = fmma_emul_thread_fn(a->d, kind, a->BLK);
    if (fn == NULL) {
        fprintf(stderr, "fmma_emulate: head size %d, tiles of %d rows: no kernel of kind %d\n", a->d, a->BLK, kind);
        exit(1);
    }
    char *smem = (char *)xmalloc(bytes);
    for (int y = 0; y < nt; y++)
        for (int bh = 0; bh < a->B * a->h; bh++) {
            memset(smem, 0xff, bytes);
            FmmaBlockArgs ba = {a, kind == FMMA_DKDV || kind == FMMA_EMUL_DK ? y : nt - 1 - y, bh, smem};
            warp_emul_shared(smem, bytes);
            warp_emul_block(FMMA_THREADS, fn, &ba);
        }
    warp_emul_shared(NULL, 0);
    free(smem);
}

/* dK and dV (one kernel, or two above FMMA_SPLIT_D), then dQ: llmc/attention/mma.cu's order */
static inline void fmma_emulate_backward(const FlashArgs *a) {
    fmma_emulate(a, FMMA_DKDV);
    if (a->d > FMMA_SPLIT_D) fmma_emulate(a, FMMA_EMUL_DK);
    fmma_emulate(a, FMMA_DQ);
}

#endif /* TEST_FLASH_MMA_EMUL_H */
