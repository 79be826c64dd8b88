/*
 * sd_attention/linear_scan.h: the chunked causal scan behind the GPU's ELU+1 linear attention
 * (Katharopoulos et al. 2020, arXiv 2006.16236; doc/methods.md "ELU+1 causal linear attention"), written once for the CUDA kernels (sd_attention/linear_scan.cu) and the CPU emulation test
 * (test/test_sd_fold_emul.c).
 *
 * One primitive, run once forward and three times backward. For one sequence of T rows:
 *   out_i = X_i . State + xs_i extra + sum_{j ~ i, same chunk} (X_i . K_j + xs_i ks_j) Y_j
 *   State = sum_{j in chunks before i's} K_j^T Y_j (dx x dy),  extra = sum_{same} ks_j Y_j
 * where "before" and j ~ i mean j <= i in a forward scan and j >= i in a reverse scan; xs, ks are
 * optional per-row scalars (constants when absent). With den: out_i /= den_i, den_i =
 * X_i . sum_{before} K_j + sum_{j ~ i} X_i . K_j + eps (the forward's normalizer Z, stored).
 *
 * The linear attention (q~ = phi(c q), k~ = phi(c k); dn_i = dO_i / Z_i, dg_i = -(dO_i . o_i)/Z_i):
 *   forward  X = q~, K = k~, Y = v, den            -> o_i = q~_i P_i / (q~_i . z_i + eps)
 *   dq~      forward scan, X = dn, xs = dg, K = v, ks = 1, Y = k~
 *            -> sum_{j <= i} (dn_i . v_j + dg_i) k~_j      (= sum_j ds_ij k~_j of the CPU)
 *   dk~      reverse scan, X = v, xs = 1, K = dn, ks = dg, Y = q~
 *            -> sum_{i >= j} (dn_i . v_j + dg_i) q~_i
 *   dv       reverse scan, X = k~, K = q~, Y = dn       -> sum_{i >= j} (q~_i . k~_j) dn_i
 * since the CPU's ds_ij = (da_ij - sum_r a_ir da_ir) / Z_i = dn_i . v_j + dg_i (da_ij = dO_i . v_j,
 * sum_r a_ir da_ir = dO_i . o_i) and a_ij = q~_i . k~_j / Z_i. The states are fp32 and carried per
 * chunk (chunks of CH rows, output columns in tiles of TY): O(T d^2) work, algebraically equal to
 * the O(T^2) form (doc/sd_attention.md, "GPU").
 *
 * Defines:
 *   LIN_EPS              eps = 1e-6 of the normalizer, the one value the CPU reference
 *                        (sd_attention/linear_cpu.h) and the GPU scan use
 *   elu1f, elu1_gradf    the feature map phi(x) = elu(x) + 1 and phi' from phi (host and device)
 *   LinScanArgs, lin_scan_smem_floats, LinScanShape, lin_scan_choose (host: CH, TY for a d and a
 *   shared-memory limit), lin_scan_supports (host: whether a d fits, else why),
 *   lin_scan_block (one block: one sequence, one output tile)
 *   lin_scratch_floats   fp32 scratch of one layer's forward/backward (q~, k~, v, dn, out, dg)
 *   LinLayer, lin_layer_init   one layer's call: shape, prescale, scan shape, views of the scratch
 *   LinOps, lin_forward_seq, lin_backward_seq   the layer's sequence of those steps (host code)
 *   lin_split_element, lin_dout_row, lin_merge_element   the elementwise steps around the scans
 */
#ifndef LLMC_LINEAR_SCAN_H
#define LLMC_LINEAR_SCAN_H

#include <math.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "../llmc/scalar_math.h"

#define LIN_EPS 1e-6f /* Z_t = sum_s q~_t . k~_s + eps */

/* phi(x) = elu(x) + 1: x + 1 for x > 0, e^x otherwise (always positive; Katharopoulos et al. 2020) */
static inline LLMC_HD float elu1f(float x) { return x > 0.0f ? x + 1.0f : expf(x); }
/* phi'(x) from phi(x): 1 where phi > 1 (x > 0), phi itself elsewhere (e^x) */
static inline LLMC_HD float elu1_gradf(float phi) { return phi > 1.0f ? 1.0f : phi; }
#define LINSCAN_THREADS 256

