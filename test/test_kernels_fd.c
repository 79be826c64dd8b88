/*
 * test/test_kernels_fd.c: finite-difference gradient checks of the per-layer-head attention
 * (llmc/cpu/kernels.h) and of the whole CPU GPT-2 with a Prism head table (llmc/cpu/gpt2_cpu.h).
 *
 * Part 1, attention_forward / attention_backward, B = 2, for (h, d) = (8, 8), (4, 16), (2, 32),
 * (1, 64) (A = C = 64) and (3, 12) (A = 36, head size not a power of two), each at T = 13 and
 * T = 7 (not multiples of 4). Loss = sum(out * R), R fixed random, accumulated in double, so
 * dout = R. Central differences on every element of qkv; tolerances where they are asserted.
 * Negative controls that must be detected: the analytic dqkv with dQ scaled by 1.1, and the
 * analytic dqkv of the wrong head split (same A, other h). Forward properties: every softmax row
 * sums to 1, the future part of each att row carries no weight (NaN sentinels stay or become 0)
 * and the backward never reads it, and changing the q/k/v of future positions leaves earlier
 * outputs bit-identical.
 *
 * Part 2, the tiny model (L 4, C 64) with the Prism table heads 1, 2, 4, 4 (head sizes 64, 32,
 * 16, 16), seed 42, B = 2, T = 8: gpt2_backward's gradients of the mean loss for a random sample
 * of parameters of qkvw, attprojw, ln1w, fcw, wte and wpe against central differences of the
 * mean loss, recomputed in double from the forward's logits. qkvw and attprojw are scaled by 5
 * first so that attention is far from uniform (at init the head split hardly matters). Negative
 * control: the uniform model's gradients at the same weights must fail; and the forward's
 * attention outputs must be those of the per-layer split (the FD alone is only a consistency
 * check).
 *
 * Build WITHOUT -ffast-math (the FD needs IEEE float semantics) and run:
 *   gcc -O2 -march=native -fopenmp -Wall -Wextra -std=c11 -D_GNU_SOURCE test/test_kernels_fd.c \
 *       -o /tmp/test_kernels_fd -lm && /tmp/test_kernels_fd
 */
#include <float.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "../llmc/cpu/gpt2_cpu.h"
#include "fd.h"
#include "harness.h"
#include "../kinds/registry_cpu.h"

#ifdef __FAST_MATH__
#error "compile test_kernels_fd.c without -ffast-math: the NaN sentinels and the FD need IEEE floats"
#endif

/* Attention tolerance. Measured with step 1e-2 (fp32 forward, loss summed in double): max error
 * 1.3e-5 to 4.6e-5 of max|a| and relative L2 1.4e-5 to 5.4e-5 over the ten cases, dominated by
 * fp32 rounding of the outputs (rounding noise / (2 step)); the O(step^2) truncation term is
 * smaller (step 3e-2 halves the error, 1e-3 multiplies it by ~8). So a ~20x margin or more:
 *   max |a - fd| <= 2e-3 * max|a| + 1e-5   and   ||a - fd|| / ||fd|| <= 1e-3.
 * A 10% error in dQ alone, or the wrong head split, is > 1e-2 in relative L2. */
#define ATT_STEP 1e-2
#define ATT_REL_MAX 2e-3
#define ATT_ABS 1e-5
#define ATT_REL_L2 1e-3

static int att_within(FdErr e) { return fd_within(e, ATT_REL_MAX, ATT_ABS, ATT_REL_L2); }

static double dot_loss(const float *out, const float *R, size_t n) {
    double s = 0.0;
    for (size_t i = 0; i < n; i++) s += (double)out[i] * (double)R[i];
    return s;
}

static float urand(Mt19937 *mt, float lo, float hi) { return lo + (hi - lo) * mt_uniform_f32(mt); }

static int max_threads(void) {
#ifdef _OPENMP
    return omp_get_max_threads();
#else
    return 1;
#endif
}

