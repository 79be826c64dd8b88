/*
 * test/test_sd_fold_emul.c: the device routines of the S-D fold (sd_attention/sd_fold.h) and of the chunked
 * linear attention (sd_attention/linear_scan.h), executed on the CPU block by block (one "thread" that
 * runs every phase in order) and compared with the fp32 references of sd_attention/sd_cpu.h and linear_cpu.h. The CUDA
 * kernels (sd_attention/sd_fold.cu, sd_attention/linear_scan.cu) run exactly these routines with 256 threads
 * per block; this test checks their indexing, chunking, tiling, masks and formulas without a GPU
 * (races between threads are not covered: see llmc/scalar_math.h).
 *
 * Inputs are random bf16 values, as the GPU sees them; the reference gets the same values widened.
 * Metric (dev/cuda/check_common.h): max |emulated - reference| / max |reference| per tensor.
 * Tolerances:
 *   generator L             0 (the same fp32 formulas)
 *   K', dU, dS, dtheta, o,  2^-7: one bf16 rounding of the output (8 significant bits: at most
 *   linear dq, dk, dv       2^-8 of the value, so of the largest value), 2x margin; the fp32 sums
 *                           differ from the reference's only in order (~1e-6). Measured: 1.5e-3
 *                           to 3.1e-3 (printed). The linear backward reaches this only because
 *                           the output o is recomputed in fp32 (sd_attention/linear_scan.h says why; with
 *                           the bf16 o, dq was off by 2e-2 at T = 150)
 *   dL, Z                   1e-5: fp32 only (sums of up to 260 terms in another order)
 * Every block of checks has a control that must fail: the untransposed/transposed product, the
 * swapped GEMM operands, the wrong scan direction, the dropped prescale.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../dev/cuda/check_common.h" /* the metric, widen, omp_threads: as the GPU checks */
#include "../llmc/cpu/kernels.h"
#include "../sd_attention/linear_cpu.h"
#include "../sd_attention/sd_cpu.h"
#include "../sd_attention/linear_scan.h"
#include "../sd_attention/sd_fold.h"
#include "../llmc/utils.h"
#include "harness.h"
#include "../kinds/registry_cpu.h"

#define TOL_BF16_OUT (1.0 / 128.0)
#define TOL_FP32 1e-5
#define TOL_LIN_BWD TOL_BF16_OUT

/* One stream for the whole test: uniform [-1, 1) times scale, as bf16. The linear backward's
 * floor (1e-3, rel_err_bf_floor) keeps a reference that is zero in exact arithmetic (T = 1: a
 * single key gets weight 1 and the softmax-like gradient vanishes) from dividing rounding by 0. */
static uint64_t g_rng = 88172645463325252ull;
static uint16_t *rand_bf16(size_t n, float scale) {
    uint16_t *x = (uint16_t *)xmalloc(n * sizeof(uint16_t));
    for (size_t i = 0; i < n; i++) x[i] = f32_to_bf16(scale * rand_unit(&g_rng));
    return x;
}


/* ----------------------------------------------------------------------------------------------
 * S-D fold */
typedef struct {
    int h, d, scalar_d, sign;
    size_t N, A, npack, ntheta;
    uint16_t *skew, *theta, *qkv, *dqkv;
    float *L; /* emulated generator */
} SdCase;

static void sd_case_init(SdCase *c, size_t N, int h, int d, int scalar_d, int sign) {
    memset(c, 0, sizeof(*c));
    c->h = h;
    c->d = d;
    c->scalar_d = scalar_d;
    c->sign = sign;
    c->N = N;
    c->A = (size_t)h * d;
    c->npack = (size_t)d * (d - 1) / 2;
    c->ntheta = scalar_d ? (size_t)h : (size_t)h * d;
    c->skew = rand_bf16((size_t)h * c->npack, 0.5f);
    c->theta = rand_bf16(c->ntheta, 1.0f);
    c->qkv = rand_bf16(N * 3 * c->A, 1.0f);
    c->dqkv = rand_bf16(N * 3 * c->A, 1.0f);
    c->L = (float *)xmalloc((size_t)h * d * d * sizeof(float));
    for (int k = 0; k < h; k++)
        for (int i = 0; i < d; i++)
            for (int j = 0; j < d; j++)
                c->L[((size_t)k * d + i) * d + j] = sd_generator_element(c->skew, c->theta, k, i, j, d, scalar_d, sign);
}

