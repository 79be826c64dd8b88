/*
 * llmc/flash_mma.h: the forward of causal attention with its tiles in registers (the register
 * layout of FlashAttention-2, Dao 2023, written here from the algorithm and the PTX ISA's fragment
 * layouts), for head sizes that are multiples of 16 up to 256. An experiment towards the issue-3
 * target "own attention within 2x of cuDNN at d 64": the tiled kernels of flash_attention.h keep
 * the score tile and the output accumulators in shared memory (WMMA fragments are opaque, so the
 * per-row softmax cannot reach them) and run at about 22 TFLOP/s on the H200 (doc/gpu.md "GPU
 * results"). Here every warp keeps its 16 query rows' scores, probabilities and output in
 * registers, in the documented layout of mma.sync.m16n8k16, so the softmax works on the registers
 * and the probabilities feed the second product without leaving them.
 *
 * Math (as flash_attention.h, per (batch, head), s = 1/sqrt(d)): S = s Q K^T with the causal mask,
 * online softmax over key tiles with m (running max) and l (running sum), O = sum e^(S - m) V / l,
 * lse = m + ln l. Exponentials in base 2 with s log2(e) folded into the scores (the same values).
 *
 * One block: 4 warps, 64 query rows (warp w: rows 16 w .. 16 w + 15 of the tile), key tiles of 64
 * up to the diagonal. Lane L holds, for g = L / 4 and t = L % 4, query rows g and g + 8 of its
 * warp's 16, and of each 8-key slice the keys 2t, 2t + 1:
 *   S (16 x 64, fp32)    s[nt][i], nt = 8-key slice, i: row g (i < 2) or g + 8, key 2t + (i & 1)
 *   P as A operands      pf[kk] of 16 keys: the C layout of two 8-key slices is the A layout of
 *                        one 16-key step (rows g, g + 8; keys 2t.., 8 + 2t..), so the
 *                        probabilities are packed to bf16 in place (pf[kk][2 (nt & 1) + r])
 *   O (16 x d, fp32)     o[nd][i], nd = 8-column slice of the head
 * Row max and sum over a row's 64 keys: the lane's own 16 values, then the 4 lanes of its quad
 * (shuffles with xor 1 and 2). The sum l stays per lane and is reduced once at the end.
 * Shared memory: Q and K tiles row-major (64 x d), V transposed (d x 64) so that a B fragment of
 * P V (two consecutive keys of one column) is one 32-bit load; rows padded by 8 elements: a row
 * is then (d + 8) / 2 = 4 (mod 8) 32-bit words, so the 8 rows g x 4 words t of one fragment load
 * fall on 32 different banks (checked for every d = 16 ... 256 and the 72-element V^T rows).
 * Rows past T are loaded as zeros; their outputs are not written.
 * Probabilities are rounded to bf16 for the P V product (as in flash_attention.h); sums are fp32.
 *
 * Defines:
 *   FMMA_THREADS, FMMA_BQ, FMMA_BK   block shape
 *   fmma_smem_bytes(d)               shared memory of one block
 *   fmma_supports(d, sm, smem_optin, why, cap)   host: can it run here (d % 16, SM 8.0+, memory)
 *   fmma_fwd_block<D>(a, qt, bh, smem, tid)      one thread's part of block (bh, query tile qt)
 * The same source runs on the GPU (llmc/attention_flash_mma.cu) and on the CPU, every thread of
 * a block as its own coroutine with PTX's mma and shuffle semantics (test/warp_emul.h), in
 * test/test_flash_mma_emul.cpp.
 */
#ifndef LLMC_FLASH_MMA_H
#define LLMC_FLASH_MMA_H

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "flash_attention.h" /* FlashArgs */
#include "gpu_shared.h"

#define FMMA_THREADS 128
#define FMMA_BQ 64
#define FMMA_BK 64
#define FMMA_PAD 8
/* every loop over fragments is unrolled: the accumulators must stay registers (an index the
 * compiler cannot resolve puts an array in local memory) */
#if defined(__CUDACC__)
#define FMMA_UNROLL _Pragma("unroll")
#else
#define FMMA_UNROLL
#endif

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
FMMA_FN uint32_t fmma_ld32(const uint16_t *p) { return *reinterpret_cast<const uint32_t *>(p); }
FMMA_FN void fmma_st32(uint16_t *p, uint32_t v) { *reinterpret_cast<uint32_t *>(p) = v; }
FMMA_FN void fmma_copy16(uint16_t *dst, const uint16_t *src) {
    *reinterpret_cast<uint4 *>(dst) = *reinterpret_cast<const uint4 *>(src);
}
FMMA_FN void fmma_zero16(uint16_t *dst) { *reinterpret_cast<uint4 *>(dst) = make_uint4(0, 0, 0, 0); }
#else
/* On the CPU the warp instructions are the emulator's (test/warp_emul.cpp), which runs each
 * thread of the block as a coroutine. */
