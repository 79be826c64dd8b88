/*
 * llmc/attention/flash.h: a tiled causal attention that never stores the T x T matrix (the
 * FlashAttention-2 schedule of Dao 2023, written here from the algorithm), for head sizes that
 * are multiples of 16 up to 256. Written once for the CUDA kernels (llmc/attention/flash.cu,
 * bf16 tensor cores through WMMA) and for the CPU emulation test (test/test_flash_emul.c), which
 * runs the same block routines with plain loops in place of the tensor-core tile products.
 *
 * Math (doc/prism.md "Definition", per (batch, head); s = 1/sqrt(d), rows i = queries, columns j = keys,
 * j <= i):
 *   forward   S = s Q K^T;  m_i = max_j S_ij;  l_i = sum_j e^(S_ij - m_i);  O = (e^(S - m) / l) V;
 *             lse_i = m_i + log l_i (natural log, cuDNN's "stats"), computed online over key
 *             tiles: a new tile raises m by some amount and rescales l and the running O by
 *             alpha = e^(m_old - m_new) (Milakov & Gimelshein 2018)
 *   backward  P = e^(S - lse) recomputed from Q, K and lse;  dP = dO V^T;
 *             D_i = dO_i . O_i (= sum_j P_ij dP_ij, since O = P V);  dS = P (dP - D);
 *             dV = P^T dO;  dK = s dS^T Q;  dQ = s dS K
 * Two backward kernels instead of one with atomics, after a pass that computes D once per row
 * (flash_delta_row): one block per key tile accumulates dK and dV over the query tiles that see
 * it (j <= i), one per query tile accumulates dQ over its key tiles.
 * Each recomputes P; nothing is summed across blocks, so the result is deterministic (bit-exact
 * resume, doc/gpu.md) and no fp32 dQ buffer is needed.
 *
 * Blocks: BLK = 64 or 32 rows per tile (flash_choose), BLK/16 warps of 32 threads; warp w owns
 * rows [16 w, 16 w + 16) of every tile it computes (query rows forward and for dQ, key rows for
 * dK, dV), so between block-wide loads every warp works on rows no other warp touches and needs
 * only __syncwarp. Shared memory per block (flash_smem_bytes): the bf16 tiles of Q, K, V (and dO)
 * with rows padded by 8 elements (the tensor cores read 16-byte aligned rows; the padding moves
 * consecutive rows to other banks), a fp32 score tile, a bf16 probability tile, and the fp32
 * accumulators (O, or dK and dV, or dQ) of d columns. The accumulators stay in shared memory so
 * that the per-row softmax can address them: a WMMA fragment's element-to-thread map is opaque.
 * Probabilities and dS are rounded to bf16 before their tile products (as the own path's P);
 * every sum is fp32.
 *
 * Defines:
 *   (from flash_tiles.h: FlashArgs, the shared-memory layout, flash_choose)
 *   flash_warp_mma                 C (16 x 16n, fp32) (+)= A (16 x 16k, bf16) B: WMMA on the GPU,
 *                                  loops on the CPU
 *   flash_fwd_block, flash_delta_row, flash_dkdv_block, flash_dq_block   one block (one row for
 *                                  D) of each kernel
 * Phases are separated by LLMC_BLOCK_SYNC (block-wide tiles) and LLMC_WARP_SYNC (a warp's rows);
 * every shared value is written in one phase and read in a later one.
 */
#ifndef LLMC_FLASH_H
#define LLMC_FLASH_H

#include <math.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "../scalar_math.h"
#include "flash_tiles.h"

#if defined(__CUDACC__)
#include <cuda_bf16.h>
#include <mma.h>
#endif

