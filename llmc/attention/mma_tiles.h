/*
 * llmc/attention/mma_tiles.h: the tile shapes of the register-tile attention kernels (mma.h), their
 * shared memory, and the rule of which head sizes they serve on a GPU: what the path selection
 * (llmc/attention/paths.h) and the launchers need without the kernels.
 *
 * Defines: FMMA_THREADS, FMMA_BQ, FMMA_BK, FMMA_PAD, FMMA_FWD / FMMA_DKDV / FMMA_DQ, FMMA_SPLIT_D,
 *   FMMA_STAGES, FMMA_RW2_MAX_D, fmma_block_rows, fmma_smem_bytes(_bq, _kind), fmma_supports_dir
 */
#ifndef LLMC_MMA_TILES_H
#define LLMC_MMA_TILES_H

#include <stddef.h>
#include <stdio.h>

#include "../scalar_math.h" /* LLMC_HD */

#define FMMA_THREADS 128
#define FMMA_BQ 64
#define FMMA_BK 64
#define FMMA_PAD 8
/* every loop over fragments is unrolled: the accumulators must stay registers (an index the
 * compiler cannot resolve puts an array in local memory); the tile copies' loop is kept rolled
 * (unrolled, the compiler hoists every piece's addresses out of the tile loop into registers:
 * up to 32 more per thread, and spills at d >= 160) */

enum { FMMA_FWD = 0, FMMA_DKDV = 1, FMMA_DQ = 2 };
/* above this head size dK and dV (d / 2 fp32 registers per lane each) are computed by two kernels */
#define FMMA_SPLIT_D 128
/* up to this head size the streamed tiles are double-buffered (the next one loads during the
 * current one's products); above, one buffer keeps a block within an A100's 163 KB */
#define FMMA_STAGE2_MAX_D 128
#define FMMA_STAGES(d) ((d) <= FMMA_STAGE2_MAX_D ? 2 : 1)

/* Rows of the tile a block owns (queries in the forward and dQ, keys in dK/dV): 128 (RW = 2
 * groups of 16 rows per warp) up to this head size, 64 above, where two groups' scores and
 * accumulators (forward 2 x 16 x (64 + d) fp32 per warp, dQ 2 x 16 x (2 x 64 + d), dK/dV
 * 2 x 16 x (2 x 32 + 2 d)) would not fit in registers. */
#define FMMA_RW2_MAX_D 64
static inline LLMC_HD int fmma_block_rows(int d) { return d <= FMMA_RW2_MAX_D ? 2 * FMMA_BQ : FMMA_BQ; }

/* Shared memory of one block: bf16 tiles of 64 rows x d (rows of d + 8; the block's own tiles, Q
 * and dO or K and V, bq rows), S = FMMA_STAGES(d) of each streamed one, plus the backward's
 * per-query lse and D (64 fp32 each, per stage).
 *   forward  Q; S x (K, V)
 *   dK, dV   K, V; S x (Q, dO, lse, D)
 *   dQ       Q, dO; S x (K, V) */
static inline LLMC_HD size_t fmma_smem_bytes_bq(int kind, int d, int bq) {
    const size_t row = (size_t)(d + FMMA_PAD) * 2, tile = FMMA_BQ * row, stages = FMMA_STAGES(d);
    if (kind == FMMA_FWD) return bq * row + 2 * stages * tile;
    if (kind == FMMA_DKDV) return 2 * bq * row + 2 * stages * tile + stages * 2 * FMMA_BQ * sizeof(float);
    return 2 * bq * row + 2 * stages * tile;
}
static inline LLMC_HD size_t fmma_smem_bytes_kind(int kind, int d) {
    return fmma_smem_bytes_bq(kind, d, fmma_block_rows(d));
}
static inline LLMC_HD size_t fmma_smem_bytes(int d) { return fmma_smem_bytes_kind(FMMA_FWD, d); }

/* Host: 1 if the kernels can run head size d on an SM `sm` GPU with `smem_optin` bytes of shared
 * memory per block (training: the backward too); else 0 with the reason. */
static inline int fmma_supports_dir(int d, int training, int sm, size_t smem_optin, char *why, size_t cap) {
    if (d < 16 || d > 256 || d % 16 != 0) {
        snprintf(why, cap, "head size %d: the register-tile kernel needs a multiple of 16 in [16, 256]", d);
        return 0;
    }
    if (sm < 80) {
        snprintf(why, cap, "mma.sync with bf16 needs SM 8.0 or newer; this GPU is SM %d.%d", sm / 10, sm % 10);
        return 0;
    }
    /* training: the larger of the dK/dV and dQ blocks (both hold more tiles than the forward's) */
    const size_t dkdv = fmma_smem_bytes_kind(FMMA_DKDV, d), dq = fmma_smem_bytes_kind(FMMA_DQ, d);
    const size_t need = training ? (dkdv > dq ? dkdv : dq) : fmma_smem_bytes(d);
    if (need > smem_optin) {
        snprintf(why, cap, "head size %d: %zu bytes of shared memory per block, %zu available", d, need, smem_optin);
        return 0;
    }
    if (why && cap) why[0] = '\0';
    return 1;
}

#endif /* LLMC_MMA_TILES_H */