static void sd_case_free(SdCase *c) {
    free(c->skew);
    free(c->theta);
    free(c->qkv);
    free(c->dqkv);
    free(c->L);
}

/* Every block of the grid the kernel launches: (row tiles, column tiles, heads). */
static void emulate_rowmat(const SdRowmat *p, int h) {
    float *sm = (float *)xmalloc(sd_rowmat_smem_floats() * sizeof(float));
    const size_t rblocks = (p->N + SD_TR - 1) / SD_TR;
    const int ablocks = (p->d + SD_TA - 1) / SD_TA;
    for (int k = 0; k < h; k++)
        for (int ab = 0; ab < ablocks; ab++)
            for (size_t rb = 0; rb < rblocks; rb++) sd_rowmat_block(p, rb, ab, k, 0, 1, sm);
    free(sm);
}

static void gemm_colmajor_ref(const GemmDesc *g, const float *A, const float *B, float *C) {
    for (int b = 0; b < g->batch; b++)
        for (int jn = 0; jn < g->n; jn++)
            for (int im = 0; im < g->m; im++) {
                double s = 0.0;
                for (int kk = 0; kk < g->k; kk++) {
                    const float a = g->transa ? A[b * g->strideA + kk + (long long)im * g->lda]
                                              : A[b * g->strideA + im + (long long)kk * g->lda];
                    const float x = g->transb ? B[b * g->strideB + jn + (long long)kk * g->ldb]
                                              : B[b * g->strideB + kk + (long long)jn * g->ldb];
                    s += (double)a * x;
                }
                C[b * g->strideC + im + (long long)jn * g->ldc] = (float)s;
            }
}

