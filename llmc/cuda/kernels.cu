/*
 * llmc/cuda/kernels.cu: the memory-bound kernels of the GPU model (declared in kernels.cuh).
 *
 * Conventions: bf16 storage, fp32 arithmetic; one warp per token row for row-wise work
 * (LayerNorm, softmax-like reductions), 16-byte packs (8 bf16) wherever the width is a multiple
 * of 8; every reduction has a fixed shape (fixed grid, fixed per-thread order, butterfly warp
 * sums whose result is identical in every lane), so results do not depend on scheduling.
 */
#include <math.h>

#include "adamw.h"
#include "kernels.cuh"

#define ROWS_PER_BLOCK 8 /* warps per 256-thread block, one row each */

/* 8 LayerNorm parameters from the parameter buffer. Activations are always 16-byte aligned, but a
 * parameter tensor is only when every slot before it has a multiple of 8 elements: a layer table
 * with sum_l 3 A_l (or 2 A_l for S-D layers) not divisible by 8 shifts ln2w, ln2b, lnfw, lnfb
 * (everything after qkvb) to 2-, 4- or 8-byte alignment, where a 16-byte load faults with
 * "misaligned address". The test is uniform over the warp (c is a multiple of 8). */
__device__ __forceinline__ Pack128<floatX> load128_param(const floatX *p) {
    if (((uintptr_t)p & 15u) == 0) return load128(p);
    Pack128<floatX> r;
    for (int k = 0; k < 8; k++) r.v[k] = p[k];
    return r;
}

/* ----------------------------------------------------------------------------------------------
 * Encoder: out = scale (wte[token] + wpe[t]), scale the model's input scale F (-emb_scale; 1 is
 * exact). The gradients are scale times the sums of dout. */
__global__ void encoder_forward_kernel(floatX *out, const int *tokens, const floatX *wte,
                                       const floatX *wpe, size_t N, int T, int C, float scale) {
    const size_t i = ((size_t)blockIdx.x * blockDim.x + threadIdx.x) * 8;
    if (i >= N * (size_t)C) return;
    const size_t bt = i / (size_t)C;
    const int c = (int)(i % (size_t)C);
    const int t = (int)(bt % (size_t)T);
    const Pack128<floatX> we = load128(wte + (size_t)tokens[bt] * C + c);
    const Pack128<floatX> pe = load128(wpe + (size_t)t * C + c);
    Pack128<floatX> o;
    for (int k = 0; k < 8; k++) o.v[k] = to_bf((bf(we.v[k]) + bf(pe.v[k])) * scale);
    store128(out + i, o);
}

void encoder_forward(floatX *out, const int *tokens, const floatX *wte, const floatX *wpe, int B,
                     int T, int C, float scale, cudaStream_t stream) {
    const size_t N = (size_t)B * T;
    const size_t threads = N * C / 8;
    encoder_forward_kernel<<<(unsigned)ceil_div(threads, 256), 256, 0, stream>>>(out, tokens, wte, wpe, N, T, C,
                                                                                 scale);
    CUDA_CHECK_LAUNCH();
}

/* One block per (distinct token, 256-channel chunk); 32 threads x 8 channels. The positions of
 * the token are summed in increasing order. */
__global__ void encoder_backward_wte_kernel(floatX *dwte, const floatX *dout, const int *uniq,
                                            const int *start, const int *pos, int C, float scale) {
    const int u = blockIdx.x;
    const int c = (blockIdx.y * blockDim.x + threadIdx.x) * 8;
    if (c >= C) return;
    float acc[8] = {0, 0, 0, 0, 0, 0, 0, 0};
    for (int p = start[u]; p < start[u + 1]; p++) {
        const Pack128<floatX> d = load128(dout + (size_t)pos[p] * C + c);
        for (int k = 0; k < 8; k++) acc[k] += bf(d.v[k]);
    }
    floatX *g = dwte + (size_t)uniq[u] * C + c;
    Pack128<floatX> old = load128(g);
    for (int k = 0; k < 8; k++) old.v[k] = to_bf(bf(old.v[k]) + acc[k] * scale);
    store128(g, old);
}

