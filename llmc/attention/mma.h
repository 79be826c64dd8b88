/*
 * llmc/attention/mma.h: causal attention with its tiles in registers (the register layout of
 * FlashAttention-2, Dao 2023, written here from the algorithm and the PTX ISA's fragment
 * layouts), for head sizes that are multiples of 16 up to 256 (the backward's dK and dV in two
 * kernels above 128, where both do not fit in registers). The aim is own attention within 2x
 * of cuDNN at d 64: the tiled kernels of llmc/attention/flash.h keep the score tile and the output accumulators in shared memory (WMMA
 * fragments are opaque, so the per-row softmax cannot reach them) and ran at about 22 TFLOP/s on
 * the H200 (doc/gpu.md "GPU results"). Here every warp keeps its 16 rows' scores, probabilities
 * and accumulators in registers, in the documented layout of mma.sync.m16n8k16, so the softmax
 * works on the registers and the probabilities feed the next product without leaving them.
 *
 * Math (as flash.h, per (batch, head), s = 1/sqrt(d)): S = s Q K^T with the causal mask,
 * online softmax over key tiles with m (running max) and l (running sum), O = sum e^(S - m) V / l,
 * lse = m + ln l. Exponentials in base 2 with s log2(e) folded into the scores (the same values).
 *
 * One block: 4 warps and a tile of 64 RW query rows, RW = 1 or 2 (fmma_block_rows): warp w owns
 * rows 16 RW w .. 16 RW (w + 1) - 1, as RW groups of 16; key tiles of 64 up to the diagonal. With
 * RW = 2 every K or V operand that ldmatrix brings from shared memory feeds two mma (one per
 * group) instead of one: half the shared-memory reads per product, which at 16 rows a warp are
 * by estimate about what the tensor cores consume (an ldmatrix.x4, 512 bytes, takes about 4 cycles
 * of an SM's 128 bytes per cycle; the two mma it feeds about 3; to be measured), at twice the
 * score and accumulator registers. Per group, lane L holds, for g = L / 4 and t = L % 4, query
 * rows g and g + 8 of the group's 16, and of each 8-key slice the keys 2t, 2t + 1:
 *   S (16 x 64, fp32)    s[nt][i], nt = 8-key slice, i: row g (i < 2) or g + 8, key 2t + (i & 1)
 *   P as A operands      pf[kk] of 16 keys: the C layout of two 8-key slices is the A layout of
 *                        one 16-key step (rows g, g + 8; keys 2t.., 8 + 2t..), so the
 *                        probabilities are packed to bf16 in place (pf[kk][2 (nt & 1) + r])
 *   O (16 x d, fp32)     o[nd][i], nd = 8-column slice of the head
 * Row max and sum over a row's 64 keys: the lane's own 16 values, then the 4 lanes of its quad
 * (shuffles with xor 1 and 2). The sum l stays per lane and is reduced once at the end.
 * Shared memory: every tile row-major (64 rows x d; a block's own tiles, Q and dO or dK/dV's K
 * and V, 64 RW rows), rows padded by 8 elements. Fragments come from it by ldmatrix.x4: four
 * 8 x 8 matrices, each row (16 bytes) addressed by one lane, so one instruction gives a 16 x 16 A
 * operand or the B operands of two 8-column slices. A padded row is (d + 8) / 2 = 4 (mod 8)
 * 32-bit words long, so the 8 rows of one matrix fall on 32 different banks. The B operand of
 * P V needs two consecutive keys of one column of V in a register: ldmatrix.trans reads the
 * row-major V tile column-major, so no tile is ever stored transposed.
 * Tiles go from global to shared memory by cp.async (16 bytes a thread, zeros for rows past T,
 * whose outputs are not written), and up to d = FMMA_STAGE2_MAX_D in two stages: the next key (or
 * query) tile is in flight while the warps compute on the current one.
 * Probabilities are rounded to bf16 for the P V product (as in flash.h); sums are fp32.
 *
 * The backward (two kernels after a D = dO . O pass, as flash.h: nothing summed across
 * blocks) is described at fmma_dkdv_block and fmma_dq_block.
 *
 * Defines (the tile shapes, shared memory and fmma_supports_dir are in mma_tiles.h, C and C++):
 *   FMMA_THREADS, FMMA_BQ, FMMA_BK, FMMA_SPLIT_D     block shape; the d above which dK and dV
 *                                    take two kernels
 *   FMMA_STAGES(d)                   buffers per streamed tile: 2 up to FMMA_STAGE2_MAX_D (one
 *                                    loads while the other is used), else 1
 *   FMMA_RW2_MAX_D, fmma_block_rows(d)   rows of a block's tile (queries; dK/dV: keys): 128 up to
 *                                    that d, else 64
 *   fmma_smem_bytes_bq(kind, d, bq), fmma_smem_bytes_kind(kind, d)   shared memory of one block of
 *                                    FMMA_FWD, FMMA_DKDV, FMMA_DQ (its own tile bq rows; of
 *                                    fmma_block_rows(d))
 *   fmma_supports_dir(d, training, sm, smem_optin, why, cap)   host: can it run here
 * In this file, C++ only (templates over the head size D):
 *   fmma_fwd_block<D, RW>, fmma_dkdv_block<D, PARTS, RW>, fmma_dq_block<D, RW>   one thread's part of
 *                                    one block (RW: groups of 16 rows per warp: queries; dK/dV keys)
 *   fmma_load_tile, fmma_load_kv, fmma_load_qdo, fmma_load_a, fmma_k_step, fmma_rows_rows,
 *   fmma_pack_a, fmma_p_times, fmma_store_rows, fmma_scale, fmma_dkdv_probs, fmma_dq_dscores,
 *   fmma_stats_load/store            their pieces
 *   fmma_mma, fmma_ldsm_x4(_t), fmma_cp_async16/commit/wait, fmma_shfl_xor, fmma_sync
 *                                    the instructions (inline PTX on the GPU, test/warp_emul on
 *                                    the CPU)
 * The same source runs on the GPU (llmc/attention/mma.cu) and on the CPU, every thread of
 * a block as its own coroutine with PTX's mma, ldmatrix, shuffle and cp.async semantics
 * (test/warp_emul.h), in
 * test/test_mma_emul.cpp and in the trainer's host build (test/host_cuda).
 */
