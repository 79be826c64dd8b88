/*
 * test/debug_state.h: the reader of the debug state that `train_gpt2.py --debug_state` writes
 * (doc/formats.md): a batch, the PyTorch logits, loss and gradients of that batch, and the
 * losses of a short AdamW trajectory with its hyperparameters. Shared by the CPU test
 * (test/test_gpt2_cpu.c) and the GPU test (test/test_gpt2_gpu.cu), which compare against it.
 * debug_state_read / debug_state_free.
 */
#ifndef TEST_DEBUG_STATE_H
#define TEST_DEBUG_STATE_H

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include "../llmc/utils.h"

#define DEBUG_STATE_MAGIC 20240327
#define DEBUG_STATE_VERSION 2

typedef struct {
    int B, T;
    int decay_sd_skew; /* header[4]: the trajectory decays the packed S-D skew parameters */
    int *x, *y;        /* (B, T) inputs and targets */
    float *logits;     /* (B, T, V) */
    float loss;
    float *grads;      /* the parameter layout's total */
    int n_steps;       /* trailer: the AdamW trajectory */
    float lr, beta1, beta2, eps, wd, clip;
    float *losses;     /* (n_steps) */
} DebugState;

/* Reads the whole file for a model with num_params parameters and vocabulary V; dies with one
 * line naming the field on a short or foreign file. */
static inline void debug_state_read(const char *path, size_t num_params, int V, DebugState *s) {
    FILE *f = xfopen(path, "rb");
    int32_t h[256];
    xfread(h, sizeof(int32_t), 256, f, path, "header");
    if (h[0] != DEBUG_STATE_MAGIC || h[1] != DEBUG_STATE_VERSION) {
        llmc_die("%s: header[0..1]: expected a v2 debug state (got magic %d, version %d)", path, h[0], h[1]);
    }
    s->B = h[2];
    s->T = h[3];
    s->decay_sd_skew = h[4];
    if (s->B < 1 || s->B > 4096 || s->T < 1 || s->T > LLMC_MAX_SEQ_LEN) {
        llmc_die("%s: header[2..3] B %d, T %d: expected 1..4096 and 1..%d", path, s->B, s->T, LLMC_MAX_SEQ_LEN);
    }
    const size_t N = (size_t)s->B * s->T;
    s->x = (int *)xmalloc(N * sizeof(int));
    s->y = (int *)xmalloc(N * sizeof(int));
    s->logits = (float *)xmalloc(N * (size_t)V * sizeof(float));
    s->grads = (float *)xmalloc(num_params * sizeof(float));
    xfread(s->x, sizeof(int), N, f, path, "x");
    xfread(s->y, sizeof(int), N, f, path, "y");
    xfread(s->logits, sizeof(float), N * (size_t)V, f, path, "logits");
    xfread(&s->loss, sizeof(float), 1, f, path, "loss");
    xfread(s->grads, sizeof(float), num_params, f, path, "grads");
    xfread(&s->n_steps, sizeof(int), 1, f, path, "trailer n_steps");
    if (s->n_steps < 0 || s->n_steps > 1000000) llmc_die("%s: trailer n_steps %d: expected 0..1000000", path, s->n_steps);
    float hp[6];
    xfread(hp, sizeof(float), 6, f, path, "trailer hyperparameters");
    s->lr = hp[0];
    s->beta1 = hp[1];
    s->beta2 = hp[2];
    s->eps = hp[3];
    s->wd = hp[4];
    s->clip = hp[5];
    s->losses = (float *)xmalloc((size_t)s->n_steps * sizeof(float));
    xfread(s->losses, sizeof(float), (size_t)s->n_steps, f, path, "trailer losses");
    xfclose(f, path);
}

static inline void debug_state_free(DebugState *s) {
    free(s->x);
    free(s->y);
    free(s->logits);
    free(s->grads);
    free(s->losses);
}

#endif /* TEST_DEBUG_STATE_H */