static void test_sd_case(size_t N, int h, int d, int scalar_d, int sign) {
    SdCase c;
    sd_case_init(&c, N, h, d, scalar_d, sign);
    const size_t A = c.A, A3 = 3 * A;
    char tag[96];
    snprintf(tag, sizeof(tag), "S-D N %zu h %d d %3d%s sign %+d", N, h, d, scalar_d ? " scalar D" : "", sign);

    /* generator: bit-identical to the CPU's from the same (widened) parameters */
    float *skew_f = widen(c.skew, (size_t)h * c.npack), *theta_f = widen(c.theta, c.ntheta);
    float *Lref = (float *)xmalloc((size_t)h * d * d * sizeof(float));
    sd_build_generator(Lref, skew_f, theta_f, h, d, scalar_d, sign);
    CHECK(rel_err_f(c.L, Lref, (size_t)h * d * d) == 0.0, "%s: generator L equals sd_build_generator", tag);

    /* forward fold: K' slot <- U slot L^T */
    float *qkv_f = widen(c.qkv, N * A3);
    sd_keys_forward(qkv_f, Lref, (int)N, h, d);
    uint16_t *qkv = (uint16_t *)xmalloc(N * A3 * sizeof(uint16_t));
    memcpy(qkv, c.qkv, N * A3 * sizeof(uint16_t));
    for (size_t i = 0; i < N * A3; i++)
        if ((i % A3) >= A && (i % A3) < 2 * A) qkv[i] = 0xffffu; /* poison the K' slot */
    SdRowmat fw = {qkv + A, A3, qkv, A3, NULL, 0, c.L, N, d, 0};
    emulate_rowmat(&fw, h);
    const double ef = rel_err_bf(qkv + A, A3, qkv_f + A, A3, N, A);
    int untouched = 1;
    for (size_t i = 0; i < N * A3; i++)
        if ((i % A3) < A || (i % A3) >= 2 * A) untouched &= qkv[i] == c.qkv[i];
    CHECK(ef <= TOL_BF16_OUT && untouched, "%s: K' = U L^T rel error %.2e <= %.1e, U and V untouched", tag, ef, TOL_BF16_OUT);
    SdRowmat ctl = fw;
    ctl.transpose = 1;
    emulate_rowmat(&ctl, h);
    const double ec = rel_err_bf(qkv + A, A3, qkv_f + A, A3, N, A);
    if (d > 1) CHECK(ec > TOL_BF16_OUT, "%s: control U L (not L^T) rel error %.2e > tol", tag, ec);
    else not_applicable(tag, "U L (not L^T)", "d = 1: L = L^T");
    emulate_rowmat(&fw, h); /* restore K' for the backward */

    /* backward: dU = dQ + dK' L into duv (N, 2A); dV copied by the kernel's caller */
    float *dqkv_f = widen(c.dqkv, N * A3), *dLref = (float *)xmalloc((size_t)h * d * d * sizeof(float));
    float *qkv_k = widen(qkv, N * A3); /* the GPU's qkv (bf16 K'); U is what dL reads */
    sd_keys_backward(dqkv_f, dLref, qkv_k, Lref, (int)N, h, d);
    uint16_t *duv = (uint16_t *)xmalloc(N * 2 * A * sizeof(uint16_t));
    memset(duv, 0xff, N * 2 * A * sizeof(uint16_t));
    SdRowmat bw = {duv, 2 * A, c.dqkv + A, A3, c.dqkv, A3, c.L, N, d, 1};
    emulate_rowmat(&bw, h);
    const double eu = rel_err_bf(duv, 2 * A, dqkv_f, A3, N, A);
    CHECK(eu <= TOL_BF16_OUT, "%s: dU = dQ + dK' L rel error %.2e <= %.1e", tag, eu, TOL_BF16_OUT);
    bw.transpose = 0;
    emulate_rowmat(&bw, h);
    const double euc = rel_err_bf(duv, 2 * A, dqkv_f, A3, N, A);
    if (d > 1) CHECK(euc > TOL_BF16_OUT, "%s: control dQ + dK' L^T rel error %.2e > tol", tag, euc);
    else not_applicable(tag, "dQ + dK' L^T", "d = 1: L = L^T");

    /* dL through the cuBLAS call's operand mapping */
    float *dq_w = widen(c.dqkv, N * A3), *dL = (float *)xmalloc((size_t)h * d * d * sizeof(float));
    GemmDesc g = sd_dl_gemm_desc(N, h, d);
    gemm_colmajor_ref(&g, qkv_k, dq_w + A, dL);
    const double el = rel_err_f(dL, dLref, (size_t)h * d * d);
    CHECK(el <= TOL_FP32, "%s: dL = sum dK'^T U (cuBLAS mapping) rel error %.2e <= %.0e", tag, el, TOL_FP32);
    /* control: A and B exchanged gives C = dK'_cm U_cm^T, which read row-major is dL^T */
    float *dLc = (float *)xmalloc((size_t)h * d * d * sizeof(float));
    gemm_colmajor_ref(&g, dq_w + A, qkv_k, dLc);
    const double elc = rel_err_f(dLc, dLref, (size_t)h * d * d);
    if (d > 1) CHECK(elc > TOL_FP32, "%s: control dL^T rel error %.2e > tol", tag, elc);
    else not_applicable(tag, "dL^T", "d = 1: dL = dL^T");

    /* packed dS, dtheta, accumulated onto existing gradients */
    uint16_t *gs16 = rand_bf16((size_t)h * c.npack, 0.01f), *gt16 = rand_bf16(c.ntheta, 0.01f);
    float *gsf = widen(gs16, (size_t)h * c.npack), *gtf = widen(gt16, c.ntheta);
    sd_params_backward(gsf, gtf, dLref, theta_f, h, d, scalar_d, sign);
    for (int k = 0; k < h; k++)
        for (int i = 0; i < d; i++)
            for (int j = 0; j < d; j++) sd_params_backward_element(gs16, gt16, dLref, c.theta, k, i, j, d, scalar_d, sign);
    const double es = c.npack ? rel_err_bf(gs16, 1, gsf, 1, (size_t)h * c.npack, 1) : 0.0;
    const double et = rel_err_bf(gt16, 1, gtf, 1, c.ntheta, 1);
    CHECK(es <= TOL_BF16_OUT && et <= TOL_BF16_OUT, "%s: dS rel error %.2e, dtheta %.2e <= %.1e", tag, es, et, TOL_BF16_OUT);
    sd_params_backward_element(gs16, gt16, dLref, c.theta, 0, 0, 0, d, scalar_d, -sign); /* control: wrong sign */
    const double etc = rel_err_bf(gt16, 1, gtf, 1, c.ntheta, 1);
    CHECK(etc > TOL_BF16_OUT, "%s: control dtheta with the other sign added again: %.2e > tol", tag, etc);

    free(skew_f); free(theta_f); free(Lref); free(qkv_f); free(qkv); free(dqkv_f); free(dLref);
    free(qkv_k); free(duv); free(dq_w); free(dL); free(dLc); free(gs16); free(gt16); free(gsf); free(gtf);
    sd_case_free(&c);
}

