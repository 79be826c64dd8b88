/*
 * dev/cuda/sd_fold_check.cu: standalone correctness and timing check of the GPU's S-D fold
 * (llmc/sd_gpu.cu; METHODS.md 3.8) against the fp32 CPU reference of llmc/cpu_kernels.h
 * (sd_build_generator, sd_keys_forward, sd_keys_backward, sd_params_backward).
 *
 *   ./sd_fold_check [-d D] [-B B] [-T T] [-h H] [-time 0|1] [-tB B] [-tT T] [-tC C]
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
 * plus one case with scalar D and the +D sign. Controls that must fail: K' against U L (the
 * untransposed product), dU against dQ + dK' L^T, dtheta with the other sign. With -time 1 the
 * mean time of forward (generator + fold) and backward (fold backward + parameter gradients) at
 * B 16, T 1024, C 768 (h = C / d) is printed as a "TIME" line (dev/gpu_check.sh reads it).
 * Ends with "N passed, N failed"; exit status non-zero on any failure.
 */
#include "attention_ref.h"

#include "../../llmc/cpu_kernels.h"
#include "../../llmc/cuda_common.cuh"
#include "../../llmc/sd_gpu.cuh"

#define TOL_L 1e-5
#define TOL_OUT (1.0 / 128.0)
#define TOL_DL 1e-4

typedef struct {
    int B, T, h, d, scalar_d, sign;
    size_t N, A, npack, ntheta;
    floatX *skew, *theta, *qkv, *dqkv, *duv, *dskew, *dtheta;
    float *L, *dL;
} Bufs;

static void bufs_alloc(Bufs *b, int B, int T, int h, int d, int scalar_d, int sign) {
    memset(b, 0, sizeof(*b));
    b->B = B; b->T = T; b->h = h; b->d = d; b->scalar_d = scalar_d; b->sign = sign;
    b->N = (size_t)B * T;
    b->A = (size_t)h * d;
    b->npack = (size_t)d * (d - 1) / 2;
    b->ntheta = scalar_d ? (size_t)h : b->A;
    dev_check(cudaMalloc(&b->skew, (size_t)h * b->npack * 2 + 2), "cudaMalloc skew");
    dev_check(cudaMalloc(&b->theta, b->ntheta * 2), "cudaMalloc theta");
    dev_check(cudaMalloc(&b->qkv, b->N * 3 * b->A * 2), "cudaMalloc qkv");
    dev_check(cudaMalloc(&b->dqkv, b->N * 3 * b->A * 2), "cudaMalloc dqkv");
    dev_check(cudaMalloc(&b->duv, b->N * 2 * b->A * 2), "cudaMalloc duv");
    dev_check(cudaMalloc(&b->dskew, (size_t)h * b->npack * 2 + 2), "cudaMalloc dskew");
    dev_check(cudaMalloc(&b->dtheta, b->ntheta * 2), "cudaMalloc dtheta");
    dev_check(cudaMalloc(&b->L, (size_t)h * d * d * 4), "cudaMalloc L");
    dev_check(cudaMalloc(&b->dL, (size_t)h * d * d * 4), "cudaMalloc dL");
}

static void bufs_free(Bufs *b) {
    void *p[] = {b->skew, b->theta, b->qkv, b->dqkv, b->duv, b->dskew, b->dtheta, b->L, b->dL};
    for (int i = 0; i < 9; i++)
        if (p[i]) cudaFree(p[i]);
}

static void forward(Bufs *b, cudaStream_t s) {
    sd_gpu_build_generator(b->L, b->skew, b->theta, b->h, b->d, b->scalar_d, b->sign, s);
    sd_gpu_fold_forward(b->qkv, b->L, b->N, b->h, b->d, s);
}

static void backward(Bufs *b, const GpuCtx *ctx) {
    sd_gpu_fold_backward(b->duv, b->dL, b->dqkv, b->qkv, b->L, b->N, b->h, b->d, ctx);
    sd_gpu_params_backward(b->dskew, b->dtheta, b->dL, b->theta, b->h, b->d, b->scalar_d, b->sign, ctx->stream);
}

static float *widen(const uint16_t *x, size_t n) {
    float *f = (float *)malloc(n * sizeof(float));
    for (size_t i = 0; i < n; i++) f[i] = host_f32(x[i]);
    return f;
}