typedef struct {
    const float *X, *K, *Y; /* (nseq, T, dx), (nseq, T, dx), (nseq, T, dy) */
    const float *xs, *ks;   /* (nseq, T) row scalars; NULL: the constants xs_c, ks_c */
    float xs_c, ks_c;
    float *out;             /* (nseq, T, dy) */
    float *den;             /* (nseq, T) normalizers (written by tile 0); NULL: no normalization */
    int T, dx, dy;
    int CH, TY;             /* chunk rows, output-column tile */
    int reverse;
} LinScanArgs;

/* Shared floats of one block: State (dx x TY), extra (TY), ksum (dx), X and K chunks (CH rows of
 * dx + 1, padded to an odd stride), Y chunk (CH x TY), W (CH x CH + 1), xs, ks, den (CH each). */
static inline LLMC_HD size_t lin_scan_smem_floats(int dx, int CH, int TY) {
    const size_t xp = (size_t)dx + 1;
    return (size_t)dx * TY + TY + dx + 2 * (size_t)CH * xp + (size_t)CH * TY +
           (size_t)CH * (CH + 1) + 3 * (size_t)CH;
}

typedef struct {
    int CH, TY;
    size_t smem_bytes;
} LinScanShape;

/*
 * Chunk rows CH and output tile TY for head size d: the first candidate that fits in 64 KiB
 * (three or more blocks per SM), else the first that fits the device's opt-in limit. Wide tiles
 * first (fewer blocks recompute the CH x CH weights), CH <= TY (the weights cost CH/TY of the
 * state work). Returns 0 when nothing fits (d too large for this GPU).
 */
static inline int lin_scan_choose(int d, size_t smem_limit, LinScanShape *s) {
    static const int cand[][2] = {{64, 64}, {64, 32}, {32, 32}, {64, 16}, {32, 16},
                                  {16, 16}, {32, 8},  {16, 8},  {8, 8}}; /* (TY, CH) */
    const int ncand = (int)(sizeof(cand) / sizeof(cand[0]));
    const size_t pref = smem_limit < (size_t)65536 ? smem_limit : (size_t)65536;
    for (int pass = 0; pass < 2; pass++) {
        const size_t limit = pass == 0 ? pref : smem_limit;
        for (int c = 0; c < ncand; c++) {
            const int TY = cand[c][0] < d ? cand[c][0] : d, CH = cand[c][1];
            const size_t bytes = lin_scan_smem_floats(d, CH, TY) * sizeof(float);
            if (bytes <= limit) {
                s->CH = CH;
                s->TY = TY;
                s->smem_bytes = bytes;
                return 1;
            }
        }
    }
    return 0;
}

/* Host: 1 if head size d has a scan shape within smem_limit bytes per block; else 0 with the
 * reason (the smallest shape's need). */
static inline int lin_scan_supports(int d, size_t smem_limit, char *why, size_t cap) {
    LinScanShape s;
    if (d >= 1 && lin_scan_choose(d, smem_limit, &s)) return 1;
    snprintf(why, cap, "head size %d: the linear-attention scan needs %zu bytes of shared memory per block; this "
             "GPU allows %zu", d, lin_scan_smem_floats(d, 8, d < 8 ? d : 8) * sizeof(float), smem_limit);
    return 0;
}

/*
 * One block of the scan: sequence seq, output columns [tile TY, +TY). Phases per chunk, each
 * after a barrier: (1) load X, K, Y, xs, ks of the chunk; (2) W_ij for the chunk, den; (3)
 * outputs from State, extra and W (read-only phase); (4) State, extra, ksum += the chunk (each
 * element owned by one thread). The next chunk's loads start after the barrier at its top.
 */
