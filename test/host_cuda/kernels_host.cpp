/*
 * test/host_cuda/kernels_host.cpp: every launcher the GPU model calls (llmc/cuda/kernels.cuh,
 * llmc/attention/own.cuh, flash.cuh, mma.cuh, sd_attention/sd_fold.cuh, linear_scan.cuh) and the cuBLASLt
 * problem runner lt_matmul (llmc/cuda/matmul_problem.h), executed on the CPU, plus the GPU context.
 * With test/host_cuda/cudart_host.cpp this lets llmc/gpu/gpt2_gpu.cu, llmc/cuda/matmul.cu's row-major to
 * column-major mapping, train_gpt2.cu and test/test_gpt2_gpu.cu run unchanged on a machine without a
 * GPU (test/host_cuda/README.md says what that checks and what it cannot).
 *
 * Each launcher does what its header promises, in fp32 arithmetic on bf16 storage, rounding
 * where the CUDA kernel stores bf16 (once per stored value; reductions in another order than
 * the GPU's, so results agree with the GPU's to rounding, not bit for bit). Four kinds run the
 * device code itself: the flash attention, S-D fold and linear-scan launchers call the block
 * routines of llmc/attention/flash.h, sd_fold.h and linear_scan.h block by block with one
 * thread (as test/test_flash_emul.c and test/test_sd_fold_emul.c do); the register-tile attention
 * runs llmc/attention/mma.h's kernels with every thread a coroutine (test/flash_mma_emul.h). Two run the .cu files' own
 * sequence of steps with CPU steps: the own softmax attention (llmc/attention/own_seq.h, its
 * cuBLAS calls as GemmDescs) and the linear attention (linear_scan.h lin_*_seq). Matmuls go through matmul.cu's own mapping into LtMatmul problems
 * and lt_matmul below runs them with cuBLASLt's column-major semantics and epilogues
 * (D = op(A) op(B) [+ C] [+ bias], GELU_AUX, DGELU), so a wrong transpose or leading dimension
 * in matmul.cu shows up here as it would on a GPU.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "../../llmc/attention/flash.cuh"
#include "../../llmc/attention/mma.cuh"
#include "../../llmc/attention/own.cuh"
#include "../../llmc/attention/own_seq.h"
#include "../../llmc/attention/flash.h"
#include "../../llmc/attention/paths.h"
#include "../../llmc/cuda/adamw.h"
#include "../../llmc/cuda/kernels.cuh"
#include "../../sd_attention/linear_scan.cuh"
#include "../../sd_attention/linear_scan.h"
#include "../../llmc/cuda/matmul.cuh"
#include "../../llmc/cuda/matmul_problem.h"
#include "../../sd_attention/sd_fold.h"
#include "../../sd_attention/sd_fold.cuh"
#include "../flash_mma_emul.h"
#include "host_cuda.h"

/* bf16 element i of a floatX buffer, widened; and the round-to-nearest-even store */
static inline float ld(const floatX *p, size_t i) { return bf16_to_f32(reinterpret_cast<const uint16_t *>(p)[i]); }
static inline void st(floatX *p, size_t i, float x) { reinterpret_cast<uint16_t *>(p)[i] = f32_to_bf16(x); }
static inline uint16_t *raw(floatX *p) { return reinterpret_cast<uint16_t *>(p); }
static inline const uint16_t *raw(const floatX *p) { return reinterpret_cast<const uint16_t *>(p); }

/* Every launcher first checks its buffers as the GPU would fault on them: n elements of device
 * memory inside one allocation (host_cuda.h), and 16-byte alignment where the kernel moves 8 bf16
 * at once (load128 / store128; the flash kernels). */
template <class T>
static void dev(const T *p, size_t n, const char *what) {
    host_cuda_need_device(p, n * sizeof(T), what);
}
template <class T>
static void dev16(const T *p, size_t n, const char *what) {
    dev(p, n, what);
    if ((uintptr_t)p % 16 != 0) llmc_die("test/host_cuda: %s at %p is not 16-byte aligned (the kernel loads 8 bf16 at once)", what, (const void *)p);
}

/* ----------------------------------------------------------------------------------------------
 * The context: what gpu_ctx_init reads from the device properties, as an H100/H200 reports it
 * (SM 9.0, 132 SMs, 227 KiB of opt-in shared memory), so that path choices and shared-memory
 * shapes are those of the GPU the project targets. No stream or handles. */
void gpu_ctx_init(GpuCtx *ctx, int device) {
    memset(ctx, 0, sizeof(*ctx));
    ctx->device = device;
    ctx->sm = 90;
    ctx->sm_count = 132;
    ctx->smem_optin = 227 * 1024;
    ctx->total_mem = (size_t)64 << 30;
    snprintf(ctx->name, sizeof(ctx->name), "host emulation (CPU, no GPU; test/host_cuda)");
}

void gpu_ctx_free(GpuCtx *ctx) { memset(ctx, 0, sizeof(*ctx)); }

void gpu_allow_smem(const void *, size_t bytes, size_t *memo) {
    if (bytes > *memo) *memo = bytes;
}