#ifdef __cplusplus
extern "C" {
#endif
void warp_emul_syncthreads(void);
float warp_emul_shfl_xor(float v, int lane_mask);
void warp_emul_mma_bf16_16816(float c[4], const uint32_t a[4], const uint32_t b[2]);
#ifdef __cplusplus
}
#endif
#define FMMA_FN static inline
FMMA_FN void fmma_mma(float c[4], const uint32_t a[4], const uint32_t b[2]) { warp_emul_mma_bf16_16816(c, a, b); }
FMMA_FN float fmma_shfl_xor(float v, int mask) { return warp_emul_shfl_xor(v, mask); }
FMMA_FN void fmma_sync(void) { warp_emul_syncthreads(); }
FMMA_FN uint32_t fmma_ld32(const uint16_t *p) {
    uint32_t v;
    memcpy(&v, p, 4);
    return v;
}
FMMA_FN void fmma_st32(uint16_t *p, uint32_t v) { memcpy(p, &v, 4); }
FMMA_FN void fmma_copy16(uint16_t *dst, const uint16_t *src) { memcpy(dst, src, 16); }
FMMA_FN void fmma_zero16(uint16_t *dst) { memset(dst, 0, 16); }
#endif

/* Two floats rounded to bf16 and packed, the first in the low half (a fragment's lower element). */
FMMA_FN uint32_t fmma_pack(float lo, float hi) {
    return (uint32_t)f32_to_bf16(lo) | ((uint32_t)f32_to_bf16(hi) << 16);
}

static inline LLMC_HD size_t fmma_smem_bytes(int d) {
    return ((size_t)(FMMA_BQ + FMMA_BK) * (d + FMMA_PAD) + (size_t)d * (FMMA_BK + FMMA_PAD)) * 2;
}

/* Host: 1 if the kernel can run head size d on an SM `sm` GPU with `smem_optin` bytes of shared
 * memory per block; else 0 with the reason. */
static inline int fmma_supports(int d, int sm, size_t smem_optin, char *why, size_t cap) {
    if (d < 16 || d > 256 || d % 16 != 0) {
        snprintf(why, cap, "head size %d: the register-tile kernel needs a multiple of 16 in [16, 256]", d);
        return 0;
    }
    if (sm < 80) {
        snprintf(why, cap, "mma.sync with bf16 needs SM 8.0 or newer; this GPU is SM %d.%d", sm / 10, sm % 10);
        return 0;
    }
    if (fmma_smem_bytes(d) > smem_optin) {
        snprintf(why, cap, "head size %d: %zu bytes of shared memory per block, %zu available", d,
                 fmma_smem_bytes(d), smem_optin);
        return 0;
    }
    if (why && cap) why[0] = '\0';
    return 1;
}

/*
 * One thread's part of block (bh = b h + head, query tile qt). The output a->o (B, T, A) and
 * a->lse (B, h, T) rows of the tile's queries < T are written once each; nothing else is.
 * Phases: the Q tile is stored before the first barrier of the key loop; each key tile is stored
 * between two barriers, the first of which also ends every warp's reads of the previous tile.
 */
