/*
 * test/test_schedulers.c: the learning-rate schedules of llmc/schedulers.h against the formulas of
 * doc/formats.md "Optimization semantics", evaluated here independently in double precision at the points where the
 * schedules change shape (warmup, the decay start, the end); and the z-scores of llmc/outlier.h
 * (what -sl/-sg compare) against the definition llm.c uses, computed here from running sums; the
 * CPU trainer's ETA (recent wall time per step) and the best val loss of the end-of-run summary.
 */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "../llmc/outlier.h"
#include "../llmc/schedulers.h"
#include "../llmc/train_setup.h"
#include "harness.h"

#define CLOSE(a, b) (fabs((double)(a) - (double)(b)) <= 1e-6 * fmax(1e-12, fabs((double)(b))))

/* z of the newest value over the last 128 values, the newest included (population variance from
 * the window's sum and sum of squares); NaN for the first 128 values. */
static double reference_z(const double *x, int k) {
    if (k < OUTLIER_WINDOW) return NAN;
    double sum = 0.0, sum_sq = 0.0;
    for (int i = k - OUTLIER_WINDOW + 1; i <= k; i++) {
        sum += x[i];
        sum_sq += x[i] * x[i];
    }
    const double mean = sum / OUTLIER_WINDOW, var = sum_sq / OUTLIER_WINDOW - mean * mean;
    return var > 0.0 ? (x[k] - mean) / sqrt(var) : 0.0;
}

static void test_outlier(void) {
    enum { N = 400 };
    double x[N];
    uint64_t r = 12345;
    for (int i = 0; i < N; i++) { /* a noisy, slowly falling loss with two spikes */
        r = r * 6364136223846793005ull + 1442695040888963407ull;
        x[i] = 3.0 - 0.0005 * i + 0.05 * ((double)(r >> 11) / 9007199254740992.0 - 0.5);
    }
    x[250] += 1.0;
    x[333] += 0.3;
    OutlierDetector d;
    outlier_init(&d);
    int nan_ok = 1, worst_i = -1;
    double worst = 0.0, z250 = 0.0, excluded250 = 0.0;
    for (int i = 0; i < N; i++) {
        const double z = outlier_update(&d, x[i]), ref = reference_z(x, i);
        if (i < OUTLIER_WINDOW) {
            nan_ok &= isnan(z);
            continue;
        }
        const double e = fabs(z - ref) / fmax(1.0, fabs(ref));
        if (!(e <= worst)) { worst = e; worst_i = i; }
        if (i == 250) {
            z250 = z;
            double m = 0.0, v = 0.0; /* control: the window of the 128 values before, x[250] left out */
            for (int j = 250 - OUTLIER_WINDOW; j < 250; j++) m += x[j];
            m /= OUTLIER_WINDOW;
            for (int j = 250 - OUTLIER_WINDOW; j < 250; j++) v += (x[j] - m) * (x[j] - m);
            excluded250 = (x[250] - m) / sqrt(v / OUTLIER_WINDOW);
        }
    }
    CHECK(nan_ok, "z-score: NaN for the first %d values (the window fills)", OUTLIER_WINDOW);
    CHECK(worst <= 1e-9, "z-score = llm.c's definition (window includes the new value) within 1e-9, worst %.2e at %d",
          worst, worst_i);
    CHECK(z250 > 5.0 && fabs(z250 - excluded250) > 1.0,
          "control: the spike's z %.2f differs from the z with the value left out (%.2f)", z250, excluded250);
    outlier_init(&d);
    double z = 0.0;
    for (int i = 0; i <= OUTLIER_WINDOW; i++) z = outlier_update(&d, 2.5);
    CHECK(z == 0.0, "z-score of a constant window is 0 (%g)", z);
}

static void test_eta(void) {
    EtaClock c = {{0}, 0};
    char buf[32];
    format_duration(eta_seconds(&c, 10), buf, sizeof(buf));
    CHECK(strcmp(buf, "?") == 0, "ETA before any step is unknown (%s)", buf);
    double now = 1000.0;
    eta_tick(&c, now);
    for (int i = 0; i < 100; i++) eta_tick(&c, now += 1.0); /* 100 steps of 1 s, then the machine slows */
    for (int i = 0; i < 3; i++) eta_tick(&c, now += 3.0);
    const double partly = eta_seconds(&c, 10);
    for (int i = 0; i < 17; i++) eta_tick(&c, now += 3.0);
    const double slowed = eta_seconds(&c, 10);
    CHECK(fabs(partly - (17 * 1.0 + 3 * 3.0) / 20 * 10) < 1e-9, "ETA from the last 20 steps, 3 of them slow: %.2f s", partly);
    CHECK(fabs(slowed - 30.0) < 1e-9, "after 20 slow steps of 3 s, 10 steps left: 30 s (%.2f; the mean of all steps gives 13.3)",
          slowed);
    format_duration(3725.0, buf, sizeof(buf));
    char buf2[32];
    format_duration(187.4, buf2, sizeof(buf2));
    CHECK(strcmp(buf, "1h02m") == 0 && strcmp(buf2, "3m07s") == 0, "ETA format: 3725 s = %s, 187.4 s = %s", buf, buf2);
    RunRecord r;
    run_record_init(&r);
    const float vals[] = {5.0f, 4.2f, NAN, 4.5f, 4.2f};
    for (int i = 0; i < 5; i++) run_record_val(&r, 10 * i, vals[i]);
    CHECK(r.best_val == 4.2f && r.best_val_step == 10, "best val loss: the first lowest (4.2 at step 10), a NaN skipped");
}

