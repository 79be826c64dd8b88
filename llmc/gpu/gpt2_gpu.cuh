/*
 * llmc/gpu/gpt2_gpu.cuh: the GPT-2 model on the GPU with a per-layer head table (llmc/gpu/gpt2_gpu.cu).
 *
 * The CPU model (llmc/cpu/gpt2_cpu.h) is the reference this mirrors, layer by layer; the differences
 * are the GPU's: bf16 parameters, gradients and activations with fp32 master weights (-w 1),
 * fp32 LayerNorm statistics and losses; cuBLASLt matmuls; attention per layer on cuDNN or the own
 * kernels (llmc/attention/paths.h attn_select_paths), S-D layers through the fold K' = U L^T (sd_attention/sd_fold.cu)
 * into either, linear layers on the chunked scan (sd_attention/linear_scan.cu); blocks with or
 * without ln_1/ln_2 (-ln 0); optional recompute (-r) and GELU fusion (-ge);
 * ZeRO-0/1 optimizer state (llmc/cuda/zero_plan.h ShardPlan) with gradient reduction overlapped with the
 * backward (multi_gpu.h).
 *
 *   GPT2GPU               everything the model owns on the device and the host staging buffers
 *   gpt2gpu_check_shapes, gpt2gpu_choose_paths        shape limits; the attention path per layer
 *   gpt2gpu_init          sizes every buffer from the config, the training (B, T), the per-layer
 *                         attention paths and the shard plan
 *   gpt2gpu_set_params    fp32 host parameters -> bf16 device parameters (+ fp32 masters)
 *   gpt2gpu_forward       tokens -> logits; with targets the per-token losses are accumulated;
 *                         FWD_TRAIN also turns the logits into dlogits for the backward
 *   gpt2gpu_backward      accumulates gradients; on the last micro-step reduces them over ranks
 *   gpt2gpu_eval_forward  the evaluator's forward (evalloader.h EvalForwardFn, ctx = the model):
 *                         losses (and argmax) at the scored positions of one batch
 *   gpt2gpu_grad_norm, gpt2gpu_update (AdamW + ZeRO-1 all-gather), gpt2gpu_mean_loss
 *   gpt2gpu_stream_sq     the residual stream's mean square entering each block and ln_f, of the
 *                         last forward (the -ln 0 diagnostic the CPU model's gpt2_stream_sq_accumulate
 *                         gives)
 *   gpt2gpu_get_params_bf16, gpt2gpu_get_opt_state / gpt2gpu_set_opt_state   checkpoint I/O
 */
#ifndef LLMC_GPT2_GPU_CUH
#define LLMC_GPT2_GPU_CUH

#include "../config.h"
#include "../cuda/cuda_common.cuh"
#include "../attention/cudnn.h"
#include "../attention/paths.h"
#include "act_plan.h"
#include "../cuda/zero_plan.h"
#include "../cuda/encoder_buckets.h"
#include "../cuda/multi_gpu.h"
#include "../optimizer.h"
#include "../param_layout.h"

typedef enum { FWD_LOGITS = 0, FWD_EVAL = 1, FWD_TRAIN = 2 } ForwardMode;

typedef struct {
    int recompute;      /* -r: 0 none, 1 GELU, 2 GELU + LayerNorm */
    int gelu_fusion;    /* -ge: 0 none, 1 forward epilogue, 2 forward + backward epilogues */
    int master_weights; /* -w */
    int inference;      /* forward only (eval_gpt2cu): no gradients, AdamW state or master weights */
} GPT2GPUOptions;

typedef struct {
    GPT2Config config;
    ParamLayout layout;
    GPT2GPUOptions opt;
    AttPath path[LLMC_MAX_LAYERS];
    /* each layer's projection and mixer (a softmax layer's: the stage of its path) */
    const struct GpuStage *proj[LLMC_MAX_LAYERS], *mix[LLMC_MAX_LAYERS];
    ShardPlan shard;
    /* segment indices for the reductions: the per-layer tensors of each layer, then the rest */
    int layer_seg[LLMC_MAX_LAYERS][LLMC_MAX_PARAM_SLOTS];
    int n_layer_seg[LLMC_MAX_LAYERS];
    int tail_seg[LLMC_MAX_PARAM_SLOTS];
    int n_tail_seg;
    /* contiguous runs of this rank's segments (one run under ZeRO-0), for the gradient norm */
    int n_runs;
    size_t run_off[SHARD_MAX_SEGS], run_len[SHARD_MAX_SEGS];

    GpuCtx *ctx;
    CudnnAtt *cudnn; /* NULL when no layer is on cuDNN */
    MultiGpu *mg;

    int B, T;        /* the allocated (training) shape */
    ActPlan alloc;   /* the plan the arenas were sized for */
    ActPlan cur;     /* the plan of the last forward's (B, T) */
    int cur_training;

    /* device memory */
    floatX *params, *grads;        /* layout.total each */
    float *m, *v, *master;         /* shard.shard_total each; master NULL with -w 0 */
    floatX *acts_bf16;
    float *acts_f32;
    float *colsum_scratch;
    float *norm_partials;          /* SHARD_MAX_SEGS * NORM_BLOCKS */
    float *scalars;                /* [0] loss sum, [1] norm^2, [2..3] gpt2gpu_sum_over_ranks */
    int *d_inputs, *d_targets, *d_uniq, *d_start, *d_pos;
    int n_uniq;

    /* host staging (pinned) */
    int *h_inputs, *h_targets, *h_uniq, *h_start, *h_pos;
    int *h_count; /* vocab_size ints of scratch for encoder_buckets */
    /* gpt2gpu_eval_forward's host buffers, allocated on first use: the padded (B, T) batch and its
     * losses (returned compacted to the caller's (B', T') in place), one logits row, and the
     * argmax it returns */
    int *eval_inputs, *eval_targets;
    float *eval_losses, *eval_row;
    int *eval_out_argmax;
    float *h_scalars;
    cudaEvent_t upload_done;

    uint64_t rng_state, rng_state_last_update;
} GPT2GPU;