/* One thread per (t, 8 channels): sum over b in order. */
__global__ void encoder_backward_wpe_kernel(floatX *dwpe, const floatX *dout, int B, int T, int C, float scale) {
    const size_t i = ((size_t)blockIdx.x * blockDim.x + threadIdx.x) * 8;
    if (i >= (size_t)T * C) return;
    float acc[8] = {0, 0, 0, 0, 0, 0, 0, 0};
    for (int b = 0; b < B; b++) {
        const Pack128<floatX> d = load128(dout + (size_t)b * T * C + i);
        for (int k = 0; k < 8; k++) acc[k] += bf(d.v[k]);
    }
    Pack128<floatX> old = load128(dwpe + i);
    for (int k = 0; k < 8; k++) old.v[k] = to_bf(bf(old.v[k]) + acc[k] * scale);
    store128(dwpe + i, old);
}

void encoder_backward(floatX *dwte, floatX *dwpe, const floatX *dout, const int *uniq,
                      const int *start, const int *pos, int U, int B, int T, int C, float scale,
                      cudaStream_t stream) {
    if (U > 0) {
        dim3 grid((unsigned)U, (unsigned)ceil_div((size_t)C, 256));
        encoder_backward_wte_kernel<<<grid, 32, 0, stream>>>(dwte, dout, uniq, start, pos, C, scale);
        CUDA_CHECK_LAUNCH();
    }
    const size_t threads = (size_t)T * C / 8;
    encoder_backward_wpe_kernel<<<(unsigned)ceil_div(threads, 256), 256, 0, stream>>>(dwpe, dout, B, T, C, scale);
    CUDA_CHECK_LAUNCH();
}

/* ----------------------------------------------------------------------------------------------
 * LayerNorm (eps 1e-5, as the CPU model and PyTorch). */
__device__ __forceinline__ float ln_out(float x, float mean, float rstd, float w, float b) {
    return (x - mean) * rstd * w + b;
}

/* Mean and rstd of one row from its bf16 values; two passes (the row stays in L1). */
__device__ __forceinline__ void row_stats(const floatX *x, int C, int lane, float *mean, float *rstd) {
    float sum = 0.0f;
    for (int c = lane * 8; c < C; c += 256) {
        const Pack128<floatX> p = load128(x + c);
        for (int k = 0; k < 8; k++) sum += bf(p.v[k]);
    }
    const float mu = warp_sum(sum) / (float)C;
    float var = 0.0f;
    for (int c = lane * 8; c < C; c += 256) {
        const Pack128<floatX> p = load128(x + c);
        for (int k = 0; k < 8; k++) {
            const float d = bf(p.v[k]) - mu;
            var += d * d;
        }
    }
    *mean = mu;
    *rstd = rsqrtf(warp_sum(var) / (float)C + 1e-5f);
}

__device__ __forceinline__ void row_normalize(floatX *out, const floatX *x, const floatX *w,
                                              const floatX *b, int C, int lane, float mu, float rs) {
    for (int c = lane * 8; c < C; c += 256) {
        const Pack128<floatX> p = load128(x + c), pw = load128_param(w + c), pb = load128_param(b + c);
        Pack128<floatX> o;
        for (int k = 0; k < 8; k++) o.v[k] = to_bf(ln_out(bf(p.v[k]), mu, rs, bf(pw.v[k]), bf(pb.v[k])));
        store128(out + c, o);
    }
}

/* One row by one warp: out = LN(x), and the row's mean and rstd for the backward. */
__device__ __forceinline__ void layernorm_row(floatX *out, float *mean, float *rstd, const floatX *x,
                                              const floatX *w, const floatX *b, int C, int lane) {
    float mu, rs;
    row_stats(x, C, lane, &mu, &rs);
    row_normalize(out, x, w, b, C, lane, mu, rs);
    if (lane == 0) {
        *mean = mu;
        *rstd = rs;
    }
}

__global__ void layernorm_forward_kernel(floatX *out, float *mean, float *rstd, const floatX *inp,
                                         const floatX *w, const floatX *b, size_t N, int C) {
    const size_t row = (size_t)blockIdx.x * ROWS_PER_BLOCK + threadIdx.x / 32;
    const int lane = threadIdx.x % 32;
    if (row >= N) return;
    layernorm_row(out + row * C, mean + row, rstd + row, inp + row * C, w, b, C, lane);
}