/* One attention configuration. (h2, d2): a wrong split with the same A for the negative control. */
static void attention_case(int h, int d, int T, int h2, int d2, uint32_t seed) {
    const int B = 2, A = h * d, A3 = 3 * A;
    const size_t nq = (size_t)B * T * A3, no = (size_t)B * T * A;
    const size_t natt = (size_t)B * LLMC_MAX(h, h2) * T * T;
    float *qkv = (float *)xmalloc(nq * sizeof(float));
    float *qkv2 = (float *)xmalloc(nq * sizeof(float));
    float *R = (float *)xmalloc(no * sizeof(float));
    float *out = (float *)xmalloc(no * sizeof(float));
    float *out2 = (float *)xmalloc(no * sizeof(float));
    float *att = (float *)xmalloc(natt * sizeof(float));
    float *dqkv = (float *)xmalloc(nq * sizeof(float));
    float *dwrong = (float *)xmalloc(nq * sizeof(float));
    float *scratch = (float *)xmalloc((size_t)max_threads() * T * sizeof(float));
    double *fd = (double *)xmalloc(nq * sizeof(double));
    char tag[64];
    snprintf(tag, sizeof(tag), "attention h %d d %d T %d", h, d, T);

    /* Q and K in [-2, 2] so the logits (std ~1.3) give peaked, non-uniform softmax rows; V and R
     * in [-1, 1]. */
    Mt19937 mt;
    mt_seed(&mt, seed);
    for (size_t r = 0; r < (size_t)B * T; r++)
        for (int j = 0; j < A3; j++) qkv[r * A3 + j] = j < 2 * A ? urand(&mt, -2.f, 2.f) : urand(&mt, -1.f, 1.f);
    for (size_t i = 0; i < no; i++) R[i] = urand(&mt, -1.f, 1.f);

    /* ---- forward properties ---- */
    for (size_t i = 0; i < natt; i++) att[i] = NAN; /* sentinels: the future part is never written */
    attention_forward(out, att, qkv, B, T, h, d);
    double worst_sum = 0.0, min_p = 1.0, max_p = 0.0;
    int future_untouched = 1, finite = 1;
    for (int b = 0; b < B; b++)
        for (int k = 0; k < h; k++)
            for (int t = 0; t < T; t++) {
                const float *p = att + (((size_t)b * h + k) * T + t) * T;
                double s = 0.0;
                for (int u = 0; u <= t; u++) {
                    s += p[u];
                    min_p = fmin(min_p, p[u]);
                    max_p = fmax(max_p, p[u]);
                }
                worst_sum = worst_err(worst_sum, fabs(s - 1.0));
                /* the future part carries no weight: left unset (the sentinel) or exactly 0 */
                for (int u = t + 1; u < T; u++) future_untouched &= isnan(p[u]) || p[u] == 0.0f;
            }
    for (size_t i = 0; i < no; i++) finite &= isfinite(out[i]) ? 1 : 0;
    /* fp32 softmax over <= T terms, each p = e * (1/sum) rounded: the row sum is 1 to within
     * about T/2 ulps of 1; allow 4 T FLT_EPSILON (6e-6 at T = 13) */
    const double sum_tol = 4.0 * T * FLT_EPSILON;
    CHECK(worst_sum <= sum_tol && min_p > 0.0 && max_p <= 1.0, "%s: softmax rows sum to 1 (worst "
          "|sum - 1| %.1e, tol %.1e), probabilities in (0, 1] (min %.2e, max %.3f)", tag, worst_sum,
          sum_tol, min_p, max_p);
    CHECK(future_untouched && finite, "%s: att[t][s > t] carries no weight (NaN sentinel untouched or "
          "0), outputs finite", tag);

    /* causality: new q/k/v at every position > t0 must leave outputs 0..t0 bit-identical, and a
     * new k at t0 itself must change output t0 (the check can see a change) */
    const int t0 = T / 2;
    memcpy(qkv2, qkv, nq * sizeof(float));
    for (int b = 0; b < B; b++)
        for (int t = t0 + 1; t < T; t++)
            for (int j = 0; j < A3; j++) qkv2[((size_t)b * T + t) * A3 + j] = urand(&mt, -3.f, 3.f);
    attention_forward(out2, att, qkv2, B, T, h, d);
    int past_same = 1, future_changed = 0;
    for (int b = 0; b < B; b++)
        for (int t = 0; t < T; t++)
            for (int j = 0; j < A; j++) {
                const size_t i = ((size_t)b * T + t) * A + j;
                if (t <= t0) past_same &= out2[i] == out[i];
                else future_changed |= out2[i] != out[i];
            }
    CHECK(past_same && future_changed, "%s: future q/k/v (t > %d) change no output at t <= %d "
          "(bit-identical) and do change later ones", tag, t0, t0);
    memcpy(qkv2, qkv, nq * sizeof(float));
    for (int b = 0; b < B; b++)
        for (int j = 0; j < A; j++) qkv2[((size_t)b * T + t0) * A3 + A + j] += 0.5f; /* k at t0 */
    attention_forward(out2, att, qkv2, B, T, h, d);
    int changed_t0 = 0, before_same = 1;
    for (int b = 0; b < B; b++)
        for (int t = 0; t <= t0; t++)
            for (int j = 0; j < A; j++) {
                const size_t i = ((size_t)b * T + t) * A + j;
                if (t == t0) changed_t0 |= out2[i] != out[i];
                else before_same &= out2[i] == out[i];
            }
    CHECK(changed_t0 && before_same, "%s: a new key at t = %d changes output %d but none before it",
          tag, t0, t0);

    /* ---- analytic gradient, then central differences on every element of qkv ---- */
    attention_forward(out, att, qkv, B, T, h, d);
    attention_backward(dqkv, R, qkv, att, B, T, h, d, scratch);
    int dfinite = 1;
    for (size_t i = 0; i < nq; i++) dfinite &= isfinite(dqkv[i]) ? 1 : 0;
    CHECK(dfinite, "%s: dqkv finite with NaN sentinels in the future part of att (never read)", tag);
    for (size_t i = 0; i < nq; i++) {
        const float x = qkv[i];
        qkv[i] = (float)(x + ATT_STEP);
        attention_forward(out, att, qkv, B, T, h, d);
        const double lp = dot_loss(out, R, no);
        qkv[i] = (float)(x - ATT_STEP);
        attention_forward(out, att, qkv, B, T, h, d);
        const double lm = dot_loss(out, R, no);
        qkv[i] = x;
        /* the perturbation actually applied (x +- step rounds in fp32) */
        fd[i] = (lp - lm) / ((double)(float)(x + ATT_STEP) - (double)(float)(x - ATT_STEP));
    }
    FdErr e = fd_compare(dqkv, fd, nq);
    CHECK(att_within(e), "%s: dqkv vs central differences on all %zu elements: max err %.2e "
          "(tol %.2e), max|a| %.3f, rel L2 %.2e (tol %.0e)", tag, nq, e.max_err,
          ATT_REL_MAX * e.max_a + ATT_ABS, e.max_a, e.rel_l2, ATT_REL_L2);
    /* each block (Q, K, V) on its own: Q and K carry the head split and the 1/sqrt(d) scale */
    static const char *const part[3] = {"dQ", "dK", "dV"};
    for (int blk = 0; blk < 3; blk++) {
        double se = 0.0, sf = 0.0;
        for (size_t r = 0; r < (size_t)B * T; r++)
            for (int j = blk * A; j < (blk + 1) * A; j++) {
                const double dd = dqkv[r * A3 + j] - fd[r * A3 + j];
                se += dd * dd;
                sf += fd[r * A3 + j] * fd[r * A3 + j];
            }
        CHECK(sf > 0.0 && sqrt(se / sf) <= ATT_REL_L2, "%s: %s alone: rel L2 %.2e, ||fd|| %.3f", tag,
              part[blk], sqrt(se / sf), sqrt(sf));
    }

    /* ---- negative controls: each must break the tolerance ---- */
    memcpy(dwrong, dqkv, nq * sizeof(float));
    for (size_t r = 0; r < (size_t)B * T; r++)
        for (int j = 0; j < A; j++) dwrong[r * A3 + j] *= 1.1f; /* dQ 10% too large */
    FdErr w = fd_compare(dwrong, fd, nq);
    CHECK(!att_within(w), "%s: negative control dQ x 1.1 is detected (max err %.2e, rel L2 %.2e)",
          tag, w.max_err, w.rel_l2);
    attention_forward(out2, att, qkv, B, T, h2, d2);
    attention_backward(dwrong, R, qkv, att, B, T, h2, d2, scratch);
    w = fd_compare(dwrong, fd, nq);
    CHECK(!att_within(w), "%s: negative control: the gradient of %d heads x %d is detected (max err "
          "%.2e, rel L2 %.2e)", tag, h2, d2, w.max_err, w.rel_l2);

    free(qkv); free(qkv2); free(R); free(out); free(out2); free(att); free(dqkv); free(dwrong);
    free(scratch); free(fd);
}

