/*
 * dev/cuda/attention_check.cu: standalone correctness and timing check of one attention path of
 * the trainer, built twice by dev/cuda/Makefile:
 *   attention_own     the own kernels (llmc/attention_own.cu): any head size, any T
 *   attention_cudnn   cuDNN flash attention (llmc/cudnn_att.cpp, -DCHECK_CUDNN)
 *
 *   ./attention_own [-d D] [-B B] [-T T] [-h H] [-time 0|1] [-tB B] [-tT T] [-tC C]
 *
 * Per head size (8, 16, 32, 64, 128, 256, and 12, 20 which are not multiples of 8; or -d):
 * random bf16 inputs at a small shape (default B 2, T 127: T is deliberately not a multiple of 4
 * or 8, h 2), outputs poisoned with NaN before each call, forward and backward compared with the
 * fp32 CPU reference (dev/cuda/attention_ref.h: metric, tolerances and the two controls that
 * must fail); then, with -time 1, the mean time of forward and backward at the benchmark shape
 * (default B 16, T 1024, h = C/d with C 768), printed as a "TIME" line that dev/gpu_check.sh
 * reads. Ends with "N passed, N failed" and a non-zero exit on any failure. Shapes a path cannot
 * serve (cuDNN: d not a multiple of 8, or over its limit on this GPU) are listed as n/a.
 */
#include "attention_ref.h"

#include "../../llmc/cuda_common.cuh"
#include "../../llmc/gpu_host.h"
#ifdef CHECK_CUDNN
#include "../../llmc/cudnn_att.h"
#define PATH_NAME "cudnn"
#else
#include "../../llmc/attention_own.cuh"
#define PATH_NAME "own"
#endif

typedef struct {
    GpuCtx ctx;
#ifdef CHECK_CUDNN
    CudnnAtt *cudnn;
#endif
} Dev;

/* Device buffers of one shape. */
typedef struct {
    int B, T, h, d;
    size_t A, N;
    floatX *qkv, *out, *dout, *dqkv, *att, *datt, *scratch;
    float *stats;
} Bufs;

static void bufs_alloc(Bufs *b, int B, int T, int h, int d) {
    memset(b, 0, sizeof(*b));
    b->B = B;
    b->T = T;
    b->h = h;
    b->d = d;
    b->A = (size_t)h * d;
    b->N = (size_t)B * T;
    dev_check(cudaMalloc(&b->qkv, b->N * 3 * b->A * 2), "cudaMalloc qkv");
    dev_check(cudaMalloc(&b->out, b->N * b->A * 2), "cudaMalloc out");
    dev_check(cudaMalloc(&b->dout, b->N * b->A * 2), "cudaMalloc dout");
    dev_check(cudaMalloc(&b->dqkv, b->N * 3 * b->A * 2), "cudaMalloc dqkv");
    dev_check(cudaMalloc(&b->stats, (size_t)B * h * T * 4), "cudaMalloc stats");
#ifndef CHECK_CUDNN
    const size_t tt = (size_t)B * h * T * T;
    dev_check(cudaMalloc(&b->att, tt * 2), "cudaMalloc att");
    dev_check(cudaMalloc(&b->datt, tt * 2), "cudaMalloc datt");
    dev_check(cudaMalloc(&b->scratch, 7 * b->N * b->A * 2), "cudaMalloc scratch");
#endif
}

static void bufs_free(Bufs *b) {
    void *p[] = {b->qkv, b->out, b->dout, b->dqkv, b->stats, b->att, b->datt, b->scratch};
    for (int i = 0; i < 8; i++)
        if (p[i]) cudaFree(p[i]);
}

static void forward(Dev *dv, Bufs *b) {
#ifdef CHECK_CUDNN
    cudnn_att_forward(dv->cudnn, b->out, b->stats, b->qkv, b->B, b->h, b->T, b->d, 1);
#else
    attention_own_forward(b->out, b->att, b->scratch, b->qkv, b->B, b->T, b->h, b->d, &dv->ctx);
#endif
}

static void backward(Dev *dv, Bufs *b) {
#ifdef CHECK_CUDNN
    cudnn_att_backward(dv->cudnn, b->dqkv, b->dout, b->qkv, b->out, b->stats, b->B, b->h, b->T, b->d);
#else
    attention_own_backward(b->dqkv, b->datt, b->scratch, b->dout, b->qkv, b->att, b->B, b->T, b->h, b->d, &dv->ctx);
#endif
}

/* Splits (B, T, 3A) into the q, k or v part (B, T, A) as floats. */
static void part(float *dst, const float *qkv3, size_t N, size_t A, int which) {
    for (size_t n = 0; n < N; n++) memcpy(dst + n * A, qkv3 + n * 3 * A + which * A, A * sizeof(float));
}

