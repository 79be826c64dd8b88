/*
 * dev/cuda/attention_check.cu: standalone correctness and timing check of one attention path of
 * the trainer, built three times by dev/cuda/Makefile:
 *   attention_own     the own kernels (llmc/attention/own.cu): any head size, any T
 *   attention_cudnn   cuDNN flash attention (llmc/attention/cudnn.cpp, -DCHECK_CUDNN)
 *   attention_flash   the own tiled tensor-core kernels (llmc/attention/flash.cu, -DCHECK_FLASH):
 *                     head sizes that are multiples of 16 up to 256 (the trainer's -attn flash)
 *   attention_mma     the register-tile kernels (llmc/attention/mma.cu, -DCHECK_FLASH_MMA):
 *                     multiples of 16 up to 256 (where the backward does not fit the GPU's shared
 *                     memory, e.g. d 128 and d >= 192 with 99 KB per block, checked and timed
 *                     forward only); where their blocks take 128-row tiles (d <= 64: two 16-row
 *                     groups per warp) also with 64-row ones, checked and timed as path
 *                     "mma_64", so one run compares the two
 *
 *   ./attention_own [-d D] [-B B] [-T T] [-h H] [-time 0|1] [-tB B] [-tT T] [-tC C] [--help]
 *
 * Per head size (8, 16, 32, 64, 128, 256, and 12, 20 which are not multiples of 8; or -d):
 * random bf16 inputs at a small shape (default B 2, T 127: T is deliberately not a multiple of 4
 * or 8, h 2), outputs poisoned with NaN before each call, forward and backward compared with the
 * CPU model's attention (dev/cuda/attention_ref.h: tolerances and the two controls that must
 * fail); then, with -time 1, the mean time of forward and backward at the benchmark shape
 * (default B 16, T 1024, h = C/d with C 768), printed as a "TIME" line that dev/gpu_check.sh
 * reads. Ends with "N passed, N failed" (test/harness.h) and a non-zero exit on any failure.
 * Shapes a path cannot serve (cuDNN: d not a multiple of 8, or over its limit on this GPU; flash:
 * d not a multiple of 16) are listed as n/a.
 */
#include "attention_ref.h"

#include "../../llmc/attention/paths.h"
#if defined(CHECK_CUDNN)
#include "../../llmc/attention/cudnn.h"
#define PATH_NAME "cudnn"
#define PATH_HAS_STATS 1
#elif defined(CHECK_FLASH)
#include "../../llmc/attention/flash.cuh"
#define PATH_NAME "flash"
#define PATH_HAS_STATS 1
#elif defined(CHECK_FLASH_MMA)
#include "../../llmc/attention/mma.cuh"
#define PATH_NAME "mma"
#define PATH_HAS_STATS 1
#else
#include "../../llmc/attention/own.cuh"
#define PATH_NAME "own"
#define PATH_HAS_STATS 0
#endif

typedef struct {
    GpuCtx ctx;
#ifdef CHECK_CUDNN
    CudnnAtt *cudnn;
#endif
} Dev;

/* Device buffers of one shape. */
typedef struct {
    Dev *dv;
    const char *name; /* the path's name in the output lines */
    int B, T, h, d;
    int bq; /* register-tile kernels: block tile rows, 0 for their default */
    size_t A, N;
    floatX *qkv, *out, *dout, *dqkv, *att, *datt, *scratch;
    float *stats, *D;
} Bufs;

static void bufs_alloc(Bufs *b, Dev *dv, int B, int T, int h, int d, int bq) {
    memset(b, 0, sizeof(*b));
    b->dv = dv;
    b->bq = bq;
    b->name = bq ? "mma_64" : PATH_NAME;
    b->B = B;
    b->T = T;
    b->h = h;
    b->d = d;
    b->A = (size_t)h * d;
    b->N = (size_t)B * T;
    CUDA_CHECK(cudaMalloc(&b->qkv, b->N * 3 * b->A * 2));
    CUDA_CHECK(cudaMalloc(&b->out, b->N * b->A * 2));
    CUDA_CHECK(cudaMalloc(&b->dout, b->N * b->A * 2));
    CUDA_CHECK(cudaMalloc(&b->dqkv, b->N * 3 * b->A * 2));
    CUDA_CHECK(cudaMalloc(&b->stats, (size_t)B * h * T * 4));
#if defined(CHECK_FLASH) || defined(CHECK_FLASH_MMA)
    CUDA_CHECK(cudaMalloc(&b->D, (size_t)B * h * T * 4));
#endif
#if !PATH_HAS_STATS
    const size_t tt = (size_t)B * h * T * T;
    CUDA_CHECK(cudaMalloc(&b->att, tt * 2));
    CUDA_CHECK(cudaMalloc(&b->datt, tt * 2));
    CUDA_CHECK(cudaMalloc(&b->scratch, 7 * b->N * b->A * 2));
#endif
}