/* ---------------------------------------------------------------------------------------------- */
/* Part 2: the whole model. */

/* Mean cross-entropy of the last forward, in double from its fp32 logits: the forward's own fp32
 * loss sums 50257 exponentials in float, whose rounding (~1e-5) would swamp a difference quotient. */
static double model_loss_double(const GPT2 *m, const int *targets) {
    const int N = m->B * m->T, V = m->config.vocab_size;
    double row[64];
    if (N > 64) llmc_die("model_loss_double: at most 64 rows");
#ifdef _OPENMP
#pragma omp parallel for schedule(static)
#endif
    for (int n = 0; n < N; n++) {
        const float *z = m->acts.logits + (size_t)n * V;
        double mx = -INFINITY;
        for (int v = 0; v < V; v++) mx = fmax(mx, (double)z[v]);
        double s = 0.0;
        for (int v = 0; v < V; v++) s += exp((double)z[v] - mx);
        row[n] = mx + log(s) - (double)z[targets[n]];
    }
    double total = 0.0; /* summed in a fixed order: the same loss for any thread count */
    for (int n = 0; n < N; n++) total += row[n];
    return total / N;
}

/* Model tolerance, for a sample of one slot. The difference quotient's error is the fp32 noise
 * of the forward (the double loss still moves by ~2e-8 between nearby weights: measured FD
 * errors ~1e-5 at step 1e-3 on fcw) divided by the step, plus the O(step^2) curvature term. The
 * step is therefore per slot: 1e-2 for the block matrices and ln1w (gradients ~1e-4..1e-2, FD
 * error ~1e-6), 1e-3 for wte and wpe (gradients up to ~0.5 and strongly curved through the tied
 * LM head; at 1e-2 their truncation error reaches 1e-2 relative). The asserted bound, for every
 * sampled element:
 *   |a - fd| <= 2e-2 * |a| + 2e-3 * max|a over the slot's sample| + 1e-7,
 * and relative L2 over the sample <= 1e-2. Measured: relative L2 <= ~2e-3, worst element at
 * <= ~0.3 of its bound. The negative control (the uniform model's gradients) is off by ~0.25 in
 * relative L2 and ~30x its bound. */