/* ----------------------------------------------------------------------------------------------
 * cuBLASLt problems (llmc/cuda/matmul_problem.h): column-major, element (i, j) of D at D[i + j ldd];
 * op(A)(i, p) = A[p + i lda] when transposed, else A[i + p lda]; likewise B. fp32 sums of bf16
 * products, C = D read before the product when accumulating, one rounding of the result. */
/* op(X) of a column-major bf16 operand as a dense fp32 (rows x inner) row-major copy: row r holds
 * op(X)(r, 0 .. inner) for A (rows = m), or op(X)(0 .. inner, r) for B (rows = n). */
static float *widen_op(const floatX *X, int64_t ld_, bool trans, int64_t rows, int64_t inner, bool is_a) {
    float *w = (float *)xmalloc((size_t)(rows * inner) * sizeof(float));
#pragma omp parallel for schedule(static)
    for (int64_t r = 0; r < rows; r++)
        for (int64_t p = 0; p < inner; p++) {
            /* A: op(A)(r, p) = trans ? A[p + r ld] : A[r + p ld];  B: op(B)(p, r) = trans ? B[r + p ld] : B[p + r ld] */
            const int64_t idx = is_a ? (trans ? p + r * ld_ : r + p * ld_) : (trans ? r + p * ld_ : p + r * ld_);
            w[r * inner + p] = ld(X, (size_t)idx);
        }
    return w;
}

void lt_matmul(const LtMatmul *mm, const GpuCtx *) {
    /* stored extents: A is (trans ? k x m : m x k) column-major with ld lda, likewise B; D m x n */
    const uint64_t acols = mm->trans_a ? mm->m : mm->k, arows = mm->trans_a ? mm->k : mm->m;
    const uint64_t bcols = mm->trans_b ? mm->k : mm->n, brows = mm->trans_b ? mm->n : mm->k;
    dev(mm->A, (size_t)((acols - 1) * (uint64_t)mm->lda + arows), "matmul A");
    dev(mm->B, (size_t)((bcols - 1) * (uint64_t)mm->ldb + brows), "matmul B");
    dev(mm->D, (size_t)((mm->n - 1) * (uint64_t)mm->ldd + mm->m), "matmul D");
    if (mm->bias != NULL) dev(mm->bias, (size_t)mm->m, "matmul bias");
    if (mm->aux != NULL) dev(mm->aux, (size_t)((mm->n - 1) * (uint64_t)mm->ld_aux + mm->m), "matmul GELU aux");
    const int64_t M = (int64_t)mm->m, Nn = (int64_t)mm->n, K = (int64_t)mm->k;
    const cublasLtEpilogue_t ep = mm->epilogue;
    const bool bias = ep == CUBLASLT_EPILOGUE_BIAS || ep == CUBLASLT_EPILOGUE_GELU_AUX_BIAS;
    const bool gelu = ep == CUBLASLT_EPILOGUE_GELU_AUX || ep == CUBLASLT_EPILOGUE_GELU_AUX_BIAS;
    const bool dgelu = ep == CUBLASLT_EPILOGUE_DGELU;
    if (!(ep == CUBLASLT_EPILOGUE_DEFAULT || bias || gelu || dgelu))
        llmc_die("host lt_matmul: epilogue %d is not emulated", (int)ep);
    if (bias && mm->bias == NULL) llmc_die("host lt_matmul: a bias epilogue without a bias pointer");
    if ((gelu || dgelu) && mm->aux == NULL) llmc_die("host lt_matmul: a GELU epilogue without an aux pointer");
    float *a = widen_op(mm->A, mm->lda, mm->trans_a, M, K, true);
    float *b = widen_op(mm->B, mm->ldb, mm->trans_b, Nn, K, false);
#pragma omp parallel for schedule(static)
    for (int64_t j = 0; j < Nn; j++) {
        const float *bj = b + j * K;
        for (int64_t i = 0; i < M; i++) {
            const float *ai = a + i * K;
            float part[8] = {0, 0, 0, 0, 0, 0, 0, 0}; /* 8 independent sums: the loop vectorizes */
            int64_t p = 0;
            for (; p + 8 <= K; p += 8)
                for (int u = 0; u < 8; u++) part[u] += ai[p + u] * bj[p + u];
            float x = 0.0f;
            for (; p < K; p++) x += ai[p] * bj[p];
            for (int u = 0; u < 8; u++) x += part[u];
            const size_t di = (size_t)(i + j * mm->ldd);
            if (mm->accumulate) x += ld(mm->D, di);
            if (bias) x += ld(mm->bias, (size_t)i);
            if (gelu) {
                st(const_cast<floatX *>(mm->aux), (size_t)(i + j * mm->ld_aux), x);
                x = gelu_tanhf(x);
            }
            if (dgelu) x *= gelu_tanh_gradf(ld(mm->aux, (size_t)(i + j * mm->ld_aux)));
            st(mm->D, di, x);
        }
    }
    free(a);
    free(b);
}

/* ----------------------------------------------------------------------------------------------
 * Encoder */
