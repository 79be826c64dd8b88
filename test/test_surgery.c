/*
 * test/test_surgery.c: sd_attention/surgery.h on small in-memory models (doc/sd_tools.md "Surgery").
 *
 *   - rank shrink is exact where it should be: on a constructed S-D head whose U rows lie in the
 *     span of the top m planes of S, with scalar D and a value-output map of rank <= 2m (random
 *     biases everywhere, so the V-bias fold is exercised), the shrunk model's logits equal the
 *     original's. Negative controls: a generic U, and dropping the sqrt(2m/d) logit-scale
 *     correction, both change the logits.
 *   - the real Schur planes: Q orthogonal, Q^T S Q block diagonal with the frequencies sorted, odd
 *     d handled; the in-plane rotation makes the 2 x 2 blocks of Q^T D Q diagonal and keeps S's.
 *   - scalar_d keeps the mean softplus of every head, gives spread 0, and both layouts (scalar flag,
 *     equal values) have bit-identical logits; linearize changes only kinds.
 *   - the value low-rank map is exact at full rank; the plan (-planes, -rank90, -round8).
 *   - uniform: for each kind (sd, sdlin, lin, mha) in layer 1, the layer's attention output after
 *     surg_uniform is the causal mean of its values, per head, at every position; layer 0 and the
 *     values are untouched. Negative control: the output before the surgery is not that mean.
 *
 * Tolerances: logits agree to 2e-5 absolute (fp32 forward of two different parametrizations of the
 * same function; the logits are O(1)); the negative controls differ by > 1e-3. Double-precision
 * identities to 1e-10.
 */
#include <lapacke.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../llmc/cpu/gpt2_cpu.h"
#include "../sd_attention/surgery.h"
#include "harness.h"
#include "../kinds/registry_cpu.h"

static uint64_t g_rng = 0x2545f4914f6cdd1dull;
static double urand(void) {
    g_rng ^= g_rng >> 12;
    g_rng ^= g_rng << 25;
    g_rng ^= g_rng >> 27;
    return ((g_rng * 2685821657736338717ull) >> 11) * (1.0 / 9007199254740992.0);
}
static double nrand(void) { return sqrt(-2.0 * log(urand() + 1e-300)) * cos(2.0 * M_PI * urand()); }

/* A small model: V 97, C 32, maxT 16, two layers of 2 S-D heads of size 8 (layer 1 optional
 * kind), random biases and S; theta random (vector) or one per head (scalar). */
static void small_config(GPT2Config *c, int scalar_d, int kind1) {
    memset(c, 0, sizeof(*c));
    c->max_seq_len = 16;
    c->vocab_size = 97;
    c->padded_vocab_size = 128;
    c->num_layers = 2;
    c->channels = 32;
    c->num_heads = 2;
    c->use_ln = 1;
    c->emb_scale = 1.0f;
    kind_opt_set_int(c->opt, &SD_SCALAR_D, scalar_d);
    kind_opt_set_int(c->opt, &SD_SIGN, -1);
    kind_opt_set_float(c->opt, &SD_INIT_S, 0.5f);
    kind_opt_set_float(c->opt, &SD_INIT_THETA, 0.1f);
    for (int l = 0; l < 2; l++) c->layer[l] = (LayerSpec){2, 8, l == 0 ? ATTN_SD : kind1};
}

static void randomize(GPT2 *m) {
    for (int l = 0; l < m->config.num_layers; l++) {
        LayerParams p = layer_params(m->params, &m->layout, l);
        const GPT2Config *c = &m->config;
        for (size_t i = 0; i < layer_slot_size(c, l, P_QKVB); i++) p.qkvb[i] = (float)(0.3 * nrand());
        for (int i = 0; i < c->channels; i++) p.attprojb[i] = (float)(0.1 * nrand());
        for (size_t i = 0; i < layer_slot_size(c, l, P_ATTPROJW); i++) p.attprojw[i] = (float)(0.2 * nrand());
        for (size_t i = 0; i < layer_slot_size(c, l, P_QKVW); i++) p.qkvw[i] = (float)(0.3 * nrand());
        for (size_t i = 0; i < layer_slot_size(c, l, P_SDTHETA); i++) p.slot[P_SDTHETA][i] = (float)nrand();
    }
}

static void tokens(int *x, int n) {
    for (int i = 0; i < n; i++) x[i] = (int)(urand() * 97) % 97;
}