__global__ void fused_residual_layernorm_kernel(floatX *residual, floatX *out, float *mean,
                                                float *rstd, const floatX *a, const floatX *bb,
                                                const floatX *w, const floatX *b, size_t N, int C) {
    const size_t row = (size_t)blockIdx.x * ROWS_PER_BLOCK + threadIdx.x / 32;
    const int lane = threadIdx.x % 32;
    if (row >= N) return;
    floatX *r = residual + row * C;
    for (int c = lane * 8; c < C; c += 256) {
        const Pack128<floatX> pa = load128(a + row * C + c), pb = load128(bb + row * C + c);
        Pack128<floatX> o;
        for (int k = 0; k < 8; k++) o.v[k] = to_bf(bf(pa.v[k]) + bf(pb.v[k]));
        store128(r + c, o);
    }
    /* the statistics are those of the stored (rounded) residual, which the backward reads */
    layernorm_row(out + row * C, mean + row, rstd + row, r, w, b, C, lane);
}

__global__ void layernorm_apply_kernel(floatX *out, const floatX *inp, const float *mean,
                                       const float *rstd, const floatX *w, const floatX *b, size_t N,
                                       int C) {
    const size_t i = ((size_t)blockIdx.x * blockDim.x + threadIdx.x) * 8;
    if (i >= N * (size_t)C) return;
    const size_t row = i / (size_t)C;
    const int c = (int)(i % (size_t)C);
    const Pack128<floatX> p = load128(inp + i), pw = load128_param(w + c), pb = load128_param(b + c);
    Pack128<floatX> o;
    for (int k = 0; k < 8; k++) o.v[k] = to_bf(ln_out(bf(p.v[k]), mean[row], rstd[row], bf(pw.v[k]), bf(pb.v[k])));
    store128(out + i, o);
}

void layernorm_forward(floatX *out, float *mean, float *rstd, const floatX *inp, const floatX *w,
                       const floatX *b, size_t N, int C, cudaStream_t stream) {
    layernorm_forward_kernel<<<(unsigned)ceil_div(N, ROWS_PER_BLOCK), 256, 0, stream>>>(out, mean, rstd, inp, w, b, N, C);
    CUDA_CHECK_LAUNCH();
}

void fused_residual_layernorm_forward(floatX *residual, floatX *out, float *mean, float *rstd,
                                      const floatX *a, const floatX *b, const floatX *w,
                                      const floatX *bias, size_t N, int C, cudaStream_t stream) {
    fused_residual_layernorm_kernel<<<(unsigned)ceil_div(N, ROWS_PER_BLOCK), 256, 0, stream>>>(
        residual, out, mean, rstd, a, b, w, bias, N, C);
    CUDA_CHECK_LAUNCH();
}

void layernorm_apply(floatX *out, const floatX *inp, const float *mean, const float *rstd,
                     const floatX *w, const floatX *b, size_t N, int C, cudaStream_t stream) {
    const size_t threads = N * C / 8;
    layernorm_apply_kernel<<<(unsigned)ceil_div(threads, 256), 256, 0, stream>>>(out, inp, mean, rstd, w, b, N, C);
    CUDA_CHECK_LAUNCH();
}

/* dinp += rstd (g - mean(g) - xhat mean(g xhat)),  g = dout w  (one warp per row). */
__global__ void layernorm_backward_dx_kernel(floatX *dinp, const floatX *dout, const floatX *inp,
                                             const floatX *w, const float *mean, const float *rstd,
                                             size_t N, int C) {
    const size_t row = (size_t)blockIdx.x * ROWS_PER_BLOCK + threadIdx.x / 32;
    const int lane = threadIdx.x % 32;
    if (row >= N) return;
    const floatX *d = dout + row * C, *x = inp + row * C;
    const float mu = mean[row], rs = rstd[row];
    float gsum = 0.0f, gxsum = 0.0f;
    for (int c = lane * 8; c < C; c += 256) {
        const Pack128<floatX> pd = load128(d + c), px = load128(x + c), pw = load128_param(w + c);
        for (int k = 0; k < 8; k++) {
            const float g = bf(pd.v[k]) * bf(pw.v[k]);
            gsum += g;
            gxsum += g * (bf(px.v[k]) - mu) * rs;
        }
    }
    gsum = warp_sum(gsum) / (float)C;
    gxsum = warp_sum(gxsum) / (float)C;
    floatX *o = dinp + row * C;
    for (int c = lane * 8; c < C; c += 256) {
        const Pack128<floatX> pd = load128(d + c), px = load128(x + c), pw = load128_param(w + c);
        Pack128<floatX> po = load128(o + c);
        for (int k = 0; k < 8; k++) {
            const float xhat = (bf(px.v[k]) - mu) * rs;
            const float dx = rs * (bf(pd.v[k]) * bf(pw.v[k]) - gsum - xhat * gxsum);
            po.v[k] = to_bf(bf(po.v[k]) + dx);
        }
        store128(o + c, po);
    }
}

