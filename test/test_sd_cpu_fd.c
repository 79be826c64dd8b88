/*
 * test/test_sd_cpu_fd.c: finite-difference checks of the backward passes that S-D attention and
 * linear attention add (sd_attention/sd_cpu.h, linear_cpu.h, llmc/cpu/gpt2_cpu.h; doc/methods.md "Formulation A", "Realization with the standard attention kernels", "ELU+1 causal linear attention"):
 *
 *   linear   linear_attention_backward: dq, dk, dv of causal ELU+1 attention, with and without
 *            the d^(-1/4) prescale (q, k in [-2, 2] so both branches of phi are exercised);
 *   sd       the fold K' = U L^T + softmax: dU, dV, the packed skew (dS = dL - dL^T) and theta
 *            through softplus, for vector and scalar D and both signs of D, odd head size;
 *   sdlin    the fold + the linear mixer;
 *   model    the tiny model with every kind (sd, sdlin, lin, mha), with and without LayerNorm,
 *            and without LayerNorm at the input scale 35.36 (-emb_scale): sampled gradients of
 *            sdskew, sdtheta, qkvw, attprojw (ln1w; wte and wpe) vs differences of the mean loss
 *            computed in double from the logits.
 *
 * Loss = sum(out * R) for the layer cases (dout = R), accumulated in double; central differences
 * with step 1e-2. Negative controls that must be detected: dk scaled by 1.1, dtheta against
 * the finite differences of the layer with the other sign of D, and the input-scaled model's
 * dwpe without its factor F (the encoder backward forgetting the scale). Build WITHOUT -ffast-math.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../llmc/cpu/gpt2_cpu.h"
#include "fd.h"
#include "harness.h"
#include "../kinds/registry_cpu.h"

#ifdef __FAST_MATH__
#error "compile test_sd_cpu_fd.c without -ffast-math: the finite differences need IEEE floats"
#endif

/* Tolerances. fp32 forward with the loss summed in double and step 1e-2: the rounding noise of
 * the outputs over 2*step dominates; the measured relative L2 errors are ~1e-5..1e-4. Asserted:
 *   ||a - fd|| / ||fd|| <= 2e-3   and   max |a - fd| <= 5e-3 max|a| + 1e-5.
 * A 10% error in one gradient (the negative controls) gives >= 2e-2. */
#define FD_STEP 1e-2f
#define FD_REL_L2 2e-3
#define FD_REL_MAX 5e-3
#define FD_ABS 1e-5

static int within(FdErr e) { return fd_within(e, FD_REL_MAX, FD_ABS, FD_REL_L2); }

static float urand(Mt19937 *mt, float lo, float hi) { return lo + (hi - lo) * mt_uniform_f32(mt); }

static int threads(void) {
#ifdef _OPENMP
    return omp_get_max_threads();
#else
    return 1;
#endif
}

/* ---------------------------------------------------------------------------------------------
 * One attention layer of any kind on a (B, T, 3A) buffer. For S-D kinds the K slot is computed
 * from U and the parameters; the inputs are the U (Q slot) and V columns. */
typedef struct {
    int B, T, h, d, kind, scalar_d, sign, prescale;
    float *qkv, *skew, *theta, *Lmat, *att, *phi, *Z, *out, *R;
} Layer;

static double layer_loss(Layer *y) {
    const int N = y->B * y->T, A = y->h * y->d;
    if ((y->kind == ATTN_SD || y->kind == ATTN_SDLIN)) {
        sd_build_generator(y->Lmat, y->skew, y->theta, y->h, y->d, y->scalar_d, y->sign);
        sd_keys_forward(y->qkv, y->Lmat, N, y->h, y->d);
    }
    if ((y->kind == ATTN_LIN || y->kind == ATTN_SDLIN)) {
        linear_attention_forward(y->out, y->att, y->phi, y->Z, y->qkv, y->B, y->T, y->h, y->d, y->prescale);
    } else {
        attention_forward(y->out, y->att, y->qkv, y->B, y->T, y->h, y->d);
    }
    double s = 0;
    for (size_t i = 0; i < (size_t)N * A; i++) s += (double)y->out[i] * y->R[i];
    return s;
}