static inline LLMC_HD void lin_scan_block(const LinScanArgs *a, size_t seq, int tile, int tid, int nthreads,
                                          float *sm) {
    const int dx = a->dx, dy = a->dy, CH = a->CH, TY = a->TY, T = a->T;
    const int xp = dx % 2 == 0 ? dx + 1 : dx; /* odd stride: reads down a column hit distinct banks */
    const int wp = CH + 1;
    const int y0 = tile * TY;
    const int ty = dy - y0 < TY ? dy - y0 : TY;
    float *state = sm, *extra = state + (size_t)dx * TY, *ksum = extra + TY;
    float *Xc = ksum + dx, *Kc = Xc + (size_t)CH * (dx + 1), *Yc = Kc + (size_t)CH * (dx + 1);
    float *W = Yc + (size_t)CH * TY, *xsc = W + (size_t)CH * wp, *ksc = xsc + CH, *dn = ksc + CH;
    const size_t row0 = seq * (size_t)T;
    for (int i = tid; i < dx * TY; i += nthreads) state[i] = 0.0f;
    for (int i = tid; i < TY; i += nthreads) extra[i] = 0.0f;
    for (int i = tid; i < dx; i += nthreads) ksum[i] = 0.0f;
    const int nchunks = (T + CH - 1) / CH;
    for (int c = 0; c < nchunks; c++) {
        const int t0 = (a->reverse ? nchunks - 1 - c : c) * CH;
        const int n = T - t0 < CH ? T - t0 : CH;
        LLMC_BLOCK_SYNC();
        /* (1) the chunk; rows past T are zero */
        for (int idx = tid; idx < CH * dx; idx += nthreads) {
            const int i = idx / dx, k = idx % dx;
            const size_t g = (row0 + (size_t)t0 + (size_t)i) * (size_t)dx + (size_t)k;
            Xc[i * xp + k] = i < n ? a->X[g] : 0.0f;
            Kc[i * xp + k] = i < n ? a->K[g] : 0.0f;
        }
        for (int idx = tid; idx < CH * TY; idx += nthreads) {
            const int i = idx / TY, y = idx % TY;
            Yc[idx] = (i < n && y < ty) ? a->Y[(row0 + (size_t)t0 + (size_t)i) * (size_t)dy + (size_t)(y0 + y)] : 0.0f;
        }
        for (int i = tid; i < CH; i += nthreads) {
            xsc[i] = i < n ? (a->xs != NULL ? a->xs[row0 + t0 + i] : a->xs_c) : 0.0f;
            ksc[i] = i < n ? (a->ks != NULL ? a->ks[row0 + t0 + i] : a->ks_c) : 0.0f;
        }
        LLMC_BLOCK_SYNC();
        /* (2) within-chunk weights, in increasing k */
        for (int idx = tid; idx < CH * CH; idx += nthreads) {
            const int i = idx / CH, j = idx % CH;
            const int causal = a->reverse ? j >= i : j <= i;
            float s = 0.0f;
            if (causal && i < n && j < n) {
                for (int k = 0; k < dx; k++) s += Xc[i * xp + k] * Kc[j * xp + k];
                s += xsc[i] * ksc[j];
            }
            W[i * wp + j] = s;
        }
        LLMC_BLOCK_SYNC();
        /* normalizer: the earlier chunks' keys, then this chunk's in key order, then eps */
        if (a->den != NULL) {
            for (int i = tid; i < n; i += nthreads) {
                float s = 0.0f;
                for (int k = 0; k < dx; k++) s += Xc[i * xp + k] * ksum[k];
                for (int j = 0; j < CH; j++) s += W[i * wp + j];
                s += LIN_EPS;
                dn[i] = s;
                if (tile == 0) a->den[row0 + t0 + i] = s;
            }
        }
        LLMC_BLOCK_SYNC();
        /* (3) outputs */
        for (int idx = tid; idx < CH * TY; idx += nthreads) {
            const int i = idx / TY, y = idx % TY;
            if (i >= n || y >= ty) continue;
            float acc = 0.0f;
            for (int k = 0; k < dx; k++) acc += Xc[i * xp + k] * state[k * TY + y];
            acc += xsc[i] * extra[y];
            for (int j = 0; j < CH; j++) acc += W[i * wp + j] * Yc[j * TY + y];
            a->out[(row0 + (size_t)t0 + (size_t)i) * (size_t)dy + (size_t)(y0 + y)] = a->den != NULL ? acc / dn[i] : acc;
        }
        LLMC_BLOCK_SYNC();
        /* (4) carry the chunk into the state, rows in order */
        for (int idx = tid; idx < dx * TY; idx += nthreads) {
            const int k = idx / TY, y = idx % TY;
            float s = 0.0f;
            for (int j = 0; j < n; j++) s += Kc[j * xp + k] * Yc[j * TY + y];
            state[idx] += s;
        }
        for (int y = tid; y < TY; y += nthreads) {
            float s = 0.0f;
            for (int j = 0; j < n; j++) s += ksc[j] * Yc[j * TY + y];
            extra[y] += s;
        }
        if (a->den != NULL) {
            for (int k = tid; k < dx; k += nthreads) {
                float s = 0.0f;
                for (int j = 0; j < n; j++) s += Kc[j * xp + k];
                ksum[k] += s;
            }
        }
    }
}