/* ----------------------------------------------------------------------------------------------
 * Column sums (bias gradients, LayerNorm weight/bias gradients), deterministic in two stages:
 *   1. block (cx, chunk) of 32 x 8 threads sums COLSUM_ROWS rows of its columns: thread (x, y)
 *      takes rows y, y+8, ... in order, then the 8 partial rows are added in order of y;
 *   2. one thread per column adds the chunk partials in chunk order to the bf16 gradient.
 * VEC = 8 columns per thread (16-byte loads) when the width allows, else 1. */
#define COLSUM_ROWS 128
#define COLSUM_Y 8

size_t colsum_scratch_floats(size_t N, int width) {
    return 2 * ceil_div(N, COLSUM_ROWS) * (size_t)width;
}

/* LN = false: partial[chunk][c] = sum dout.   LN = true: also dout * xhat into partial2. */
template <int VEC, bool LN>
__global__ void colsum_partial_kernel(float *partial, float *partial2, const floatX *dout,
                                      const floatX *inp, const float *mean, const float *rstd,
                                      size_t N, int width) {
    __shared__ float sh[COLSUM_Y][32 * VEC];
    __shared__ float sh2[LN ? COLSUM_Y : 1][LN ? 32 * VEC : 1];
    const int c = (blockIdx.x * 32 + threadIdx.x) * VEC;
    const size_t chunk = blockIdx.y;
    const size_t r0 = chunk * COLSUM_ROWS;
    const size_t r1 = r0 + COLSUM_ROWS < N ? r0 + COLSUM_ROWS : N;
    float acc[VEC], acc2[VEC];
    for (int k = 0; k < VEC; k++) acc[k] = acc2[k] = 0.0f;
    if (c < width) {
        for (size_t r = r0 + threadIdx.y; r < r1; r += COLSUM_Y) {
            const floatX *d = dout + r * (size_t)width + c;
            if (VEC == 8) {
                const Pack128<floatX> pd = load128(d);
                if (LN) {
                    const Pack128<floatX> px = load128(inp + r * (size_t)width + c);
                    for (int k = 0; k < VEC; k++) {
                        acc[k] += bf(pd.v[k]);
                        acc2[k] += bf(pd.v[k]) * (bf(px.v[k]) - mean[r]) * rstd[r];
                    }
                } else {
                    for (int k = 0; k < VEC; k++) acc[k] += bf(pd.v[k]);
                }
            } else {
                acc[0] += bf(d[0]);
                if (LN) acc2[0] += bf(d[0]) * (bf(inp[r * (size_t)width + c]) - mean[r]) * rstd[r];
            }
        }
    }
    for (int k = 0; k < VEC; k++) {
        sh[threadIdx.y][threadIdx.x * VEC + k] = acc[k];
        if (LN) sh2[threadIdx.y][threadIdx.x * VEC + k] = acc2[k];
    }
    __syncthreads();
    if (threadIdx.y == 0 && c < width) {
        for (int k = 0; k < VEC && c + k < width; k++) {
            float s = 0.0f, s2 = 0.0f;
            for (int y = 0; y < COLSUM_Y; y++) {
                s += sh[y][threadIdx.x * VEC + k];
                if (LN) s2 += sh2[y][threadIdx.x * VEC + k];
            }
            partial[chunk * width + c + k] = s;
            if (LN) partial2[chunk * width + c + k] = s2;
        }
    }
}

__global__ void colsum_finalize_kernel(floatX *grad, const float *partial, size_t nchunks, int width) {
    const int c = blockIdx.x * blockDim.x + threadIdx.x;
    if (c >= width) return;
    float s = 0.0f;
    for (size_t k = 0; k < nchunks; k++) s += partial[k * width + c];
    grad[c] = to_bf(bf(grad[c]) + s);
}