#ifndef LLMC_FLASH_MMA_H
#define LLMC_FLASH_MMA_H

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "../scalar_math.h"
#include "flash.h" /* FlashArgs */
#include "mma_tiles.h"

#if defined(__CUDACC__)
#define FMMA_UNROLL _Pragma("unroll")
#define FMMA_ROLLED _Pragma("unroll 1")
#else
#define FMMA_UNROLL
#define FMMA_ROLLED
#endif

/* ---- the kernels' routines (C++: templates over the head size) ---- */
#ifdef __cplusplus
#if defined(__CUDACC__)
#include <cuda_bf16.h>
#define FMMA_FN __device__ __forceinline__
/* c (+)= a b: mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 with D = C */
FMMA_FN void fmma_mma(float c[4], const uint32_t a[4], const uint32_t b[2]) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
    asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, "
                 "{%8, %9}, {%0, %1, %2, %3};\n"
                 : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
#else
    (void)c; (void)a; (void)b; /* never launched below SM 8.0 (fmma_supports) */
#endif
}
FMMA_FN float fmma_shfl_xor(float v, int mask) { return __shfl_xor_sync(0xffffffffu, v, mask); }
FMMA_FN void fmma_sync(void) { __syncthreads(); }
/* d[i] = the lane's part of 8 x 8 matrix i, whose row r this warp's lane 8 i + r addresses
 * (ldmatrix.sync.aligned.m8n8.x4.shared.b16); trans: the matrix read column-major */
FMMA_FN void fmma_ldsm_x4(uint32_t d[4], const uint16_t *row) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
    const unsigned a = (unsigned)__cvta_generic_to_shared(row);
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];\n"
                 : "=r"(d[0]), "=r"(d[1]), "=r"(d[2]), "=r"(d[3]) : "r"(a) : "memory");
#else
    (void)row; d[0] = d[1] = d[2] = d[3] = 0u; /* never launched below SM 8.0 */
#endif
}
FMMA_FN void fmma_ldsm_x4_t(uint32_t d[4], const uint16_t *row) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
    const unsigned a = (unsigned)__cvta_generic_to_shared(row);
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0, %1, %2, %3}, [%4];\n"
                 : "=r"(d[0]), "=r"(d[1]), "=r"(d[2]), "=r"(d[3]) : "r"(a) : "memory");
#else
    (void)row; d[0] = d[1] = d[2] = d[3] = 0u;
#endif
}
/* 16 bytes global -> shared without a register round trip, zeros when src_bytes is 0
 * (cp.async.cg: cached in L2 only); they land by this thread's next fmma_cp_wait */
FMMA_FN void fmma_cp_async16(uint16_t *dst, const uint16_t *src, int src_bytes) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
    const unsigned a = (unsigned)__cvta_generic_to_shared(dst);
    const size_t g = __cvta_generic_to_global(src);
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(a), "l"(g), "r"(src_bytes) : "memory");
#else
    (void)dst; (void)src; (void)src_bytes;
#endif
}
FMMA_FN void fmma_cp_commit(void) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
    asm volatile("cp.async.commit_group;\n" ::: "memory");
#endif
}
FMMA_FN void fmma_cp_wait(void) { /* every committed group has landed (for this thread) */
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
    asm volatile("cp.async.wait_group 0;\n" ::: "memory");
#endif
}
FMMA_FN void fmma_st32(uint16_t *p, uint32_t v) { *reinterpret_cast<uint32_t *>(p) = v; }
FMMA_FN float fmma_ldf(const float *p) { return *p; }
FMMA_FN void fmma_stf(float *p, float v) { *p = v; }
#else
/* On the CPU the warp instructions are the emulator's (test/warp_emul.cpp), which runs each
 * thread of the block as a coroutine; every memory access goes through warp_emul_smem_access,
 * which checks the ones to the block's shared memory for races between barriers (cp.async and
 * ldmatrix included). */
extern "C" {
void warp_emul_syncthreads(void);
float warp_emul_shfl_xor(float v, int lane_mask);
void warp_emul_mma_bf16_16816(float c[4], const uint32_t a[4], const uint32_t b[2]);
void warp_emul_ldmatrix_x4(uint32_t d[4], const void *row, int trans);
void warp_emul_cp_async16(void *dst, const void *src, int src_bytes);
void warp_emul_cp_async_commit(void);
void warp_emul_cp_async_wait_all(void);
void warp_emul_smem_access(const void *p, size_t bytes, int write);
}
#define FMMA_FN static inline
FMMA_FN void fmma_mma(float c[4], const uint32_t a[4], const uint32_t b[2]) { warp_emul_mma_bf16_16816(c, a, b); }
FMMA_FN float fmma_shfl_xor(float v, int mask) { return warp_emul_shfl_xor(v, mask); }
FMMA_FN void fmma_sync(void) { warp_emul_syncthreads(); }
FMMA_FN void fmma_ldsm_x4(uint32_t d[4], const uint16_t *row) { warp_emul_ldmatrix_x4(d, row, 0); }
FMMA_FN void fmma_ldsm_x4_t(uint32_t d[4], const uint16_t *row) { warp_emul_ldmatrix_x4(d, row, 1); }
FMMA_FN void fmma_cp_async16(uint16_t *dst, const uint16_t *src, int src_bytes) {
    warp_emul_cp_async16(dst, src, src_bytes);
}
FMMA_FN void fmma_cp_commit(void) { warp_emul_cp_async_commit(); }
FMMA_FN void fmma_cp_wait(void) { warp_emul_cp_async_wait_all(); }
FMMA_FN void fmma_st32(uint16_t *p, uint32_t v) { /* global memory only: the outputs */
    memcpy(p, &v, 4);
}
FMMA_FN float fmma_ldf(const float *p) {
    warp_emul_smem_access(p, 4, 0);
    return *p;
}
FMMA_FN void fmma_stf(float *p, float v) {
    warp_emul_smem_access(p, 4, 1);
    *p = v;
}
#endif

/* Two floats rounded to bf16 and packed, the first in the low half (a fragment's lower element). */
FMMA_FN uint32_t fmma_pack(float lo, float hi) {
    return (uint32_t)f32_to_bf16(lo) | ((uint32_t)f32_to_bf16(hi) << 16);
}

