/*
 * dev/cuda/linear_attention_check.cu: standalone correctness and timing check of the GPU's causal
 * ELU+1 linear attention (sd_attention/linear_scan.cu, the chunked scan; doc/methods.md "ELU+1 causal linear attention") against the
 * exact O(T^2) fp32 CPU reference of sd_attention/linear_cpu.h (linear_attention_forward / _backward).
 *
 *   ./linear_attention_check [-d D] [-B B] [-T T] [-h H] [-time 0|1] [-tB B] [-tT T] [-tC C] [--help]
 *
 * Per head size (8, 16, 32, 64, 128, 256, and 12, 20 which are not multiples of 8; or -d), at a
 * small shape (default B 2, T 200, h 2: T is not a multiple of any chunk length, so the last chunk
 * is partial, and spans 4 to 25 chunks), the prescale alternating per size (both at d = 64), with
 * random bf16 q, k, v, dO in [-1, 1) and every output poisoned with NaN before the call:
 *   o, dq, dk, dv   rel error <= 2^-7: the fp32 scan equals the exact form up to summation order
 *                   (~1e-6), then one bf16 rounding (at most 2^-8 of a value), 2x margin; gradient
 *                   errors are taken against max(max |ref|, 1e-3)
 * Controls that must fail: o against the reference one position later; the forward with the
 * other prescale setting; dq against dk. The chunk length and tile chosen for each d are printed.
 * With -time 1 the mean forward and backward times at B 16, T 1024, C 768 (h = C / d) are printed
 * as "TIME" lines (dev/gpu_check.sh reads them). Ends with "N passed, N failed" (test/harness.h).
 */
#include "check_common.h"

#include "../../llmc/cpu/kernels.h"
#include "../../sd_attention/linear_cpu.h"
#include "../../sd_attention/linear_scan.cuh"
#include "../../sd_attention/linear_scan.h"

#define TOL (1.0 / 128.0)

typedef struct {
    const GpuCtx *ctx;
    int B, T, h, d, prescale;
    size_t N, A;
    floatX *qkv, *out, *dout, *dqkv;
    float *scratch;
} Bufs;

static void bufs_alloc(Bufs *b, const GpuCtx *ctx, int B, int T, int h, int d, int prescale) {
    memset(b, 0, sizeof(*b));
    b->ctx = ctx;
    b->B = B; b->T = T; b->h = h; b->d = d; b->prescale = prescale;
    b->N = (size_t)B * T;
    b->A = (size_t)h * d;
    CUDA_CHECK(cudaMalloc(&b->qkv, b->N * 3 * b->A * 2));
    CUDA_CHECK(cudaMalloc(&b->out, b->N * b->A * 2));
    CUDA_CHECK(cudaMalloc(&b->dout, b->N * b->A * 2));
    CUDA_CHECK(cudaMalloc(&b->dqkv, b->N * 3 * b->A * 2));
    CUDA_CHECK(cudaMalloc(&b->scratch, lin_scratch_floats(b->N, h, d) * 4));
}

static void bufs_free(Bufs *b) {
    void *p[] = {b->qkv, b->out, b->dout, b->dqkv, b->scratch};
    for (int i = 0; i < 5; i++)
        if (p[i]) cudaFree(p[i]);
}

/* step(b, 0) the forward, step(b, 1) the backward (time_steps' CheckStep) */
static void step(void *arg, int backward) {
    Bufs *b = (Bufs *)arg;
    if (!backward) linear_attention_forward(b->out, b->scratch, b->qkv, b->B, b->T, b->h, b->d, b->prescale, b->ctx);
    else linear_attention_backward(b->dqkv, b->scratch, b->dout, b->qkv, b->B, b->T, b->h, b->d, b->prescale, b->ctx);
}