void encoder_forward(floatX *out, const int *tokens, const floatX *wte, const floatX *wpe, int B, int T, int C,
                     float scale, cudaStream_t) {
    dev16(out, (size_t)B * T * C, "encoder out");
    dev(tokens, (size_t)B * T, "encoder tokens");
    dev16(wpe, (size_t)T * C, "wpe");
    for (size_t bt = 0; bt < (size_t)B * T; bt++)
        for (int c = 0; c < C; c++)
            st(out, bt * C + c, (ld(wte, (size_t)tokens[bt] * C + c) + ld(wpe, (bt % T) * C + c)) * scale);
}

void encoder_backward(floatX *dwte, floatX *dwpe, const floatX *dout, const int *uniq, const int *start,
                      const int *pos, int U, int B, int T, int C, float scale, cudaStream_t) {
    dev16(dwpe, (size_t)T * C, "dwpe");
    dev16(dout, (size_t)B * T * C, "encoder dout");
    if (U > 0) dev(pos, (size_t)B * T, "encoder buckets");
    float *acc = (float *)xmalloc((size_t)C * sizeof(float));
    for (int u = 0; u < U; u++) {
        memset(acc, 0, (size_t)C * sizeof(float));
        for (int p = start[u]; p < start[u + 1]; p++)
            for (int c = 0; c < C; c++) acc[c] += ld(dout, (size_t)pos[p] * C + c);
        for (int c = 0; c < C; c++) st(dwte, (size_t)uniq[u] * C + c, ld(dwte, (size_t)uniq[u] * C + c) + acc[c] * scale);
    }
    for (size_t i = 0; i < (size_t)T * C; i++) {
        float s = 0.0f;
        for (int b = 0; b < B; b++) s += ld(dout, (size_t)b * T * C + i);
        st(dwpe, i, ld(dwpe, i) + s * scale);
    }
    free(acc);
}

/* ----------------------------------------------------------------------------------------------
 * LayerNorm (eps 1e-5): statistics of the bf16 row in fp32, stored fp32; outputs rounded. */
static void ln_row(floatX *out, float *mean, float *rstd, const floatX *x, const floatX *w, const floatX *b, int C) {
    float mu = 0.0f, var = 0.0f;
    for (int c = 0; c < C; c++) mu += ld(x, c);
    mu /= (float)C;
    for (int c = 0; c < C; c++) var += (ld(x, c) - mu) * (ld(x, c) - mu);
    const float rs = 1.0f / sqrtf(var / (float)C + 1e-5f);
    for (int c = 0; c < C; c++) st(out, c, (ld(x, c) - mu) * rs * ld(w, c) + ld(b, c));
    *mean = mu;
    *rstd = rs;
}

void layernorm_forward(floatX *out, float *mean, float *rstd, const floatX *inp, const floatX *w, const floatX *b,
                       size_t N, int C, cudaStream_t) {
    dev16(out, N * C, "layernorm out");
    dev16(inp, N * C, "layernorm inp");
    dev(mean, N, "layernorm mean");
    dev(rstd, N, "layernorm rstd");
    dev(w, (size_t)C, "layernorm w");
    dev(b, (size_t)C, "layernorm b");
    for (size_t r = 0; r < N; r++) ln_row(out + r * C, mean + r, rstd + r, inp + r * C, w, b, C);
}

void fused_residual_layernorm_forward(floatX *residual, floatX *out, float *mean, float *rstd, const floatX *a,
                                      const floatX *b, const floatX *w, const floatX *bias, size_t N, int C,
                                      cudaStream_t) {
    dev16(residual, N * C, "residual");
    dev16(out, N * C, "layernorm out");
    dev16(a, N * C, "residual a");
    dev16(b, N * C, "residual b");
    dev(mean, N, "layernorm mean");
    dev(rstd, N, "layernorm rstd");
    for (size_t r = 0; r < N; r++) {
        for (int c = 0; c < C; c++) st(residual, r * C + c, ld(a, r * C + c) + ld(b, r * C + c));
        ln_row(out + r * C, mean + r, rstd + r, residual + r * C, w, bias, C);
    }
}

void layernorm_apply(floatX *out, const floatX *inp, const float *mean, const float *rstd, const floatX *w,
                     const floatX *b, size_t N, int C, cudaStream_t) {
    dev16(out, N * C, "layernorm out");
    dev16(inp, N * C, "layernorm inp");
    dev(mean, N, "layernorm mean");
    for (size_t r = 0; r < N; r++)
        for (int c = 0; c < C; c++)
            st(out, r * C + c, (ld(inp, r * C + c) - mean[r]) * rstd[r] * ld(w, c) + ld(b, c));
}

size_t colsum_scratch_floats(size_t N, int width) { return 2 * ceil_div(N, 128) * (size_t)width; }

/* grad (width) += sum over rows of dout; with inp: grad2 += sum dout * xhat (LayerNorm weight) */
static void colsum(floatX *grad, floatX *grad2, const floatX *dout, const floatX *inp, const float *mean,
                   const float *rstd, size_t N, int width) {
    for (int c = 0; c < width; c++) {
        float s = 0.0f, s2 = 0.0f;
        for (size_t r = 0; r < N; r++) {
            const float d = ld(dout, r * width + c);
            s += d;
            if (grad2 != NULL) s2 += d * (ld(inp, r * width + c) - mean[r]) * rstd[r];
        }
        st(grad, c, ld(grad, c) + s);
        if (grad2 != NULL) st(grad2, c, ld(grad2, c) + s2);
    }
}