/* Central differences of layer_loss w.r.t. the n floats at x (restored afterwards). */
static void fd_grad(Layer *y, float *x, size_t n, double *fd) {
    for (size_t i = 0; i < n; i++) {
        const float keep = x[i];
        x[i] = keep + FD_STEP;
        const double lp = layer_loss(y);
        x[i] = keep - FD_STEP;
        const double lm = layer_loss(y);
        x[i] = keep;
        fd[i] = (lp - lm) / (2.0 * (double)FD_STEP);
    }
}

static void layer_case(int kind, int h, int d, int T, int scalar_d, int sign, int prescale, uint32_t seed) {
    Layer y;
    const int B = 2, A = h * d, A3 = 3 * A, N = B * T;
    const size_t nq = (size_t)N * A3, npack = (size_t)h * d * (d - 1) / 2, nth = scalar_d ? (size_t)h : (size_t)h * d;
    memset(&y, 0, sizeof(y));
    y.B = B; y.T = T; y.h = h; y.d = d; y.kind = kind; y.scalar_d = scalar_d; y.sign = sign; y.prescale = prescale;
    y.qkv = (float *)xcalloc(nq, sizeof(float));
    y.skew = (float *)xcalloc(npack + 1, sizeof(float));
    y.theta = (float *)xcalloc(nth, sizeof(float));
    y.Lmat = (float *)xcalloc((size_t)h * d * d, sizeof(float));
    y.att = (float *)xcalloc((size_t)B * h * T * T, sizeof(float));
    y.phi = (float *)xcalloc((size_t)N * 2 * A, sizeof(float));
    y.Z = (float *)xcalloc((size_t)B * h * T, sizeof(float));
    y.out = (float *)xcalloc((size_t)N * A, sizeof(float));
    y.R = (float *)xcalloc((size_t)N * A, sizeof(float));
    Mt19937 mt;
    mt_seed(&mt, seed);
    for (size_t i = 0; i < nq; i++) y.qkv[i] = urand(&mt, -2.f, 2.f);
    for (size_t i = 0; i < (size_t)N * A; i++) y.R[i] = urand(&mt, -1.f, 1.f);
    for (size_t i = 0; i < npack; i++) y.skew[i] = urand(&mt, -0.6f, 0.6f);
    for (size_t i = 0; i < nth; i++) y.theta[i] = urand(&mt, -1.f, 1.f);
    const int sd = (kind == ATTN_SD || kind == ATTN_SDLIN);

    /* analytic */
    layer_loss(&y);
    float *dqkv = (float *)xcalloc(nq, sizeof(float)), *dL = (float *)xcalloc((size_t)h * d * d, sizeof(float));
    float *dskew = (float *)xcalloc(npack + 1, sizeof(float)), *dtheta = (float *)xcalloc(nth, sizeof(float));
    float *scratch = (float *)xmalloc((size_t)threads() * T * sizeof(float));
    if ((kind == ATTN_LIN || kind == ATTN_SDLIN)) linear_attention_backward(dqkv, y.R, y.qkv, y.att, y.phi, y.Z, B, T, h, d, prescale, scratch);
    else attention_backward(dqkv, y.R, y.qkv, y.att, B, T, h, d, scratch);
    if (sd) {
        sd_keys_backward(dqkv, dL, y.qkv, y.Lmat, N, h, d);
        sd_params_backward(dskew, dtheta, dL, y.theta, h, d, scalar_d, sign);
    }

    char tag[96];
    snprintf(tag, sizeof(tag), "%s h %d d %d T %d%s%s%s", LAYER_KINDS[kind].name, h, d, T,
             sd ? (scalar_d ? " scalar D" : " vector D") : "", sd ? (sign < 0 ? " (S - D)" : " (S + D)") : "",
             prescale ? " prescale" : "");

    /* inputs: for S-D kinds the U and V columns (K' is computed), else q, k, v */
    double *fd = (double *)xmalloc((nq + npack + nth + 1) * sizeof(double));
    float *an = (float *)xmalloc((nq + npack + nth + 1) * sizeof(float));
    size_t m = 0;
    for (int n = 0; n < N; n++) {
        for (int j = 0; j < A3; j++) {
            if (sd && j >= A && j < 2 * A) continue;
            float *x = y.qkv + (size_t)n * A3 + j;
            fd_grad(&y, x, 1, fd + m);
            an[m++] = dqkv[(size_t)n * A3 + j];
        }
    }
    FdErr e_in = fd_compare(an, fd, m);
    CHECK(within(e_in), "%s: d(inputs) vs FD on %zu values: rel L2 %.1e, max err %.1e (max|a| %.2f)", tag, m,
          e_in.rel_l2, e_in.max_err, e_in.max_a);
    if (sd) {
        double *fds = (double *)xmalloc((npack + 1) * sizeof(double)), *fdt = (double *)xmalloc(nth * sizeof(double));
        fd_grad(&y, y.skew, npack, fds);
        fd_grad(&y, y.theta, nth, fdt);
        FdErr es = fd_compare(dskew, fds, npack), et = fd_compare(dtheta, fdt, nth);
        CHECK(npack == 0 || within(es), "%s: d(packed skew) vs FD on %zu values: rel L2 %.1e (max|a| %.2e)", tag, npack,
              es.rel_l2, es.max_a);
        CHECK(within(et), "%s: d(theta) through softplus vs FD on %zu values: rel L2 %.1e (max|a| %.2e)", tag, nth,
              et.rel_l2, et.max_a);
        /* control: the sign of D changes the layer. A forward and a backward that both ignored the
         * sign would pass the checks above for either sign; then the finite differences of the
         * layer with the other sign would match this sign's analytic dtheta. */
        double *fdo = (double *)xmalloc(nth * sizeof(double));
        y.sign = -sign;
        fd_grad(&y, y.theta, nth, fdo);
        y.sign = sign;
        const FdErr other = fd_compare(dtheta, fdo, nth);
        CHECK(!within(other), "%s: control: d(theta) vs FD of the layer with the other sign of D differs (rel L2 %.1e)",
              tag, other.rel_l2);
        free(fds); free(fdt); free(fdo);
    } else if ((kind == ATTN_LIN || kind == ATTN_SDLIN)) {
        for (size_t i = 0; i < m; i++) an[i] *= (i % A3 >= (size_t)A && i % A3 < (size_t)2 * A) ? 1.1f : 1.0f;
        FdErr bad = fd_compare(an, fd, m);
        CHECK(!within(bad), "%s: negative control dk x 1.1 detected (rel L2 %.1e)", tag, bad.rel_l2);
    }
    free(fd); free(an); free(dqkv); free(dL); free(dskew); free(dtheta); free(scratch);
    free(y.qkv); free(y.skew); free(y.theta); free(y.Lmat); free(y.att); free(y.phi); free(y.Z); free(y.out); free(y.R);
}

