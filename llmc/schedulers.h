/*
 * llmc/schedulers.h: learning-rate schedules (doc/formats.md "Optimization semantics"), identical to llm.c's.
 *
 * Defines:
 *   LRSchedule, lr_schedule_init, lr_at(step)
 *
 * t is the 0-based step, N the number of updates, u the warmup, eta the peak and eta_min = q eta.
 *   warmup (cosine, linear, wsd): eta (t+1)/u for t < u
 *   cosine:   eta_min + (1 + cos(pi r))/2 (eta - eta_min),  r = (t-u)/(N-u)
 *   linear:   eta - r (eta - eta_min)
 *   constant: eta (llm.c ignores -u here; the trainer rejects -k constant with -u > 0)
 *   wsd:      eta until P = floor((1 - f) N), then eta_min + (1 - sqrt((t-P)/(N-P))) (eta - eta_min),
 *             f the decay fraction (-decay_frac, llm.c's 0.2). Before P the rate does not depend on
 *             N, so a run stopped there continues as a longer one (-x) as if started with it.
 */
#ifndef LLMC_SCHEDULERS_H
#define LLMC_SCHEDULERS_H

#include <math.h>
#include <string.h>

typedef enum { LR_COSINE = 0, LR_LINEAR, LR_CONSTANT, LR_WSD } LRKind;

typedef struct {
    LRKind kind;
    float peak;
    int warmup;
    int total;
    float final_frac;
    float decay_frac; /* wsd only */
} LRSchedule;

/* Returns 0 for an unknown name. */
static inline int lr_kind_from_name(const char *name, LRKind *kind) {
    static const char *const names[] = {"cosine", "linear", "constant", "wsd"};
    for (int i = 0; i < 4; i++) {
        if (strcmp(name, names[i]) == 0) {
            *kind = (LRKind)i;
            return 1;
        }
    }
    return 0;
}

static inline void lr_schedule_init(LRSchedule *s, LRKind kind, float peak, int warmup, int total,
                                    float final_frac, float decay_frac) {
    s->kind = kind;
    s->peak = peak;
    s->warmup = warmup;
    s->total = total;
    s->final_frac = final_frac;
    s->decay_frac = decay_frac;
}

static inline float lr_at(const LRSchedule *s, int t) {
    const float eta = s->peak, eta_min = s->final_frac * s->peak;
    if (s->kind == LR_CONSTANT) return eta;
    if (t < s->warmup) return eta * (float)(t + 1) / (float)s->warmup;
    if (s->kind == LR_WSD) {
        const int P = (int)((1.0f - s->decay_frac) * (float)s->total); /* 1 - 0.2f is 0.8f exactly */
        if (t < P) return eta;
        const float frac = s->total > P ? (float)(t - P) / (float)(s->total - P) : 1.0f;
        return eta_min + (1.0f - sqrtf(frac)) * (eta - eta_min);
    }
    const float r = s->total > s->warmup ? (float)(t - s->warmup) / (float)(s->total - s->warmup) : 1.0f;
    if (s->kind == LR_LINEAR) return eta - r * (eta - eta_min);
    return eta_min + 0.5f * (1.0f + cosf((float)M_PI * r)) * (eta - eta_min);
}

#endif /* LLMC_SCHEDULERS_H */