void bias_backward(floatX *db, const floatX *dout, float *, size_t N, int OC, cudaStream_t) {
    dev(db, (size_t)OC, "bias gradient");
    dev(dout, N * (size_t)OC, "bias_backward dout");
    colsum(db, NULL, dout, NULL, NULL, NULL, N, OC);
}

void layernorm_backward(floatX *dinp, floatX *dw, floatX *db, float *, const floatX *dout, const floatX *inp,
                        const floatX *w, const float *mean, const float *rstd, size_t N, int C, cudaStream_t) {
    dev16(dinp, N * C, "layernorm dinp");
    dev16(dout, N * C, "layernorm dout");
    dev16(inp, N * C, "layernorm inp");
    dev(dw, (size_t)C, "layernorm dw");
    dev(db, (size_t)C, "layernorm db");
    dev(mean, N, "layernorm mean");
    colsum(db, dw, dout, inp, mean, rstd, N, C);
    for (size_t r = 0; r < N; r++) {
        const float mu = mean[r], rs = rstd[r];
        float gsum = 0.0f, gxsum = 0.0f;
        for (int c = 0; c < C; c++) {
            const float g = ld(dout, r * C + c) * ld(w, c);
            gsum += g;
            gxsum += g * (ld(inp, r * C + c) - mu) * rs;
        }
        gsum /= (float)C;
        gxsum /= (float)C;
        for (int c = 0; c < C; c++) {
            const float xhat = (ld(inp, r * C + c) - mu) * rs;
            const float dx = rs * (ld(dout, r * C + c) * ld(w, c) - gsum - xhat * gxsum);
            st(dinp, r * C + c, ld(dinp, r * C + c) + dx);
        }
    }
}

/* ----------------------------------------------------------------------------------------------
 * Element-wise */
void gelu_forward(floatX *out, const floatX *inp, size_t n, cudaStream_t) {
    dev16(out, n, "gelu out");
    dev16(inp, n, "gelu inp");
    for (size_t i = 0; i < n; i++) st(out, i, gelu_tanhf(ld(inp, i)));
}

void gelu_backward_inplace(floatX *d, const floatX *inp, size_t n, cudaStream_t) {
    dev16(d, n, "gelu d");
    dev16(inp, n, "gelu inp");
    for (size_t i = 0; i < n; i++) st(d, i, ld(d, i) * gelu_tanh_gradf(ld(inp, i)));
}

void residual_forward(floatX *out, const floatX *a, const floatX *b, size_t n, cudaStream_t) {
    dev16(out, n, "residual out");
    dev16(a, n, "residual a");
    dev16(b, n, "residual b");
    for (size_t i = 0; i < n; i++) st(out, i, ld(a, i) + ld(b, i));
}

void residual_accumulate(floatX *d, const floatX *x, size_t n, cudaStream_t s) { residual_forward(d, d, x, n, s); }

void add_bias(floatX *out, const floatX *bias, size_t N, int OC, cudaStream_t) {
    dev(out, N * (size_t)OC, "add_bias out");
    dev(bias, (size_t)OC, "add_bias bias");
    for (size_t i = 0; i < N * (size_t)OC; i++) st(out, i, ld(out, i) + ld(bias, i % (size_t)OC));
}

void cast_f32_to_bf16(floatX *dst, const float *src, size_t n, cudaStream_t) {
    dev(dst, n, "cast dst");
    dev(src, n, "cast src");
    for (size_t i = 0; i < n; i++) st(dst, i, src[i]);
}

void cast_bf16_to_f32(float *dst, const floatX *src, size_t n, cudaStream_t) {
    dev(dst, n, "cast dst");
    dev(src, n, "cast src");
    for (size_t i = 0; i < n; i++) dst[i] = ld(src, i);
}

/* ----------------------------------------------------------------------------------------------
 * Classifier, optimizer, norm */
void fused_classifier(floatX *logits, float *losses_acc, const int *targets, float dloss, size_t N, int V, int Vp,
                      bool write_dlogits, cudaStream_t) {
    dev16(logits, N * (size_t)Vp, "logits");
    dev(losses_acc, N, "losses");
    dev(targets, N, "targets");
#pragma omp parallel for schedule(static)
    for (size_t r = 0; r < N; r++) {
        floatX *z = logits + r * (size_t)Vp;
        const int target = targets[r];
        float m = -INFINITY, s = 0.0f;
        for (int v = 0; v < V; v++) m = fmaxf(m, ld(z, v));
        for (int v = 0; v < V; v++) s += expf(ld(z, v) - m);
        const float lse = m + logf(s);
        if (target >= 0) losses_acc[r] += lse - ld(z, target);
        if (write_dlogits)
            for (int v = 0; v < Vp; v++)
                st(z, v, v < V ? (expf(ld(z, v) - lse) - (v == target ? 1.0f : 0.0f)) * dloss : 0.0f);
    }
}