#define MODEL_REL 2e-2
#define MODEL_REL_MAX 2e-3
#define MODEL_ABS 1e-7
#define MODEL_REL_L2 1e-2

static double model_step(int slot) { return slot == P_WTE || slot == P_WPE ? 1e-3 : 1e-2; }

typedef struct {
    int n;
    size_t idx[64];   /* element index inside the slot */
    float a[64];      /* analytic */
    double fd[64];    /* central difference */
} Sample;

static int sample_within(const Sample *s, const float *a, int *worst, double *worst_ratio) {
    const FdErr e = fd_compare(a, s->fd, (size_t)s->n);
    int ok = 1;
    *worst = 0;
    *worst_ratio = 0.0;
    for (int i = 0; i < s->n; i++) {
        const double err = fabs((double)a[i] - s->fd[i]);
        const double tol = MODEL_REL * fabs((double)a[i]) + MODEL_REL_MAX * e.max_a + MODEL_ABS;
        if (err > tol) ok = 0;
        if (err / tol > *worst_ratio) {
            *worst_ratio = err / tol;
            *worst = i;
        }
    }
    return ok && e.rel_l2 <= MODEL_REL_L2;
}

static double sample_rel_l2(const Sample *s, const float *a) { return fd_compare(a, s->fd, (size_t)s->n).rel_l2; }