static void bufs_free(Bufs *b) {
    void *p[] = {b->qkv, b->out, b->dout, b->dqkv, b->stats, b->att, b->datt, b->scratch, b->D};
    for (int i = 0; i < 9; i++)
        if (p[i]) cudaFree(p[i]);
}

/* step(b, 0) the forward, step(b, 1) the backward of the path under test (time_steps' CheckStep) */
static void step(void *arg, int backward) {
    Bufs *b = (Bufs *)arg;
#if defined(CHECK_CUDNN)
    if (!backward) cudnn_att_forward(b->dv->cudnn, b->out, b->stats, b->qkv, b->B, b->h, b->T, b->d);
    else cudnn_att_backward(b->dv->cudnn, b->dqkv, b->dout, b->qkv, b->out, b->stats, b->B, b->h, b->T, b->d);
#elif defined(CHECK_FLASH)
    const GpuCtx *ctx = &b->dv->ctx;
    if (!backward) attention_flash_forward(b->out, b->stats, b->qkv, b->B, b->T, b->h, b->d, ctx);
    else attention_flash_backward(b->dqkv, b->D, b->dout, b->qkv, b->out, b->stats, b->B, b->T, b->h, b->d, ctx);
#elif defined(CHECK_FLASH_MMA)
    const GpuCtx *ctx = &b->dv->ctx;
    if (!backward) attention_flash_mma_forward_bq(b->out, b->stats, b->qkv, b->B, b->T, b->h, b->d, b->bq, ctx);
    else
        attention_flash_mma_backward_bq(b->dqkv, b->D, b->dout, b->qkv, b->out, b->stats, b->B, b->T, b->h, b->d, b->bq,
                                        ctx);
#else
    const GpuCtx *ctx = &b->dv->ctx;
    if (!backward) attention_own_forward(b->out, b->att, b->scratch, b->qkv, b->B, b->T, b->h, b->d, ctx);
    else attention_own_backward(b->dqkv, b->datt, b->scratch, b->dout, b->qkv, b->att, b->B, b->T, b->h, b->d, ctx);
#endif
}

#if !PATH_HAS_STATS
/* The own path's probabilities: each P is rounded to bf16 (2^-9 relative), so a row sums to 1
 * within 2^-9; above the diagonal they must be exactly 0 (the backward reads the full rows). */
static void check_probabilities(const Bufs *b) {
    const size_t rows = (size_t)b->B * b->h * b->T, T = (size_t)b->T;
    uint16_t *att = (uint16_t *)xmalloc(rows * T * 2);
    CUDA_CHECK(cudaMemcpy(att, b->att, rows * T * 2, cudaMemcpyDeviceToHost));
    double worst_sum = 0.0;
    int upper_zero = 1;
    for (size_t r = 0; r < rows; r++) {
        const size_t t = r % T;
        double s = 0.0;
        for (size_t j = 0; j < T; j++) {
            const float v = bf16_to_f32(att[r * T + j]);
            if (j <= t) s += v;
            else upper_zero &= v == 0.0f;
        }
        worst_sum = fmax(worst_sum, fabs(s - 1.0));
    }
    CHECK(upper_zero && worst_sum <= 1.0 / 512 && count_nan_bf16(att, rows * T) == 0,
          "%s d %3d probabilities: rows sum to 1 within %.1e, zeros above the diagonal", PATH_NAME, b->d, worst_sum);
    free(att);
}
#endif

