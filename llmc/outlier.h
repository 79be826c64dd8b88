/*
 * llmc/outlier.h: z-scores of the loss and the grad norm against the last 128 steps, for the
 * step line and for `-sl` / `-sg` (skip an update whose z-score exceeds the threshold).
 *
 * Defines: OutlierDetector, outlier_init, outlier_update (adds a value and returns its z-score
 * against the last 128 values, itself included, as llm.c's detector; NaN for the first 128).
 *
 * The window is not saved in state files (nor is it in llm.c), so after a resume z-scores are NaN
 * for 128 steps and -sl/-sg skip nothing in that time.
 */
#ifndef LLMC_OUTLIER_H
#define LLMC_OUTLIER_H

#include <math.h>

#define OUTLIER_WINDOW 128

typedef struct {
    double buf[OUTLIER_WINDOW];
    int count; /* values seen, capped at the window */
    int next;  /* slot the next value overwrites */
} OutlierDetector;

static inline void outlier_init(OutlierDetector *d) {
    d->count = 0;
    d->next = 0;
}

/* Adds x, then its z against the window of the last 128 values, x included (llm.c's definition:
 * -sl/-sg thresholds mean the same in both trainers). NaN while the window fills: the first 128
 * values get none. A window of equal values gives 0. */
static inline double outlier_update(OutlierDetector *d, double x) {
    const int was_full = d->count == OUTLIER_WINDOW;
    d->buf[d->next] = x;
    d->next = (d->next + 1) % OUTLIER_WINDOW;
    if (!was_full) {
        d->count++;
        return NAN;
    }
    double mean = 0.0, var = 0.0;
    for (int i = 0; i < OUTLIER_WINDOW; i++) mean += d->buf[i];
    mean /= OUTLIER_WINDOW;
    for (int i = 0; i < OUTLIER_WINDOW; i++) var += (d->buf[i] - mean) * (d->buf[i] - mean);
    const double sd = sqrt(var / OUTLIER_WINDOW);
    return sd > 0.0 ? (x - mean) / sd : 0.0;
}

#endif /* LLMC_OUTLIER_H */