/* the kernel's body (llmc/cuda/adamw.h adamw_element): the same update and rounding bits */
void adamw_update(floatX *params, float *master, const floatX *grads, float *m, float *v, size_t global_off,
                  size_t shard_off, size_t count, const AdamWArgs *a, cudaStream_t) {
    dev(params, global_off + count, "parameters");
    dev(grads, global_off + count, "gradients");
    dev(m, shard_off + count, "AdamW m");
    dev(v, shard_off + count, "AdamW v");
    if (master != NULL) dev(master, shard_off + count, "master weights");
    for (size_t i = 0; i < count; i++) {
        const size_t gi = global_off + i, si = shard_off + i;
        float p = master != NULL ? master[si] : ld(params, gi);
        raw(params)[gi] = adamw_element(a, ld(grads, gi), &m[si], &v[si], &p, (uint64_t)gi);
        if (master != NULL) master[si] = p;
    }
}

void norm_squared_partial(float *partials, const floatX *g, size_t n, cudaStream_t) {
    dev(partials, NORM_BLOCKS, "norm partials");
    dev(g, n, "norm input");
    for (int b = 0; b < NORM_BLOCKS; b++) partials[b] = 0.0f;
    for (size_t i = 0; i < n; i++) partials[i % NORM_BLOCKS] += ld(g, i) * ld(g, i);
}

void sum_partials(float *out, const float *partials, size_t count, bool accumulate, cudaStream_t) {
    dev(partials, count, "partials");
    dev(out, 1, "sum");
    float s = 0.0f;
    for (size_t i = 0; i < count; i++) s += partials[i];
    out[0] = (accumulate ? out[0] : 0.0f) + s;
}

/* ----------------------------------------------------------------------------------------------
 * A GemmDesc (llmc/scalar_math.h) with cuBLAS's column-major strided-batched semantics on bf16
 * operands, fp32 sums: into fp32 C (Cf) or bf16 C rounded once (Cb). */
static void gemm_desc_run(const GemmDesc *g, const floatX *A, const floatX *Bm, float *Cf, floatX *Cb) {
#pragma omp parallel for collapse(2) schedule(static)
    for (int b = 0; b < g->batch; b++)
        for (int j = 0; j < g->n; j++)
            for (int i = 0; i < g->m; i++) {
                float s = 0.0f;
                for (int p = 0; p < g->k; p++) {
                    const float a = g->transa ? ld(A, b * g->strideA + p + (long long)i * g->lda)
                                              : ld(A, b * g->strideA + i + (long long)p * g->lda);
                    const float x = g->transb ? ld(Bm, b * g->strideB + j + (long long)p * g->ldb)
                                              : ld(Bm, b * g->strideB + p + (long long)j * g->ldb);
                    s += a * x;
                }
                const size_t c = (size_t)(b * g->strideC + i + (long long)j * g->ldc);
                if (Cf != NULL) Cf[c] = s;
                else st(Cb, c, s);
            }
}

/* ----------------------------------------------------------------------------------------------
 * Own softmax attention: llmc/attention/own.cu's sequence (llmc/attention/own_seq.h) with CPU
 * primitives; the split/merge and softmax loops do what the kernels of llmc/attention/own.cu do. */
static void own_split(const GpuCtx *, floatX *dst, const floatX *src, size_t row_stride, int B, int T, int h, int d) {
    for (int b = 0; b < B; b++)
        for (int k = 0; k < h; k++)
            for (int t = 0; t < T; t++)
                memcpy(dst + (((size_t)b * h + k) * T + t) * d, src + ((size_t)b * T + t) * row_stride + (size_t)k * d,
                       (size_t)d * sizeof(floatX));
}

static void own_merge(const GpuCtx *, floatX *dst, size_t row_stride, const floatX *src, int B, int T, int h, int d) {
    for (int b = 0; b < B; b++)
        for (int k = 0; k < h; k++)
            for (int t = 0; t < T; t++)
                memcpy(dst + ((size_t)b * T + t) * row_stride + (size_t)k * d, src + (((size_t)b * h + k) * T + t) * d,
                       (size_t)d * sizeof(floatX));
}

static void own_gemm_host(const GpuCtx *, const GemmDesc *g, const floatX *A, const floatX *Bm, floatX *C) {
    gemm_desc_run(g, A, Bm, NULL, C);
}

static void own_softmax_forward(const GpuCtx *, floatX *att, size_t rows, int T, float scale) {
    for (size_t r = 0; r < rows; r++) {
        floatX *row = att + r * (size_t)T;
        const int t = (int)(r % (size_t)T);
        float m = -INFINITY, sum = 0.0f;
        for (int j = 0; j <= t; j++) m = fmaxf(m, scale * ld(row, j));
        for (int j = 0; j <= t; j++) sum += expf(scale * ld(row, j) - m);
        for (int j = 0; j < T; j++) st(row, j, j <= t ? expf(scale * ld(row, j) - m) / sum : 0.0f);
    }
}