/* Starts the copy of rows r0 .. r0 + ROWS - 1 of a bf16 matrix (row stride ld, d columns from
 * src) into a row-major tile dst (rows of d + 8); rows past T become zeros (cp.async reads no byte
 * of them; src itself, row 0 of the sequence, stands as their address). The whole block takes part, each
 * thread 16-byte pieces; they land at the threads' fmma_cp_wait, and a barrier after it makes
 * them visible to every warp. */
template <int D, int ROWS = FMMA_BQ>
FMMA_FN void fmma_load_tile(uint16_t *dst, const uint16_t *src, size_t ld, int r0, int T, int tid) {
    constexpr int LD = D + FMMA_PAD, CH = D / 8, PER = ROWS * CH / FMMA_THREADS;
    static_assert(ROWS * CH % FMMA_THREADS == 0, "every thread copies the same number of pieces");
    /* a fixed trip count and unsigned indices: no remainder loop, a division by a constant */
    const uint16_t *base = src + (size_t)r0 * ld;
    FMMA_ROLLED
    for (int i = 0; i < PER; i++) {
        const unsigned c = (unsigned)tid + (unsigned)(i * FMMA_THREADS), r = c / CH, col = c % CH * 8;
        const bool in = r0 + (int)r < T;
        fmma_cp_async16(dst + r * LD + col, in ? base + r * ld + col : src, in ? 16 : 0);
    }
}

/* The A operand of k step ks (16 x 16) for rows r0 .. r0 + 15 of a row-major tile: matrices 0 .. 3
 * are rows 0-7 / 8-15 x columns 0-7, then the same x columns 8-15, so lane L addresses row
 * r0 + L % 16, column 8 (L / 16) (the mma's a0 .. a3). */
template <int D>
FMMA_FN void fmma_load_a(uint32_t af[4], const uint16_t *X, int r0, int lane, int ks) {
    fmma_ldsm_x4(af, X + (r0 + (lane & 15)) * (D + FMMA_PAD) + 16 * ks + 8 * (lane >> 4));
}

/* acc[j] (16 x N, C layout) += A_j Y^T over k step ks, j < RW: A_j 16 x 16 operands, Y N rows
 * (64, or 32 in the two-group dK/dV) of a row-major tile. One ldmatrix.x4 gives the B operands of
 * two 8-row slices of Y: matrices (slice 2np, columns 0-7), (2np, 8-15), (2np + 1, 0-7), (2np + 1,
 * 8-15), lane L addressing row 16 np + L % 8 + 8 (L / 16), column 8 ((L / 8) % 2); each serves
 * all RW groups. */
template <int D, int RW, int N = 64>
FMMA_FN void fmma_k_step(float (*acc)[N / 8][4], const uint32_t (*af)[4], const uint16_t *Y, int lane, int ks) {
    const uint16_t *yb = Y + ((lane & 7) + 8 * (lane >> 4)) * (D + FMMA_PAD) + 16 * ks + 8 * ((lane >> 3) & 1);
    FMMA_UNROLL
    for (int np = 0; np < N / 16; np++) {
        uint32_t bf[4];
        fmma_ldsm_x4(bf, yb + 16 * np * (D + FMMA_PAD));
        FMMA_UNROLL
        for (int j = 0; j < RW; j++) {
            fmma_mma(acc[j][2 * np], af[j], bf);
            fmma_mma(acc[j][2 * np + 1], af[j], bf + 2);
        }
    }
}

/* acc[j] (16 x N, C layout) += X_j Y^T over d: X_j the warp's row group j (rows 16 (RW warp + j)
 * ..) of a row-major tile, Y N rows of another (S = Q K^T, S^T = K Q^T, dP = dO V^T,
 * dP^T = V dO^T). */
template <int D, int RW, int N = 64>
FMMA_FN void fmma_rows_rows(float (*acc)[N / 8][4], const uint16_t *X, const uint16_t *Y, int warp, int lane) {
    FMMA_UNROLL
    for (int ks = 0; ks < D / 16; ks++) {
        uint32_t af[RW][4];
        FMMA_UNROLL
        for (int j = 0; j < RW; j++) fmma_load_a<D>(af[j], X, 16 * (RW * warp + j), lane, ks);
        fmma_k_step<D, RW, N>(acc, af, Y, lane, ks);
    }
}

/* The C layout of a 16 x N fp32 tile packed to bf16 as the A operands of N / 16 16-deep k steps:
 * slices 2kk and 2kk + 1 give step kk (rows g, g + 8 x columns 2t.., 8 + 2t..). */
template <int N = 64>
FMMA_FN void fmma_pack_a(uint32_t pf[N / 16][4], const float p[N / 8][4]) {
    FMMA_UNROLL
    for (int nt = 0; nt < N / 8; nt++) {
        pf[nt >> 1][2 * (nt & 1)] = fmma_pack(p[nt][0], p[nt][1]);
        pf[nt >> 1][2 * (nt & 1) + 1] = fmma_pack(p[nt][2], p[nt][3]);
    }
}

/* acc[j] (16 x d) += P_j Z over N, j < RW: P_j packed A operands (fmma_pack_a), Z N rows of a
 * row-major tile (N rows x d; N = 64, or 32 in the two-group dK/dV) (O += P V, dV += P^T dO,
 * dK += dS^T Q, dQ += dS K). The B operand wants two consecutive rows of one column of Z in a
 * register: ldmatrix.trans of matrices (rows 16 kk + 0-7, columns 16 ndp + 0-7), (16 kk + 8-15,
 * the same), (16 kk + 0-7, 16 ndp + 8-15), (16 kk + 8-15, those), lane L addressing row
 * 16 kk + L % 16, column 16 ndp + 8 (L / 16): the operands of slices 2 ndp and 2 ndp + 1, for
 * every group. */