static void check_case(Dev *dv, Tally *tl, int B, int T, int h, int d) {
    Bufs b;
    bufs_alloc(&b, B, T, h, d);
    const size_t N = b.N, A = b.A;
    uint16_t *qkv = (uint16_t *)malloc(N * 3 * A * 2), *dout = (uint16_t *)malloc(N * A * 2);
    uint16_t *out = (uint16_t *)malloc(N * A * 2), *dqkv = (uint16_t *)malloc(N * 3 * A * 2);
    float *fq = (float *)malloc(N * 3 * A * 4), *fd = (float *)malloc(N * A * 4);
    float *ro = (float *)malloc(N * A * 4), *rd = (float *)malloc(N * 3 * A * 4);
    float *rc = (float *)malloc(N * A * 4), *lse = (float *)malloc((size_t)B * h * T * 4);
    float *g = (float *)malloc(N * 3 * A * 4), *p1 = (float *)malloc(N * A * 4), *p2 = (float *)malloc(N * A * 4);
    fill_random_bf16(qkv, N * 3 * A, 1000 + d);
    fill_random_bf16(dout, N * A, 2000 + d);
    for (size_t i = 0; i < N * 3 * A; i++) fq[i] = host_f32(qkv[i]);
    for (size_t i = 0; i < N * A; i++) fd[i] = host_f32(dout[i]);
    dev_check(cudaMemcpy(b.qkv, qkv, N * 3 * A * 2, cudaMemcpyHostToDevice), "copy qkv");
    dev_check(cudaMemcpy(b.dout, dout, N * A * 2, cudaMemcpyHostToDevice), "copy dout");
    const float scale = 1.0f / sqrtf((float)d);
    ref_attention(ro, lse, rd, fq, fd, B, T, h, d, 1, scale);

    poison(b.out, N * A * 2);
    poison(b.stats, (size_t)B * h * T * 4);
    if (b.att) poison(b.att, (size_t)B * h * T * T * 2);
    forward(dv, &b);
    dev_check(cudaStreamSynchronize(dv->ctx.stream), "forward");
    dev_check(cudaMemcpy(out, b.out, N * A * 2, cudaMemcpyDeviceToHost), "copy out");
    const size_t unwritten = count_nan_bf16(out, N * A);
    const double ef = rel_error(out, ro, N * A);
    report(tl, unwritten == 0 && ef <= TOL_FWD, "%s d %3d (B %d T %d h %d) forward: rel error %.2e <= %.2e, %zu poisoned left",
           PATH_NAME, d, B, T, h, ef, TOL_FWD, unwritten);
    ref_attention(rc, NULL, NULL, fq, fd, B, T, h, d, 0, scale);
    const double c1 = rel_error(out, rc, N * A);
    ref_attention(rc, NULL, NULL, fq, fd, B, T, 2 * h, d / 2, 1, 1.0f / sqrtf((float)(d / 2)));
    const double c2 = rel_error(out, rc, N * A);
    report(tl, c1 > TOL_FWD && c2 > TOL_FWD, "%s d %3d controls: vs unmasked %.2e, vs %d heads of %d %.2e (both > tol)",
           PATH_NAME, d, c1, 2 * h, d / 2, c2);
#ifdef CHECK_CUDNN
    float *st = (float *)malloc((size_t)B * h * T * 4);
    dev_check(cudaMemcpy(st, b.stats, (size_t)B * h * T * 4, cudaMemcpyDeviceToHost), "copy stats");
    const double es = rel_error_f(st, lse, (size_t)B * h * T);
    report(tl, es <= TOL_FWD, "%s d %3d stats (logsumexp): rel error %.2e", PATH_NAME, d, es);
    free(st);
#else
    uint16_t *att = (uint16_t *)malloc((size_t)B * h * T * T * 2);
    dev_check(cudaMemcpy(att, b.att, (size_t)B * h * T * T * 2, cudaMemcpyDeviceToHost), "copy att");
    double worst_sum = 0.0;
    int upper_zero = 1;
    for (size_t r = 0; r < (size_t)B * h * T; r++) {
        const int t = (int)(r % T);
        double s = 0.0;
        for (int j = 0; j < T; j++) {
            const float v = host_f32(att[r * T + j]);
            if (j <= t) s += v;
            else upper_zero &= v == 0.0f;
        }
        worst_sum = fmax(worst_sum, fabs(s - 1.0));
    }
    /* each P is rounded to bf16 (2^-9 relative), so a row sums to 1 within 2^-9 */
    report(tl, upper_zero && worst_sum <= 1.0 / 512 && count_nan_bf16(att, (size_t)B * h * T * T) == 0,
           "%s d %3d probabilities: rows sum to 1 within %.1e, zeros above the diagonal", PATH_NAME, d, worst_sum);
    free(att);
#endif

    poison(b.dqkv, N * 3 * A * 2);
    backward(dv, &b);
    dev_check(cudaStreamSynchronize(dv->ctx.stream), "backward");
    dev_check(cudaMemcpy(dqkv, b.dqkv, N * 3 * A * 2, cudaMemcpyDeviceToHost), "copy dqkv");
    for (size_t i = 0; i < N * 3 * A; i++) g[i] = host_f32(dqkv[i]);
    const char *names[3] = {"dq", "dk", "dv"};
    for (int w = 0; w < 3; w++) {
        part(p1, g, N, A, w);
        part(p2, rd, N, A, w);
        const double eb = rel_error_f(p1, p2, N * A);
        size_t nan = 0;
        for (size_t i = 0; i < N * A; i++) nan += p1[i] != p1[i];
        report(tl, nan == 0 && eb <= TOL_BWD, "%s d %3d backward %s: rel error %.2e <= %.2e, %zu poisoned left",
               PATH_NAME, d, names[w], eb, TOL_BWD, nan);
    }
    free(qkv); free(dout); free(out); free(dqkv); free(fq); free(fd); free(ro); free(rd); free(rc);
    free(lse); free(g); free(p1); free(p2);
    bufs_free(&b);
}