/* llm.c's wsd, its decay over the final 0.2 written as the constant 0.8 (the schedule before
 * -decay_frac), for the check that 0.2 reproduces it exactly. */
static float wsd_fixed_08(const LRSchedule *s, int t) {
    const float eta = s->peak, eta_min = s->final_frac * s->peak;
    if (t < s->warmup) return eta * (float)(t + 1) / (float)s->warmup;
    const int P = (int)(0.8f * (float)s->total);
    if (t < P) return eta;
    const float frac = s->total > P ? (float)(t - P) / (float)(s->total - P) : 1.0f;
    return eta_min + (1.0f - sqrtf(frac)) * (eta - eta_min);
}

int main(void) {
    test_eta();
    test_outlier();
    const double eta = 6e-4, q = 0.1, emin = q * eta;
    const int u = 10, N = 100;
    LRSchedule s;
    LRKind k;
    CHECK(lr_kind_from_name("cosine", &k) && k == LR_COSINE && lr_kind_from_name("wsd", &k) && k == LR_WSD &&
              !lr_kind_from_name("step", &k),
          "schedule names: cosine, linear, constant, wsd; others rejected");

    lr_schedule_init(&s, LR_COSINE, (float)eta, u, N, (float)q, 0.2f);
    CHECK(CLOSE(lr_at(&s, 0), eta / u), "cosine: warmup step 0 = eta/u (%g)", lr_at(&s, 0));
    CHECK(CLOSE(lr_at(&s, 4), eta * 5 / u), "cosine: warmup step 4 = 5 eta/u");
    CHECK(CLOSE(lr_at(&s, u), eta), "cosine: step u = peak");
    CHECK(CLOSE(lr_at(&s, 55), emin + 0.5 * (1 + cos(M_PI * 0.5)) * (eta - emin)), "cosine: midpoint of the decay");
    CHECK(CLOSE(lr_at(&s, N), emin), "cosine: step N = q eta (%g)", lr_at(&s, N));

    lr_schedule_init(&s, LR_LINEAR, (float)eta, u, N, (float)q, 0.2f);
    CHECK(CLOSE(lr_at(&s, 3), eta * 4 / u), "linear: warmup");
    CHECK(CLOSE(lr_at(&s, 55), eta - 0.5 * (eta - emin)), "linear: midpoint");
    CHECK(CLOSE(lr_at(&s, N), emin), "linear: end at q eta");

    lr_schedule_init(&s, LR_CONSTANT, (float)eta, 0, N, (float)q, 0.2f);
    CHECK(CLOSE(lr_at(&s, 0), eta) && CLOSE(lr_at(&s, N), eta), "constant: eta throughout");

    lr_schedule_init(&s, LR_WSD, (float)eta, u, N, (float)q, 0.2f);
    const int P = 80;
    CHECK(CLOSE(lr_at(&s, 2), eta * 3 / u), "wsd: warmup");
    CHECK(CLOSE(lr_at(&s, P - 1), eta), "wsd: stable until P = floor(0.8 N) = 80");
    CHECK(CLOSE(lr_at(&s, 85), emin + (1 - sqrt(5.0 / 20.0)) * (eta - emin)), "wsd: sqrt decay at step 85");
    CHECK(CLOSE(lr_at(&s, N), emin), "wsd: end at q eta");
    int same = 1, n_checked = 0;  /* -decay_frac 0.2 is llm.c's floor(0.8 N), bit for bit */
    for (int n = 1; n <= 5000; n += 7) {
        LRSchedule w;
        lr_schedule_init(&w, LR_WSD, (float)eta, 0, n, (float)q, 0.2f);
        for (int t = 0; t <= n; t++) same &= lr_at(&w, t) == wsd_fixed_08(&w, t);
        n_checked++;
    }
    CHECK(same, "wsd: decay fraction 0.2 gives llm.c's schedule (decay from floor(0.8f N)) bit for bit, every step of %d totals up to 5000", n_checked);
    lr_schedule_init(&s, LR_WSD, (float)eta, u, N, (float)q, 0.5f);
    CHECK(CLOSE(lr_at(&s, 49), eta) && CLOSE(lr_at(&s, 75), emin + (1 - sqrt(25.0 / 50.0)) * (eta - emin)),
          "wsd, decay fraction 0.5: stable until P = 50, sqrt decay at step 75");
    LRSchedule longer;  /* the stable phase does not depend on N: a run continues as a longer one */
    lr_schedule_init(&longer, LR_WSD, (float)eta, u, 4 * N, (float)q, 0.5f);
    int stable_same = 1;
    for (int t = 0; t < 50; t++) stable_same &= lr_at(&s, t) == lr_at(&longer, t);
    CHECK(stable_same && lr_at(&s, 60) != lr_at(&longer, 60),
          "wsd: the rates before the decay are the same for N = 100 and 400, and differ after P");

    lr_schedule_init(&s, LR_COSINE, (float)eta, 0, N, 0.0f, 0.2f);
    CHECK(CLOSE(lr_at(&s, 0), eta) && lr_at(&s, N) == 0.0f, "cosine without warmup: peak at 0, zero at N with q = 0");
    return test_finish();
}