#if defined(__CUDACC__)
template <typename BLayout>
static __device__ inline void flash_wmma(float *C, int ldc, const uint16_t *A, int lda, const uint16_t *Bm, int ldb,
                                         int b_t, int ntile, int ksteps, int acc) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
    using namespace nvcuda;
    /* Output tiles in groups of up to FLASH_NGROUP, each group's accumulators in registers, so that
     * one A fragment serves the whole group (A is read ntile / FLASH_NGROUP times, not ntile). The
     * j loops are unrolled over a constant bound, which keeps c[] in registers. */
    constexpr int FLASH_NGROUP = 4;
    for (int n0 = 0; n0 < ntile; n0 += FLASH_NGROUP) {
        const int nn = ntile - n0 < FLASH_NGROUP ? ntile - n0 : FLASH_NGROUP;
        wmma::fragment<wmma::accumulator, 16, 16, 16, float> c[FLASH_NGROUP];
#pragma unroll
        for (int j = 0; j < FLASH_NGROUP; j++) {
            if (j >= nn) continue;
            if (acc) wmma::load_matrix_sync(c[j], C + (n0 + j) * 16, (unsigned)ldc, wmma::mem_row_major);
            else wmma::fill_fragment(c[j], 0.0f);
        }
        for (int ks = 0; ks < ksteps; ks++) {
            wmma::fragment<wmma::matrix_a, 16, 16, 16, __nv_bfloat16, wmma::row_major> fa;
            wmma::load_matrix_sync(fa, reinterpret_cast<const __nv_bfloat16 *>(A + ks * 16), (unsigned)lda);
#pragma unroll
            for (int j = 0; j < FLASH_NGROUP; j++) {
                if (j >= nn) continue;
                const int nt = n0 + j;
                wmma::fragment<wmma::matrix_b, 16, 16, 16, __nv_bfloat16, BLayout> fb;
                const uint16_t *pb = b_t ? Bm + (size_t)nt * 16 * ldb + ks * 16 : Bm + (size_t)ks * 16 * ldb + nt * 16;
                wmma::load_matrix_sync(fb, reinterpret_cast<const __nv_bfloat16 *>(pb), (unsigned)ldb);
                wmma::mma_sync(c[j], fa, fb, c[j]);
            }
        }
#pragma unroll
        for (int j = 0; j < FLASH_NGROUP; j++)
            if (j < nn) wmma::store_matrix_sync(C + (n0 + j) * 16, c[j], (unsigned)ldc, wmma::mem_row_major);
    }
#else
    (void)C; (void)ldc; (void)A; (void)lda; (void)Bm; (void)ldb; (void)b_t; (void)ntile; (void)ksteps; (void)acc;
    __trap(); /* bf16 tensor cores need SM 8.0; the build targets 80 and 90 only (mk/cuda.mk) */
#endif
}
#endif

static inline LLMC_HD void flash_warp_mma(float *C, int ldc, const uint16_t *A, int lda, const uint16_t *Bm, int ldb,
                                          int b_t, int ntile, int ksteps, int acc) {
#if defined(__CUDA_ARCH__)
    if (b_t) flash_wmma<nvcuda::wmma::col_major>(C, ldc, A, lda, Bm, ldb, 1, ntile, ksteps, acc);
    else flash_wmma<nvcuda::wmma::row_major>(C, ldc, A, lda, Bm, ldb, 0, ntile, ksteps, acc);
#else
    for (int i = 0; i < 16; i++)
        for (int n = 0; n < 16 * ntile; n++) {
            float s = acc ? C[(size_t)i * ldc + n] : 0.0f;
            for (int k = 0; k < 16 * ksteps; k++) {
                const uint16_t b = b_t ? Bm[(size_t)n * ldb + k] : Bm[(size_t)k * ldb + n];
                s += bf16_to_f32(A[(size_t)i * lda + k]) * bf16_to_f32(b);
            }
            C[(size_t)i * ldc + n] = s;
        }
#endif
}

/* ----------------------------------------------------------------------------------------------
 * Block-wide phases (threads tid of nthreads; on the CPU one thread does all). */