template <int D, int RW, int N = 64>
FMMA_FN void fmma_p_times(float (*acc)[D / 8][4], const uint32_t (*pf)[N / 16][4], const uint16_t *Z, int lane) {
    const uint16_t *zb = Z + (lane & 15) * (D + FMMA_PAD) + 8 * (lane >> 4);
    FMMA_UNROLL
    for (int ndp = 0; ndp < D / 16; ndp++) {
        FMMA_UNROLL
        for (int kk = 0; kk < N / 16; kk++) {
            uint32_t bf[4];
            fmma_ldsm_x4_t(bf, zb + 16 * kk * (D + FMMA_PAD) + 16 * ndp);
            FMMA_UNROLL
            for (int j = 0; j < RW; j++) {
                fmma_mma(acc[j][2 * ndp], pf[j][kk], bf);
                fmma_mma(acc[j][2 * ndp + 1], pf[j][kk], bf + 2);
            }
        }
    }
}

/* Stores rows row0 and row0 + 8 (those < T) of a 16 x d accumulator, times mul, as bf16 at dst +
 * row ld (columns 8nd + 2t.. of each row). */
template <int D>
FMMA_FN void fmma_store_rows(uint16_t *dst, size_t ld, const float acc[D / 8][4], int row0, int T, float mul0,
                             float mul1, int t) {
    FMMA_UNROLL
    for (int r = 0; r < 2; r++) {
        const int q = row0 + 8 * r;
        if (q >= T) continue;
        const float mul = r ? mul1 : mul0;
        FMMA_UNROLL
        for (int nd = 0; nd < D / 8; nd++)
            fmma_st32(dst + (size_t)q * ld + 8 * nd + 2 * t, fmma_pack(acc[nd][2 * r] * mul, acc[nd][2 * r + 1] * mul));
    }
}

/* One block's view of the tensors: sequence b and head `head` of block bh; its Q, K, V and dO
 * rows (Q of time step r at q + r ld_qkv, K at + A, V at + 2A; dO at dout + r A), the offsets of
 * its rows in the (B, T, A) and (B, T, 3A) outputs, and the thread's place: warp, lane, fragment
 * row group g and column pair t. */
struct FmmaView {
    int T, A, b, head, warp, lane, g, t;
    size_t ld_qkv, off_a, off_qkv;
    const uint16_t *q, *dout;
};
template <int D>
FMMA_FN FmmaView fmma_view(const FlashArgs *a, int bh, int tid) {
    FmmaView v;
    v.T = a->T;
    v.A = a->h * D;
    v.b = bh / a->h;
    v.head = bh % a->h;
    v.ld_qkv = 3 * (size_t)v.A;
    v.off_a = (size_t)v.b * v.T * v.A + (size_t)v.head * D;
    v.off_qkv = (size_t)v.b * v.T * v.ld_qkv + (size_t)v.head * D;
    v.q = a->qkv + v.off_qkv;
    v.dout = a->dout != NULL ? a->dout + v.off_a : NULL;
    v.warp = tid >> 5;
    v.lane = tid & 31;
    v.g = v.lane >> 2;
    v.t = v.lane & 3;
    return v;
}

/* Starts key tile k0 (K, then V in the next tile buffer) into dst, and commits every copy this
 * thread has started (a Q or dO tile started before it lands with it). */
template <int D>
FMMA_FN void fmma_load_kv(uint16_t *dst, const FmmaView &v, int k0, int tid) {
    fmma_load_tile<D>(dst, v.q + v.A, v.ld_qkv, k0, v.T, tid);
    fmma_load_tile<D>(dst + FMMA_BQ * (D + FMMA_PAD), v.q + 2 * v.A, v.ld_qkv, k0, v.T, tid);
    fmma_cp_commit();
}

/* s (16 x 64, C layout: rows row0 + 8 (i >> 1), keys k0 + 8 nt + 2t + (i & 1)) times mul; with
 * MASK, -inf where the key is after the query. */
template <bool MASK>
FMMA_FN void fmma_scale(float s[8][4], float mul, int k0, int row0, int t) {
    FMMA_UNROLL
    for (int nt = 0; nt < 8; nt++)
        FMMA_UNROLL
        for (int i = 0; i < 4; i++) {
            const int key = k0 + 8 * nt + 2 * t + (i & 1), q = row0 + 8 * (i >> 1);
            s[nt][i] = !MASK || key <= q ? s[nt][i] * mul : -INFINITY;
        }
}

/*
 * Forward: one thread's part of block (bh = b h + head, query tile qt of FMMA_BQ RW rows). The
 * output a->o (B, T, A) and a->lse (B, h, T) rows of the tile's queries < T are written once each;
 * nothing else is. Phases: Q and key tile 0 are started before the loop. Each step waits for its
 * tile, then a barrier makes it visible and ends every warp's reads of the previous tile, so (two
 * stages) the next tile can start into that buffer at once, or (one stage) after a second barrier
 * at the end of the step. Up to 128 columns of Q per warp (d RW <= 128) each warp keeps its Q
 * operands in registers after the first step.
 * A warp computes on a key tile only if some of its rows see a key there: with RW = 2 the tile's
 * last key tile lies past the first two warps' rows. Its rows start at a multiple of 16 RW, which
 * divides 64, so a warp that computes on a tile has its first row at or after the tile's first key:
 * every row sees a key of every tile it computes on, and its running max stays finite.
 */
