/*
 * test/test_schedulers.c: the learning-rate schedules of llmc/schedulers.h against the formulas of
 * doc/formats.md 11, evaluated here independently in double precision at the points where the
 * schedules change shape (warmup, the decay start, the end).
 */
#include <math.h>
#include <stdio.h>

#include "../llmc/schedulers.h"
#include "harness.h"

#define CLOSE(a, b) (fabs((double)(a) - (double)(b)) <= 1e-6 * fmax(1e-12, fabs((double)(b))))

int main(void) {
    const double eta = 6e-4, q = 0.1, emin = q * eta;
    const int u = 10, N = 100;
    LRSchedule s;
    LRKind k;
    CHECK(lr_kind_from_name("cosine", &k) && k == LR_COSINE && lr_kind_from_name("wsd", &k) && k == LR_WSD &&
              !lr_kind_from_name("step", &k),
          "schedule names: cosine, linear, constant, wsd; others rejected");

    lr_schedule_init(&s, LR_COSINE, (float)eta, u, N, (float)q);
    CHECK(CLOSE(lr_at(&s, 0), eta / u), "cosine: warmup step 0 = eta/u (%g)", lr_at(&s, 0));
    CHECK(CLOSE(lr_at(&s, 4), eta * 5 / u), "cosine: warmup step 4 = 5 eta/u");
    CHECK(CLOSE(lr_at(&s, u), eta), "cosine: step u = peak");
    CHECK(CLOSE(lr_at(&s, 55), emin + 0.5 * (1 + cos(M_PI * 0.5)) * (eta - emin)), "cosine: midpoint of the decay");
    CHECK(CLOSE(lr_at(&s, N), emin), "cosine: step N = q eta (%g)", lr_at(&s, N));

    lr_schedule_init(&s, LR_LINEAR, (float)eta, u, N, (float)q);
    CHECK(CLOSE(lr_at(&s, 3), eta * 4 / u), "linear: warmup");
    CHECK(CLOSE(lr_at(&s, 55), eta - 0.5 * (eta - emin)), "linear: midpoint");
    CHECK(CLOSE(lr_at(&s, N), emin), "linear: end at q eta");

    lr_schedule_init(&s, LR_CONSTANT, (float)eta, 0, N, (float)q);
    CHECK(CLOSE(lr_at(&s, 0), eta) && CLOSE(lr_at(&s, N), eta), "constant: eta throughout");

    lr_schedule_init(&s, LR_WSD, (float)eta, u, N, (float)q);
    const int P = 80;
    CHECK(CLOSE(lr_at(&s, 2), eta * 3 / u), "wsd: warmup");
    CHECK(CLOSE(lr_at(&s, P - 1), eta), "wsd: stable until P = floor(0.8 N) = 80");
    CHECK(CLOSE(lr_at(&s, 85), emin + (1 - sqrt(5.0 / 20.0)) * (eta - emin)), "wsd: sqrt decay at step 85");
    CHECK(CLOSE(lr_at(&s, N), emin), "wsd: end at q eta");

    lr_schedule_init(&s, LR_COSINE, (float)eta, 0, N, 0.0f);
    CHECK(CLOSE(lr_at(&s, 0), eta) && lr_at(&s, N) == 0.0f, "cosine without warmup: peak at 0, zero at N with q = 0");
    return test_finish();
}