/* dst (BLK rows of d, stride ldh) <- rows row0.. of one sequence's head columns (src: that
 * sequence's row 0 at the head's first column, rows row_stride apart); zeros past T, so that
 * padded keys and values contribute exact zeros (0 x garbage could be NaN). 8 elements (16 bytes)
 * per copy: d is a multiple of 16 and every row and head column starts 16-byte aligned. */
static inline LLMC_HD void flash_load_rows(uint16_t *dst, const uint16_t *src, size_t row_stride, int row0, int T,
                                           int BLK, int d, int tid, int nthreads) {
    const int ldh = flash_ldh(d), per_row = d / 8;
    for (int e = tid; e < BLK * per_row; e += nthreads) {
        const int r = e / per_row, c = (e % per_row) * 8, t = row0 + r;
        uint16_t *to = dst + (size_t)r * ldh + c;
#if defined(__CUDA_ARCH__)
        uint4 v = make_uint4(0u, 0u, 0u, 0u);
        if (t < T) v = *reinterpret_cast<const uint4 *>(src + (size_t)t * row_stride + c);
        *reinterpret_cast<uint4 *>(to) = v;
#else
        for (int k = 0; k < 8; k++) to[k] = t < T ? src[(size_t)t * row_stride + c + k] : 0;
#endif
    }
}

/* The K and V tiles of the rows from row0 (k, v: the sequence's row 0 at the head's column). */
static inline LLMC_HD void flash_load_kv(const FlashSmem *s, const uint16_t *k, const uint16_t *v, size_t row_stride,
                                         int row0, int T, int BLK, int d, int tid, int nthreads) {
    flash_load_rows(s->K, k, row_stride, row0, T, BLK, d, tid, nthreads);
    flash_load_rows(s->V, v, row_stride, row0, T, BLK, d, tid, nthreads);
}

static inline LLMC_HD void flash_zero(float *x, size_t n, int tid, int nthreads) {
    for (size_t i = (size_t)tid; i < n; i += (size_t)nthreads) x[i] = 0.0f;
}

/* D_r = dO_r . O_r in fp32 for row r = (b h + k) T + t of the (B, h, T) rows, reading both rows 8
 * elements (16 bytes) at a time. */
static inline LLMC_HD void flash_delta_row(const FlashArgs *a, size_t r) {
    const size_t A = (size_t)a->h * a->d, T = (size_t)a->T, bh = r / T, t = r % T;
    const size_t row = ((bh / (size_t)a->h) * T + t) * A + (bh % (size_t)a->h) * (size_t)a->d;
    const uint16_t *o = a->out + row, *g = a->dout + row;
    float dot = 0.0f;
    for (int c = 0; c < a->d; c += 8) {
#if defined(__CUDA_ARCH__)
        const uint4 o4 = *reinterpret_cast<const uint4 *>(o + c), g4 = *reinterpret_cast<const uint4 *>(g + c);
        const uint16_t *ov = reinterpret_cast<const uint16_t *>(&o4), *gv = reinterpret_cast<const uint16_t *>(&g4);
#else
        const uint16_t *ov = o + c, *gv = g + c;
#endif
        for (int k = 0; k < 8; k++) dot += bf16_to_f32(ov[k]) * bf16_to_f32(gv[k]);
    }
    a->D[r] = dot;
}

/* Per query row of the tile at q0: lse and D (0 past T). */
static inline LLMC_HD void flash_load_row_stats(float *L, float *D, const FlashArgs *a, int bh, int q0, int tid,
                                                int nthreads) {
    for (int r = tid; r < a->BLK; r += nthreads) {
        const int i = q0 + r;
        const size_t at = (size_t)bh * a->T + i;
        L[r] = i < a->T ? a->lse[at] : 0.0f;
        D[r] = i < a->T ? a->D[at] : 0.0f;
    }
}

/* The warps this thread runs: its own on the GPU; every warp of the block, one after the other,
 * on the CPU (lane 0 of 1 does all the lanes' work). */
typedef struct {
    int lo, hi, lane, nlanes;
} FlashWarps;