/* What the kernels assume of the shapes (C and the padded vocabulary multiples of 8, T <= maxT),
 * checked once with a one-line error. */
void gpt2gpu_check_shapes(const GPT2Config *c, int T);
/* The attention path of every layer for attn = "auto", "cudnn", "own" or "flash" on this GPU and build
 * (llmc/attention/paths.h attn_select_paths) and the linear-attention limits; dies with one line naming the
 * layer. Returns the cuDNN context when some layer runs on cuDNN, else NULL. training = 1: cuDNN
 * must also run the layer's backward (a trainable model); 0: the forward only, for a model built
 * with opt.inference (eval_gpt2cu), so that e.g. d = 129...256 heads on SM 8.x run on cuDNN too.
 * The cuDNN graphs of the (B, T) shape are built here: a layer whose graphs the backend refuses
 * runs on the own kernels with attn = "auto" (a warning), and is an error with "cudnn". */
CudnnAtt *gpt2gpu_choose_paths(const GPT2Config *c, const char *attn, int training, int B, int T,
                               const GpuCtx *ctx, AttPath *path);

void gpt2gpu_init(GPT2GPU *m, const GPT2Config *c, int B, int T, const GPT2GPUOptions *opt,
                  const AttPath *path, int zero_stage, GpuCtx *ctx, CudnnAtt *cudnn, MultiGpu *mg);
void gpt2gpu_free(GPT2GPU *m);

/* Device bytes the model will allocate, for the start-up report and the memory check. */
size_t gpt2gpu_param_bytes(const GPT2GPU *m);

/* host_params: layout.total fp32 values (a checkpoint widened, or a fresh init). */
void gpt2gpu_set_params(GPT2GPU *m, const float *host_params);

/* B <= m->B, T <= m->T. targets may be NULL for FWD_LOGITS. dloss: d objective / d token loss
 * (1 / (B T grad_accum)) for FWD_TRAIN. Losses accumulate into the per-token buffer until
 * gpt2gpu_zero_losses. */
void gpt2gpu_forward(GPT2GPU *m, const int *inputs, const int *targets, int B, int T,
                     ForwardMode mode, float dloss);
void gpt2gpu_zero_losses(GPT2GPU *m);
/* Mean of the accumulated per-token losses over `tokens` tokens, averaged over ranks. */
float gpt2gpu_mean_loss(GPT2GPU *m, double tokens);
/* The mean square of the residual stream entering block 0..L-1 and ln_f (out[0..L], L + 1 host
 * doubles) over the last forward's B*T positions on this rank, from the bf16 activations. */
void gpt2gpu_stream_sq(GPT2GPU *m, double *out);
/* The accumulated per-token losses of the last forward's B*T positions (row b*T + t). */
void gpt2gpu_read_losses(GPT2GPU *m, float *host);
/* v[0..n) (n <= 2 host floats) summed over the ranks in place, through the trainer's stream (the
 * NCCL stream waits on it); integers stay exact below 2^24. */
void gpt2gpu_sum_over_ranks(GPT2GPU *m, float *v, int n);
/* The logits row (B index b, position t) as floats (V values). */
void gpt2gpu_logits_row(GPT2GPU *m, int b, int t, float *out);
/* The evaluator's forward (llmc/evalloader.h EvalForwardFn; ctx: the GPT2GPU): B <= m->B rows of
 * T <= m->T tokens, padded to the allocated shape; per-position losses (B, T) and, with
 * need_argmax, the argmax of the logits at every position whose target is >= 0 (-1 elsewhere),
 * in buffers the model owns (valid until the next call). */
void gpt2gpu_eval_forward(void *ctx, const int *inputs, const int *targets, int B, int T, int need_argmax,
                          const float **losses, const int **argmax);

void gpt2gpu_zero_grads(GPT2GPU *m);
/* After a FWD_TRAIN forward of the training shape. last_micro_step: reduce over ranks. */
void gpt2gpu_backward(GPT2GPU *m, int last_micro_step);
/* Global L2 norm of the (reduced) gradients; synchronizes. */
float gpt2gpu_grad_norm(GPT2GPU *m);
/* AdamW, t = 1-based update count; grad_scale from clipping. */
void gpt2gpu_update(GPT2GPU *m, const AdamWHyper *h, float grad_scale, int t);

/* Checkpoint I/O (synchronizing copies). */
void gpt2gpu_get_params_bf16(GPT2GPU *m, uint16_t *host);
void gpt2gpu_set_params_bf16(GPT2GPU *m, const uint16_t *host);
void gpt2gpu_get_grads_f32(GPT2GPU *m, float *host); /* tests */
/* m, v, master: shard.shard_total floats each (master ignored with -w 0). */
void gpt2gpu_get_opt_state(GPT2GPU *m, float *mm, float *vv, float *master);
void gpt2gpu_set_opt_state(GPT2GPU *m, const float *mm, const float *vv, const float *master);

#endif /* LLMC_GPT2_GPU_CUH */