static void check_case(const GpuCtx *ctx, int B, int T, int h, int d, int prescale) {
    Bufs b;
    bufs_alloc(&b, ctx, B, T, h, d, prescale);
    const size_t N = b.N, A = b.A, A3 = 3 * A;
    LinScanShape shape = {0, 0, 0};
    lin_scan_choose(d, ctx->smem_optin, &shape);
    char tag[96];
    snprintf(tag, sizeof(tag), "linear d %3d%s (chunk %d, tile %d)", d, prescale ? " prescale" : "", shape.CH,
             shape.TY);
    uint16_t *qkv = (uint16_t *)xmalloc(N * A3 * 2), *dout = (uint16_t *)xmalloc(N * A * 2);
    uint16_t *out = (uint16_t *)xmalloc(N * A * 2), *dqkv = (uint16_t *)xmalloc(N * A3 * 2);
    fill_random_bf16(qkv, N * A3, 7000 + d);
    fill_random_bf16(dout, N * A, 8000 + d);
    float *fq = widen(qkv, N * A3), *fd = widen(dout, N * A);
    CUDA_CHECK(cudaMemcpy(b.qkv, qkv, N * A3 * 2, cudaMemcpyHostToDevice));
    CUDA_CHECK(cudaMemcpy(b.dout, dout, N * A * 2, cudaMemcpyHostToDevice));
    float *ro = (float *)xmalloc(N * A * 4), *att = (float *)xmalloc((size_t)B * h * T * T * 4);
    float *phi = (float *)xmalloc(N * 2 * A * 4), *Z = (float *)xmalloc((size_t)B * h * T * 4);
    linear_attention_forward(ro, att, phi, Z, fq, B, T, h, d, prescale);

    poison(b.out, N * A * 2);
    poison(b.scratch, lin_scratch_floats(N, h, d) * 4);
    step(&b, 0);
    CUDA_CHECK(cudaStreamSynchronize(ctx->stream));
    CUDA_CHECK(cudaMemcpy(out, b.out, N * A * 2, cudaMemcpyDeviceToHost));
    const double eo = rel_err_bf(out, A, ro, A, N, A);
    CHECK(eo <= TOL, "%s forward o: rel error %.2e <= %.1e (inf: poisoned left)", tag, eo, TOL);
    const double c1 = rel_err_bf(out, A, ro + A, A, N - 1, A);
    float *ro2 = (float *)xmalloc(N * A * 4);
    linear_attention_forward(ro2, att, phi, Z, fq, B, T, h, d, !prescale);
    const double c2 = rel_err_bf(out, A, ro2, A, N, A);
    /* the reference's att/phi/Z are reused by the backward: recompute them for this prescale */
    linear_attention_forward(ro, att, phi, Z, fq, B, T, h, d, prescale);
    CHECK(c1 > TOL && c2 > TOL, "%s controls: o vs the next position %.2e, vs the other prescale %.2e (both > tol)",
          tag, c1, c2);

    float *rd = (float *)xmalloc(N * A3 * 4), *sc = (float *)xmalloc((size_t)omp_threads() * T * 4);
    linear_attention_backward(rd, fd, fq, att, phi, Z, B, T, h, d, prescale, sc);
    poison(b.dqkv, N * A3 * 2);
    step(&b, 1);
    CUDA_CHECK(cudaStreamSynchronize(ctx->stream));
    CUDA_CHECK(cudaMemcpy(dqkv, b.dqkv, N * A3 * 2, cudaMemcpyDeviceToHost));
    const char *names[3] = {"dq", "dk", "dv"};
    for (int w = 0; w < 3; w++) {
        const double e = rel_err_bf_floor(dqkv + w * A, A3, rd + w * A, A3, N, A, 1e-3);
        CHECK(e <= TOL, "%s backward %s: rel error %.2e <= %.1e (inf: poisoned left)", tag, names[w], e, TOL);
    }
    const double cq = rel_err_bf_floor(dqkv, A3, rd + A, A3, N, A, 1e-3);
    CHECK(cq > TOL, "%s control: dq vs the reference dk %.2e > tol", tag, cq);
    free(qkv); free(dout); free(out); free(dqkv); free(fq); free(fd); free(ro); free(att); free(phi); free(Z);
    free(ro2); free(rd); free(sc);
    bufs_free(&b);
}

static void time_case(const GpuCtx *ctx, int B, int T, int C, int d) {
    const int h = C / d > 0 ? C / d : 1;
    Bufs b;
    bufs_alloc(&b, ctx, B, T, h, d, 0);
    upload_random_bf16(b.qkv, b.N * 3 * b.A, 9);
    upload_random_bf16(b.dout, b.N * b.A, 10);
    float ms_f = 0, ms_b = 0;
    time_steps(step, &b, ctx->stream, 1, 5, &ms_f, &ms_b);
    /* state FLOPs per token and head: 2 d^2 (k~^T v) + 2 d^2 (q~ P); the backward runs 4 scans */
    const double flops = 4.0 * (double)b.N * h * d * d;
    print_time("linear", d, B, T, h, ms_f, ms_b, flops, 4.0 * flops);
    bufs_free(&b);
}

int main(int argc, char **argv) {
    CheckArgs a = {0, 2, 200, 2, 1, 16, 1024, 768};
    const int r = check_args_parse(&a, argc, argv, "linear_attention_check");
    if (r != 1) return r;
    GpuCtx ctx;
    gpu_ctx_init(&ctx, 0);
    printf("linear_attention_check on %s (SM %d.%d, %zu bytes of opt-in shared memory per block)\n", ctx.name,
           ctx.sm / 10, ctx.sm % 10, ctx.smem_optin);
    for (int i = 0; i < N_HEAD_SIZES; i++) {
        const int d = HEAD_SIZES[i];
        if (a.only_d && d != a.only_d) continue;
        char why[256];
        if (!linear_attention_supported(d, &ctx, why, sizeof(why))) {
            CHECK(0, "linear d %3d: %s", d, why);
            continue;
        }
        check_case(&ctx, a.B, a.T, a.h, d, i % 2);
        if (d == 64) check_case(&ctx, a.B, a.T, a.h, d, 1 - i % 2);
        if (a.timing) time_case(&ctx, a.tB, a.tT, a.tC, d);
    }
    gpu_ctx_free(&ctx);
    return check_finish(&a);
}