/* ----------------------------------------------------------------------------------------------
 * Linear attention: the kernel sequence of sd_attention/linear_scan.cu on the CPU. */
typedef struct {
    int B, T, h, d, CH, TY;
    float c;
    float *qf, *kf, *vf, *dn, *out, *Z, *dg;
} LinEmu;

static void emu_scan(const LinEmu *e, const float *X, const float *K, const float *Y, const float *xs,
                     float xs_c, const float *ks, float ks_c, float *den, int reverse) {
    LinScanArgs a;
    memset(&a, 0, sizeof(a));
    a.X = X; a.K = K; a.Y = Y; a.xs = xs; a.ks = ks; a.xs_c = xs_c; a.ks_c = ks_c;
    a.out = e->out; a.den = den; a.T = e->T; a.dx = e->d; a.dy = e->d; a.CH = e->CH; a.TY = e->TY;
    a.reverse = reverse;
    float *sm = (float *)xmalloc(lin_scan_smem_floats(e->d, e->CH, e->TY) * sizeof(float));
    const int tiles = (e->d + e->TY - 1) / e->TY;
    for (size_t s = 0; s < (size_t)e->B * e->h; s++)
        for (int t = 0; t < tiles; t++) lin_scan_block(&a, s, t, 0, 1, sm);
    free(sm);
}

static void emu_merge(const LinEmu *e, uint16_t *dst, size_t ld, size_t col0, const float *phi) {
    const size_t n = (size_t)e->B * e->T * e->h * e->d;
    for (size_t i = 0; i < n; i++) lin_merge_element(dst, ld, col0, e->out, phi, e->c, i, e->T, e->h, e->d);
}

static void emu_split(const LinEmu *e, const uint16_t *qkv) {
    const size_t n = (size_t)e->B * e->T * e->h * e->d;
    for (size_t i = 0; i < n; i++) lin_split_element(e->qf, e->kf, e->vf, qkv, i, e->T, e->h, e->d, e->c);
}

