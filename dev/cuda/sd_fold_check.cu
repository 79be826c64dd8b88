/*
 * dev/cuda/sd_fold_check.cu: standalone correctness and timing check of the GPU's S-D fold
 * (sd_attention/sd_fold.cu; doc/methods.md "Realization with the standard attention kernels") against the fp32 CPU reference of sd_attention/sd_cpu.h
 * (sd_build_generator, sd_keys_forward, sd_keys_backward, sd_params_backward).
 *
 *   ./sd_fold_check [-d D] [-B B] [-T T] [-h H] [-time 0|1] [-tB B] [-tT T] [-tC C] [--help]
 *
 * Per head size (8, 16, 32, 64, 128, 256, and 12, 20 which are not multiples of 8; or -d), at a
 * small shape (default B 2, T 127, h 2; B T = 254 rows, not a multiple of the 64-row tile), with
 * random bf16 inputs (U, V, dQ, dK', dV uniform in [-1, 1), packed S in [-0.5, 0.5), theta in
 * [-1, 1)) and every output poisoned with NaN before the call:
 *   L (fp32 generator)         rel error <= 1e-5 (the same formula; fast-math exp/log1p)
 *   K' = U L^T (bf16)          <= 2^-7: one bf16 rounding (at most 2^-8 of a value), 2x margin
 *   dU = dQ + dK' L (bf16)     <= 2^-7; dV copied exactly
 *   dL = sum dK'^T U (fp32)    <= 1e-4: cuBLAS sums B T products in fp32 in its own order
 *   packed dS, dtheta (bf16)   <= 2^-7 (one rounding when the gradient starts at zero)
 * plus one case with scalar D and the +D sign. Controls that must fail: L against the generator
 * of the other sign of D, K' against U L (the untransposed product), dU against dQ + dK' L^T.
 * With -time 1 the mean time of forward (generator + fold) and backward (fold backward +
 * parameter gradients) at B 16, T 1024, C 768 (h = C / d) is printed as a "TIME" line
 * (dev/gpu_check.sh reads it).
 * Ends with "N passed, N failed" (test/harness.h); exit status non-zero on any failure.
 */
#include "check_common.h"

#include "../../llmc/cpu/kernels.h"
#include "../../sd_attention/sd_cpu.h"
#include "../../sd_attention/sd_fold.cuh"

#define TOL_L 1e-5
#define TOL_OUT (1.0 / 128.0)
#define TOL_DL 1e-4

typedef struct {
    const GpuCtx *ctx;
    int B, T, h, d, scalar_d, sign;
    size_t N, A, npack, ntheta;
    floatX *skew, *theta, *qkv, *dqkv, *duv, *dskew, *dtheta;
    float *L, *dL;
} Bufs;

static void bufs_alloc(Bufs *b, const GpuCtx *ctx, int B, int T, int h, int d, int scalar_d, int sign) {
    memset(b, 0, sizeof(*b));
    b->ctx = ctx;
    b->B = B; b->T = T; b->h = h; b->d = d; b->scalar_d = scalar_d; b->sign = sign;
    b->N = (size_t)B * T;
    b->A = (size_t)h * d;
    b->npack = (size_t)d * (d - 1) / 2;
    b->ntheta = scalar_d ? (size_t)h : b->A;
    CUDA_CHECK(cudaMalloc(&b->skew, (size_t)h * b->npack * 2 + 2));
    CUDA_CHECK(cudaMalloc(&b->theta, b->ntheta * 2));
    CUDA_CHECK(cudaMalloc(&b->qkv, b->N * 3 * b->A * 2));
    CUDA_CHECK(cudaMalloc(&b->dqkv, b->N * 3 * b->A * 2));
    CUDA_CHECK(cudaMalloc(&b->duv, b->N * 2 * b->A * 2));
    CUDA_CHECK(cudaMalloc(&b->dskew, (size_t)h * b->npack * 2 + 2));
    CUDA_CHECK(cudaMalloc(&b->dtheta, b->ntheta * 2));
    CUDA_CHECK(cudaMalloc(&b->L, (size_t)h * d * d * 4));
    CUDA_CHECK(cudaMalloc(&b->dL, (size_t)h * d * d * 4));
}