static inline LLMC_HD FlashWarps flash_warps(int BLK, int tid) {
    FlashWarps w;
#if defined(__CUDA_ARCH__)
    (void)BLK;
    w.lo = tid / 32;
    w.hi = w.lo + 1;
    w.lane = tid % 32;
    w.nlanes = 32;
#else
    (void)tid;
    w.lo = 0;
    w.hi = BLK / 16;
    w.lane = 0;
    w.nlanes = 1;
#endif
    return w;
}

/* The max and the sum over a warp's lanes, in every lane (a butterfly); on the CPU the one lane
 * already holds the whole row's value. */
static inline LLMC_HD float flash_lanes_max(float x) {
#if defined(__CUDA_ARCH__)
    for (int o = 16; o > 0; o >>= 1) x = fmaxf(x, __shfl_xor_sync(0xffffffffu, x, o));
#endif
    return x;
}

static inline LLMC_HD float flash_lanes_sum(float x) {
#if defined(__CUDA_ARCH__)
    for (int o = 16; o > 0; o >>= 1) x += __shfl_xor_sync(0xffffffffu, x, o);
#endif
    return x;
}

/* Number of keys of the tile at k0 that query i sees: keys k0 + j with j < n, n in [0, BLK]
 * (causal: key <= i; and key < T, which for a query i < T follows). */
static inline LLMC_HD int flash_visible(int i, int k0, int T, int BLK) {
    const int last = (i < T - 1 ? i : T - 1) - k0 + 1;
    return last < 0 ? 0 : (last > BLK ? BLK : last);
}

/* ----------------------------------------------------------------------------------------------
 * Forward: block (query tile qt, sequence-head bh). */
static inline LLMC_HD void flash_fwd_warp_tile(const FlashArgs *a, const FlashSmem *s, int w, int lane, int nlanes,
                                               int q0, int k0) {
    const int BLK = a->BLK, d = a->d, r0 = 16 * w;
    const int ldh = flash_ldh(d), ldf = flash_ldf(d), lds = flash_lds(BLK), ldp = flash_ldp(BLK);
    float *S = s->S + (size_t)r0 * lds, *O = s->acc0 + (size_t)r0 * ldf;
    uint16_t *P = s->P + (size_t)r0 * ldp;
    flash_warp_mma(S, lds, s->Q + (size_t)r0 * ldh, ldh, s->K, ldh, 1, BLK / 16, d / 16, 0); /* Q K^T */
    LLMC_WARP_SYNC();
    for (int r = 0; r < 16; r++) { /* row by row, the lanes across its keys and columns */
        const float *Sr = S + (size_t)r * lds;
        uint16_t *Pr = P + (size_t)r * ldp;
        float *Or = O + (size_t)r * ldf;
        const int n = flash_visible(q0 + r0 + r, k0, a->T, BLK);
        const float m_old = s->r0[r0 + r], l_old = s->r1[r0 + r];
        float m = -INFINITY;
        for (int j = lane; j < n; j += nlanes) m = fmaxf(m, a->scale * Sr[j]);
        m = fmaxf(m_old, flash_lanes_max(m));
        /* m_old = -inf (first tile): alpha = e^-inf = 0 scales the zero accumulators; no visible
         * key at all (m = -inf): nothing changes */
        const float alpha = m == -INFINITY ? 1.0f : expf(m_old - m);
        float sum = 0.0f;
        for (int j = lane; j < BLK; j += nlanes) {
            const uint16_t p = j < n ? f32_to_bf16(expf(a->scale * Sr[j] - m)) : 0;
            Pr[j] = p;
            sum += bf16_to_f32(p); /* l sums what P V multiplies: the rounded p */
        }
        sum = flash_lanes_sum(sum);
        for (int c = lane; c < d; c += nlanes) Or[c] *= alpha;
        LLMC_WARP_SYNC(); /* every lane has read m_old and l_old before lane 0 replaces them */
        if (lane == 0) {
            s->r0[r0 + r] = m;
            s->r1[r0 + r] = alpha * l_old + sum;
        }
    }
    LLMC_WARP_SYNC();
    flash_warp_mma(O, ldf, P, ldp, s->V, ldh, 0, d / 16, BLK / 16, 1); /* O += P V */
}