static void own_softmax_backward(const GpuCtx *, floatX *datt, const floatX *att, size_t rows, int T, float scale) {
    for (size_t r = 0; r < rows; r++) {
        floatX *drow = datt + r * (size_t)T;
        const floatX *prow = att + r * (size_t)T;
        const int t = (int)(r % (size_t)T);
        float dot = 0.0f;
        for (int j = 0; j <= t; j++) dot += ld(prow, j) * ld(drow, j);
        for (int j = 0; j < T; j++) st(drow, j, j <= t ? scale * ld(prow, j) * (ld(drow, j) - dot) : 0.0f);
    }
}

static const OwnAttnOps HOST_OPS = {own_split, own_merge, own_gemm_host, own_softmax_forward, own_softmax_backward};

void attention_own_forward(floatX *out, floatX *att, floatX *scratch, const floatX *qkv, int B, int T, int h, int d,
                           const GpuCtx *ctx) {
    const size_t n = (size_t)B * T * h * d;
    dev(qkv, 3 * n, "qkv");
    dev(out, n, "attention out");
    dev(att, (size_t)B * h * T * T, "att");
    dev(scratch, 4 * n, "attention scratch");
    own_attention_forward_seq(&HOST_OPS, ctx, out, att, scratch, qkv, B, T, h, d);
}

void attention_own_backward(floatX *dqkv, floatX *datt, floatX *scratch, const floatX *dout, const floatX *qkv,
                            const floatX *att, int B, int T, int h, int d, const GpuCtx *ctx) {
    const size_t n = (size_t)B * T * h * d;
    dev(dqkv, 3 * n, "dqkv");
    dev(datt, (size_t)B * h * T * T, "datt");
    dev(scratch, 7 * n, "attention scratch");
    dev(dout, n, "attention dout");
    dev(qkv, 3 * n, "qkv");
    dev(att, (size_t)B * h * T * T, "att");
    own_attention_backward_seq(&HOST_OPS, ctx, dqkv, datt, scratch, dout, qkv, att, B, T, h, d);
}

/* ----------------------------------------------------------------------------------------------
 * Flash attention: llmc/attention/flash.h's block routines over llmc/attention/flash.cu's grids. */
void flash_delta(const FlashArgs *a, cudaStream_t) {
    for (size_t r = 0; r < (size_t)a->B * a->h * a->T; r++) flash_delta_row(a, r);
}

static FlashArgs flash_host_args(const floatX *qkv, int B, int T, int h, int d, const GpuCtx *ctx) {
    char why[256];
    const AttnEnv env = {ctx->sm, 0, 0, ctx->smem_optin};
    FlashArgs a;
    if (!flash_args_init(&a, raw(qkv), B, T, h, d, &env, why, sizeof(why))) llmc_die("flash attention: %s", why);
    return a;
}

void attention_flash_forward(floatX *out, float *lse, const floatX *qkv, int B, int T, int h, int d,
                             const GpuCtx *ctx) {
    const size_t n = (size_t)B * T * h * d;
    dev16(qkv, 3 * n, "qkv");
    dev16(out, n, "flash out");
    dev(lse, (size_t)B * h * T, "flash logsumexp");
    FlashArgs a = flash_host_args(qkv, B, T, h, d, ctx);
    a.o = raw(out);
    a.lse = lse;
    const size_t bytes = flash_smem_max(a.BLK, d);
    char *smem = (char *)xmalloc(bytes);
    const int tiles = (int)ceil_div((size_t)T, (size_t)a.BLK);
    for (int bh = 0; bh < B * h; bh++)
        for (int t = 0; t < tiles; t++) {
            memset(smem, 0xff, bytes); /* NaN: a read before a write shows */
            flash_fwd_block(&a, t, bh, smem, 0, 1);
        }
    free(smem);
}

void attention_flash_backward(floatX *dqkv, float *D, const floatX *dout, const floatX *qkv, const floatX *out,
                              const float *lse, int B, int T, int h, int d, const GpuCtx *ctx) {
    const size_t n = (size_t)B * T * h * d;
    dev16(dqkv, 3 * n, "dqkv");
    dev16(dout, n, "flash dout");
    dev16(out, n, "flash out");
    dev(D, (size_t)B * h * T, "flash D");
    FlashArgs a = flash_host_args(qkv, B, T, h, d, ctx);
    a.out = raw(out);
    a.dout = raw(dout);
    a.lse = const_cast<float *>(lse);
    a.dqkv = raw(dqkv);
    a.D = D;
    flash_delta(&a, ctx->stream);
    const size_t bytes = flash_smem_max(a.BLK, d);
    char *smem = (char *)xmalloc(bytes);
    const int tiles = (int)ceil_div((size_t)T, (size_t)a.BLK);
    for (int bh = 0; bh < B * h; bh++)
        for (int t = 0; t < tiles; t++) {
            memset(smem, 0xff, bytes);
            flash_dkdv_block(&a, t, bh, smem, 0, 1);
        }
    for (int bh = 0; bh < B * h; bh++)
        for (int t = 0; t < tiles; t++) {
            memset(smem, 0xff, bytes);
            flash_dq_block(&a, t, bh, smem, 0, 1);
        }
    free(smem);
}

