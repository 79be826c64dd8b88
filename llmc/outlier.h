/*
 * llmc/outlier.h: z-scores of the loss and the grad norm against the last 128 steps, for the
 * step line and for `-sl` / `-sg` (skip an update whose z-score exceeds the threshold).
 *
 * Defines: OutlierDetector, outlier_init, outlier_zscore (z of a new value against the window,
 * NaN until the window is full), outlier_push.
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

/* z of x against the previous window (x itself excluded), NaN while the window fills. */
static inline double outlier_zscore(const OutlierDetector *d, double x) {
    if (d->count < OUTLIER_WINDOW) return NAN;
    double mean = 0.0, var = 0.0;
    for (int i = 0; i < OUTLIER_WINDOW; i++) mean += d->buf[i];
    mean /= OUTLIER_WINDOW;
    for (int i = 0; i < OUTLIER_WINDOW; i++) var += (d->buf[i] - mean) * (d->buf[i] - mean);
    double sd = sqrt(var / OUTLIER_WINDOW);
    return sd > 0.0 ? (x - mean) / sd : 0.0;
}

static inline void outlier_push(OutlierDetector *d, double x) {
    d->buf[d->next] = x;
    d->next = (d->next + 1) % OUTLIER_WINDOW;
    if (d->count < OUTLIER_WINDOW) d->count++;
}

#endif /* LLMC_OUTLIER_H */