static void colsum(floatX *grad, floatX *grad2, float *scratch, const floatX *dout, const floatX *inp,
                   const float *mean, const float *rstd, size_t N, int width, cudaStream_t stream) {
    const size_t nchunks = ceil_div(N, COLSUM_ROWS);
    float *partial = scratch, *partial2 = scratch + nchunks * (size_t)width;
    const bool ln = grad2 != NULL;
    const bool vec = width % 8 == 0 && ((uintptr_t)dout % 16 == 0);
    const dim3 block(32, COLSUM_Y);
    const dim3 grid((unsigned)ceil_div((size_t)width, 32 * (vec ? 8 : 1)), (unsigned)nchunks);
    if (vec && ln) colsum_partial_kernel<8, true><<<grid, block, 0, stream>>>(partial, partial2, dout, inp, mean, rstd, N, width);
    else if (vec) colsum_partial_kernel<8, false><<<grid, block, 0, stream>>>(partial, partial2, dout, inp, mean, rstd, N, width);
    else if (ln) colsum_partial_kernel<1, true><<<grid, block, 0, stream>>>(partial, partial2, dout, inp, mean, rstd, N, width);
    else colsum_partial_kernel<1, false><<<grid, block, 0, stream>>>(partial, partial2, dout, inp, mean, rstd, N, width);
    CUDA_CHECK_LAUNCH();
    /* LN: partial = sum dout -> db, partial2 = sum dout * xhat -> dw */
    colsum_finalize_kernel<<<(unsigned)ceil_div((size_t)width, 256), 256, 0, stream>>>(grad, partial, nchunks, width);
    CUDA_CHECK_LAUNCH();
    if (ln) {
        colsum_finalize_kernel<<<(unsigned)ceil_div((size_t)width, 256), 256, 0, stream>>>(grad2, partial2, nchunks, width);
        CUDA_CHECK_LAUNCH();
    }
}

void bias_backward(floatX *db, const floatX *dout, float *scratch, size_t N, int OC, cudaStream_t stream) {
    colsum(db, NULL, scratch, dout, NULL, NULL, NULL, N, OC, stream);
}

void layernorm_backward(floatX *dinp, floatX *dw, floatX *db, float *scratch, const floatX *dout,
                        const floatX *inp, const floatX *w, const float *mean, const float *rstd,
                        size_t N, int C, cudaStream_t stream) {
    /* parameter gradients first: they read dout, inp, mean, rstd; the dx kernel only adds to dinp */
    colsum(db, dw, scratch, dout, inp, mean, rstd, N, C, stream);
    layernorm_backward_dx_kernel<<<(unsigned)ceil_div(N, ROWS_PER_BLOCK), 256, 0, stream>>>(dinp, dout, inp, w, mean, rstd, N, C);
    CUDA_CHECK_LAUNCH();
}

/* ----------------------------------------------------------------------------------------------
 * GELU, tanh approximation (llmc/scalar_math.h gelu_tanhf, gelu_tanh_gradf: the CPU model's formula). */
__global__ void gelu_forward_kernel(floatX *out, const floatX *inp, size_t n) {
    const size_t i = ((size_t)blockIdx.x * blockDim.x + threadIdx.x) * 8;
    if (i >= n) return;
    const Pack128<floatX> p = load128(inp + i);
    Pack128<floatX> o;
    for (int k = 0; k < 8; k++) o.v[k] = to_bf(gelu_tanhf(bf(p.v[k])));
    store128(out + i, o);
}

__global__ void gelu_backward_kernel(floatX *d, const floatX *inp, size_t n) {
    const size_t i = ((size_t)blockIdx.x * blockDim.x + threadIdx.x) * 8;
    if (i >= n) return;
    const Pack128<floatX> p = load128(inp + i);
    Pack128<floatX> g = load128(d + i);
    for (int k = 0; k < 8; k++) g.v[k] = to_bf(bf(g.v[k]) * gelu_tanh_gradf(bf(p.v[k])));
    store128(d + i, g);
}

void gelu_forward(floatX *out, const floatX *inp, size_t n, cudaStream_t stream) {
    gelu_forward_kernel<<<(unsigned)ceil_div(n / 8, 256), 256, 0, stream>>>(out, inp, n);
    CUDA_CHECK_LAUNCH();
}

void gelu_backward_inplace(floatX *d, const floatX *inp, size_t n, cudaStream_t stream) {
    gelu_backward_kernel<<<(unsigned)ceil_div(n / 8, 256), 256, 0, stream>>>(d, inp, n);
    CUDA_CHECK_LAUNCH();
}

/* ----------------------------------------------------------------------------------------------
 * Residual adds without a LayerNorm (-ln 0). residual_forward may run in place (out == a). */