template <int D, int RW>
FMMA_FN void fmma_fwd_block(const FlashArgs *a, int qt, int bh, char *smem, int tid) {
    constexpr int ND = D / 8, BQ = RW * FMMA_BQ, TILE = FMMA_BQ * (D + FMMA_PAD), STAGES = FMMA_STAGES(D);
    constexpr bool QREG = D * RW <= 128;
    static_assert(FMMA_BK % (16 * RW) == 0, "a warp's rows never straddle a key tile's first key");
    uint16_t *Qs = reinterpret_cast<uint16_t *>(smem);
    uint16_t *KV = Qs + BQ * (D + FMMA_PAD); /* stage s: K at KV + 2 s TILE, V after it */
    const FmmaView v = fmma_view<D>(a, bh, tid);
    const int T = v.T, A = v.A, warp = v.warp, lane = v.lane, t = v.t;
    const int q0 = qt * BQ, w0 = q0 + 16 * RW * warp; /* the warp's first query row */
    const int row0 = w0 + v.g; /* this lane's query rows: row0 + 16 j and row0 + 16 j + 8, j < RW */
    /* key tiles up to the one holding the tile's last query row before T */
    const int nkt = ((q0 + BQ < T ? q0 + BQ : T) - 1) / FMMA_BK + 1;

    fmma_load_tile<D, BQ>(Qs, v.q, v.ld_qkv, q0, T, tid);
    fmma_load_kv<D>(KV, v, 0, tid);
    const float sl2 = a->scale * 1.4426950408889634f; /* s log2(e) */
    float m[RW][2], l[RW][2], o[RW][ND][4];
    FMMA_UNROLL
    for (int j = 0; j < RW; j++) {
        m[j][0] = m[j][1] = -INFINITY;
        l[j][0] = l[j][1] = 0.0f;
        FMMA_UNROLL
        for (int nd = 0; nd < ND; nd++)
            FMMA_UNROLL
            for (int i = 0; i < 4; i++) o[j][nd][i] = 0.0f;
    }
    uint32_t qf[QREG ? D / 16 : 1][RW][4];

    for (int kt = 0; kt < nkt; kt++) {
        const int k0 = kt * FMMA_BK, cur = STAGES == 2 ? (kt & 1) : 0;
        fmma_cp_wait();
        fmma_sync(); /* tile kt is visible; every warp is done with tile kt - 1 */
        if (STAGES == 2 && kt + 1 < nkt) fmma_load_kv<D>(KV + 2 * TILE * (cur ^ 1), v, k0 + FMMA_BK, tid);
        const uint16_t *Ks = KV + 2 * TILE * cur, *Vs = Ks + TILE;

        /* Q's operands, by every warp (one past T loads zeros): inside the skip below, the branch
         * costs the d 80 forward a register spill */
        if constexpr (QREG)
            if (kt == 0)
                FMMA_UNROLL
                for (int ks = 0; ks < D / 16; ks++)
                    FMMA_UNROLL
                    for (int j = 0; j < RW; j++) fmma_load_a<D>(qf[ks][j], Qs, 16 * (RW * warp + j), lane, ks);
        if (k0 < w0 + 16 * RW && w0 < T) { /* some row of the warp's, before T, sees a key here */
            float s[RW][8][4];
            FMMA_UNROLL
            for (int j = 0; j < RW; j++)
                FMMA_UNROLL
                for (int nt = 0; nt < 8; nt++)
                    FMMA_UNROLL
                    for (int i = 0; i < 4; i++) s[j][nt][i] = 0.0f;
            if constexpr (QREG) { /* S = Q K^T, the warp's 16 RW rows x 64 keys */
                FMMA_UNROLL
                for (int ks = 0; ks < D / 16; ks++) fmma_k_step<D, RW>(s, qf[ks], Ks, lane, ks);
            } else {
                fmma_rows_rows<D, RW>(s, Qs, Ks, warp, lane);
            }

            /* scale (base 2), the causal mask (only where a key of the tile may be after the
             * warp's first row: keys past T are there too), row max over the quad */
            const bool diag = k0 + FMMA_BK - 1 > w0;
            uint32_t pf[RW][4][4];
            FMMA_UNROLL
            for (int j = 0; j < RW; j++) {
                if (diag) fmma_scale<true>(s[j], sl2, k0, row0 + 16 * j, t);
                else fmma_scale<false>(s[j], sl2, k0, row0 + 16 * j, t);
                float mx[2] = {-INFINITY, -INFINITY};
                FMMA_UNROLL
                for (int nt = 0; nt < 8; nt++)
                    FMMA_UNROLL
                    for (int i = 0; i < 4; i++) mx[i >> 1] = fmaxf(mx[i >> 1], s[j][nt][i]);
                float alpha[2];
                FMMA_UNROLL
                for (int r = 0; r < 2; r++) {
                    mx[r] = fmaxf(mx[r], fmma_shfl_xor(mx[r], 1));
                    mx[r] = fmaxf(mx[r], fmma_shfl_xor(mx[r], 2));
                    const float mn = fmaxf(m[j][r], mx[r]); /* finite: the row sees a key here */
                    alpha[r] = exp2f(m[j][r] - mn);         /* 0 on the first tile (m = -inf) */
                    m[j][r] = mn;
                    l[j][r] *= alpha[r];
                }
                /* P = e^(S - m); l += the lane's row sums; O = alpha O, then + P V below */
                FMMA_UNROLL
                for (int nt = 0; nt < 8; nt++)
                    FMMA_UNROLL
                    for (int i = 0; i < 4; i++) {
                        s[j][nt][i] = exp2f(s[j][nt][i] - m[j][i >> 1]);
                        l[j][i >> 1] += s[j][nt][i];
                    }
                fmma_pack_a(pf[j], s[j]);
                FMMA_UNROLL
                for (int nd = 0; nd < ND; nd++)
                    FMMA_UNROLL
                    for (int i = 0; i < 4; i++) o[j][nd][i] *= alpha[i >> 1];
            }
            fmma_p_times<D, RW>(o, pf, Vs, lane);
        }

        if (STAGES == 1 && kt + 1 < nkt) {
            fmma_sync(); /* every warp is done with the only stage */
            fmma_load_kv<D>(KV, v, k0 + FMMA_BK, tid);
        }
    }

    FMMA_UNROLL
    for (int j = 0; j < RW; j++) {
        FMMA_UNROLL
        for (int r = 0; r < 2; r++) {
            l[j][r] += fmma_shfl_xor(l[j][r], 1);
            l[j][r] += fmma_shfl_xor(l[j][r], 2);
        }
        const int rj = row0 + 16 * j;
        fmma_store_rows<D>(a->o + v.off_a, (size_t)A, o[j], rj, T, 1.0f / l[j][0], 1.0f / l[j][1], t);
        FMMA_UNROLL
        for (int r = 0; r < 2; r++) {
            const int q = rj + 8 * r;
            if (q < T && t == 0) a->lse[(size_t)bh * T + q] = (m[j][r] + log2f(l[j][r])) * 0.6931471805599453f;
        }
    }
}