/* logits of the (B, T) tokens into out (copied) */
static void logits_of(const GPT2Config *c, const float *params, const int *x, int B, int T, float *out) {
    GPT2 m;
    gpt2_build_from_config(&m, c, 1);
    memcpy(m.params, params, m.layout.total * sizeof(float));
    gpt2_forward(&m, x, NULL, B, T);
    memcpy(out, m.acts.logits, sizeof(float) * (size_t)B * T * c->vocab_size);
    gpt2_free(&m);
}

/* Makes layer 0's heads shrinkable without loss to m planes: U rows (and b_U) projected onto the
 * span of S's top m planes, V rows beyond 2m zeroed (value-output map of rank <= 2m). */
static void make_head_in_span(GPT2 *m, int m_planes) {
    const GPT2Config *c = &m->config;
    const int d = c->layer[0].head_size, h = c->layer[0].n_head, C = c->channels, A = h * d;
    LayerParams p = layer_params(m->params, &m->layout, 0);
    double S[64], Q[64], om[8], P[64];
    for (int k = 0; k < h; k++) {
        spec_skew_unpack(p.slot[P_SDSKEW] + (size_t)k * d * (d - 1) / 2, d, S);
        surg_schur_planes(S, d, Q, om);
        for (int i = 0; i < d; i++)
            for (int j = 0; j < d; j++) {
                double s = 0.0;
                for (int t = 0; t < 2 * m_planes; t++) s += Q[i * d + t] * Q[j * d + t];
                P[i * d + j] = s;
            }
        float *W = p.qkvw + (size_t)k * d * C, *b = p.qkvb + (size_t)k * d;
        float Wn[8 * 32], bn[8];
        for (int i = 0; i < d; i++) {
            double sb = 0.0;
            for (int j = 0; j < d; j++) sb += P[i * d + j] * b[j];
            bn[i] = (float)sb;
            for (int cc = 0; cc < C; cc++) {
                double s = 0.0;
                for (int j = 0; j < d; j++) s += P[i * d + j] * W[(size_t)j * C + cc];
                Wn[i * C + cc] = (float)s;
            }
        }
        memcpy(W, Wn, sizeof(float) * d * C);
        memcpy(b, bn, sizeof(float) * d);
        for (int i = 2 * m_planes; i < d; i++)
            memset(p.qkvw + (size_t)(A + k * d + i) * C, 0, sizeof(float) * C);
    }
}

static void test_shrink_exact(void) {
    GPT2Config c;
    small_config(&c, 1, ATTN_MHA);
    GPT2 m;
    gpt2_build_from_config(&m, &c, 3);
    randomize(&m);
    make_head_in_span(&m, 2);
    const int B = 2, T = 12, n = B * T * c.vocab_size;
    int x[24];
    tokens(x, B * T);
    float *ref = (float *)xmalloc(sizeof(float) * n), *got = (float *)xmalloc(sizeof(float) * n);
    logits_of(&c, m.params, x, B, T, ref);

    ShrinkPlan plan;
    memset(&plan, 0, sizeof(plan));
    plan.new_d[0] = 4;
    plan.planes[0] = 2;
    GPT2Config oc;
    float *op = NULL;
    ShrinkReport rep;
    surg_shrink(&c, m.params, &plan, &oc, &op, &rep);
    CHECK(oc.layer[0].head_size == 4 && oc.layer[1].head_size == 8 && oc.layer[0].kind == ATTN_SD,
          "shrink plan applied: layer 0 head size 8 -> 4, layer 1 untouched");
    logits_of(&oc, op, x, B, T, got);
    double scale = max_abs(ref, n), diff = max_abs_diff(ref, got, n);
    CHECK(diff < 2e-5, "U in the span of the top 2 planes, scalar D, value rank <= 4: shrunk logits "
          "equal the original's (max |diff| %.2e, logits up to %.2f)", diff, scale);
    CHECK(rep.value_kept[0] > 1 - 1e-9 && rep.routing_kept[0] < 1.0,
          "value-output map kept exactly (%.12f); the dropped planes held routing energy (kept %.4f)",
          rep.value_kept[0], rep.routing_kept[0]);

    /* negative control 1: without the sqrt(2m/d) correction the logit scale is wrong */
    ParamLayout ol;
    param_layout_init(&ol, &oc);
    LayerParams po = layer_params(op, &ol, 0);
    const double s = sqrt(4.0 / 8.0);
    for (size_t i = 0; i < layer_slot_size(&oc, 0, P_SDSKEW); i++) po.slot[P_SDSKEW][i] /= (float)s;
    for (size_t i = 0; i < layer_slot_size(&oc, 0, P_SDTHETA); i++)
        po.slot[P_SDTHETA][i] = (float)surg_softplus_inv(spec_softplus(po.slot[P_SDTHETA][i]) / s);
    logits_of(&oc, op, x, B, T, got);
    diff = max_abs_diff(ref, got, n);
    CHECK(diff > 1e-3, "negative control: without the sqrt(2m/d) logit-scale correction the logits "
          "move (max |diff| %.2e)", diff);
    free(op);

    /* negative control 2: a generic U (not in the span) loses the dropped planes */
    GPT2 g;
    gpt2_build_from_config(&g, &c, 3);
    randomize(&g);
    logits_of(&c, g.params, x, B, T, ref);
    surg_shrink(&c, g.params, &plan, &oc, &op, &rep);
    logits_of(&oc, op, x, B, T, got);
    diff = max_abs_diff(ref, got, n);
    CHECK(diff > 1e-3, "negative control: a generic U changes the logits (max |diff| %.2e)", diff);
    free(op);
    gpt2_free(&g);
    gpt2_free(&m);
    free(ref);
    free(got);
}

