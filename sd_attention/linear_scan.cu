/*
 * sd_attention/linear_scan.cu: the kernels of the GPU's ELU+1 linear attention (interface and
 * buffers in sd_attention/linear_scan.cuh). The arithmetic lives in sd_attention/linear_scan.h, shared with
 * the CPU emulation test (test/test_sd_fold_emul.c), and so is the order of the steps of a layer's
 * forward and backward (lin_forward_seq, lin_backward_seq, also run by test/host_cuda); this
 * file supplies the steps as kernels:
 *   split    (B T, 3A) bf16 -> q~, k~, v as (B, h, T, d) fp32, one thread per element
 *   scan     one block per (sequence b h + k, output tile), 256 threads, sequential over chunks
 *   dout     one thread per (sequence, t): dn, dg (a d-long dot product in fixed order)
 *   merge    (B, h, T, d) fp32 -> bf16 columns of (B T, width), times c phi' for dq, dk
 * The scan's shared memory exceeds the 48 KiB default for large d; the launcher opts in once per
 * size (gpu_allow_smem, with a static memo: every program that runs the scan drives one device per
 * process).
 */
#include <math.h>

#include "linear_scan.cuh"
#include "linear_scan.h"
#include "../llmc/utils.h"

__global__ void lin_split_kernel(float *qf, float *kf, float *vf, const uint16_t *qkv, int B, int T, int h, int d,
                                 float c) {
    const size_t total = (size_t)B * T * h * d;
    for (size_t e = (size_t)blockIdx.x * blockDim.x + threadIdx.x; e < total; e += (size_t)gridDim.x * blockDim.x)
        lin_split_element(qf, kf, vf, qkv, e, T, h, d, c);
}

__global__ void lin_dout_kernel(float *dn, float *dg, const uint16_t *dout, const float *o, const float *Z, int B,
                                int T, int h, int d) {
    const size_t rows = (size_t)B * h * T;
    for (size_t r = (size_t)blockIdx.x * blockDim.x + threadIdx.x; r < rows; r += (size_t)gridDim.x * blockDim.x)
        lin_dout_row(dn, dg, dout, o, Z, r, T, h, d);
}

__global__ void lin_merge_kernel(uint16_t *dst, size_t ld, size_t col0, const float *src, const float *phi, float c,
                                 int B, int T, int h, int d) {
    const size_t total = (size_t)B * T * h * d;
    for (size_t e = (size_t)blockIdx.x * blockDim.x + threadIdx.x; e < total; e += (size_t)gridDim.x * blockDim.x)
        lin_merge_element(dst, ld, col0, src, phi, c, e, T, h, d);
}

__global__ void __launch_bounds__(LINSCAN_THREADS) lin_scan_kernel(LinScanArgs a) {
    extern __shared__ float sm[];
    lin_scan_block(&a, blockIdx.x, (int)blockIdx.y, (int)threadIdx.x, (int)blockDim.x, sm);
}

/* ---------------------------------------------------------------------------------------------- */
static LinLayer lin_layer(float *scratch, int B, int T, int h, int d, int prescale, const GpuCtx *ctx) {
    LinLayer L;
    if (!lin_layer_init(&L, scratch, B, T, h, d, prescale, ctx->smem_optin))
        llmc_die("linear attention: head size %d does not fit this GPU's shared memory (%zu bytes)", d, ctx->smem_optin);
    return L;
}

/* The primitives of the shared sequence (linear_scan.h LinOps) on the trainer's stream. */
static void scan(void *ctx_, const LinLayer *L, const LinScanArgs *a) {
    const GpuCtx *ctx = (const GpuCtx *)ctx_;
    const dim3 grid((unsigned)((size_t)L->B * L->h), (unsigned)ceil_div((size_t)L->d, (size_t)L->shape.TY));
    static size_t opted = 0;
    gpu_allow_smem((const void *)lin_scan_kernel, L->shape.smem_bytes, &opted);
    lin_scan_kernel<<<grid, LINSCAN_THREADS, L->shape.smem_bytes, ctx->stream>>>(*a);
    CUDA_CHECK_LAUNCH();
}

static void split(void *ctx_, const LinLayer *L, const uint16_t *qkv) {
    const size_t n = (size_t)L->B * L->T * L->h * L->d;
    lin_split_kernel<<<grid_stride_blocks(n, 256), 256, 0, ((const GpuCtx *)ctx_)->stream>>>(L->qf, L->kf, L->vf, qkv,
                                                                                          L->B, L->T, L->h, L->d, L->c);
    CUDA_CHECK_LAUNCH();
}

static void dout_rows(void *ctx_, const LinLayer *L, const uint16_t *dout) {
    const size_t rows = (size_t)L->B * L->h * L->T;
    lin_dout_kernel<<<grid_stride_blocks(rows, 256), 256, 0, ((const GpuCtx *)ctx_)->stream>>>(L->dn, L->dg, dout, L->out,
                                                                                            L->Z, L->B, L->T, L->h, L->d);
    CUDA_CHECK_LAUNCH();
}

static void merge(void *ctx_, const LinLayer *L, uint16_t *dst, size_t ld, size_t col0, const float *phi) {
    const size_t n = (size_t)L->B * L->T * L->h * L->d;
    lin_merge_kernel<<<grid_stride_blocks(n, 256), 256, 0, ((const GpuCtx *)ctx_)->stream>>>(dst, ld, col0, L->out, phi,
                                                                                          L->c, L->B, L->T, L->h, L->d);
    CUDA_CHECK_LAUNCH();
}

static const LinOps CUDA_LIN_OPS = {split, scan, dout_rows, merge};

int linear_attention_supported(int d, const GpuCtx *ctx, char *why, size_t cap) {
    return lin_scan_supports(d, ctx->smem_optin, why, cap);
}

void linear_attention_forward(floatX *out, float *scratch, const floatX *qkv, int B, int T, int h, int d,
                              int prescale, const GpuCtx *ctx) {
    const LinLayer L = lin_layer(scratch, B, T, h, d, prescale, ctx);
    lin_forward_seq(&CUDA_LIN_OPS, (void *)ctx, &L, reinterpret_cast<uint16_t *>(out),
                    reinterpret_cast<const uint16_t *>(qkv));
}

void linear_attention_backward(floatX *dqkv, float *scratch, const floatX *dout, const floatX *qkv, int B,
                               int T, int h, int d, int prescale, const GpuCtx *ctx) {
    const LinLayer L = lin_layer(scratch, B, T, h, d, prescale, ctx);
    lin_backward_seq(&CUDA_LIN_OPS, (void *)ctx, &L, reinterpret_cast<uint16_t *>(dqkv),
                     reinterpret_cast<const uint16_t *>(dout), reinterpret_cast<const uint16_t *>(qkv));
}