/* max |a - b| / max |b| over rows x cols with row strides (a bf16 on the host) */
static double rel_error_strided(const uint16_t *a, size_t lda, const float *b, size_t ldb, size_t rows, size_t cols) {
    double e = 0.0, m = 0.0;
    for (size_t r = 0; r < rows; r++)
        for (size_t c = 0; c < cols; c++) {
            const float x = host_f32(a[r * lda + c]);
            if (x != x) return INFINITY;
            e = fmax(e, fabs((double)x - b[r * ldb + c]));
            m = fmax(m, fabs((double)b[r * ldb + c]));
        }
    return m > 0 ? e / m : e;
}

static void transpose_heads(float *dst, const float *L, int h, int d) {
    for (int k = 0; k < h; k++)
        for (int i = 0; i < d; i++)
            for (int j = 0; j < d; j++) dst[((size_t)k * d + i) * d + j] = L[((size_t)k * d + j) * d + i];
}

static void check_case(const GpuCtx *ctx, Tally *tl, int B, int T, int h, int d, int scalar_d, int sign) {
    Bufs b;
    bufs_alloc(&b, B, T, h, d, scalar_d, sign);
    const size_t N = b.N, A = b.A, A3 = 3 * A, nL = (size_t)h * d * d, nskew = (size_t)h * b.npack;
    char tag[64];
    snprintf(tag, sizeof(tag), "sd d %3d%s%s", d, scalar_d ? " scalar D" : "", sign > 0 ? " +D" : "");
    /* inputs: skew, theta, U | poison | V, dQ | dK' | dV */
    uint16_t *skew = (uint16_t *)malloc(nskew * 2 + 2), *theta = (uint16_t *)malloc(b.ntheta * 2);
    uint16_t *qkv = (uint16_t *)malloc(N * A3 * 2), *dqkv = (uint16_t *)malloc(N * A3 * 2);
    fill_random_bf16(skew, nskew, 3000 + d);
    for (size_t i = 0; i < nskew; i++) skew[i] = host_bf16(0.5f * host_f32(skew[i]));
    fill_random_bf16(theta, b.ntheta, 4000 + d);
    fill_random_bf16(qkv, N * A3, 5000 + d);
    fill_random_bf16(dqkv, N * A3, 6000 + d);
    for (size_t i = 0; i < N * A3; i++)
        if (i % A3 >= A && i % A3 < 2 * A) qkv[i] = 0xffffu;
    dev_check(cudaMemcpy(b.skew, skew, nskew * 2, cudaMemcpyHostToDevice), "copy skew");
    dev_check(cudaMemcpy(b.theta, theta, b.ntheta * 2, cudaMemcpyHostToDevice), "copy theta");
    dev_check(cudaMemcpy(b.qkv, qkv, N * A3 * 2, cudaMemcpyHostToDevice), "copy qkv");
    dev_check(cudaMemcpy(b.dqkv, dqkv, N * A3 * 2, cudaMemcpyHostToDevice), "copy dqkv");
    poison(b.L, nL * 4);

    /* reference forward */
    float *fskew = widen(skew, nskew), *ftheta = widen(theta, b.ntheta), *Lref = (float *)malloc(nL * 4);
    sd_build_generator(Lref, fskew, ftheta, h, d, scalar_d, sign);
    float *fq = widen(qkv, N * A3);
    sd_keys_forward(fq, Lref, (int)N, h, d);

    forward(&b, ctx->stream);
    dev_check(cudaStreamSynchronize(ctx->stream), "forward");
    float *L = (float *)malloc(nL * 4);
    uint16_t *out = (uint16_t *)malloc(N * A3 * 2);
    dev_check(cudaMemcpy(L, b.L, nL * 4, cudaMemcpyDeviceToHost), "copy L");
    dev_check(cudaMemcpy(out, b.qkv, N * A3 * 2, cudaMemcpyDeviceToHost), "copy qkv");
    const double el = rel_error_f(L, Lref, nL);
    report(tl, el <= TOL_L, "%s generator L: rel error %.2e <= %.0e", tag, el, TOL_L);
    const double ek = rel_error_strided(out + A, A3, fq + A, A3, N, A);
    report(tl, ek <= TOL_OUT, "%s forward K' = U L^T: rel error %.2e <= %.1e (NaN: poisoned left)", tag, ek, TOL_OUT);
    float *Lt = (float *)malloc(nL * 4), *fq2 = widen(qkv, N * A3);
    transpose_heads(Lt, Lref, h, d);
    sd_keys_forward(fq2, Lt, (int)N, h, d);
    const double ekc = rel_error_strided(out + A, A3, fq2 + A, A3, N, A);
    report(tl, ekc > TOL_OUT, "%s control: K' vs U L (untransposed) rel error %.2e > tol", tag, ekc);

    /* backward, from the GPU's qkv (its bf16 K' is what the attention saw) */
    float *fqkv = widen(out, N * A3), *fd = widen(dqkv, N * A3), *dLref = (float *)malloc(nL * 4);
    for (size_t i = 0; i < N * A3; i++) /* U and V are the inputs; K' is not read by the reference */
        if (fqkv[i] != fqkv[i]) fqkv[i] = 0.0f;
    sd_keys_backward(fd, dLref, fqkv, Lref, (int)N, h, d);
    float *gskew = (float *)calloc(nskew + 1, 4), *gtheta = (float *)calloc(b.ntheta, 4);
    sd_params_backward(gskew, gtheta, dLref, ftheta, h, d, scalar_d, sign);
    poison(b.duv, N * 2 * A * 2);
    poison(b.dL, nL * 4);
    dev_check(cudaMemset(b.dskew, 0, nskew * 2 + 2), "zero dskew");
    dev_check(cudaMemset(b.dtheta, 0, b.ntheta * 2), "zero dtheta");
    dev_check(cudaDeviceSynchronize(), "zero dskew, dtheta"); /* legacy-stream memsets: see poison */
    backward(&b, ctx);
    dev_check(cudaStreamSynchronize(ctx->stream), "backward");
    uint16_t *duv = (uint16_t *)malloc(N * 2 * A * 2), *ds = (uint16_t *)malloc(nskew * 2 + 2);
    uint16_t *dt = (uint16_t *)malloc(b.ntheta * 2);
    float *dL = (float *)malloc(nL * 4);
    dev_check(cudaMemcpy(duv, b.duv, N * 2 * A * 2, cudaMemcpyDeviceToHost), "copy duv");
    dev_check(cudaMemcpy(dL, b.dL, nL * 4, cudaMemcpyDeviceToHost), "copy dL");
    dev_check(cudaMemcpy(ds, b.dskew, nskew * 2, cudaMemcpyDeviceToHost), "copy dskew");
    dev_check(cudaMemcpy(dt, b.dtheta, b.ntheta * 2, cudaMemcpyDeviceToHost), "copy dtheta");
    const double eu = rel_error_strided(duv, 2 * A, fd, A3, N, A);
    int dv_exact = 1;
    for (size_t n = 0; n < N; n++)
        for (size_t c = 0; c < A; c++) dv_exact &= duv[n * 2 * A + A + c] == dqkv[n * A3 + 2 * A + c];
    report(tl, eu <= TOL_OUT && dv_exact, "%s backward dU = dQ + dK' L: rel error %.2e <= %.1e; dV copied exactly", tag,
           eu, TOL_OUT);
    const double edl = rel_error_f(dL, dLref, nL);
    report(tl, edl <= TOL_DL, "%s backward dL = sum dK'^T U: rel error %.2e <= %.0e", tag, edl, TOL_DL);
    const double es = nskew ? rel_error(ds, gskew, nskew) : 0.0, et = rel_error(dt, gtheta, b.ntheta);
    report(tl, es <= TOL_OUT && et <= TOL_OUT, "%s packed dS rel error %.2e, dtheta %.2e <= %.1e", tag, es, et, TOL_OUT);
    /* controls */
    float *fd2 = widen(dqkv, N * A3), *dL2 = (float *)malloc(nL * 4);
    sd_keys_backward(fd2, dL2, fqkv, Lt, (int)N, h, d);
    const double euc = rel_error_strided(duv, 2 * A, fd2, A3, N, A);
    for (size_t i = 0; i < b.ntheta; i++) gtheta[i] = -gtheta[i];
    const double etc = rel_error(dt, gtheta, b.ntheta);
    report(tl, euc > TOL_OUT && etc > TOL_OUT, "%s controls: dU with L^T %.2e, dtheta of the other sign %.2e (both > tol)",
           tag, euc, etc);
    free(skew); free(theta); free(qkv); free(dqkv); free(fskew); free(ftheta); free(Lref); free(fq); free(L);
    free(out); free(Lt); free(fq2); free(fqkv); free(fd); free(dLref); free(gskew); free(gtheta); free(duv);
    free(ds); free(dt); free(dL); free(fd2); free(dL2);
    bufs_free(&b);
}

