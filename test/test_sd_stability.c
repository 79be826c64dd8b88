/*
 * test/test_sd_stability.c: S-D stability after training (doc/methods.md "Stability"). For every S-D head of
 * a checkpoint, the eigenvalues of its generator L = S - D (computed by LAPACK's dgeev, not by
 * hand) have max Re(lambda) <= 0: for v^H L v = v^H S v - v^H D v the first term is imaginary and
 * the second positive, so Re(lambda) = -v^H D v < 0 whatever training did to S and theta.
 *
 *   ./test_sd_stability MODEL.bin stable|unstable
 *
 * `unstable` is the negative control: a model trained with -sd_sign 1 (L = S + D) must have
 * max Re(lambda) > 0 in every head, which shows the check can fail.
 */
#include <lapacke.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "../llmc/cpu/gpt2_cpu.h"
#include "harness.h"
#include "../kinds/registry_cpu.h"

/* max Re(lambda) of the d x d matrix L (float) via LAPACK dgeev. */
static double spectral_abscissa(const float *L, int d) {
    double *a = (double *)xmalloc(sizeof(double) * d * d), *wr = (double *)xmalloc(sizeof(double) * d);
    double *wi = (double *)xmalloc(sizeof(double) * d);
    for (int i = 0; i < d * d; i++) a[i] = L[i];
    lapack_int info = LAPACKE_dgeev(LAPACK_ROW_MAJOR, 'N', 'N', d, a, d, wr, wi, NULL, 1, NULL, 1);
    if (info != 0) llmc_die("LAPACKE_dgeev failed with info %d", (int)info);
    double mx = -INFINITY;
    for (int i = 0; i < d; i++) mx = fmax(mx, wr[i]);
    free(a); free(wr); free(wi);
    return mx;
}

int main(int argc, char **argv) {
    if (argc != 3 || (strcmp(argv[2], "stable") != 0 && strcmp(argv[2], "unstable") != 0)) {
        fprintf(stderr, "usage: %s MODEL.bin stable|unstable\n", argv[0]);
        return 2;
    }
    const int expect_stable = strcmp(argv[2], "stable") == 0;
    GPT2 m;
    gpt2_build_from_checkpoint(&m, argv[1]);
    const GPT2Config *c = &m.config;
    int heads = 0, ok = 0;
    double worst = -INFINITY, best = INFINITY;
    for (int l = 0; l < c->num_layers; l++) {
        const LayerSpec *ls = &c->layer[l];
        if (!(ls->kind == ATTN_SD || ls->kind == ATTN_SDLIN)) continue;
        LayerParams p = layer_params(m.params, &m.layout, l);
        float *L = (float *)xmalloc(sizeof(float) * ls->n_head * ls->head_size * ls->head_size);
        sd_build_generator(L, p.slot[P_SDSKEW], p.slot[P_SDTHETA], ls->n_head, ls->head_size, sd_opt_scalar_d(c), sd_opt_sign(c));
        for (int k = 0; k < ls->n_head; k++) {
            const double a = spectral_abscissa(L + (size_t)k * ls->head_size * ls->head_size, ls->head_size);
            worst = fmax(worst, a);
            best = fmin(best, a);
            ok += expect_stable ? a <= 0.0 : a > 0.0;
            heads++;
        }
        free(L);
    }
    CHECK(heads > 0, "%s: %d S-D heads found", argv[1], heads);
    if (expect_stable) {
        CHECK(ok == heads, "every S-D head has max Re(eig(L)) <= 0: %d/%d (largest %.4f)", ok, heads, worst);
    } else {
        CHECK(ok == heads, "negative control (+D): every head has max Re(eig(L)) > 0: %d/%d (smallest %.4f)", ok, heads, best);
    }
    gpt2_free(&m);
    return test_finish();
}