/* ----------------------------------------------------------------------------------------------
 * Register-tile attention: llmc/attention/mma.h's kernels over llmc/attention/mma.cu's grids, thread by
 * thread (test/flash_mma_emul.h); the checks of llmc/attention/mma.cu's launchers. */
int attention_flash_mma_supports(int d, int training, const GpuCtx *ctx, char *why, size_t cap) {
    const AttnEnv env = {ctx->sm, 0, 0, ctx->smem_optin};
    return mma_path_supports(&env, d, training, why, cap);
}

static FlashArgs mma_host_args(const floatX *qkv, int B, int T, int h, int d, int training, const GpuCtx *ctx) {
    char why[256];
    const AttnEnv env = {ctx->sm, 0, 0, ctx->smem_optin};
    FlashArgs a;
    if (!mma_args_init(&a, raw(qkv), B, T, h, d, training, &env, why, sizeof(why)))
        llmc_die("register-tile attention: %s", why);
    return a;
}

void attention_flash_mma_forward(floatX *out, float *lse, const floatX *qkv, int B, int T, int h, int d,
                                 const GpuCtx *ctx) {
    const size_t n = (size_t)B * T * h * d;
    dev16(qkv, 3 * n, "qkv");
    dev(out, n, "mma out");
    dev(lse, (size_t)B * h * T, "mma logsumexp");
    FlashArgs a = mma_host_args(qkv, B, T, h, d, 0, ctx);
    a.o = raw(out);
    a.lse = lse;
    fmma_emulate(&a, FMMA_FWD);
}

void attention_flash_mma_backward(floatX *dqkv, float *D, const floatX *dout, const floatX *qkv, const floatX *out,
                                  const float *lse, int B, int T, int h, int d, const GpuCtx *ctx) {
    const size_t n = (size_t)B * T * h * d;
    dev(dqkv, 3 * n, "dqkv");
    dev16(dout, n, "mma dout");
    dev16(out, n, "mma out");
    dev(D, (size_t)B * h * T, "mma D");
    FlashArgs a = mma_host_args(qkv, B, T, h, d, 1, ctx);
    a.out = raw(out);
    a.dout = raw(dout);
    a.lse = const_cast<float *>(lse);
    a.dqkv = raw(dqkv);
    a.D = D;
    flash_delta(&a, ctx->stream);
    fmma_emulate_backward(&a);
}

/* ----------------------------------------------------------------------------------------------
 * S-D fold: sd_attention/sd_fold.h's routines over sd_attention/sd_fold.cu's grids; dL by cuBLAS's column-major
 * strided-batched semantics from sd_dl_gemm_desc (fp32 output). */
void copy_columns(floatX *dst, size_t ldd, const floatX *src, size_t lds, size_t N, int width, cudaStream_t) {
    for (size_t r = 0; r < N; r++) memcpy(dst + r * ldd, src + r * lds, (size_t)width * sizeof(floatX));
}

void sd_gpu_scatter_uv(floatX *qkv, const floatX *uv, size_t N, int A, cudaStream_t s) {
    copy_columns(qkv, 3 * (size_t)A, uv, 2 * (size_t)A, N, A, s);
    copy_columns(qkv + 2 * (size_t)A, 3 * (size_t)A, uv + A, 2 * (size_t)A, N, A, s);
}

void sd_gpu_build_generator(float *L, const floatX *skew, const floatX *theta, int h, int d, int scalar_d, int sign,
                            cudaStream_t) {
    dev(L, (size_t)h * d * d, "S-D generator");
    dev(theta, (size_t)(scalar_d ? h : h * d), "theta");
    for (int k = 0; k < h; k++)
        for (int i = 0; i < d; i++)
            for (int j = 0; j < d; j++)
                L[((size_t)k * d + i) * d + j] = sd_generator_element(raw(skew), raw(theta), k, i, j, d, scalar_d, sign);
}

static void rowmat_host(floatX *Y, size_t ldy, const floatX *X, size_t ldx, const floatX *Add, size_t ldadd,
                        const float *M, size_t N, int h, int d, int transpose) {
    SdRowmat p;
    p.Y = raw(Y);
    p.ldy = ldy;
    p.X = raw(X);
    p.ldx = ldx;
    p.Add = Add != NULL ? raw(Add) : NULL;
    p.ldadd = ldadd;
    p.M = M;
    p.N = N;
    p.d = d;
    p.transpose = transpose;
    const size_t smem = sd_rowmat_smem_floats() * sizeof(float);
    float *sm = (float *)xmalloc(smem);
    for (int k = 0; k < h; k++)
        for (size_t ab = 0; ab < ceil_div((size_t)d, SD_TA); ab++)
            for (size_t rb = 0; rb < ceil_div(N, SD_TR); rb++) {
                memset(sm, 0xff, smem); /* NaN: shared memory starts undefined in every block */
                sd_rowmat_block(&p, rb, (int)ab, k, 0, 1, sm);
            }
    free(sm);
}

void sd_gpu_fold_forward(floatX *qkv, const float *L, size_t N, int h, int d, cudaStream_t) {
    dev(qkv, N * 3 * (size_t)h * d, "qkv");
    dev(L, (size_t)h * d * d, "S-D generator");
    const size_t A = (size_t)h * d;
    rowmat_host(qkv + A, 3 * A, qkv, 3 * A, NULL, 0, L, N, h, d, 0);
}