static void time_case(const GpuCtx *ctx, int B, int T, int C, int d) {
    const int h = C / d > 0 ? C / d : 1;
    Bufs b;
    bufs_alloc(&b, B, T, h, d, 0, -1);
    const size_t N = b.N, A3 = 3 * b.A;
    uint16_t *x = (uint16_t *)malloc(N * A3 * 2);
    fill_random_bf16(x, N * A3, 7);
    dev_check(cudaMemcpy(b.qkv, x, N * A3 * 2, cudaMemcpyHostToDevice), "copy");
    dev_check(cudaMemcpy(b.dqkv, x, N * A3 * 2, cudaMemcpyHostToDevice), "copy");
    dev_check(cudaMemcpy(b.skew, x, (size_t)h * b.npack * 2, cudaMemcpyHostToDevice), "copy");
    dev_check(cudaMemcpy(b.theta, x, b.ntheta * 2, cudaMemcpyHostToDevice), "copy");
    cudaEvent_t e0, e1;
    cudaEventCreate(&e0);
    cudaEventCreate(&e1);
    float ms_f = 0, ms_b = 0;
    for (int pass = 0; pass < 2; pass++) { /* pass 0 warms up (cuBLAS heuristics) */
        const int n = pass == 0 ? 2 : 20;
        cudaEventRecord(e0, ctx->stream);
        for (int i = 0; i < n; i++) forward(&b, ctx->stream);
        cudaEventRecord(e1, ctx->stream);
        cudaEventSynchronize(e1);
        cudaEventElapsedTime(&ms_f, e0, e1);
        ms_f /= n;
        cudaEventRecord(e0, ctx->stream);
        for (int i = 0; i < n; i++) backward(&b, ctx);
        cudaEventRecord(e1, ctx->stream);
        cudaEventSynchronize(e1);
        cudaEventElapsedTime(&ms_b, e0, e1);
        ms_b /= n;
    }
    dev_check(cudaGetLastError(), "timing");
    /* fold FLOPs: 2 N A d forward; backward dU and dL, twice that */
    const double flops = 2.0 * (double)N * b.A * d;
    printf("TIME path sdfold d %d B %d T %d h %d fwd_ms %.3f bwd_ms %.3f fwd_tflops %.1f bwd_tflops %.1f\n", d, B, T,
           h, ms_f, ms_b, flops / ms_f / 1e9, 2.0 * flops / ms_b / 1e9);
    fflush(stdout);
    cudaEventDestroy(e0);
    cudaEventDestroy(e1);
    free(x);
    bufs_free(&b);
}