/*
 * Backward, after D = dO . O per row (flash_delta_row, in a->D). P = e^(S - lse) is recomputed
 * from Q, K and the forward's lse; dP = dO V^T; dS = P (dP - D); dV = P^T dO; dK = s dS^T Q;
 * dQ = s dS K (flash.h). P and dS are rounded to bf16 for their products.
 *
 * dK, dV: block (bh, key tile kt of 64 RW keys); warp w owns keys 16 RW w .. 16 RW (w + 1) - 1
 * of the tile (RW groups of 16, as the forward's queries) and holds the transposed tiles S^T, P^T,
 * dP^T, dS^T (each group's 16 keys x 64 / RW queries: a query tile is RW sub-steps, so that two
 * groups' scores fit in registers beside their dK and dV) and dK, dV (16 x d per group) in
 * registers, over the query tiles from the one holding the tile's first key to the last (those
 * that see the tile's keys); a warp skips the sub-steps whose queries are all before its keys. Each query tile's
 * Q and dO (cp.async) and its lse and D (fmma_stats_load/store) go to a stage buffer, with the
 * forward's phases: wait, barrier, start the next tile into the other stage (or, one stage, after
 * a second barrier). Writes the tile's rows of dK and dV (keys < T) once each.
 * PARTS: which of the two it computes, FMMA_PART_DV | FMMA_PART_DK. Up to d = FMMA_SPLIT_D one
 * kernel does both; above, dK and dV (d / 2 fp32 registers per lane each) do not fit in registers
 * together, so one kernel computes dV and another dK, each recomputing S^T (and dK dP^T) and
 * loading only the tiles it reads.
 */
enum { FMMA_PART_DV = 1, FMMA_PART_DK = 2, FMMA_PART_BOTH = 3 };

/* The per-query values of a dK/dV stage, lse in base 2 and D, of the thread's query (threads
 * 0 .. 63: query q0 + tid; 0 past T). They are read from global memory into registers when the
 * stage's copies start and stored to shared memory after the step's products, so the global
 * load's latency is hidden behind them. */
struct FmmaStats {
    float lse2, D;
};
template <bool DK>
FMMA_FN FmmaStats fmma_stats_load(const FlashArgs *a, const FmmaView &v, int bh, int q0, int tid) {
    static_assert(FMMA_THREADS >= FMMA_BQ, "one query per thread");
    FmmaStats st = {0.0f, 0.0f};
    const int q = q0 + tid;
    if (tid < FMMA_BQ && q < v.T) {
        st.lse2 = a->lse[(size_t)bh * v.T + q] * 1.4426950408889634f;
        if constexpr (DK) st.D = a->D[(size_t)bh * v.T + q];
    }
    return st;
}
template <bool DK>
FMMA_FN void fmma_stats_store(float *lse2, float *Dq, FmmaStats st, int tid) {
    if (tid < FMMA_BQ) {
        fmma_stf(lse2 + tid, st.lse2);
        if constexpr (DK) fmma_stf(Dq + tid, st.D);
    }
}

/* Starts the query tile at q0 into one dK/dV stage: Q, then dO after it (cp.async), committed. */
template <int D>
FMMA_FN void fmma_load_qdo(uint16_t *Qs, const FmmaView &v, int q0, int tid) {
    fmma_load_tile<D>(Qs, v.q, v.ld_qkv, q0, v.T, tid);
    fmma_load_tile<D>(Qs + FMMA_BQ * (D + FMMA_PAD), v.dout, (size_t)v.A, q0, v.T, tid);
    fmma_cp_commit();
}

/* P^T = e^(S^T - lse) (S^T in p, base 2), and with DK dS^T = P^T (dP^T - D) (dP^T in dp), for
 * the lane's keys key0, key0 + 8 and queries q0 + 8 nt + 2t + (i & 1) (nt < N / 8; lse2 and Dq
 * from query q0 on). MASK (the diagonal): P = 0 for a query before the key; a query tile after
 * the diagonal sees every key of the tile.
 * Query rows past T (the last tile) need no mask: they were loaded as zeros with lse = D = 0, so
 * P = 1 there, but dO = 0 and dP - D = 0: they add nothing to dV or dK. */
template <bool DK, bool MASK, int N = 64>
FMMA_FN void fmma_dkdv_probs(float p[N / 8][4], float dp[N / 8][4], const float *lse2, const float *Dq, float sl2,
                             int q0, int key0, int t) {
    FMMA_UNROLL
    for (int nt = 0; nt < N / 8; nt++)
        FMMA_UNROLL
        for (int i = 0; i < 4; i++) {
            const int ql = 8 * nt + 2 * t + (i & 1), q = q0 + ql, key = key0 + 8 * (i >> 1);
            const float pv = !MASK || q >= key ? exp2f(p[nt][i] * sl2 - fmma_ldf(lse2 + ql)) : 0.0f;
            p[nt][i] = pv;
            if constexpr (DK) dp[nt][i] = pv * (dp[nt][i] - fmma_ldf(Dq + ql));
        }
}