static void model_fd(void) {
    GPT2Config cfg;
    char msg[256];
    if (!config_from_descriptor("tiny", &cfg, msg, sizeof(msg))) llmc_die("%s", msg);
    const int heads[4] = {1, 2, 4, 4};
    for (int l = 0; l < 4; l++) {
        cfg.layer[l].n_head = heads[l];
        cfg.layer[l].head_size = cfg.channels / heads[l];
        cfg.layer[l].kind = ATTN_MHA;
    }
    GPT2 model, uni;
    gpt2_build_from_config(&model, &cfg, 42);
    GPT2Config ucfg;
    config_from_descriptor("tiny", &ucfg, msg, sizeof(msg));
    gpt2_build_from_config(&uni, &ucfg, 42);
    CHECK(model.layout.total == uni.layout.total &&
              memcmp(model.params, uni.params, model.layout.total * sizeof(float)) == 0,
          "tiny Prism (1,2,4,4) and uniform: the same %zu initial weights from seed 42",
          model.layout.total);

    /* At init (std 0.02) q.k is ~0.03, every softmax row is nearly uniform and the head split
     * barely matters. Scale qkvw by 5 (q, k ~ N(0, 0.8^2)) and attprojw by 5 so the attention is
     * peaked and its gradients are not negligible; same change in both models. */
    const ParamLayout *pl = &model.layout;
    for (size_t i = 0; i < pl->slot_size[P_QKVW]; i++) {
        model.params[pl->slot_offset[P_QKVW] + i] *= 5.0f;
        uni.params[pl->slot_offset[P_QKVW] + i] *= 5.0f;
    }
    for (size_t i = 0; i < pl->slot_size[P_ATTPROJW]; i++) {
        model.params[pl->slot_offset[P_ATTPROJW] + i] *= 5.0f;
        uni.params[pl->slot_offset[P_ATTPROJW] + i] *= 5.0f;
    }

    const int B = 2, T = 8, N = B * T, V = cfg.vocab_size;
    int x[16], y[16];
    Mt19937 mt;
    mt_seed(&mt, 7);
    for (int i = 0; i < N; i++) x[i] = (int)(mt_u32(&mt) % (uint32_t)V);
    for (int i = 0; i < N; i++) y[i] = (int)(mt_u32(&mt) % (uint32_t)V);

    /* analytic gradients of the mean loss: dloss = 1 / (B T) per token */
    gpt2_forward(&model, x, y, B, T);
    const float fp32_loss = model.mean_loss;
    gpt2_zero_grad(&model);
    gpt2_backward(&model, 1.0f / (float)N);
    gpt2_forward(&uni, x, y, B, T);
    gpt2_zero_grad(&uni);
    gpt2_backward(&uni, 1.0f / (float)N);
    gpt2_forward(&model, x, NULL, B, T);
    const double loss0 = model_loss_double(&model, y);
    CHECK(fabs(loss0 - fp32_loss) <= 1e-5 * fabs(loss0) && fabs(loss0 - log((double)V)) < 0.5,
          "tiny Prism: double loss %.7f vs the forward's fp32 %.7f (ln V = %.3f)", loss0, fp32_loss,
          log((double)V));
    /* The FD check is a consistency check: a model that ignored the table in both passes would
     * pass it. So check that the forward really splits layer l into h_l heads: its attention
     * output equals attention_forward(h_l, d_l) on its own qkv bit for bit, and differs from the
     * uniform split (4 x 16) wherever h_l != 4. */
    {
        float *o = (float *)xmalloc((size_t)N * cfg.channels * sizeof(float));
        float *at = (float *)xmalloc((size_t)B * 4 * T * T * sizeof(float));
        int same_own = 1, differs_uniform = 1;
        for (int l = 0; l < 4; l++) {
            const size_t n = (size_t)N * cfg.channels;
            attention_forward(o, at, model.acts.qkv[l], B, T, heads[l], cfg.channels / heads[l]);
            same_own &= memcmp(o, model.acts.atty[l], n * sizeof(float)) == 0;
            attention_forward(o, at, model.acts.qkv[l], B, T, 4, 16);
            double diff = 0.0;
            for (size_t i = 0; i < n; i++) diff = fmax(diff, fabs((double)o[i] - model.acts.atty[l][i]));
            if (heads[l] != 4) differs_uniform &= diff > 1e-3;
        }
        CHECK(same_own && differs_uniform, "tiny Prism forward: layer l's attention output is "
              "attention_forward with h_l = 1, 2, 4, 4 (bit-identical), not the uniform 4-head split");
        free(o);
        free(at);
    }

    const int slots[6] = {P_QKVW, P_ATTPROJW, P_LN1W, P_FCW, P_WTE, P_WPE};
    const int NS = 30;
    for (int si = 0; si < 6; si++) {
        const int slot = slots[si];
        const size_t off = pl->slot_offset[slot], size = pl->slot_size[slot];
        const size_t C = (size_t)cfg.channels;
        Sample s;
        s.n = NS;
        for (int i = 0; i < NS; i++) {
            size_t idx = (size_t)mt_u32(&mt) % size;
            if (slot == P_WTE) { /* 2/3 from rows of tokens in the batch: the rest get ~1e-6 */
                const size_t row = i % 3 != 2 ? (size_t)(i % 2 ? x : y)[mt_u32(&mt) % N]
                                              : (size_t)(mt_u32(&mt) % (uint32_t)V);
                idx = row * C + mt_u32(&mt) % C;
            } else if (slot == P_WPE) { /* rows 0..T-1; the rows beyond T are checked below */
                idx = (size_t)(mt_u32(&mt) % T) * C + mt_u32(&mt) % C;
            }
            s.idx[i] = idx;
            s.a[i] = model.grads[off + idx];
            float *p = model.params + off + idx;
            const float p0 = *p;
            *p = (float)(p0 + model_step(slot));
            const double step_up = (double)*p - p0;
            gpt2_forward(&model, x, NULL, B, T);
            const double lp = model_loss_double(&model, y);
            *p = (float)(p0 - model_step(slot));
            const double step_dn = p0 - (double)*p;
            gpt2_forward(&model, x, NULL, B, T);
            const double lm = model_loss_double(&model, y);
            *p = p0;
            s.fd[i] = (lp - lm) / (step_up + step_dn);
        }
        int worst;
        double ratio;
        const int ok = sample_within(&s, s.a, &worst, &ratio);
        double max_a = 0.0;
        for (int i = 0; i < NS; i++) max_a = fmax(max_a, fabs((double)s.a[i]));
        CHECK(ok, "tiny Prism %-8s: %d sampled grads vs central differences (step %.0e): rel L2 %.2e "
              "(tol %.0e), max|a| %.2e, worst err/tol %.2f (a %.4e, fd %.4e)", param_slot_name(slot),
              NS, model_step(slot),
              sample_rel_l2(&s, s.a), MODEL_REL_L2, max_a, ratio, s.a[worst], s.fd[worst]);
        /* negative control: the uniform model's gradient at the same (equal) weights must not pass
         * for the attention weights, whose gradient depends on the head split */
        if (slot == P_QKVW || slot == P_ATTPROJW) {
            float ua[64];
            for (int i = 0; i < NS; i++) ua[i] = uni.grads[off + s.idx[i]];
            const int uok = sample_within(&s, ua, &worst, &ratio);
            CHECK(!uok, "tiny Prism %-8s: negative control: the uniform (4 heads) gradient is detected "
                  "(rel L2 %.2e, worst err/tol %.1f)", param_slot_name(slot), sample_rel_l2(&s, ua),
                  ratio);
        }
    }
    /* wpe rows >= T are never read at T = 8 and padded wte rows never used: gradient exactly 0 */
    int zero_ok = 1;
    for (size_t i = (size_t)T * cfg.channels; i < pl->slot_size[P_WPE]; i++)
        zero_ok &= model.grads[pl->slot_offset[P_WPE] + i] == 0.0f;
    for (size_t i = (size_t)V * cfg.channels; i < pl->slot_size[P_WTE]; i++)
        zero_ok &= model.grads[pl->slot_offset[P_WTE] + i] == 0.0f;
    CHECK(zero_ok, "tiny Prism: wpe rows >= T and padded wte rows have exactly zero gradient");
    gpt2_free(&model);
    gpt2_free(&uni);
}

int main(void) {
    const clock_t c0 = clock();
    /* (h, d, T, wrong h, wrong d): the wrong split keeps A */
    static const int cases[][5] = {
        {8, 8, 13, 4, 16}, {4, 16, 13, 8, 8}, {2, 32, 13, 4, 16}, {1, 64, 13, 2, 32}, {3, 12, 13, 6, 6},
        {8, 8, 7, 4, 16},  {4, 16, 7, 2, 32}, {2, 32, 7, 1, 64},  {1, 64, 7, 2, 32},  {3, 12, 7, 4, 9},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++)
        attention_case(cases[i][0], cases[i][1], cases[i][2], cases[i][3], cases[i][4], 1000u + (uint32_t)i);
    printf("attention part: cpu time %.2f s\n", (double)(clock() - c0) / CLOCKS_PER_SEC);
    model_fd();
    printf("cpu time %.2f s\n", (double)(clock() - c0) / CLOCKS_PER_SEC);
    return test_finish();
}
