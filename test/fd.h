/*
 * test/fd.h: comparison of an analytic gradient with a finite-difference one, shared by the
 * gradient tests (test/test_kernels_fd.c, test/test_sd_cpu_fd.c, test/test_layer_kind.c). Each test
 * keeps its own step and tolerances (stated and measured there); this file measures the error,
 * and gives the whole CPU model's mean loss in double (fd_mean_loss) for differences of the model.
 */
#ifndef TEST_FD_H
#define TEST_FD_H

#include <math.h>
#include <stddef.h>

#include "../llmc/cpu/gpt2_cpu.h"
#include "harness.h"

typedef struct {
    double max_err; /* max |a - fd| */
    double max_a;   /* max |a| */
    double rel_l2;  /* ||a - fd|| / ||fd|| (infinite when fd is all zero and a is not) */
    /* a NaN on either side makes max_err and rel_l2 infinite, so that it fails fd_within */
} FdErr;

static inline FdErr fd_compare(const float *a, const double *fd, size_t n) {
    FdErr e = {0.0, 0.0, 0.0};
    double se = 0.0, sf = 0.0;
    for (size_t i = 0; i < n; i++) {
        const double d = (double)a[i] - fd[i];
        e.max_err = worst_err(e.max_err, fabs(d));
        e.max_a = fmax(e.max_a, fabs((double)a[i]));
        se += d * d;
        sf += fd[i] * fd[i];
    }
    e.rel_l2 = isnan(se) ? INFINITY : sf > 0.0 ? sqrt(se / sf) : (se > 0.0 ? INFINITY : 0.0);
    return e;
}

/* The usual two-part tolerance: max |a - fd| <= rel_max * max|a| + abs_tol, and a relative L2
 * error of at most rel_l2. */
static inline int fd_within(FdErr e, double rel_max, double abs_tol, double rel_l2) {
    return e.max_err <= rel_max * e.max_a + abs_tol && e.rel_l2 <= rel_l2;
}

/* The model's mean loss over (B, T) in double, from the forward's fp32 logits: the loss whose
 * central differences the model-level checks compare with the backward's gradients. */
static inline double fd_mean_loss(GPT2 *m, const int *x, const int *y, int B, int T) {
    gpt2_forward(m, x, y, B, T);
    const int V = m->config.vocab_size;
    double total = 0.0;
    for (int n = 0; n < B * T; n++) {
        const float *z = m->acts.logits + (size_t)n * V;
        double mx = -INFINITY, s = 0.0;
        for (int v = 0; v < V; v++) mx = fmax(mx, (double)z[v]);
        for (int v = 0; v < V; v++) s += exp((double)z[v] - mx);
        total += mx + log(s) - (double)z[y[n]];
    }
    return total / (B * T);
}

#endif /* TEST_FD_H */