/* Whether the path has a backward for head size d here (every path but the register-tile one,
 * whose backward blocks may not fit the shared memory); the reason when not. */
static int has_backward(const Dev *dv, int d, char *why, size_t cap) {
#if defined(CHECK_FLASH_MMA)
    return attention_flash_mma_supports(d, 1, &dv->ctx, why, cap);
#else
    (void)dv; (void)d; (void)why; (void)cap;
    return 1;
#endif
}

/* bq: the register-tile kernels' block tile rows (0: their default; other paths 0) */
static void check_case(Dev *dv, int B, int T, int h, int d, int bq) {
    Bufs b;
    bufs_alloc(&b, dv, B, T, h, d, bq);
    const char *name = b.name;
    const size_t N = b.N, A = b.A, A3 = 3 * A;
    uint16_t *qkv = (uint16_t *)xmalloc(N * A3 * 2), *dout = (uint16_t *)xmalloc(N * A * 2);
    uint16_t *out = (uint16_t *)xmalloc(N * A * 2), *dqkv = (uint16_t *)xmalloc(N * A3 * 2);
    fill_random_bf16(qkv, N * A3, 1000 + d);
    fill_random_bf16(dout, N * A, 2000 + d);
    float *fq = widen(qkv, N * A3), *fd = widen(dout, N * A);
    float *ro = (float *)xmalloc(N * A * 4), *rd = (float *)xmalloc(N * A3 * 4);
    float *rc = (float *)xmalloc(N * A * 4), *lse = (float *)xmalloc((size_t)B * h * T * 4);
    CUDA_CHECK(cudaMemcpy(b.qkv, qkv, N * A3 * 2, cudaMemcpyHostToDevice));
    CUDA_CHECK(cudaMemcpy(b.dout, dout, N * A * 2, cudaMemcpyHostToDevice));
    ref_attention(ro, lse, rd, fq, fd, B, T, h, d);

    poison(b.out, N * A * 2);
    poison(b.stats, (size_t)B * h * T * 4);
    if (b.att) poison(b.att, (size_t)B * h * T * T * 2);
    step(&b, 0);
    CUDA_CHECK(cudaStreamSynchronize(dv->ctx.stream));
    CUDA_CHECK(cudaMemcpy(out, b.out, N * A * 2, cudaMemcpyDeviceToHost));
    const double ef = rel_err_bf(out, A, ro, A, N, A);
    CHECK(ef <= TOL_FWD, "%s d %3d (B %d T %d h %d) forward: rel error %.2e <= %.2e (inf: poisoned left)", name, d,
          B, T, h, ef, TOL_FWD);
    ref_attention_one_ahead(rc, ro, fq, B, T, h, d);
    const double c1 = rel_err_bf(out, A, rc, A, N, A);
    ref_attention(rc, NULL, NULL, fq, NULL, B, T, 2 * h, d / 2);
    const double c2 = rel_err_bf(out, A, rc, A, N, A);
    CHECK(c1 > TOL_FWD && c2 > TOL_FWD,
          "%s d %3d controls: vs a mask one key ahead %.2e, vs %d heads of %d %.2e (both > tol)", name, d, c1,
          2 * h, d / 2, c2);
#if PATH_HAS_STATS
    float *st = (float *)xmalloc((size_t)B * h * T * 4);
    CUDA_CHECK(cudaMemcpy(st, b.stats, (size_t)B * h * T * 4, cudaMemcpyDeviceToHost));
    const double es = rel_err_f(st, lse, (size_t)B * h * T);
    CHECK(es <= TOL_FWD, "%s d %3d stats (logsumexp): rel error %.2e", name, d, es);
    free(st);
#else
    check_probabilities(&b);
#endif

    char why[256];
    if (!has_backward(dv, d, why, sizeof(why))) {
        char tag[64];
        snprintf(tag, sizeof(tag), "%s d %3d", name, d);
        not_applicable(tag, "backward dq, dk, dv", why);
    } else {
        poison(b.dqkv, N * A3 * 2);
        step(&b, 1);
        CUDA_CHECK(cudaStreamSynchronize(dv->ctx.stream));
        CUDA_CHECK(cudaMemcpy(dqkv, b.dqkv, N * A3 * 2, cudaMemcpyDeviceToHost));
        const char *names[3] = {"dq", "dk", "dv"};
        for (int w = 0; w < 3; w++) {
            const double eb = rel_err_bf(dqkv + w * A, A3, rd + w * A, A3, N, A);
            CHECK(eb <= TOL_BWD, "%s d %3d backward %s: rel error %.2e <= %.2e (inf: poisoned left)", name, d,
                  names[w], eb, TOL_BWD);
        }
    }
    free(qkv); free(dout); free(out); free(dqkv); free(fq); free(fd); free(ro); free(rd); free(rc); free(lse);
    bufs_free(&b);
}