int main(int argc, char **argv) {
    int only_d = 0, B = 2, T = 127, h = 2, timing = 1, tB = 16, tT = 1024, tC = 768;
    for (int i = 1; i + 1 < argc; i += 2) {
        const int v = atoi(argv[i + 1]);
        if (!strcmp(argv[i], "-d")) only_d = v;
        else if (!strcmp(argv[i], "-B")) B = v;
        else if (!strcmp(argv[i], "-T")) T = v;
        else if (!strcmp(argv[i], "-h")) h = v;
        else if (!strcmp(argv[i], "-time")) timing = v;
        else if (!strcmp(argv[i], "-tB")) tB = v;
        else if (!strcmp(argv[i], "-tT")) tT = v;
        else if (!strcmp(argv[i], "-tC")) tC = v;
        else {
            fprintf(stderr, "error: %s: unknown flag (expected -d -B -T -h -time -tB -tT -tC)\n", argv[i]);
            return 2;
        }
    }
    GpuCtx ctx;
    gpu_ctx_init(&ctx, 0);
    printf("sd_fold_check on %s (SM %d.%d)\n", ctx.name, ctx.sm / 10, ctx.sm % 10);
    Tally tl = {0, 0};
    for (int i = 0; i < N_HEAD_SIZES; i++) {
        const int d = HEAD_SIZES[i];
        if (only_d && d != only_d) continue;
        check_case(&ctx, &tl, B, T, h, d, 0, -1);
        if (timing) time_case(&ctx, tB, tT, tC, d);
    }
    if (!only_d || only_d == 24) check_case(&ctx, &tl, B, T, 3, 24, 1, 1);
    gpu_ctx_free(&ctx);
    printf("%d passed, %d failed\n", tl.passed, tl.failed);
    return tl.failed == 0 ? 0 : 1;
}