/* ----------------------------------------------------------------------------------------------
 * The steps around the scans. fp32 scratch per layer: q~, k~, v, dn, out as (B, h, T, d), then
 * Z and dg as (B, h, T). Element e of (B, h, T, d) is row b T + t, column k d + i of a (B T, width)
 * buffer with heads side by side.
 *
 * Why the backward recomputes o in fp32 (one more forward scan) instead of reading the layer's
 * bf16 output: dq~_i = sum_j (dn_i . (v_j - o_i)) k~_j is a small difference of two large sums
 * (every k~_j > 0), so the 2^-9 rounding of a bf16 o is amplified by about sum_j k~_j / |dq~_i|;
 * measured on the CPU emulation at T = 150, d = 64 that gave 2e-2 relative error in dq, growing with
 * T. With the recomputed o the error is the output's own bf16 rounding. */
static inline size_t lin_scratch_floats(size_t N, int h, int d) {
    return 5 * N * (size_t)h * (size_t)d + 2 * N * (size_t)h;
}

/* One layer's call: its shape, the feature prescale c (d^-1/4 with prescale, else 1: the CPU
 * reference's expression), the scan shape for the shared-memory limit, and the views of the
 * scratch: q~, k~, v, dn, out (B h T d each), Z and dg (B h T each). lin_layer_init returns 0 when
 * no scan shape fits. Shared by sd_attention/linear_scan.cu and test/host_cuda. */
typedef struct {
    int B, T, h, d;
    float c;
    LinScanShape shape;
    float *qf, *kf, *vf, *dn, *out, *Z, *dg;
} LinLayer;

static inline int lin_layer_init(LinLayer *L, float *scratch, int B, int T, int h, int d, int prescale,
                                 size_t smem_limit) {
    const size_t n = (size_t)B * T * h * d, rows = (size_t)B * T * h;
    L->B = B;
    L->T = T;
    L->h = h;
    L->d = d;
    L->c = prescale ? powf((float)d, -0.25f) : 1.0f;
    L->qf = scratch;
    L->kf = scratch + n;
    L->vf = scratch + 2 * n;
    L->dn = scratch + 3 * n;
    L->out = scratch + 4 * n;
    L->Z = scratch + 5 * n;
    L->dg = L->Z + rows;
    return lin_scan_choose(d, smem_limit, &L->shape);
}

static inline LLMC_HD void lin_head_index(size_t e, int T, int h, int d, size_t *row, size_t *col) {
    const size_t i = e % (size_t)d, t = (e / (size_t)d) % (size_t)T;
    const size_t k = (e / ((size_t)d * T)) % (size_t)h, b = e / ((size_t)d * T * h);
    *row = b * (size_t)T + t;
    *col = k * (size_t)d + i;
}

/* qf, kf <- phi(c q), phi(c k); vf <- v, from qkv (B T, 3A) bf16 bits. */
static inline LLMC_HD void lin_split_element(float *qf, float *kf, float *vf, const uint16_t *qkv, size_t e,
                                             int T, int h, int d, float c) {
    size_t row, col;
    lin_head_index(e, T, h, d, &row, &col);
    const size_t A = (size_t)h * d, base = row * 3 * A + col;
    qf[e] = elu1f(c * bf16_to_f32(qkv[base]));
    kf[e] = elu1f(c * bf16_to_f32(qkv[base + A]));
    vf[e] = bf16_to_f32(qkv[base + 2 * A]);
}

/* Row r = (b h + k) T + t: dn = dO / Z, dg = -(dO . o) / Z, with dO (B T, A) bf16 bits and the
 * recomputed fp32 o (B, h, T, d). */
static inline LLMC_HD void lin_dout_row(float *dn, float *dg, const uint16_t *dout, const float *o,
                                        const float *Z, size_t r, int T, int h, int d) {
    const size_t t = r % (size_t)T, seq = r / (size_t)T, k = seq % (size_t)h, b = seq / (size_t)h;
    const size_t A = (size_t)h * d, base = (b * (size_t)T + t) * A + k * (size_t)d;
    const float z = Z[r];
    float dot = 0.0f;
    for (int i = 0; i < d; i++) {
        const float g = bf16_to_f32(dout[base + i]);
        dot += g * o[r * (size_t)d + i];
        dn[r * (size_t)d + i] = g / z;
    }
    dg[r] = -dot / z;
}