static inline LLMC_HD void flash_fwd_block(const FlashArgs *a, int qt, int bh, char *smem, int tid, int nthreads) {
    const int BLK = a->BLK, d = a->d, T = a->T, b = bh / a->h, hh = bh % a->h;
    const size_t A = (size_t)a->h * d, A3 = 3 * A;
    const uint16_t *q = a->qkv + (size_t)b * T * A3 + (size_t)hh * d, *k = q + A, *v = q + 2 * A;
    const int q0 = qt * BLK, ldf = flash_ldf(d);
    FlashSmem s;
    flash_carve(FLASH_FWD, BLK, d, smem, &s);
    flash_load_rows(s.Q, q, A3, q0, T, BLK, d, tid, nthreads);
    flash_zero(s.acc0, (size_t)BLK * ldf, tid, nthreads);
    for (int r = tid; r < BLK; r += nthreads) {
        s.r0[r] = -INFINITY;
        s.r1[r] = 0.0f;
    }
    LLMC_BLOCK_SYNC();
    const FlashWarps w = flash_warps(BLK, tid);
    for (int kt = 0; kt <= qt; kt++) { /* key tiles up to the diagonal one */
        flash_load_kv(&s, k, v, A3, kt * BLK, T, BLK, d, tid, nthreads);
        LLMC_BLOCK_SYNC();
        for (int wi = w.lo; wi < w.hi; wi++) flash_fwd_warp_tile(a, &s, wi, w.lane, w.nlanes, q0, kt * BLK);
        LLMC_BLOCK_SYNC();
    }
    for (int wi = w.lo; wi < w.hi; wi++)
        for (int r = 16 * wi; r < 16 * wi + 16 && q0 + r < T; r++) {
            const int i = q0 + r;
            const float l = s.r1[r];
            if (w.lane == 0) a->lse[(size_t)bh * T + i] = s.r0[r] + logf(l);
            uint16_t *orow = a->o + ((size_t)b * T + i) * A + (size_t)hh * d;
            for (int c = w.lane; c < d; c += w.nlanes) orow[c] = f32_to_bf16(s.acc0[(size_t)r * ldf + c] / l);
        }
}

/* ----------------------------------------------------------------------------------------------
 * Backward, dK and dV: block (key tile kt, bh); warp w owns key rows r0 = 16 w and sees the
 * transposed products (rows keys, columns queries). */
static inline LLMC_HD void flash_dkdv_warp_tile(const FlashArgs *a, const FlashSmem *s, int w, int lane, int nlanes,
                                                int q0, int k0) {
    const int BLK = a->BLK, d = a->d, r0 = 16 * w;
    const int ldh = flash_ldh(d), ldf = flash_ldf(d), lds = flash_lds(BLK), ldp = flash_ldp(BLK);
    float *S = s->S + (size_t)r0 * lds;
    uint16_t *P = s->P + (size_t)r0 * ldp;
    flash_warp_mma(S, lds, s->K + (size_t)r0 * ldh, ldh, s->Q, ldh, 1, BLK / 16, d / 16, 0); /* S^T = K Q^T */
    LLMC_WARP_SYNC();
    for (int r = 0; r < 16; r++) {
        const int j = k0 + r0 + r; /* this row's key; the columns are queries q0 + c */
        for (int c = lane; c < BLK; c += nlanes) {
            const int seen = j <= q0 + c && q0 + c < a->T;
            P[(size_t)r * ldp + c] = seen ? f32_to_bf16(expf(a->scale * S[(size_t)r * lds + c] - s->r0[c])) : 0;
        }
    }
    LLMC_WARP_SYNC();
    flash_warp_mma(s->acc1 + (size_t)r0 * ldf, ldf, P, ldp, s->V2, ldh, 0, d / 16, BLK / 16, 1); /* dV += P^T dO */
    flash_warp_mma(S, lds, s->V + (size_t)r0 * ldh, ldh, s->V2, ldh, 1, BLK / 16, d / 16, 0);   /* dP^T = V dO^T */
    LLMC_WARP_SYNC();
    for (int r = 0; r < 16; r++) /* dS^T = P^T (dP^T - D), in place of P^T */
        for (int c = lane; c < BLK; c += nlanes) {
            const float p = bf16_to_f32(P[(size_t)r * ldp + c]);
            P[(size_t)r * ldp + c] = f32_to_bf16(p * (S[(size_t)r * lds + c] - s->r1[c]));
        }
    LLMC_WARP_SYNC();
    flash_warp_mma(s->acc0 + (size_t)r0 * ldf, ldf, P, ldp, s->Q, ldh, 0, d / 16, BLK / 16, 1); /* dK += dS^T Q */
}