static void bufs_free(Bufs *b) {
    void *p[] = {b->skew, b->theta, b->qkv, b->dqkv, b->duv, b->dskew, b->dtheta, b->L, b->dL};
    for (int i = 0; i < 9; i++)
        if (p[i]) cudaFree(p[i]);
}

/* step(b, 0): generator + fold; step(b, 1): fold backward + parameter gradients (time_steps' CheckStep) */
static void step(void *arg, int backward) {
    Bufs *b = (Bufs *)arg;
    const cudaStream_t s = b->ctx->stream;
    if (!backward) {
        sd_gpu_build_generator(b->L, b->skew, b->theta, b->h, b->d, b->scalar_d, b->sign, s);
        sd_gpu_fold_forward(b->qkv, b->L, b->N, b->h, b->d, s);
    } else {
        sd_gpu_fold_backward(b->duv, b->dL, b->dqkv, b->qkv, b->L, b->N, b->h, b->d, b->ctx);
        sd_gpu_params_backward(b->dskew, b->dtheta, b->dL, b->theta, b->h, b->d, b->scalar_d, b->sign, s);
    }
}

static void transpose_heads(float *dst, const float *L, int h, int d) {
    for (int k = 0; k < h; k++)
        for (int i = 0; i < d; i++)
            for (int j = 0; j < d; j++) dst[((size_t)k * d + i) * d + j] = L[((size_t)k * d + j) * d + i];
}