/* dst (B T rows of stride ld, columns col0 + k d + i) <- src[e] (times c phi'(phi[e]) when phi). */
static inline LLMC_HD void lin_merge_element(uint16_t *dst, size_t ld, size_t col0, const float *src,
                                             const float *phi, float c, size_t e, int T, int h, int d) {
    size_t row, col;
    lin_head_index(e, T, h, d, &row, &col);
    const float v = phi != NULL ? src[e] * c * elu1_gradf(phi[e]) : src[e];
    dst[row * ld + col0 + col] = f32_to_bf16(v);
}

/* ----------------------------------------------------------------------------------------------
 * One layer's forward and backward as a sequence of the steps above, written once and run by
 * sd_attention/linear_scan.cu (kernels) and test/host_cuda (CPU loops over the same routines):
 *   forward   split q~ k~ v; scan with the normalizer Z; merge o into out
 *   backward  split; the forward scan again (o and Z in fp32); dn, dg from dout; three scans
 *             dq~ (forward), dk~ (reverse), dv (reverse), each merged into dqkv (with phi' for q, k)
 * The scans' arguments (which of q~, k~, v, dn plays X, K, Y, their row scalars, the direction)
 * are doc/methods.md "ELU+1 causal linear attention"'s; LinOps supplies the primitives, ctx is theirs. */
typedef struct {
    void (*split)(void *ctx, const LinLayer *L, const uint16_t *qkv);
    void (*scan)(void *ctx, const LinLayer *L, const LinScanArgs *a);
    void (*dout)(void *ctx, const LinLayer *L, const uint16_t *dout);
    void (*merge)(void *ctx, const LinLayer *L, uint16_t *dst, size_t ld, size_t col0, const float *phi);
} LinOps;

static inline void lin_scan_seq(const LinOps *op, void *ctx, const LinLayer *L, const float *X, const float *K,
                                const float *Y, const float *xs, float xs_c, const float *ks, float ks_c, float *den,
                                int reverse) {
    LinScanArgs a;
    memset(&a, 0, sizeof(a));
    a.X = X;
    a.K = K;
    a.Y = Y;
    a.xs = xs;
    a.ks = ks;
    a.xs_c = xs_c;
    a.ks_c = ks_c;
    a.out = L->out;
    a.den = den;
    a.T = L->T;
    a.dx = L->d;
    a.dy = L->d;
    a.CH = L->shape.CH;
    a.TY = L->shape.TY;
    a.reverse = reverse;
    op->scan(ctx, L, &a);
}

static inline void lin_forward_seq(const LinOps *op, void *ctx, const LinLayer *L, uint16_t *out, const uint16_t *qkv) {
    op->split(ctx, L, qkv);
    lin_scan_seq(op, ctx, L, L->qf, L->kf, L->vf, NULL, 0.0f, NULL, 0.0f, L->Z, 0);
    op->merge(ctx, L, out, (size_t)L->h * L->d, 0, NULL);
}

static inline void lin_backward_seq(const LinOps *op, void *ctx, const LinLayer *L, uint16_t *dqkv,
                                    const uint16_t *dout, const uint16_t *qkv) {
    const size_t A = (size_t)L->h * L->d;
    op->split(ctx, L, qkv);
    lin_scan_seq(op, ctx, L, L->qf, L->kf, L->vf, NULL, 0.0f, NULL, 0.0f, L->Z, 0); /* o and Z in fp32 again */
    op->dout(ctx, L, dout);
    lin_scan_seq(op, ctx, L, L->dn, L->vf, L->kf, L->dg, 0.0f, NULL, 1.0f, NULL, 0); /* dq~ */
    op->merge(ctx, L, dqkv, 3 * A, 0, L->qf);
    lin_scan_seq(op, ctx, L, L->vf, L->dn, L->qf, NULL, 1.0f, L->dg, 0.0f, NULL, 1); /* dk~ */
    op->merge(ctx, L, dqkv, 3 * A, A, L->kf);
    lin_scan_seq(op, ctx, L, L->kf, L->qf, L->dn, NULL, 0.0f, NULL, 0.0f, NULL, 1); /* dv */
    op->merge(ctx, L, dqkv, 3 * A, 2 * A, NULL);
}

#endif /* LLMC_LINEAR_SCAN_H */