template <int D, int PARTS, int RW>
FMMA_FN void fmma_dkdv_block(const FlashArgs *a, int kt, int bh, char *smem, int tid) {
    /* N: the queries of one sub-step; a query tile takes RW of them (with two key groups the
     * scores of 32 queries fit in registers beside dK and dV, those of 64 would not) */
    constexpr int ND = D / 8, BKEY = RW * FMMA_BK, N = FMMA_BQ / RW;
    constexpr int TILE = FMMA_BQ * (D + FMMA_PAD), STAGES = FMMA_STAGES(D);
    constexpr bool DV = (PARTS & FMMA_PART_DV) != 0, DK = (PARTS & FMMA_PART_DK) != 0;
    uint16_t *Ks = reinterpret_cast<uint16_t *>(smem), *Vs = Ks + BKEY * (D + FMMA_PAD);
    uint16_t *QO = Vs + BKEY * (D + FMMA_PAD); /* stage s: Q at QO + 2 s TILE, dO after it */
    float *stat = reinterpret_cast<float *>(QO + 2 * STAGES * TILE); /* stage s: lse2, D at + 2 s 64 */
    const FmmaView v = fmma_view<D>(a, bh, tid);
    const int T = v.T, A = v.A, warp = v.warp, lane = v.lane, t = v.t;
    const int k0 = kt * BKEY, w0 = k0 + 16 * RW * warp; /* the block's and the warp's first key */
    const int key0 = w0 + v.g; /* this lane's keys: key0 + 16 j and key0 + 16 j + 8, j < RW */
    /* query tiles from the one holding the block's first key (the ones before see none of them) */
    const int qt0 = k0 / FMMA_BQ, nqt = (T + FMMA_BQ - 1) / FMMA_BQ;
    const float sl2 = a->scale * 1.4426950408889634f;

    fmma_load_tile<D, BKEY>(Ks, v.q + A, v.ld_qkv, k0, T, tid);
    if constexpr (DK) fmma_load_tile<D, BKEY>(Vs, v.q + 2 * A, v.ld_qkv, k0, T, tid); /* for dP^T */
    fmma_load_qdo<D>(QO, v, qt0 * FMMA_BQ, tid);
    fmma_stats_store<DK>(stat, stat + FMMA_BQ, fmma_stats_load<DK>(a, v, bh, qt0 * FMMA_BQ, tid), tid);
    float dk[RW][DK ? ND : 1][4], dv[RW][DV ? ND : 1][4]; /* an unused one shrinks to a dummy */
    FMMA_UNROLL
    for (int j = 0; j < RW; j++)
        FMMA_UNROLL
        for (int nd = 0; nd < ND; nd++)
            FMMA_UNROLL
            for (int i = 0; i < 4; i++) {
                if constexpr (DK) dk[j][nd][i] = 0.0f;
                if constexpr (DV) dv[j][nd][i] = 0.0f;
            }

    for (int qt = qt0; qt < nqt; qt++) {
        const int q0 = qt * FMMA_BQ, cur = STAGES == 2 ? ((qt - qt0) & 1) : 0;
        fmma_cp_wait();
        fmma_sync(); /* query tile qt is visible; every warp is done with the previous one */
        const bool next = qt + 1 < nqt;
        FmmaStats st_next = {0.0f, 0.0f};
        if (STAGES == 2 && next) {
            fmma_load_qdo<D>(QO + 2 * TILE * (cur ^ 1), v, q0 + FMMA_BQ, tid);
            st_next = fmma_stats_load<DK>(a, v, bh, q0 + FMMA_BQ, tid);
        }
        const uint16_t *Qs = QO + 2 * TILE * cur, *Os = Qs + TILE;
        const float *lse2 = stat + 2 * FMMA_BQ * cur, *Dq = lse2 + FMMA_BQ;

        FMMA_UNROLL
        for (int h = 0; h < RW; h++) { /* sub-step h: queries qh .. qh + N - 1 */
            const int qh = q0 + N * h;
            /* the warp works on them if one is at or after one of its keys (below T): the last
             * query at or after the first key; the mask is needed where one is before one of its
             * keys: the first query before the last key. With one group every warp with keys
             * before T sees every query tile from the diagonal on, and the diagonal is the first
             * (a warp whose keys are all past T computes rows it does not store): written so, the
             * test and the mask cost 18 registers less (168, 3 blocks per SM at d 64) */
            if (RW > 1 && !(qh + N > w0 && w0 < T)) continue;
            const bool diag = RW == 1 ? qt == qt0 : qh < w0 + 16 * RW - 1;
            const uint16_t *Qh = Qs + N * h * (D + FMMA_PAD), *Oh = Os + N * h * (D + FMMA_PAD);
            float p[RW][N / 8][4], dp[RW][N / 8][4];
            FMMA_UNROLL
            for (int j = 0; j < RW; j++)
                FMMA_UNROLL
                for (int nt = 0; nt < N / 8; nt++)
                    FMMA_UNROLL
                    for (int i = 0; i < 4; i++) p[j][nt][i] = dp[j][nt][i] = 0.0f;
            fmma_rows_rows<D, RW, N>(p, Ks, Qh, warp, lane);                     /* S^T = K Q^T */
            if constexpr (DK) fmma_rows_rows<D, RW, N>(dp, Vs, Oh, warp, lane); /* dP^T = V dO^T */
            const float *lse_h = lse2 + N * h, *D_h = Dq + N * h;
            FMMA_UNROLL
            for (int j = 0; j < RW; j++) {
                if (diag) fmma_dkdv_probs<DK, true, N>(p[j], dp[j], lse_h, D_h, sl2, qh, key0 + 16 * j, t);
                else fmma_dkdv_probs<DK, false, N>(p[j], dp[j], lse_h, D_h, sl2, qh, key0 + 16 * j, t);
            }
            uint32_t pf[RW][N / 16][4];
            if constexpr (DV) {
                FMMA_UNROLL
                for (int j = 0; j < RW; j++) fmma_pack_a<N>(pf[j], p[j]);
                fmma_p_times<D, RW, N>(dv, pf, Oh, lane); /* dV += P^T dO */
            }
            if constexpr (DK) {
                FMMA_UNROLL
                for (int j = 0; j < RW; j++) fmma_pack_a<N>(pf[j], dp[j]);
                fmma_p_times<D, RW, N>(dk, pf, Qh, lane); /* dK += dS^T Q */
            }
        }

        if (STAGES == 2 && next) { /* the other stage: last read before this step's barrier */
            float *ls = stat + 2 * FMMA_BQ * (cur ^ 1);
            fmma_stats_store<DK>(ls, ls + FMMA_BQ, st_next, tid);
        }
        if (STAGES == 1 && next) {
            fmma_sync(); /* every warp is done with the only stage */
            fmma_load_qdo<D>(QO, v, q0 + FMMA_BQ, tid);
            fmma_stats_store<DK>(stat, stat + FMMA_BQ, fmma_stats_load<DK>(a, v, bh, q0 + FMMA_BQ, tid), tid);
        }
    }
    uint16_t *dk_base = a->dqkv + v.off_qkv + (size_t)A;
    FMMA_UNROLL
    for (int j = 0; j < RW; j++) {
        if constexpr (DK) fmma_store_rows<D>(dk_base, v.ld_qkv, dk[j], key0 + 16 * j, T, a->scale, a->scale, t);
        if constexpr (DV) fmma_store_rows<D>(dk_base + A, v.ld_qkv, dv[j], key0 + 16 * j, T, 1.0f, 1.0f, t);
    }
}