template <int D>
FMMA_FN void fmma_fwd_block(const FlashArgs *a, int qt, int bh, char *smem, int tid) {
    constexpr int LD = D + FMMA_PAD;      /* Q, K rows (elements) */
    constexpr int LDV = FMMA_BK + FMMA_PAD; /* V^T rows */
    constexpr int ND = D / 8, NK = D / 16, CH = D / 8; /* 8-column slices, 16-deep k steps, 16-byte chunks per row */
    uint16_t *Qs = reinterpret_cast<uint16_t *>(smem);
    uint16_t *Ks = Qs + FMMA_BQ * LD;
    uint16_t *Vt = Ks + FMMA_BK * LD;
    const int T = a->T, h = a->h, A = h * D, b = bh / h, head = bh % h;
    const size_t ld_qkv = 3 * (size_t)A;
    const uint16_t *q_base = a->qkv + (size_t)b * T * ld_qkv + (size_t)head * D;
    const int warp = tid >> 5, lane = tid & 31, g = lane >> 2, t = lane & 3;
    const int q0 = qt * FMMA_BQ;
    const int row0 = q0 + 16 * warp + g; /* this lane's query rows: row0 and row0 + 8 */

    for (int c = tid; c < FMMA_BQ * CH; c += FMMA_THREADS) {
        const int r = c / CH, col = (c % CH) * 8;
        if (q0 + r < T) fmma_copy16(Qs + r * LD + col, q_base + (size_t)(q0 + r) * ld_qkv + col);
        else fmma_zero16(Qs + r * LD + col);
    }

    const float sl2 = a->scale * 1.4426950408889634f; /* s log2(e) */
    float m[2] = {-INFINITY, -INFINITY}, l[2] = {0.0f, 0.0f};
    float o[ND][4];
    FMMA_UNROLL
    for (int nd = 0; nd < ND; nd++)
        FMMA_UNROLL
        for (int i = 0; i < 4; i++) o[nd][i] = 0.0f;

    for (int kt = 0; kt <= qt; kt++) {
        const int k0 = kt * FMMA_BK;
        fmma_sync(); /* the previous tile's K and V are read by every warp */
        for (int c = tid; c < FMMA_BK * CH; c += FMMA_THREADS) {
            const int r = c / CH, col = (c % CH) * 8;
            uint16_t v[8];
            if (k0 + r < T) {
                const uint16_t *src = q_base + (size_t)(k0 + r) * ld_qkv + col;
                fmma_copy16(Ks + r * LD + col, src + A);
                fmma_copy16(v, src + 2 * A);
            } else {
                fmma_zero16(Ks + r * LD + col);
                fmma_zero16(v);
            }
            FMMA_UNROLL
            for (int i = 0; i < 8; i++) Vt[(col + i) * LDV + r] = v[i];
        }
        fmma_sync();

        /* S = Q K^T for the warp's 16 rows x 64 keys */
        float s[8][4];
        FMMA_UNROLL
        for (int nt = 0; nt < 8; nt++)
            FMMA_UNROLL
            for (int i = 0; i < 4; i++) s[nt][i] = 0.0f;
        FMMA_UNROLL
        for (int ks = 0; ks < NK; ks++) {
            const uint16_t *qa = Qs + (16 * warp + g) * LD + 16 * ks + 2 * t;
            const uint32_t af[4] = {fmma_ld32(qa), fmma_ld32(qa + 8 * LD), fmma_ld32(qa + 8), fmma_ld32(qa + 8 * LD + 8)};
            FMMA_UNROLL
            for (int nt = 0; nt < 8; nt++) {
                const uint16_t *kb = Ks + (8 * nt + g) * LD + 16 * ks + 2 * t;
                const uint32_t bfr[2] = {fmma_ld32(kb), fmma_ld32(kb + 8)};
                fmma_mma(s[nt], af, bfr);
            }
        }

        /* scale (base 2), causal mask, row max over the quad */
        float mx[2] = {-INFINITY, -INFINITY};
        FMMA_UNROLL
        for (int nt = 0; nt < 8; nt++)
            FMMA_UNROLL
            for (int i = 0; i < 4; i++) {
                const int key = k0 + 8 * nt + 2 * t + (i & 1), q = row0 + 8 * (i >> 1);
                const float v = key <= q ? s[nt][i] * sl2 : -INFINITY;
                s[nt][i] = v;
                mx[i >> 1] = fmaxf(mx[i >> 1], v);
            }
        float alpha[2];
        FMMA_UNROLL
        for (int r = 0; r < 2; r++) {
            mx[r] = fmaxf(mx[r], fmma_shfl_xor(mx[r], 1));
            mx[r] = fmaxf(mx[r], fmma_shfl_xor(mx[r], 2));
            /* every row sees key 0 in tile 0, so the new max is finite */
            const float mn = fmaxf(m[r], mx[r]);
            alpha[r] = exp2f(m[r] - mn); /* 0 on the first tile (m = -inf) */
            m[r] = mn;
            l[r] *= alpha[r];
        }

        /* P = e^(S - m), packed as the A operands of P V; l += the lane's row sums */
        uint32_t pf[4][4];
        FMMA_UNROLL
        for (int nt = 0; nt < 8; nt++) {
            const float p0 = exp2f(s[nt][0] - m[0]), p1 = exp2f(s[nt][1] - m[0]);
            const float p2 = exp2f(s[nt][2] - m[1]), p3 = exp2f(s[nt][3] - m[1]);
            l[0] += p0 + p1;
            l[1] += p2 + p3;
            pf[nt >> 1][2 * (nt & 1)] = fmma_pack(p0, p1);
            pf[nt >> 1][2 * (nt & 1) + 1] = fmma_pack(p2, p3);
        }

        /* O = alpha O + P V */
        FMMA_UNROLL
        for (int nd = 0; nd < ND; nd++) {
            o[nd][0] *= alpha[0];
            o[nd][1] *= alpha[0];
            o[nd][2] *= alpha[1];
            o[nd][3] *= alpha[1];
            FMMA_UNROLL
            for (int kk = 0; kk < 4; kk++) {
                const uint16_t *vb = Vt + (8 * nd + g) * LDV + 16 * kk + 2 * t;
                const uint32_t bfr[2] = {fmma_ld32(vb), fmma_ld32(vb + 8)};
                fmma_mma(o[nd], pf[kk], bfr);
            }
        }
    }

    FMMA_UNROLL
    for (int r = 0; r < 2; r++) {
        l[r] += fmma_shfl_xor(l[r], 1);
        l[r] += fmma_shfl_xor(l[r], 2);
    }
    FMMA_UNROLL
    for (int r = 0; r < 2; r++) {
        const int q = row0 + 8 * r;
        if (q >= T) continue;
        const float inv = 1.0f / l[r];
        uint16_t *orow = a->o + ((size_t)b * T + q) * A + (size_t)head * D;
        FMMA_UNROLL
        for (int nd = 0; nd < ND; nd++) fmma_st32(orow + 8 * nd + 2 * t, fmma_pack(o[nd][2 * r] * inv, o[nd][2 * r + 1] * inv));
        if (t == 0) a->lse[(size_t)bh * T + q] = (m[r] + log2f(l[r])) * 0.6931471805599453f;
    }
}

#endif /* LLMC_FLASH_MMA_H */