static void test_schur_planes(void) {
    const int d = 9; /* odd: one 1 x 1 zero block */
    double S[81], Q[81], om[9], T[81], dv[9], sv[9];
    for (int i = 0; i < d; i++) {
        S[i * d + i] = 0.0;
        for (int j = i + 1; j < d; j++) {
            S[i * d + j] = nrand();
            S[j * d + i] = -S[i * d + j];
        }
        dv[i] = 0.2 + urand();
    }
    const int np = surg_schur_planes(S, d, Q, om);
    double orth = 0.0, offblock = 0.0, sorted = 1.0, freq = 0.0;
    spec_singular_values(S, d, d, sv);
    for (int a = 0; a < d; a++)
        for (int b = 0; b < d; b++) {
            double qq = 0.0, t = 0.0;
            for (int i = 0; i < d; i++) {
                qq += Q[i * d + a] * Q[i * d + b];
                for (int j = 0; j < d; j++) t += Q[i * d + a] * S[i * d + j] * Q[j * d + b];
            }
            T[a * d + b] = t;
            orth = worst_err(orth, fabs(qq - (a == b)));
            const int same_plane = a / 2 == b / 2 && a < 2 * np && b < 2 * np;
            if (!same_plane) offblock = worst_err(offblock, fabs(t));
        }
    for (int p = 0; p < np; p++) {
        if (p > 0 && om[p] > om[p - 1]) sorted = 0.0;
        freq = worst_err(freq, fabs(fabs(T[(2 * p) * d + 2 * p + 1]) - om[p]) + fabs(om[p] - sv[2 * p]));
    }
    CHECK(np == 4 && orth < 1e-12 && offblock < 1e-10 && sorted == 1.0 && freq < 1e-10,
          "real Schur planes of a random 9 x 9 skew S: 4 planes, Q orthogonal (%.1e), Q^T S Q block "
          "diagonal (%.1e), omega sorted and equal to S's singular-value pairs (%.1e)", orth, offblock, freq);
    surg_align_planes(Q, d, np, dv);
    double dblock = 0.0, sblock = 0.0;
    for (int p = 0; p < np; p++) {
        const int a = 2 * p, b = a + 1;
        double d12 = 0.0, s12 = 0.0, s11 = 0.0;
        for (int i = 0; i < d; i++) {
            d12 += dv[i] * Q[i * d + a] * Q[i * d + b];
            for (int j = 0; j < d; j++) {
                s12 += Q[i * d + a] * S[i * d + j] * Q[j * d + b];
                s11 += Q[i * d + a] * S[i * d + j] * Q[j * d + a];
            }
        }
        dblock = worst_err(dblock, fabs(d12));
        sblock = worst_err(sblock, fabs(s12 - T[a * d + b]) + fabs(s11));
    }
    CHECK(dblock < 1e-12 && sblock < 1e-10, "in-plane rotation: the 2 x 2 blocks of Q^T D Q are "
          "diagonal (%.1e) and S's blocks are unchanged (%.1e)", dblock, sblock);
}