static void model_case(int use_ln, float emb_scale, uint32_t seed) {
    GPT2Config c;
    char msg[256];
    config_from_descriptor("tiny", &c, msg, sizeof(msg));
    const int kinds[4] = {ATTN_SD, ATTN_SDLIN, ATTN_LIN, ATTN_MHA};
    for (int l = 0; l < 4; l++) c.layer[l].kind = kinds[l];
    c.use_ln = use_ln;
    c.emb_scale = emb_scale;
    kind_opt_set_float(c.opt, &SD_INIT_S, 0.5f);
    kind_opt_set_float(c.opt, &SD_INIT_THETA, -0.5f);
    GPT2 m;
    gpt2_build_from_config(&m, &c, seed);
    /* larger attention weights so that the heads are far from uniform mixing (the scaled input
     * does that by itself) */
    const float gain = emb_scale != 1.0f ? 1.0f : use_ln ? 5.0f : 40.0f;
    for (int l = 0; l < 4; l++) {
        LayerParams p = layer_params(m.params, &m.layout, l);
        for (size_t i = 0; i < layer_slot_size(&c, l, P_QKVW); i++) p.qkvw[i] *= gain;
    }
    const int B = 2, T = 8;
    int x[16], y[16];
    Mt19937 mt;
    mt_seed(&mt, seed);
    for (int i = 0; i < B * T; i++) { x[i] = (int)(mt_u32(&mt) % 50257); y[i] = (int)(mt_u32(&mt) % 50257); }
    fd_mean_loss(&m, x, y, B, T);
    gpt2_zero_grad(&m);
    gpt2_backward(&m, 1.0f / (B * T));
    /* at the input scale the S and theta gradients (~1e-6) drown in the logits' rounding: the
     * check there is on the weights the scale passes through, and on wte and wpe themselves */
    static const int plain[] = {P_SDSKEW, P_SDTHETA, P_QKVW, P_ATTPROJW, P_LN1W};
    static const int scaled[] = {P_QKVW, P_ATTPROJW, P_WTE, P_WPE};
    const int *slots = emb_scale != 1.0f ? scaled : plain;
    const int n_slots = emb_scale != 1.0f ? 4 : 5;
    char label[64];
    snprintf(label, sizeof(label), "%s%s", use_ln ? "" : " -ln 0", emb_scale != 1.0f ? " -emb_scale 35.36" : "");
    for (int si = 0; si < n_slots; si++) {
        const int s = slots[si];
        /* wte rows past the vocabulary's padding and wpe rows past T are never read */
        const size_t n = s == P_WTE ? (size_t)c.vocab_size * c.channels : s == P_WPE ? (size_t)T * c.channels
                                                                                     : m.layout.slot_size[s];
        if (n == 0) continue;
        float an[30];
        double fd[30];
        /* S and theta enter smoothly and their gradients are small (4e-5 without LayerNorm):
         * with step 1e-2 the change of the loss, ~4e-7, drowns in the fp32 logits' rounding;
         * 1e-1 keeps the truncation error (O(step^2)) below 1e-3 relative */
        const float step = (s == P_SDSKEW || s == P_SDTHETA) ? 1e-1f : 1e-2f;
        for (int k = 0; k < 30; k++) {
            const size_t i = m.layout.slot_offset[s] + (size_t)(mt_u32(&mt) % n);
            const float keep = m.params[i];
            m.params[i] = keep + step;
            const double lp = fd_mean_loss(&m, x, y, B, T);
            m.params[i] = keep - step;
            const double lm = fd_mean_loss(&m, x, y, B, T);
            m.params[i] = keep;
            fd[k] = (lp - lm) / (2.0 * step);
            an[k] = m.grads[i];
        }
        FdErr e = fd_compare(an, fd, 30);
        /* whole-model differences go through the 50257-way softmax: measured rel L2 <= 3e-3;
         * asserted 2e-2 (a 10% error in the parameter's gradient gives >= 0.1). */
        CHECK(e.rel_l2 <= 2e-2, "model (sd, sdlin, lin, mha)%s: d%s vs FD on 30 sampled values: rel L2 %.1e (max|a| %.2e)",
              label, param_slot_name(s), e.rel_l2, e.max_a);
        if (s == P_WPE && emb_scale != 1.0f) { /* wpe reaches the loss only through the scaled input */
            for (int k = 0; k < 30; k++) an[k] /= emb_scale;
            const FdErr bad = fd_compare(an, fd, 30);
            CHECK(bad.rel_l2 > 2e-2, "model%s: negative control: dwpe without the factor F is detected (rel L2 %.2f)",
                  label, bad.rel_l2);
        }
    }
    gpt2_free(&m);
}

int main(void) {
    layer_case(ATTN_LIN, 2, 8, 13, 0, -1, 0, 11);
    layer_case(ATTN_LIN, 1, 16, 7, 0, -1, 1, 12);
    layer_case(ATTN_SD, 2, 8, 13, 0, -1, 0, 13);
    layer_case(ATTN_SD, 2, 8, 7, 1, -1, 0, 14);
    layer_case(ATTN_SD, 1, 5, 13, 0, 1, 0, 15);
    layer_case(ATTN_SDLIN, 2, 8, 13, 0, -1, 1, 16);
    layer_case(ATTN_SDLIN, 1, 6, 7, 1, 1, 0, 17);
    model_case(1, 1.0f, 42);
    model_case(0, 1.0f, 43);
    model_case(0, 35.36f, 44);
    return test_finish();
}