/*
 * dQ: block (bh, query tile qt of FMMA_BQ RW rows); warp w owns the tile's queries 16 RW w ..
 * 16 RW (w + 1) - 1 (RW groups of 16, as the forward) and holds each group's S, P, dP, dS
 * (16 x 64) and dQ (16 x d) in registers over the key tiles up to the diagonal; a warp skips the
 * key tiles none of its rows sees (the forward's rule). Q and dO are started with key tile 0; the
 * key tiles (K, V) stream through the stages with the forward's phases. Writes the tile's rows of
 * dQ (queries < T) once each.
 */
/* dS = P (dP - D) into dp, P = e^(S - lse) (S in p), for the lane's rows row0, row0 + 8 and keys
 * k0 + 8 nt + 2t + (i & 1); MASK: P = 0 for a key after the query. */
template <bool MASK>
FMMA_FN void fmma_dq_dscores(const float p[8][4], float dp[8][4], const float lse2[2], const float Dr[2], float sl2,
                             int k0, int row0, int t) {
    FMMA_UNROLL
    for (int nt = 0; nt < 8; nt++)
        FMMA_UNROLL
        for (int i = 0; i < 4; i++) {
            const int key = k0 + 8 * nt + 2 * t + (i & 1), q = row0 + 8 * (i >> 1);
            const float pv = !MASK || key <= q ? exp2f(p[nt][i] * sl2 - lse2[i >> 1]) : 0.0f;
            dp[nt][i] = pv * (dp[nt][i] - Dr[i >> 1]);
        }
}

template <int D, int RW>
FMMA_FN void fmma_dq_block(const FlashArgs *a, int qt, int bh, char *smem, int tid) {
    constexpr int ND = D / 8, BQ = RW * FMMA_BQ, TILE = FMMA_BQ * (D + FMMA_PAD), STAGES = FMMA_STAGES(D);
    static_assert(FMMA_BK % (16 * RW) == 0, "a warp's rows never straddle a key tile's first key");
    uint16_t *Qs = reinterpret_cast<uint16_t *>(smem), *Os = Qs + BQ * (D + FMMA_PAD);
    uint16_t *KV = Os + BQ * (D + FMMA_PAD); /* stage s: K at KV + 2 s TILE, V after it */
    const FmmaView v = fmma_view<D>(a, bh, tid);
    const int T = v.T, A = v.A, warp = v.warp, lane = v.lane, t = v.t;
    const int q0 = qt * BQ, w0 = q0 + 16 * RW * warp, row0 = w0 + v.g;
    const int nkt = ((q0 + BQ < T ? q0 + BQ : T) - 1) / FMMA_BK + 1;
    const float sl2 = a->scale * 1.4426950408889634f;
    float lse2[RW][2], Dr[RW][2];
    FMMA_UNROLL
    for (int j = 0; j < RW; j++)
        FMMA_UNROLL
        for (int r = 0; r < 2; r++) {
            const int q = row0 + 16 * j + 8 * r;
            lse2[j][r] = q < T ? a->lse[(size_t)bh * T + q] * 1.4426950408889634f : 0.0f;
            Dr[j][r] = q < T ? a->D[(size_t)bh * T + q] : 0.0f;
        }

    fmma_load_tile<D, BQ>(Qs, v.q, v.ld_qkv, q0, T, tid);
    fmma_load_tile<D, BQ>(Os, v.dout, (size_t)A, q0, T, tid);
    fmma_load_kv<D>(KV, v, 0, tid);
    float dq[RW][ND][4];
    FMMA_UNROLL
    for (int j = 0; j < RW; j++)
        FMMA_UNROLL
        for (int nd = 0; nd < ND; nd++)
            FMMA_UNROLL
            for (int i = 0; i < 4; i++) dq[j][nd][i] = 0.0f;

    for (int kt = 0; kt < nkt; kt++) {
        const int k0 = kt * FMMA_BK, cur = STAGES == 2 ? (kt & 1) : 0;
        fmma_cp_wait();
        fmma_sync(); /* key tile kt is visible; every warp is done with tile kt - 1 */
        if (STAGES == 2 && kt + 1 < nkt) fmma_load_kv<D>(KV + 2 * TILE * (cur ^ 1), v, k0 + FMMA_BK, tid);
        const uint16_t *Ks = KV + 2 * TILE * cur, *Vs = Ks + TILE;

        if (k0 < w0 + 16 * RW && w0 < T) {
            float p[RW][8][4], dp[RW][8][4];
            FMMA_UNROLL
            for (int j = 0; j < RW; j++)
                FMMA_UNROLL
                for (int nt = 0; nt < 8; nt++)
                    FMMA_UNROLL
                    for (int i = 0; i < 4; i++) p[j][nt][i] = dp[j][nt][i] = 0.0f;
            fmma_rows_rows<D, RW>(p, Qs, Ks, warp, lane);  /* S = Q K^T */
            fmma_rows_rows<D, RW>(dp, Os, Vs, warp, lane); /* dP = dO V^T */
            /* dS = P (dP - D), P = e^(S - lse): masked only where a key of the tile may be after
             * the warp's first row (rows past T are not stored) */
            const bool diag = k0 + FMMA_BK - 1 > w0;
            uint32_t pf[RW][4][4];
            FMMA_UNROLL
            for (int j = 0; j < RW; j++) {
                if (diag) fmma_dq_dscores<true>(p[j], dp[j], lse2[j], Dr[j], sl2, k0, row0 + 16 * j, t);
                else fmma_dq_dscores<false>(p[j], dp[j], lse2[j], Dr[j], sl2, k0, row0 + 16 * j, t);
                fmma_pack_a(pf[j], dp[j]);
            }
            fmma_p_times<D, RW>(dq, pf, Ks, lane); /* dQ += dS K */
        }

        if (STAGES == 1 && kt + 1 < nkt) {
            fmma_sync(); /* every warp is done with the only stage */
            fmma_load_kv<D>(KV, v, k0 + FMMA_BK, tid);
        }
    }
    FMMA_UNROLL
    for (int j = 0; j < RW; j++)
        fmma_store_rows<D>(a->dqkv + v.off_qkv, v.ld_qkv, dq[j], row0 + 16 * j, T, a->scale, a->scale, t);
}

#endif /* __cplusplus */

#endif /* LLMC_FLASH_MMA_H */