static void check_case(const GpuCtx *ctx, int B, int T, int h, int d, int scalar_d, int sign) {
    Bufs b;
    bufs_alloc(&b, ctx, B, T, h, d, scalar_d, sign);
    const size_t N = b.N, A = b.A, A3 = 3 * A, nL = (size_t)h * d * d, nskew = (size_t)h * b.npack;
    char tag[64];
    snprintf(tag, sizeof(tag), "sd d %3d%s%s", d, scalar_d ? " scalar D" : "", sign > 0 ? " +D" : "");
    /* inputs: skew, theta, U | poison | V, dQ | dK' | dV */
    uint16_t *skew = (uint16_t *)xmalloc(nskew * 2 + 2), *theta = (uint16_t *)xmalloc(b.ntheta * 2);
    uint16_t *qkv = (uint16_t *)xmalloc(N * A3 * 2), *dqkv = (uint16_t *)xmalloc(N * A3 * 2);
    fill_random_bf16(skew, nskew, 3000 + d);
    for (size_t i = 0; i < nskew; i++) skew[i] = f32_to_bf16(0.5f * bf16_to_f32(skew[i]));
    fill_random_bf16(theta, b.ntheta, 4000 + d);
    fill_random_bf16(qkv, N * A3, 5000 + d);
    fill_random_bf16(dqkv, N * A3, 6000 + d);
    for (size_t i = 0; i < N * A3; i++)
        if (i % A3 >= A && i % A3 < 2 * A) qkv[i] = 0xffffu;
    CUDA_CHECK(cudaMemcpy(b.skew, skew, nskew * 2, cudaMemcpyHostToDevice));
    CUDA_CHECK(cudaMemcpy(b.theta, theta, b.ntheta * 2, cudaMemcpyHostToDevice));
    CUDA_CHECK(cudaMemcpy(b.qkv, qkv, N * A3 * 2, cudaMemcpyHostToDevice));
    CUDA_CHECK(cudaMemcpy(b.dqkv, dqkv, N * A3 * 2, cudaMemcpyHostToDevice));
    poison(b.L, nL * 4);

    /* reference forward */
    float *fskew = widen(skew, nskew), *ftheta = widen(theta, b.ntheta), *Lref = (float *)xmalloc(nL * 4);
    sd_build_generator(Lref, fskew, ftheta, h, d, scalar_d, sign);
    float *fq = widen(qkv, N * A3);
    sd_keys_forward(fq, Lref, (int)N, h, d);

    step(&b, 0);
    CUDA_CHECK(cudaStreamSynchronize(ctx->stream));
    float *L = (float *)xmalloc(nL * 4);
    uint16_t *out = (uint16_t *)xmalloc(N * A3 * 2);
    CUDA_CHECK(cudaMemcpy(L, b.L, nL * 4, cudaMemcpyDeviceToHost));
    CUDA_CHECK(cudaMemcpy(out, b.qkv, N * A3 * 2, cudaMemcpyDeviceToHost));
    const double el = rel_err_f(L, Lref, nL);
    CHECK(el <= TOL_L, "%s generator L: rel error %.2e <= %.0e", tag, el, TOL_L);
    float *Lo = (float *)xmalloc(nL * 4); /* control: the sign of D is visible at this tolerance */
    sd_build_generator(Lo, fskew, ftheta, h, d, scalar_d, -sign);
    const double elc = rel_err_f(L, Lo, nL);
    CHECK(elc > TOL_L, "%s control: L vs the generator of the other sign of D rel error %.2e > tol", tag, elc);
    const double ek = rel_err_bf(out + A, A3, fq + A, A3, N, A);
    CHECK(ek <= TOL_OUT, "%s forward K' = U L^T: rel error %.2e <= %.1e (inf: poisoned left)", tag, ek, TOL_OUT);
    float *Lt = (float *)xmalloc(nL * 4), *fq2 = widen(qkv, N * A3);
    transpose_heads(Lt, Lref, h, d);
    sd_keys_forward(fq2, Lt, (int)N, h, d);
    const double ekc = rel_err_bf(out + A, A3, fq2 + A, A3, N, A);
    CHECK(ekc > TOL_OUT, "%s control: K' vs U L (untransposed) rel error %.2e > tol", tag, ekc);

    /* backward, from the GPU's qkv (its bf16 K' is what the attention saw) */
    float *fqkv = widen(out, N * A3), *fd = widen(dqkv, N * A3), *dLref = (float *)xmalloc(nL * 4);
    for (size_t i = 0; i < N * A3; i++) /* U and V are the inputs; K' is not read by the reference */
        if (fqkv[i] != fqkv[i]) fqkv[i] = 0.0f;
    sd_keys_backward(fd, dLref, fqkv, Lref, (int)N, h, d);
    float *gskew = (float *)xcalloc(nskew + 1, 4), *gtheta = (float *)xcalloc(b.ntheta, 4);
    sd_params_backward(gskew, gtheta, dLref, ftheta, h, d, scalar_d, sign);
    poison(b.duv, N * 2 * A * 2);
    poison(b.dL, nL * 4);
    CUDA_CHECK(cudaMemset(b.dskew, 0, nskew * 2 + 2));
    CUDA_CHECK(cudaMemset(b.dtheta, 0, b.ntheta * 2));
    CUDA_CHECK(cudaDeviceSynchronize()); /* legacy-stream memsets: see poison */
    step(&b, 1);
    CUDA_CHECK(cudaStreamSynchronize(ctx->stream));
    uint16_t *duv = (uint16_t *)xmalloc(N * 2 * A * 2), *ds = (uint16_t *)xmalloc(nskew * 2 + 2);
    uint16_t *dt = (uint16_t *)xmalloc(b.ntheta * 2);
    float *dL = (float *)xmalloc(nL * 4);
    CUDA_CHECK(cudaMemcpy(duv, b.duv, N * 2 * A * 2, cudaMemcpyDeviceToHost));
    CUDA_CHECK(cudaMemcpy(dL, b.dL, nL * 4, cudaMemcpyDeviceToHost));
    CUDA_CHECK(cudaMemcpy(ds, b.dskew, nskew * 2, cudaMemcpyDeviceToHost));
    CUDA_CHECK(cudaMemcpy(dt, b.dtheta, b.ntheta * 2, cudaMemcpyDeviceToHost));
    const double eu = rel_err_bf(duv, 2 * A, fd, A3, N, A);
    int dv_exact = 1;
    for (size_t n = 0; n < N; n++)
        for (size_t c = 0; c < A; c++) dv_exact &= duv[n * 2 * A + A + c] == dqkv[n * A3 + 2 * A + c];
    CHECK(eu <= TOL_OUT && dv_exact, "%s backward dU = dQ + dK' L: rel error %.2e <= %.1e; dV copied exactly", tag,
          eu, TOL_OUT);
    const double edl = rel_err_f(dL, dLref, nL);
    CHECK(edl <= TOL_DL, "%s backward dL = sum dK'^T U: rel error %.2e <= %.0e", tag, edl, TOL_DL);
    const double es = nskew ? rel_err_bf(ds, 1, gskew, 1, nskew, 1) : 0.0;
    const double et = rel_err_bf(dt, 1, gtheta, 1, b.ntheta, 1);
    CHECK(es <= TOL_OUT && et <= TOL_OUT, "%s packed dS rel error %.2e, dtheta %.2e <= %.1e", tag, es, et, TOL_OUT);
    /* controls */
    float *fd2 = widen(dqkv, N * A3), *dL2 = (float *)xmalloc(nL * 4);
    sd_keys_backward(fd2, dL2, fqkv, Lt, (int)N, h, d);
    const double euc = rel_err_bf(duv, 2 * A, fd2, A3, N, A);
    CHECK(euc > TOL_OUT, "%s control: dU with L^T rel error %.2e > tol", tag, euc);
    free(skew); free(theta); free(qkv); free(dqkv); free(fskew); free(ftheta); free(Lref); free(Lo); free(fq); free(L);
    free(out); free(Lt); free(fq2); free(fqkv); free(fd); free(dLref); free(gskew); free(gtheta); free(duv);
    free(ds); free(dt); free(dL); free(fd2); free(dL2);
    bufs_free(&b);
}