/* Mean milliseconds of forward and backward at the benchmark shape (random inputs). */
static void time_case(Dev *dv, int B, int T, int C, int d, int bq) {
    const int h = C / d > 0 ? C / d : 1;
    Bufs b;
    bufs_alloc(&b, dv, B, T, h, d, bq);
    upload_random_bf16(b.qkv, b.N * 3 * b.A, 7);
    upload_random_bf16(b.dout, b.N * b.A, 8);
    float ms_f = 0, ms_b = 0;
    char why[256];
    time_steps(step, &b, dv->ctx.stream, 2, 10, &ms_f, has_backward(dv, d, why, sizeof(why)) ? &ms_b : NULL);
    /* causal attention FLOPs: 4 B h T^2 d forward (half of the square), twice that backward */
    const double flops = 2.0 * B * h * (double)T * T * d;
    print_time(b.name, d, B, T, h, ms_f, ms_b, flops, 2.0 * flops);
    bufs_free(&b);
}

static int supported(const Dev *dv, int d, char *why, size_t cap) {
#if defined(CHECK_CUDNN)
    AttnEnv env = {dv->ctx.sm, cudnn_att_built(), cudnn_att_version(), dv->ctx.smem_optin};
    return cudnn_sdpa_supports(&env, d, 1, why, cap);
#elif defined(CHECK_FLASH)
    AttnEnv env = {dv->ctx.sm, 0, 0, dv->ctx.smem_optin};
    return flash_path_supports(&env, d, why, cap) != 0;
#elif defined(CHECK_FLASH_MMA)
    return attention_flash_mma_supports(d, 0, &dv->ctx, why, cap);
#else
    (void)dv; (void)d; (void)why; (void)cap;
    return 1;
#endif
}

int main(int argc, char **argv) {
    CheckArgs a = {0, 2, 127, 2, 1, 16, 1024, 768};
    const int r = check_args_parse(&a, argc, argv, "attention_" PATH_NAME);
    if (r != 1) return r;
    Dev dv;
    gpu_ctx_init(&dv.ctx, 0);
    printf("attention_%s on %s (SM %d.%d)\n", PATH_NAME, dv.ctx.name, dv.ctx.sm / 10, dv.ctx.sm % 10);
#ifdef CHECK_CUDNN
    dv.cudnn = cudnn_att_create(dv.ctx.stream);
    printf("cuDNN %ld\n", cudnn_att_version());
#endif
    for (int i = 0; i < N_HEAD_SIZES; i++) {
        const int d = HEAD_SIZES[i];
        if (a.only_d && d != a.only_d) continue;
        char why[256];
        if (!supported(&dv, d, why, sizeof(why))) {
            printf("n/a  %s d %3d: %s\n", PATH_NAME, d, why);
            continue;
        }
        check_case(&dv, a.B, a.T, a.h, d, 0);
        if (a.timing) time_case(&dv, a.tB, a.tT, a.tC, d, 0);
#if defined(CHECK_FLASH_MMA)
        if (fmma_block_rows(d) != FMMA_BQ) { /* the 64-row tiles too, side by side */
            check_case(&dv, a.B, a.T, a.h, d, FMMA_BQ);
            if (a.timing) time_case(&dv, a.tB, a.tT, a.tC, d, FMMA_BQ);
        }
#endif
    }
#ifdef CHECK_CUDNN
    cudnn_att_destroy(dv.cudnn);
#endif
    gpu_ctx_free(&dv.ctx);
    return check_finish(&a);
}