static void test_lin_case(int B, int T, int h, int d, int prescale, int CH, int TY) {
    const size_t N = (size_t)B * T, A = (size_t)h * d, A3 = 3 * A, n = N * A;
    LinEmu e;
    e.B = B; e.T = T; e.h = h; e.d = d; e.CH = CH; e.TY = TY;
    e.c = prescale ? powf((float)d, -0.25f) : 1.0f;
    float *scratch = (float *)xmalloc(lin_scratch_floats(N, h, d) * sizeof(float));
    e.qf = scratch; e.kf = scratch + n; e.vf = scratch + 2 * n; e.dn = scratch + 3 * n; e.out = scratch + 4 * n;
    e.Z = scratch + 5 * n;
    e.dg = e.Z + (size_t)B * h * T;
    char tag[96];
    snprintf(tag, sizeof(tag), "linear B %d T %3d h %d d %3d%s CH %d TY %d", B, T, h, d, prescale ? " prescale" : "", CH, TY);

    uint16_t *qkv = rand_bf16(N * A3, 1.0f), *dout = rand_bf16(n, 1.0f);
    float *qkv_f = widen(qkv, N * A3), *dout_f = widen(dout, n);
    float *o_ref = (float *)xmalloc(n * sizeof(float)), *att = (float *)xmalloc((size_t)B * h * T * T * sizeof(float));
    float *phi = (float *)xmalloc(N * 2 * A * sizeof(float)), *Zref = (float *)xmalloc((size_t)B * h * T * sizeof(float));
    linear_attention_forward(o_ref, att, phi, Zref, qkv_f, B, T, h, d, prescale);

    /* forward: split, scan with the normalizer, merge into the (B T, A) output */
    float *Z = e.Z;
    uint16_t *o = (uint16_t *)xmalloc(n * sizeof(uint16_t));
    memset(o, 0xff, n * sizeof(uint16_t));
    emu_split(&e, qkv);
    emu_scan(&e, e.qf, e.kf, e.vf, NULL, 0.0f, NULL, 0.0f, Z, 0);
    emu_merge(&e, o, A, 0, NULL);
    const double eo = rel_err_bf(o, A, o_ref, A, N, A), ez = rel_err_f(Z, Zref, (size_t)B * h * T);
    CHECK(eo <= TOL_BF16_OUT && ez <= TOL_FP32, "%s: forward o rel error %.2e <= %.1e, Z %.2e <= %.0e", tag, eo,
          TOL_BF16_OUT, ez, TOL_FP32);
    { /* control: a reverse scan is the anti-causal attention */
        uint16_t *oc = (uint16_t *)xmalloc(n * sizeof(uint16_t));
        emu_scan(&e, e.qf, e.kf, e.vf, NULL, 0.0f, NULL, 0.0f, e.dg, 1);
        emu_merge(&e, oc, A, 0, NULL);
        const double ec = rel_err_bf(oc, A, o_ref, A, N, A);
        if (T > 1) CHECK(ec > TOL_BF16_OUT, "%s: control reverse-direction forward rel error %.2e > tol", tag, ec);
        else not_applicable(tag, "reverse-direction forward", "T = 1");
        free(oc);
    }

    /* backward: recompute o (fp32) and Z; dn, dg; three scans; merged with phi' into dqkv */
    float *dqkv_ref = (float *)xmalloc(N * A3 * sizeof(float)), *sc = (float *)xmalloc((size_t)omp_threads() * T * sizeof(float));
    linear_attention_backward(dqkv_ref, dout_f, qkv_f, att, phi, Zref, B, T, h, d, prescale, sc);
    uint16_t *dqkv = (uint16_t *)xmalloc(N * A3 * sizeof(uint16_t));
    memset(dqkv, 0xff, N * A3 * sizeof(uint16_t));
    emu_split(&e, qkv);
    emu_scan(&e, e.qf, e.kf, e.vf, NULL, 0.0f, NULL, 0.0f, e.Z, 0);
    for (size_t r = 0; r < (size_t)B * h * T; r++) lin_dout_row(e.dn, e.dg, dout, e.out, e.Z, r, T, h, d);
    emu_scan(&e, e.dn, e.vf, e.kf, e.dg, 0.0f, NULL, 1.0f, NULL, 0); /* dq~ */
    emu_merge(&e, dqkv, A3, 0, e.qf);
    emu_scan(&e, e.vf, e.dn, e.qf, NULL, 1.0f, e.dg, 0.0f, NULL, 1); /* dk~ */
    emu_merge(&e, dqkv, A3, A, e.kf);
    emu_scan(&e, e.kf, e.qf, e.dn, NULL, 0.0f, NULL, 0.0f, NULL, 1); /* dv */
    emu_merge(&e, dqkv, A3, 2 * A, NULL);
    const double eq = rel_err_bf_floor(dqkv, A3, dqkv_ref, A3, N, A, 1e-3);
    const double ek = rel_err_bf_floor(dqkv + A, A3, dqkv_ref + A, A3, N, A, 1e-3);
    const double ev = rel_err_bf_floor(dqkv + 2 * A, A3, dqkv_ref + 2 * A, A3, N, A, 1e-3);
    CHECK(eq <= TOL_LIN_BWD && ek <= TOL_LIN_BWD && ev <= TOL_LIN_BWD,
          "%s: backward rel error dq %.2e dk %.2e dv %.2e <= %.1e", tag, eq, ek, ev, TOL_LIN_BWD);
    /* controls (with the same floor as the checks): dk~ by a forward scan; the phi' factor without
     * the prescale */
    if (T > 1) {
        emu_scan(&e, e.vf, e.dn, e.qf, NULL, 1.0f, e.dg, 0.0f, NULL, 0);
        emu_merge(&e, dqkv, A3, A, e.kf);
        const double ekc = rel_err_bf_floor(dqkv + A, A3, dqkv_ref + A, A3, N, A, 1e-3);
        CHECK(ekc > TOL_LIN_BWD, "%s: control dk~ by a forward scan rel error %.2e > tol", tag, ekc);
    } else {
        not_applicable(tag, "dk~ by a forward scan", "T = 1");
    }
    if (prescale) {
        e.c = 1.0f;
        emu_scan(&e, e.dn, e.vf, e.kf, e.dg, 0.0f, NULL, 1.0f, NULL, 0);
        emu_merge(&e, dqkv, A3, 0, e.qf);
        const double eqc = rel_err_bf_floor(dqkv, A3, dqkv_ref, A3, N, A, 1e-3);
        CHECK(eqc > TOL_LIN_BWD, "%s: control dq without the prescale factor rel error %.2e > tol", tag, eqc);
    }
    free(scratch); free(qkv); free(dout); free(qkv_f); free(dout_f); free(o_ref); free(att); free(phi);
    free(Zref); free(o); free(dqkv_ref); free(sc); free(dqkv);
}

