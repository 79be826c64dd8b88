/*
 * llmc/attention/flash_tiles.h: the arguments of the own tiled attention kernels (flash.h), their
 * shared-memory layout and the choice of tile rows for a head size: what the path selection
 * (llmc/attention/paths.h) and the launchers need without the kernels.
 *
 * Defines: FlashArgs, FLASH_MAX_D, FlashSmem, flash_carve, flash_smem_bytes, flash_smem_max,
 *   flash_choose (host: BLK for a d and a shared-memory limit, or 0 with why)
 */
#ifndef LLMC_FLASH_TILES_H
#define LLMC_FLASH_TILES_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "../scalar_math.h" /* LLMC_HD */

#define FLASH_MAX_D 256

enum { FLASH_FWD = 0, FLASH_DKDV = 1, FLASH_DQ = 2 };

typedef struct {
    const uint16_t *qkv;  /* (B, T, 3A), A = h d: Q | K | V, head k at columns [k d, (k+1) d) */
    const uint16_t *out;  /* (B, T, A) the forward's output (backward: D = dO . O) */
    const uint16_t *dout; /* (B, T, A) */
    uint16_t *o;          /* forward output (B, T, A) */
    float *lse;           /* (B, h, T): written forward, read backward */
    float *D;             /* (B, h, T) backward scratch: D = dO . O per row, once per backward */
    uint16_t *dqkv;       /* (B, T, 3A) backward output, every element written once */
    int B, T, h, d, BLK;
    float scale;          /* 1/sqrt(d) */
} FlashArgs;

/* Row strides (elements), every one padded by 8 so that consecutive rows fall on other banks:
 * with d and BLK multiples of 16, every row of every tile starts 16-byte (bf16) or 32-byte (fp32)
 * aligned, as the PTX ISA asks of wmma.load/store (each row aligned to the fragment's size: 16
 * bytes for a bf16 A/B fragment, 32 for an fp32 accumulator; the C++ API's "ldm a multiple of 4
 * floats" alone would allow misaligned fp32 rows), and every 16 x 16 fragment starts 32-byte
 * aligned. */
static inline LLMC_HD int flash_ldh(int d) { return d + 8; }
static inline LLMC_HD int flash_ldf(int d) { return d + 8; }
static inline LLMC_HD int flash_lds(int BLK) { return BLK + 8; }
static inline LLMC_HD int flash_ldp(int BLK) { return BLK + 8; }

/* Bump allocation in a block's shared memory, 128-byte aligned regions. */
static inline LLMC_HD size_t flash_take(size_t *off, size_t bytes) {
    const size_t o = (*off + 127) & ~(size_t)127;
    *off = o + bytes;
    return o;
}

/* The views of one block's shared memory. Forward: Q, K, V, S, P, acc0 = O, r0 = m, r1 = l.
 * dK/dV: K, V, Q, dO (in V2), S, P, acc0 = dK, acc1 = dV, r0 = lse, r1 = D. dQ: Q,
 * dO (V2), K, V, S, P, acc0 = dQ, r0 = lse, r1 = D. */
typedef struct {
    uint16_t *Q, *K, *V, *V2, *P;
    float *S, *acc0, *acc1, *r0, *r1;
} FlashSmem;

static inline LLMC_HD size_t flash_carve(int kind, int BLK, int d, char *base, FlashSmem *s) {
    size_t off = 0;
    const size_t tile = (size_t)BLK * flash_ldh(d) * 2, acc = (size_t)BLK * flash_ldf(d) * 4;
    const size_t oQ = flash_take(&off, tile), oK = flash_take(&off, tile), oV = flash_take(&off, tile);
    const size_t oV2 = kind == FLASH_FWD ? 0 : flash_take(&off, tile);
    const size_t oS = flash_take(&off, (size_t)BLK * flash_lds(BLK) * 4);
    const size_t oP = flash_take(&off, (size_t)BLK * flash_ldp(BLK) * 2);
    const size_t oA0 = flash_take(&off, acc);
    const size_t oA1 = kind == FLASH_DKDV ? flash_take(&off, acc) : 0;
    const size_t oR0 = flash_take(&off, (size_t)BLK * 4), oR1 = flash_take(&off, (size_t)BLK * 4);
    if (s != NULL) {
        s->Q = (uint16_t *)(base + oQ);
        s->K = (uint16_t *)(base + oK);
        s->V = (uint16_t *)(base + oV);
        s->V2 = kind == FLASH_FWD ? NULL : (uint16_t *)(base + oV2);
        s->S = (float *)(base + oS);
        s->P = (uint16_t *)(base + oP);
        s->acc0 = (float *)(base + oA0);
        s->acc1 = kind == FLASH_DKDV ? (float *)(base + oA1) : NULL;
        s->r0 = (float *)(base + oR0);
        s->r1 = (float *)(base + oR1);
    }
    return off;
}

static inline LLMC_HD size_t flash_smem_bytes(int kind, int BLK, int d) { return flash_carve(kind, BLK, d, NULL, NULL); }

static inline size_t flash_smem_max(int BLK, int d) {
    size_t m = 0;
    for (int k = FLASH_FWD; k <= FLASH_DQ; k++) {
        const size_t b = flash_smem_bytes(k, BLK, d);
        m = b > m ? b : m;
    }
    return m;
}

/*
 * Tile rows for head size d under a per-block shared-memory limit: 64 for d <= 64 (4 warps, the
 * score tile as wide as the head), else 32 (the d-wide fp32 accumulators of 64 rows would not fit
 * an A100's 163 KiB for d = 256, nor leave room for a second block per SM for d = 128); a smaller
 * tile when the preferred one does not fit. Returns 0 with the reason when d is not a multiple of
 * 16 in [16, 256] (the tensor-core tile is 16 x 16 x 16) or nothing fits.
 */
static inline int flash_choose(int d, size_t smem_limit, char *why, size_t cap) {
    if (d < 16 || d > FLASH_MAX_D || d % 16 != 0) {
        if (why) snprintf(why, cap, "head size %d: the flash kernels need a multiple of 16 in [16, %d]", d, FLASH_MAX_D);
        return 0;
    }
    for (int BLK = d <= 64 ? 64 : 32; BLK >= 32; BLK /= 2)
        if (flash_smem_max(BLK, d) <= smem_limit) return BLK;
    if (why)
        snprintf(why, cap, "head size %d: a 32-row tile needs %zu bytes of shared memory, this GPU allows %zu", d,
                 flash_smem_max(32, d), smem_limit);
    return 0;
}

/* ----------------------------------------------------------------------------------------------
 * The tile product. C (16 rows, 16 ntile columns, fp32, row stride ldc) = (acc ? C : 0) + A B with
 * A (16 x 16 ksteps, bf16, row-major, lda) and B (16 ksteps x 16 ntile, bf16): element (k, n) is
 * Bm[k ldb + n] (row-major) or, with b_t, Bm[n ldb + k] (so that B = X^T for a row-major X: the
 * products Q K^T, K Q^T, V dO^T, dO V^T read their second operand transposed in place).
 * Called by all 32 lanes of a warp on the GPU; once per warp on the CPU. */

#endif /* LLMC_FLASH_TILES_H */