__global__ void residual_add_kernel(floatX *out, const floatX *a, const floatX *b, size_t n) {
    const size_t i = ((size_t)blockIdx.x * blockDim.x + threadIdx.x) * 8;
    if (i >= n) return;
    const Pack128<floatX> pa = load128(a + i), pb = load128(b + i);
    Pack128<floatX> o;
    for (int k = 0; k < 8; k++) o.v[k] = to_bf(bf(pa.v[k]) + bf(pb.v[k]));
    store128(out + i, o);
}

void residual_forward(floatX *out, const floatX *a, const floatX *b, size_t n, cudaStream_t stream) {
    residual_add_kernel<<<(unsigned)ceil_div(n / 8, 256), 256, 0, stream>>>(out, a, b, n);
    CUDA_CHECK_LAUNCH();
}

void residual_accumulate(floatX *d, const floatX *x, size_t n, cudaStream_t stream) {
    residual_forward(d, d, x, n, stream);
}

/* out (N, OC) += bias, element by element: any OC, any bias alignment (matmul.cu's fallback for
 * a bias that cuBLASLt's epilogue cannot take). */
__global__ void add_bias_kernel(floatX *out, const floatX *bias, size_t N, int OC) {
    const size_t total = N * (size_t)OC;
    for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < total; i += (size_t)gridDim.x * blockDim.x)
        out[i] = to_bf(bf(out[i]) + bf(bias[i % (size_t)OC]));
}

void add_bias(floatX *out, const floatX *bias, size_t N, int OC, cudaStream_t stream) {
    const size_t total = N * (size_t)OC;
    if (total == 0) return;
    add_bias_kernel<<<grid_stride_blocks(total, 256), 256, 0, stream>>>(out, bias, N, OC);
    CUDA_CHECK_LAUNCH();
}

/* ----------------------------------------------------------------------------------------------
 * Fused classifier: one 512-thread block per row; the row's normalizer by the online softmax
 * (SoftmaxAcc, cuda_common.cuh), per lane, then per warp, then over the warps. */
#define CLS_THREADS 512

template <bool WriteGrad>
__global__ void fused_classifier_kernel(floatX *logits, float *losses_acc, const int *targets,
                                        float dloss, int V, int Vp) {
    __shared__ SoftmaxAcc sh[CLS_THREADS / 32];
    const size_t row = blockIdx.x;
    floatX *z = logits + row * (size_t)Vp;
    /* target -1: an unscored position (evaluation batches): no loss, no gradient */
    const int target = targets[row];
    const float z_target = target >= 0 ? bf(z[target]) : 0.0f; /* read before the barrier below */
    SoftmaxAcc acc = {-INFINITY, 0.0f};
    for (int i = threadIdx.x * 8; i < V; i += CLS_THREADS * 8) {
        const Pack128<floatX> p = load128(z + i);
        for (int k = 0; k < 8 && i + k < V; k++) acc = softmax_acc_push(acc, bf(p.v[k]));
    }
    acc = warp_softmax_acc(acc);
    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
    if (lane == 0) sh[warp] = acc;
    __syncthreads();
    SoftmaxAcc all = {-INFINITY, 0.0f};
    if (lane < CLS_THREADS / 32) all = sh[lane];
    all = warp_softmax_acc(all);
    const float lse = all.m + logf(all.s);
    if (threadIdx.x == 0 && target >= 0) losses_acc[row] += lse - z_target;
    if constexpr (WriteGrad) {
        for (int i = threadIdx.x * 8; i < Vp; i += CLS_THREADS * 8) {
            const Pack128<floatX> p = load128(z + i);
            Pack128<floatX> o;
            for (int k = 0; k < 8; k++) {
                const int v = i + k;
                float g = 0.0f;
                if (v < V) g = (expf(bf(p.v[k]) - lse) - (v == target ? 1.0f : 0.0f)) * dloss;
                o.v[k] = to_bf(g);
            }
            store128(z + i, o);
        }
    }
}

void fused_classifier(floatX *logits, float *losses_acc, const int *targets, float dloss, size_t N,
                      int V, int Vp, bool write_dlogits, cudaStream_t stream) {
    if (write_dlogits) fused_classifier_kernel<true><<<(unsigned)N, CLS_THREADS, 0, stream>>>(logits, losses_acc, targets, dloss, V, Vp);
    else fused_classifier_kernel<false><<<(unsigned)N, CLS_THREADS, 0, stream>>>(logits, losses_acc, targets, dloss, V, Vp);
    CUDA_CHECK_LAUNCH();
}