static void test_lin_choose(void) {
    LinScanShape s;
    int ok = 1, pref = 1;
    for (int d = 1; d <= 256; d++) {
        const int found = lin_scan_choose(d, 232448, &s); /* H100/H200 opt-in limit */
        ok &= found && s.smem_bytes <= 232448 && s.smem_bytes == lin_scan_smem_floats(d, s.CH, s.TY) * 4 &&
              s.TY <= d && s.CH >= 8;
        pref &= d > 160 || s.smem_bytes <= 65536;
    }
    CHECK(ok, "lin_scan_choose: every d in 1..256 fits the H100/H200 shared-memory limit");
    CHECK(pref, "d <= 160 stays within the 64 KiB preference");
    CHECK(lin_scan_choose(256, 166912, &s) && s.smem_bytes <= 166912, "d = 256 fits the A100 limit (CH %d, TY %d, %zu B)",
          s.CH, s.TY, s.smem_bytes);
    CHECK(lin_scan_choose(64, 232448, &s) && s.CH == 32 && s.TY == 64, "d = 64: chunks of 32, one 64-wide tile");
    CHECK(!lin_scan_choose(4096, 232448, &s), "d = 4096 is refused (nothing fits)");
}

/* The normalizer's eps is LIN_EPS (sd_attention/linear_scan.h), the one constant both the CPU
 * reference and the scan add: with phi(q) . phi(k) ~ 4e-18 the CPU's Z is eps alone. */
static void test_lin_eps(void) {
    const float qkv[3] = {-20.0f, -20.0f, 1.0f};
    float out[1], att[1], phi[2], Z[1];
    linear_attention_forward(out, att, phi, Z, qkv, 1, 1, 1, 1, 0);
    CHECK(fabsf(Z[0] - LIN_EPS) <= 1e-6f * LIN_EPS && fabsf(out[0] * Z[0] - phi[0] * phi[1]) < 1e-20f,
          "the CPU reference's normalizer adds LIN_EPS = %g (Z = %g)", (double)LIN_EPS, (double)Z[0]);
}

int main(void) {
    test_lin_eps();
    const int sizes[] = {1, 8, 20, 64, 130, 256};
    for (int i = 0; i < 6; i++) test_sd_case(150, 2, sizes[i], 0, -1);
    test_sd_case(70, 3, 24, 1, 1);  /* scalar D, +D */
    test_sd_case(70, 2, 16, 0, 1);  /* +D */
    test_lin_choose();
    for (int i = 1; i < 6; i++) {
        LinScanShape s = {8, 8, 0};
        lin_scan_choose(sizes[i], 232448, &s);
        test_lin_case(2, 150, 2, sizes[i], i % 2, s.CH, s.TY);
    }
    test_lin_case(1, 129, 3, 20, 1, 8, 8);   /* many chunks, three column tiles of 8 (20 = 8+8+4) */
    test_lin_case(2, 70, 2, 64, 0, 64, 16);  /* one chunk longer than T's remainder, 4 tiles */
    test_lin_case(1, 1, 2, 8, 0, 8, 8);      /* T = 1 */
    return test_finish();
}