static void time_case(const GpuCtx *ctx, int B, int T, int C, int d) {
    const int h = C / d > 0 ? C / d : 1;
    Bufs b;
    bufs_alloc(&b, ctx, B, T, h, d, 0, -1);
    const size_t N = b.N, A3 = 3 * b.A;
    upload_random_bf16(b.qkv, N * A3, 7);
    upload_random_bf16(b.dqkv, N * A3, 8);
    upload_random_bf16(b.skew, (size_t)h * b.npack, 9);
    upload_random_bf16(b.theta, b.ntheta, 10);
    float ms_f = 0, ms_b = 0;
    time_steps(step, &b, ctx->stream, 2, 20, &ms_f, &ms_b);
    /* fold FLOPs: 2 N A d forward; backward dU and dL, twice that */
    const double flops = 2.0 * (double)N * b.A * d;
    print_time("sdfold", d, B, T, h, ms_f, ms_b, flops, 2.0 * flops);
    bufs_free(&b);
}

int main(int argc, char **argv) {
    CheckArgs a = {0, 2, 127, 2, 1, 16, 1024, 768};
    const int r = check_args_parse(&a, argc, argv, "sd_fold_check");
    if (r != 1) return r;
    GpuCtx ctx;
    gpu_ctx_init(&ctx, 0);
    printf("sd_fold_check on %s (SM %d.%d)\n", ctx.name, ctx.sm / 10, ctx.sm % 10);
    for (int i = 0; i < N_HEAD_SIZES; i++) {
        const int d = HEAD_SIZES[i];
        if (a.only_d && d != a.only_d) continue;
        check_case(&ctx, a.B, a.T, a.h, d, 0, -1);
        if (a.timing) time_case(&ctx, a.tB, a.tT, a.tC, d);
    }
    if (!a.only_d || a.only_d == 24) check_case(&ctx, a.B, a.T, 3, 24, 1, 1);
    gpu_ctx_free(&ctx);
    return check_finish(&a);
}