/* ----------------------------------------------------------------------------------------------
 * AdamW: llmc/cuda/adamw.h adamw_element per parameter (the CPU model's expression order, stochastic
 * rounding from (seed, global index)); p is the fp32 master when there is one, else the bf16
 * parameter widened. */
__global__ void adamw_kernel(floatX *params, float *master, const floatX *grads, float *m, float *v,
                             size_t global_off, size_t shard_off, size_t count, AdamWArgs a) {
    for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < count;
         i += (size_t)gridDim.x * blockDim.x) {
        const size_t gi = global_off + i, si = shard_off + i;
        float p = master != NULL ? master[si] : bf(params[gi]);
        __nv_bfloat16_raw raw;
        raw.x = adamw_element(&a, bf(grads[gi]), &m[si], &v[si], &p, (uint64_t)gi);
        if (master != NULL) master[si] = p;
        params[gi] = floatX(raw);
    }
}

void adamw_update(floatX *params, float *master, const floatX *grads, float *m, float *v,
                  size_t global_off, size_t shard_off, size_t count, const AdamWArgs *a,
                  cudaStream_t stream) {
    if (count == 0) return;
    adamw_kernel<<<grid_stride_blocks(count, 512), 512, 0, stream>>>(params, master, grads, m, v, global_off, shard_off, count, *a);
    CUDA_CHECK_LAUNCH();
}

/* ----------------------------------------------------------------------------------------------
 * Gradient norm: fixed grid of NORM_BLOCKS x 512 threads, each thread strides in a fixed order,
 * block sums in warp order. */
__device__ __forceinline__ float block_sum(float x, float *sh) {
    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, nwarps = blockDim.x / 32;
    x = warp_sum(x);
    if (lane == 0) sh[warp] = x;
    __syncthreads();
    float total = 0.0f;
    for (int w = 0; w < nwarps; w++) total += sh[w];
    return total;
}

__global__ void norm_squared_kernel(float *partials, const floatX *g, size_t n) {
    __shared__ float sh[32];
    float acc = 0.0f;
    for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x) {
        const float x = bf(g[i]);
        acc += x * x;
    }
    const float total = block_sum(acc, sh);
    if (threadIdx.x == 0) partials[blockIdx.x] = total;
}

__global__ void sum_partials_kernel(float *out, const float *partials, size_t count, int accumulate) {
    __shared__ float sh[32];
    float acc = 0.0f;
    for (size_t i = threadIdx.x; i < count; i += blockDim.x) acc += partials[i];
    const float total = block_sum(acc, sh);
    if (threadIdx.x == 0) out[0] = (accumulate ? out[0] : 0.0f) + total;
}

void norm_squared_partial(float *partials, const floatX *g, size_t n, cudaStream_t stream) {
    norm_squared_kernel<<<NORM_BLOCKS, 512, 0, stream>>>(partials, g, n);
    CUDA_CHECK_LAUNCH();
}

void sum_partials(float *out, const float *partials, size_t count, bool accumulate, cudaStream_t stream) {
    sum_partials_kernel<<<1, 1024, 0, stream>>>(out, partials, count, accumulate ? 1 : 0);
    CUDA_CHECK_LAUNCH();
}

/* ----------------------------------------------------------------------------------------------
 * Casts */
__global__ void cast_f32_bf16_kernel(floatX *dst, const float *src, size_t n) {
    for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x)
        dst[i] = to_bf(src[i]);
}

__global__ void cast_bf16_f32_kernel(float *dst, const floatX *src, size_t n) {
    for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x)
        dst[i] = bf(src[i]);
}

void cast_f32_to_bf16(floatX *dst, const float *src, size_t n, cudaStream_t stream) {
    if (n == 0) return;
    cast_f32_bf16_kernel<<<grid_stride_blocks(n, 256), 256, 0, stream>>>(dst, src, n);
    CUDA_CHECK_LAUNCH();
}

void cast_bf16_to_f32(float *dst, const floatX *src, size_t n, cudaStream_t stream) {
    if (n == 0) return;
    cast_bf16_f32_kernel<<<grid_stride_blocks(n, 256), 256, 0, stream>>>(dst, src, n);
    CUDA_CHECK_LAUNCH();
}