static void test_scalar_d_and_linearize(void) {
    GPT2Config c;
    small_config(&c, 0, ATTN_SDLIN);
    GPT2 m;
    gpt2_build_from_config(&m, &c, 5);
    randomize(&m);
    GPT2Config sc, kc;
    float *sp = NULL, *kp = NULL;
    surg_scalar_d(&c, m.params, 0, &sc, &sp);
    surg_scalar_d(&c, m.params, 1, &kc, &kp);
    ParamLayout sl;
    param_layout_init(&sl, &sc);
    double err = 0.0;
    for (int l = 0; l < 2; l++) {
        LayerParams pi = layer_params(m.params, &m.layout, l), ps = layer_params(sp, &sl, l);
        for (int k = 0; k < 2; k++) {
            double mean = 0.0;
            for (int i = 0; i < 8; i++) mean += spec_softplus(pi.slot[P_SDTHETA][k * 8 + i]) / 8;
            err = worst_err(err, fabs(spec_softplus(ps.slot[P_SDTHETA][k]) - mean) / mean);
        }
    }
    CHECK(sd_opt_scalar_d(&sc) == 1 && layer_slot_size(&sc, 0, P_SDTHETA) == 2 && err < 1e-6,
          "scalar_d: the scalar-D layout (one theta per head) keeps each head's mean softplus "
          "(rel. err %.1e)", err);
    const int B = 1, T = 10, n = B * T * c.vocab_size;
    int x[10];
    tokens(x, 10);
    float *a = (float *)xmalloc(sizeof(float) * n), *b = (float *)xmalloc(sizeof(float) * n);
    logits_of(&sc, sp, x, B, T, a);
    logits_of(&kc, kp, x, B, T, b);
    CHECK(sd_opt_scalar_d(&kc) == 0 && max_abs_diff(a, b, n) == 0.0,
          "-keep_layout 1 (d equal values) and the scalar layout give bit-identical logits");
    HeadStats hs;
    ParamLayout kl;
    param_layout_init(&kl, &kc);
    LayerParams pk = layer_params(kp, &kl, 1);
    spec_head_sd(pk.qkvw, pk.slot[P_SDSKEW], pk.slot[P_SDTHETA], 32, 8, 1, 1, ATTN_SDLIN, 0, -1, 1e-6, &hs);
    CHECK(hs.d_spread < 1e-7, "after scalar_d every head's D spread is 0 (%.1e)", hs.d_spread);
    free(sp);
    free(kp);
    free(a);
    free(b);

    GPT2Config lc, mc;
    small_config(&mc, 0, ATTN_MHA);
    const int changed = surg_linearize(&mc, 2, &lc);
    ParamLayout l1, l2;
    param_layout_init(&l1, &mc);
    param_layout_init(&l2, &lc);
    CHECK(changed == 2 && lc.layer[0].kind == ATTN_SDLIN && lc.layer[1].kind == ATTN_LIN &&
              l1.total == l2.total && memcmp(l1.slot_offset, l2.slot_offset, sizeof(l1.slot_offset)) == 0,
          "linearize: sd -> sdlin, mha -> lin, the parameter layout unchanged");
    CHECK(surg_linearize(&lc, 2, &mc) == 0, "linearize on linear layers changes nothing");
    gpt2_free(&m);
}

static void test_value_and_plan(void) {
    const int C = 12, d = 4;
    double WV[48], WO[48], vr[48], oc[48];
    for (int i = 0; i < C * d; i++) { WV[i] = nrand(); WO[i] = nrand(); }
    const double kept = surg_value_lowrank(WV, WO, C, d, d, vr, oc);
    double err = 0.0;
    for (int i = 0; i < C; i++)
        for (int j = 0; j < C; j++) {
            double p = 0.0, q = 0.0;
            for (int t = 0; t < d; t++) {
                p += WV[i * d + t] * WO[j * d + t];
                q += vr[t * C + i] * oc[j * d + t];
            }
            err = worst_err(err, fabs(p - q));
        }
    CHECK(fabs(kept - 1) < 1e-12 && err < 1e-10, "value-output map at full rank: W_V' W_O' = W_V W_O "
          "(%.1e), all energy kept", err);

    double worst = 0.0;
    for (double y = 1e-6; y < 60; y *= 1.7) worst = worst_err(worst, fabs(spec_softplus(surg_softplus_inv(y)) - y) / y);
    CHECK(worst < 1e-10, "softplus^-1 inverts softplus on [1e-6, 60] (rel. %.1e)", worst);

    GPT2Config c;
    small_config(&c, 0, ATTN_SD);
    c.layer[1].head_size = 32;
    GPT2 m;
    gpt2_build_from_config(&m, &c, 9);
    ShrinkPlan p1, p2, p3;
    surg_plan_shrink(&c, m.params, 4, 0, 0, &p1);
    surg_plan_shrink(&c, m.params, 3, 0, 1, &p2);
    surg_plan_shrink(&c, m.params, 0, 1, 0, &p3);
    CHECK(p1.new_d[0] == 0 && p1.new_d[1] == 8 && p1.n_changed == 1,
          "-planes 4: d 8 keeps every plane (unchanged), d 32 -> 8");
    CHECK(p2.new_d[0] == 0 && p2.new_d[1] == 8, "-planes 3 -round8 1: 6 rounds up to 8 (d 8 unchanged)");
    int ok = 1;
    ParamLayout pl;
    param_layout_init(&pl, &c);
    for (int l = 0; l < 2; l++) {
        const int d2 = c.layer[l].head_size;
        int mx = 1;
        double S[32 * 32], sv[32];
        for (int k = 0; k < 2; k++) {
            spec_skew_unpack(m.params + param_offset(&pl, P_SDSKEW, l) + (size_t)k * d2 * (d2 - 1) / 2, d2, S);
            spec_singular_values(S, d2, d2, sv);
            RankStats rs = spec_rank_stats(sv, d2, 0.0);
            if (rs.n90 > mx) mx = rs.n90;
        }
        ok &= p3.planes[l] == mx && (p3.new_d[l] == (2 * mx < d2 ? 2 * mx : 0));
    }
    CHECK(ok, "-rank90 1: m = the largest n90 over the layer's heads (layer 1: %d planes)", p3.planes[1]);
    gpt2_free(&m);
}