static inline LLMC_HD void flash_dkdv_block(const FlashArgs *a, int kt, int bh, char *smem, int tid, int nthreads) {
    const int BLK = a->BLK, d = a->d, T = a->T, b = bh / a->h, hh = bh % a->h;
    const size_t A = (size_t)a->h * d, A3 = 3 * A;
    const uint16_t *q = a->qkv + (size_t)b * T * A3 + (size_t)hh * d, *k = q + A, *v = q + 2 * A;
    const uint16_t *g = a->dout + (size_t)b * T * A + (size_t)hh * d;
    const int k0 = kt * BLK, ldf = flash_ldf(d), ntiles = (T + BLK - 1) / BLK;
    FlashSmem s;
    flash_carve(FLASH_DKDV, BLK, d, smem, &s);
    flash_load_kv(&s, k, v, A3, k0, T, BLK, d, tid, nthreads);
    flash_zero(s.acc0, (size_t)BLK * ldf, tid, nthreads);
    flash_zero(s.acc1, (size_t)BLK * ldf, tid, nthreads);
    const FlashWarps w = flash_warps(BLK, tid);
    for (int qt = kt; qt < ntiles; qt++) { /* query tiles from the diagonal one on */
        flash_load_rows(s.Q, q, A3, qt * BLK, T, BLK, d, tid, nthreads);
        flash_load_rows(s.V2, g, A, qt * BLK, T, BLK, d, tid, nthreads);
        flash_load_row_stats(s.r0, s.r1, a, bh, qt * BLK, tid, nthreads);
        LLMC_BLOCK_SYNC();
        for (int wi = w.lo; wi < w.hi; wi++) flash_dkdv_warp_tile(a, &s, wi, w.lane, w.nlanes, qt * BLK, k0);
        LLMC_BLOCK_SYNC();
    }
    for (int wi = w.lo; wi < w.hi; wi++)
        for (int r = 16 * wi; r < 16 * wi + 16 && k0 + r < T; r++) {
            uint16_t *row = a->dqkv + ((size_t)b * T + k0 + r) * A3 + (size_t)hh * d;
            for (int c = w.lane; c < d; c += w.nlanes) {
                row[A + c] = f32_to_bf16(a->scale * s.acc0[(size_t)r * ldf + c]); /* dK = s dS^T Q */
                row[2 * A + c] = f32_to_bf16(s.acc1[(size_t)r * ldf + c]);
            }
        }
}

/* ----------------------------------------------------------------------------------------------
 * Backward, dQ: block (query tile qt, bh); warp w owns query rows r0 = 16 w. */