/* Mean milliseconds of forward and backward at the benchmark shape (random inputs). */
static void time_case(Dev *dv, int B, int T, int C, int d) {
    const int h = C / d > 0 ? C / d : 1;
    Bufs b;
    bufs_alloc(&b, B, T, h, d);
    uint16_t *x = (uint16_t *)malloc(b.N * 3 * b.A * 2);
    fill_random_bf16(x, b.N * 3 * b.A, 7);
    dev_check(cudaMemcpy(b.qkv, x, b.N * 3 * b.A * 2, cudaMemcpyHostToDevice), "copy");
    dev_check(cudaMemcpy(b.dout, x, b.N * b.A * 2, cudaMemcpyHostToDevice), "copy");
    cudaEvent_t e0, e1;
    cudaEventCreate(&e0);
    cudaEventCreate(&e1);
    float ms_f = 0, ms_b = 0;
    const int iters = 10;
    for (int pass = 0; pass < 2; pass++) { /* pass 0 warms up (graph builds, cuBLAS heuristics) */
        const int n = pass == 0 ? 2 : iters;
        cudaEventRecord(e0, dv->ctx.stream);
        for (int i = 0; i < n; i++) forward(dv, &b);
        cudaEventRecord(e1, dv->ctx.stream);
        cudaEventSynchronize(e1);
        cudaEventElapsedTime(&ms_f, e0, e1);
        ms_f /= n;
        cudaEventRecord(e0, dv->ctx.stream);
        for (int i = 0; i < n; i++) backward(dv, &b);
        cudaEventRecord(e1, dv->ctx.stream);
        cudaEventSynchronize(e1);
        cudaEventElapsedTime(&ms_b, e0, e1);
        ms_b /= n;
    }
    /* causal attention FLOPs: 4 B h T^2 d forward (half of the square), twice that backward */
    const double flops = 2.0 * B * h * (double)T * T * d;
    printf("TIME path %s d %d B %d T %d h %d fwd_ms %.3f bwd_ms %.3f fwd_tflops %.1f bwd_tflops %.1f\n",
           PATH_NAME, d, B, T, h, ms_f, ms_b, flops / ms_f / 1e9, 2.0 * flops / ms_b / 1e9);
    fflush(stdout);
    cudaEventDestroy(e0);
    cudaEventDestroy(e1);
    free(x);
    bufs_free(&b);
}

static int supported(const Dev *dv, int d, char *why, size_t cap) {
#ifdef CHECK_CUDNN
    AttnEnv env = {dv->ctx.sm, cudnn_att_built(), cudnn_att_version()};
    return cudnn_sdpa_supports(&env, d, 1, why, cap);
#else
    (void)dv; (void)d; (void)why; (void)cap;
    return 1;
#endif
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
    Dev dv;
    gpu_ctx_init(&dv.ctx, 0);
    printf("attention_%s on %s (SM %d.%d)\n", PATH_NAME, dv.ctx.name, dv.ctx.sm / 10, dv.ctx.sm % 10);
#ifdef CHECK_CUDNN
    dv.cudnn = cudnn_att_create(dv.ctx.stream);
    printf("cuDNN %ld\n", cudnn_att_version());
#endif
    Tally tl = {0, 0};
    for (int i = 0; i < N_HEAD_SIZES; i++) {
        const int d = HEAD_SIZES[i];
        if (only_d && d != only_d) continue;
        char why[256];
        if (!supported(&dv, d, why, sizeof(why))) {
            printf("n/a  %s d %3d: %s\n", PATH_NAME, d, why);
            continue;
        }
        check_case(&dv, &tl, B, T, h, d);
        if (timing) time_case(&dv, tB, tT, tC, d);
    }
#ifdef CHECK_CUDNN
    cudnn_att_destroy(dv.cudnn);
#endif
    gpu_ctx_free(&dv.ctx);
    printf("%d passed, %d failed\n", tl.passed, tl.failed);
    return tl.failed == 0 ? 0 : 1;
}