/* max |atty - causal mean of V| of layer l of a forward of (c, params) on x (1, T) */
static double uniform_gap(const GPT2Config *c, const float *params, const int *x, int T, int l) {
    GPT2 m;
    gpt2_build_from_config(&m, c, 1);
    memcpy(m.params, params, m.layout.total * sizeof(float));
    gpt2_forward(&m, x, NULL, 1, T);
    const int A = attn_width(&c->layer[l]);
    const float *qkv = m.acts.qkv[l], *atty = m.acts.atty[l]; /* qkv (T, 3A): Q | K | V, S-D U | U L^T | V */
    double gap = 0.0;
    for (int a = 0; a < A; a++) {
        double sum = 0.0;
        for (int t = 0; t < T; t++) {
            sum += qkv[(size_t)t * 3 * A + (size_t)2 * A + a];
            gap = worst_err(gap, fabs(atty[(size_t)t * A + a] - sum / (t + 1)));
        }
    }
    gpt2_free(&m);
    return gap;
}

static void test_uniform(void) {
    const int kinds[4] = {ATTN_SD, ATTN_SDLIN, ATTN_LIN, ATTN_MHA};
    for (int k = 0; k < 4; k++) {
        GPT2Config c;
        small_config(&c, 0, kinds[k]);
        GPT2 m;
        gpt2_build_from_config(&m, &c, 7);
        randomize(&m);
        const size_t n = m.layout.total;
        float *u = (float *)xmalloc(n * sizeof(float));
        memcpy(u, m.params, n * sizeof(float));
        surg_uniform(&c, u, 1);
        int x[12];
        tokens(x, 12);
        const double before = uniform_gap(&c, m.params, x, 12, 1), after = uniform_gap(&c, u, x, 12, 1);
        /* what may change: layer 1's score rows of qkvw and qkvb, nothing else */
        const int A = attn_width(&c.layer[1]), rows = layer_kind_of(c.layer[1].kind)->proj->qkv_rows;
        const size_t w0 = param_offset(&m.layout, P_QKVW, 1), b0 = param_offset(&m.layout, P_QKVB, 1);
        const size_t wn = (size_t)(rows - 1) * A * c.channels, bn = (size_t)(rows - 1) * A;
        int kept = 1;
        for (size_t i = 0; i < n; i++) {
            const int score = (i >= w0 && i < w0 + wn) || (i >= b0 && i < b0 + bn);
            kept &= score ? u[i] == 0.0f : u[i] == m.params[i];
        }
        CHECK(after <= 1e-5 && before > 1e-2 && kept,
              "uniform, layer 1 %s: attention output = causal mean of V to %.1e (before: %.2e); only its score rows zeroed",
              layer_kind_of(kinds[k])->name, after, before);
        free(u);
        gpt2_free(&m);
    }
}

int main(void) {
    test_uniform();
    test_shrink_exact();
    test_schur_planes();
    test_scalar_d_and_linearize();
    test_value_and_plan();
    return test_finish();
}