static inline LLMC_HD void flash_dq_warp_tile(const FlashArgs *a, const FlashSmem *s, int w, int lane, int nlanes,
                                              int q0, int k0) {
    const int BLK = a->BLK, d = a->d, r0 = 16 * w;
    const int ldh = flash_ldh(d), ldf = flash_ldf(d), lds = flash_lds(BLK), ldp = flash_ldp(BLK);
    float *S = s->S + (size_t)r0 * lds;
    uint16_t *P = s->P + (size_t)r0 * ldp;
    flash_warp_mma(S, lds, s->Q + (size_t)r0 * ldh, ldh, s->K, ldh, 1, BLK / 16, d / 16, 0); /* Q K^T */
    LLMC_WARP_SYNC();
    for (int r = 0; r < 16; r++) {
        const int i = q0 + r0 + r, n = i < a->T ? flash_visible(i, k0, a->T, BLK) : 0;
        const float lse = s->r0[r0 + r];
        for (int c = lane; c < BLK; c += nlanes)
            P[(size_t)r * ldp + c] = c < n ? f32_to_bf16(expf(a->scale * S[(size_t)r * lds + c] - lse)) : 0;
    }
    LLMC_WARP_SYNC();
    flash_warp_mma(S, lds, s->V2 + (size_t)r0 * ldh, ldh, s->V, ldh, 1, BLK / 16, d / 16, 0); /* dP = dO V^T */
    LLMC_WARP_SYNC();
    for (int r = 0; r < 16; r++) { /* dS = P (dP - D), in place of P */
        const float D = s->r1[r0 + r];
        for (int c = lane; c < BLK; c += nlanes) {
            const float p = bf16_to_f32(P[(size_t)r * ldp + c]);
            P[(size_t)r * ldp + c] = f32_to_bf16(p * (S[(size_t)r * lds + c] - D));
        }
    }
    LLMC_WARP_SYNC();
    flash_warp_mma(s->acc0 + (size_t)r0 * ldf, ldf, P, ldp, s->K, ldh, 0, d / 16, BLK / 16, 1); /* dQ += dS K */
}

static inline LLMC_HD void flash_dq_block(const FlashArgs *a, int qt, int bh, char *smem, int tid, int nthreads) {
    const int BLK = a->BLK, d = a->d, T = a->T, b = bh / a->h, hh = bh % a->h;
    const size_t A = (size_t)a->h * d, A3 = 3 * A;
    const uint16_t *q = a->qkv + (size_t)b * T * A3 + (size_t)hh * d, *k = q + A, *v = q + 2 * A;
    const uint16_t *g = a->dout + (size_t)b * T * A + (size_t)hh * d;
    const int q0 = qt * BLK, ldf = flash_ldf(d);
    FlashSmem s;
    flash_carve(FLASH_DQ, BLK, d, smem, &s);
    flash_load_rows(s.Q, q, A3, q0, T, BLK, d, tid, nthreads);
    flash_load_rows(s.V2, g, A, q0, T, BLK, d, tid, nthreads);
    flash_load_row_stats(s.r0, s.r1, a, bh, q0, tid, nthreads);
    flash_zero(s.acc0, (size_t)BLK * ldf, tid, nthreads);
    const FlashWarps w = flash_warps(BLK, tid);
    for (int kt = 0; kt <= qt; kt++) {
        flash_load_kv(&s, k, v, A3, kt * BLK, T, BLK, d, tid, nthreads);
        LLMC_BLOCK_SYNC();
        for (int wi = w.lo; wi < w.hi; wi++) flash_dq_warp_tile(a, &s, wi, w.lane, w.nlanes, q0, kt * BLK);
        LLMC_BLOCK_SYNC();
    }
    for (int wi = w.lo; wi < w.hi; wi++)
        for (int r = 16 * wi; r < 16 * wi + 16 && q0 + r < T; r++) {
            uint16_t *row = a->dqkv + ((size_t)b * T + q0 + r) * A3 + (size_t)hh * d;
            for (int c = w.lane; c < d; c += w.nlanes) row[c] = f32_to_bf16(a->scale * s.acc0[(size_t)r * ldf + c]);
        }
}

#endif /* LLMC_FLASH_H */