void sd_gpu_fold_backward(floatX *duv, float *dL, const floatX *dqkv, const floatX *qkv, const float *L, size_t N,
                          int h, int d, const GpuCtx *ctx) {
    dev(duv, N * 2 * (size_t)h * d, "duv");
    dev(dL, (size_t)h * d * d, "dL");
    dev(dqkv, N * 3 * (size_t)h * d, "dqkv");
    const size_t A = (size_t)h * d;
    rowmat_host(duv, 2 * A, dqkv + A, 3 * A, dqkv, 3 * A, L, N, h, d, 1);
    copy_columns(duv + A, 2 * A, dqkv + 2 * A, 3 * A, N, (int)A, ctx->stream);
    const GemmDesc g = sd_dl_gemm_desc(N, h, d);
    gemm_desc_run(&g, qkv, dqkv + A, dL, NULL);
}

void sd_gpu_params_backward(floatX *dskew, floatX *dtheta, const float *dL, const floatX *theta, int h, int d,
                            int scalar_d, int sign, cudaStream_t) {
    for (int k = 0; k < h; k++)
        for (int i = 0; i < d; i++)
            for (int j = 0; j < d; j++)
                sd_params_backward_element(raw(dskew), raw(dtheta), dL, raw(theta), k, i, j, d, scalar_d, sign);
}

/* ----------------------------------------------------------------------------------------------
 * Linear attention: sd_attention/linear_scan.h's routines in sd_attention/linear_scan.cu's launch order. */
static LinLayer lin_host(float *scratch, int B, int T, int h, int d, int prescale, const GpuCtx *ctx) {
    LinLayer L;
    if (!lin_layer_init(&L, scratch, B, T, h, d, prescale, ctx->smem_optin))
        llmc_die("linear attention: head size %d does not fit", d);
    return L;
}

/* The steps of linear_scan.h's sequence on the CPU: the same routines over the kernels' grids. */
static void lin_scan_host(void *, const LinLayer *L, const LinScanArgs *a) {
    const size_t smem = lin_scan_smem_floats(L->d, L->shape.CH, L->shape.TY) * sizeof(float);
    float *sm = (float *)xmalloc(smem);
    for (size_t s = 0; s < (size_t)L->B * L->h; s++)
        for (size_t t = 0; t < ceil_div((size_t)L->d, (size_t)L->shape.TY); t++) {
            memset(sm, 0xff, smem); /* NaN: shared memory starts undefined in every block */
            lin_scan_block(a, s, (int)t, 0, 1, sm);
        }
    free(sm);
}

static void lin_split_host(void *, const LinLayer *L, const uint16_t *qkv) {
    for (size_t e = 0; e < (size_t)L->B * L->T * L->h * L->d; e++)
        lin_split_element(L->qf, L->kf, L->vf, qkv, e, L->T, L->h, L->d, L->c);
}

static void lin_dout_host(void *, const LinLayer *L, const uint16_t *dout) {
    for (size_t r = 0; r < (size_t)L->B * L->h * L->T; r++) lin_dout_row(L->dn, L->dg, dout, L->out, L->Z, r, L->T, L->h, L->d);
}

static void lin_merge_host(void *, const LinLayer *L, uint16_t *dst, size_t ld_, size_t col0, const float *phi) {
    for (size_t e = 0; e < (size_t)L->B * L->T * L->h * L->d; e++)
        lin_merge_element(dst, ld_, col0, L->out, phi, L->c, e, L->T, L->h, L->d);
}

static const LinOps HOST_LIN_OPS = {lin_split_host, lin_scan_host, lin_dout_host, lin_merge_host};

int linear_attention_supported(int d, const GpuCtx *ctx, char *why, size_t cap) {
    return lin_scan_supports(d, ctx->smem_optin, why, cap);
}

void linear_attention_forward(floatX *out, float *scratch, const floatX *qkv, int B, int T, int h, int d, int prescale,
                              const GpuCtx *ctx) {
    dev(scratch, lin_scratch_floats((size_t)B * T, h, d), "linear scratch");
    dev(qkv, (size_t)B * T * 3 * h * d, "qkv");
    dev(out, (size_t)B * T * h * d, "linear out");
    const LinLayer L = lin_host(scratch, B, T, h, d, prescale, ctx);
    lin_forward_seq(&HOST_LIN_OPS, NULL, &L, raw(out), raw(qkv));
}

void linear_attention_backward(floatX *dqkv, float *scratch, const floatX *dout, const floatX *qkv, int B, int T, int h,
                               int d, int prescale, const GpuCtx *ctx) {
    dev(scratch, lin_scratch_floats((size_t)B * T, h, d), "linear scratch");
    dev(dqkv, (size_t)B * T * 3 * h * d, "dqkv");
    dev(dout, (size_t)B * T * h * d, "linear dout");
    const LinLayer L = lin_host(scratch, B, T, h, d, prescale, ctx);
    lin_backward_seq(&HOST_LIN_OPS, NULL, &L, raw(dqkv), raw(dout), raw(qkv));
}
