/*
 * llmc/gpu/gpt2_gpu.cu: the GPU GPT-2 (interface and conventions in gpt2_gpu.cuh).
 *
 * Forward per layer l (the CPU model's order, llmc/cpu/gpt2_cpu.h; A = h_l d_l):
 *   qkv = project(ln1)                     the kind's projection (llmc/gpu/kind_gpu.cuh): mha and
 *                                          lin x W^T + b on cuBLASLt; S-D layers U | U L^T | V
 *                                          (sd_attention/stages_gpu.cu)
 *   atty = mix(qkv; h_l, d_l)              the layer's mixer stage: for softmax kinds the stage of
 *                                          its path (cuDNN, own, flash or mma kernels of
 *                                          llmc/attention/, scale 1/sqrt(d_l)); others their
 *                                          kind's mixer (the ELU+1 scan)
 *   out = atty W_o^T + b
 *   residual2 = residual + out; ln2 = LN(residual2)              one fused kernel
 *   fch_gelu = gelu(ln2 W_fc^T + b)        GELU in the epilogue with -ge >= 1
 *   out = fch_gelu W_proj^T + b
 *   residual3 = residual2 + out; ln1 of layer l+1 (or lnf) = LN(residual3)   fused
 * then logits = lnf wte^T over the padded vocabulary and the fused classifier. With -ln 0
 * (doc/methods.md "Training without LayerNorm", option 1) ln1 and ln2 are the stream itself (residual, residual2): the
 * residual adds are plain, the backward adds the sub-blocks' input gradients straight into
 * dresidual; ln_f stays. The backward mirrors it with one running bf16 dresidual and two scratch
 * gradients (DBIG for the 4C / 3A wide ones, DSMALL for the C / A ones), as the CPU model's
 * dwide / dmid; the attention sub-block's backward is its mixer's, then its projection's.
 */
#include <math.h>
#include <string.h>

#include "../attention/flash.cuh"
#include "../attention/mma.cuh"
#include "../attention/own.cuh"
#include "../evalloader.h"
#include "gpt2_gpu.cuh"
#include "kind_gpu.cuh"
#include "../cuda/kernels.cuh"
#include "../cuda/matmul.cuh"

/* ----------------------------------------------------------------------------------------------
 * Views */
static floatX *actb(const GPT2GPU *m, int t) { return m->acts_bf16 + m->cur.off[t]; }
static float *actf(const GPT2GPU *m, int t) { return m->acts_f32 + m->cur.off[t]; }
static size_t ntok(const GPT2GPU *m) { return (size_t)m->cur.B * m->cur.T; }

/* Per-layer views of the current plan. Recomputed tensors share one block for all layers; with
 * -ln 0, ln1 and ln2 are views of the residual stream (the block input and residual2). */
typedef struct {
    floatX *ln1, *qkv, *atty, *att, *residual2, *ln2, *fch, *fch_gelu, *residual3;
    float *ln1_mean, *ln1_rstd, *ln2_mean, *ln2_rstd, *stats, *proj_state;
} LayerActs;

static LayerActs layer_acts(const GPT2GPU *m, int l) {
    const size_t N = ntok(m), C = (size_t)m->config.channels;
    const ActPlan *p = &m->cur;
    const size_t ln_l = p->recompute >= 2 ? 0 : (size_t)l, gelu_l = p->recompute >= 1 ? 0 : (size_t)l;
    LayerActs a;
    a.qkv = actb(m, ACT_QKV) + p->qkv_off[l];
    a.atty = actb(m, ACT_ATTY) + p->atty_off[l];
    a.att = actb(m, ACT_ATT) + p->att_off[l];
    a.residual2 = actb(m, ACT_RESIDUAL2) + (size_t)l * N * C;
    a.fch = actb(m, ACT_FCH) + (size_t)l * N * 4 * C;
    a.fch_gelu = actb(m, ACT_FCH_GELU) + gelu_l * N * 4 * C;
    a.residual3 = actb(m, ACT_RESIDUAL3) + (size_t)l * N * C;
    if (m->config.use_ln) {
        a.ln1 = actb(m, ACT_LN1) + ln_l * N * C;
        a.ln2 = actb(m, ACT_LN2) + ln_l * N * C;
    } else {
        a.ln1 = l == 0 ? actb(m, ACT_ENCODED) : actb(m, ACT_RESIDUAL3) + (size_t)(l - 1) * N * C;
        a.ln2 = a.residual2;
    }
    a.ln1_mean = actf(m, ACT_LN1_MEAN) + (size_t)l * N; /* empty tensors with -ln 0 (unused) */
    a.ln1_rstd = actf(m, ACT_LN1_RSTD) + (size_t)l * N;
    a.ln2_mean = actf(m, ACT_LN2_MEAN) + (size_t)l * N;
    a.ln2_rstd = actf(m, ACT_LN2_RSTD) + (size_t)l * N;
    a.stats = actf(m, ACT_STATS) + p->stats_off[l];
    a.proj_state = actf(m, ACT_PROJ_STATE) + p->proj_state_off[l];
    return a;
}

static floatX *param(floatX *base, const GPT2GPU *m, int slot, int l) {
    return base + param_offset(&m->layout, slot, l);
}

/* ----------------------------------------------------------------------------------------------
 * Set-up */
static void *dmalloc(size_t bytes, const char *what) {
    void *p = NULL;
    if (bytes == 0) return NULL;
    const cudaError_t e = cudaMalloc(&p, bytes);
    if (e != cudaSuccess) {
        fflush(stdout);
        fprintf(stderr, "error: cudaMalloc(%s, %.2f GiB): %s (lower -b, or use -r 1 / -r 2)\n", what,
                bytes / 1073741824.0, cudaGetErrorString(e));
        exit(EXIT_FAILURE);
    }
    return p;
}

static void *hmalloc(size_t bytes) {
    void *p = NULL;
    CUDA_CHECK(cudaMallocHost(&p, bytes > 0 ? bytes : 1));
    return p;
}

/* Segment index lists: per layer for the overlapped reduction, the rest for the end; and the
 * contiguous runs of this rank's part for the norm. */
static void index_segments(GPT2GPU *m) {
    const ShardPlan *s = &m->shard;
    memset(m->n_layer_seg, 0, sizeof(m->n_layer_seg));
    m->n_tail_seg = 0;
    m->n_runs = 0;
    for (int i = 0; i < s->nseg; i++) {
        const ShardSeg *g = &s->seg[i];
        if (slot_is_per_layer(g->slot)) m->layer_seg[g->layer][m->n_layer_seg[g->layer]++] = i;
        else m->tail_seg[m->n_tail_seg++] = i;
        if (m->n_runs > 0 && m->run_off[m->n_runs - 1] + m->run_len[m->n_runs - 1] == g->global_off) {
            m->run_len[m->n_runs - 1] += g->count;
        } else {
            m->run_off[m->n_runs] = g->global_off;
            m->run_len[m->n_runs] = g->count;
            m->n_runs++;
        }
    }
}


void gpt2gpu_check_shapes(const GPT2Config *c, int T) {
    if (c->channels % 8 != 0) {
        llmc_die("model: C = %d: the GPU model needs C to be a multiple of 8 (16-byte vector loads)", c->channels);
    }
    if (c->padded_vocab_size % 8 != 0) {
        llmc_die("model: padded vocabulary %d: the GPU model needs a multiple of 8", c->padded_vocab_size);
    }
    if (T > c->max_seq_len) llmc_die("-t %d exceeds the model's maxT = %d", T, c->max_seq_len);
}

CudnnAtt *gpt2gpu_choose_paths(const GPT2Config *c, const char *attn, int training, int B, int T,
                               const GpuCtx *ctx, AttPath *path) {
    AttnRequest req = ATTN_REQ_AUTO;
    if (!attn_request_from_name(attn, &req)) llmc_die("-attn %s: expected auto, cudnn, own, flash or mma", attn);
    if (req == ATTN_REQ_CUDNN && !cudnn_att_built()) {
        llmc_die("-attn cudnn: this binary was built without cuDNN (build with USE_CUDNN=1)");
    }
    AttnEnv env;
    env.sm = ctx->sm;
    env.cudnn_built = cudnn_att_built();
    env.cudnn_version = cudnn_att_version();
    env.smem_optin = ctx->smem_optin;
    char err[1024];
    if (!attn_select_paths(c, req, &env, training, path, err, sizeof(err))) llmc_die("%s", err);
    int any_cudnn = 0;
    for (int l = 0; l < c->num_layers; l++) {
        const GpuStage *proj = GPU_KINDS[c->layer[l].kind].proj, *mix = GPU_KINDS[c->layer[l].kind].mix;
        const int proj_ok = proj->supported == NULL || proj->supported(&c->layer[l], ctx, err, sizeof(err));
        const int mix_ok = !proj_ok || path[l] != ATT_PATH_MIXER || mix->supported == NULL ||
                           mix->supported(&c->layer[l], ctx, err, sizeof(err));
        if (!proj_ok || !mix_ok) llmc_die("layer %d (%s): %s", l, layer_kind_of(c->layer[l].kind)->name, err);
        any_cudnn |= path[l] == ATT_PATH_CUDNN;
    }
    if (!any_cudnn) return NULL;
    /* The rules above are static (head size, SM, backend version); the graphs of the run's (B, T)
     * are built now (forward with stats; backward for a trainable model), so that no step pays for
     * a build, and a shape the backend still refuses is an error with -attn cudnn and an own-kernel
     * layer with -attn auto (with a warning): "auto" never stops a run the own kernels can serve.
     * Evaluation runs the same forward graph (it also writes the stats, B h T floats) in the trainer
     * and in eval_gpt2cu, so both score a checkpoint bit for bit the same wherever their path tables
     * agree; sampling's (1, T) forward graph is built on its first use. */
    CudnnAtt *ca = cudnn_att_create(ctx->stream);
    any_cudnn = 0;
    for (int l = 0; l < c->num_layers; l++) {
        if (path[l] != ATT_PATH_CUDNN) continue;
        const LayerSpec *ls = &c->layer[l];
        if (!cudnn_att_try_prepare(ca, B, ls->n_head, T, ls->head_size, training, err, sizeof(err))) {
            if (req == ATTN_REQ_CUDNN) llmc_die("-attn cudnn: layer %d: %s", l, err);
            fflush(stdout);
            fprintf(stderr, "warning: layer %d: %s; -attn auto runs it on the own kernels\n", l, err);
            path[l] = ATT_PATH_OWN;
            continue;
        }
        any_cudnn = 1;
    }
    if (!any_cudnn) {
        cudnn_att_destroy(ca);
        return NULL;
    }
    return ca;
}

void gpt2gpu_init(GPT2GPU *m, const GPT2Config *c, int B, int T, const GPT2GPUOptions *opt,
                  const AttPath *path, int zero_stage, GpuCtx *ctx, CudnnAtt *cudnn, MultiGpu *mg) {
    memset(m, 0, sizeof(*m));
    m->config = *c;
    m->opt = *opt;
    m->ctx = ctx;
    m->cudnn = cudnn;
    m->mg = mg;
    m->B = B;
    m->T = T;
    memcpy(m->path, path, sizeof(AttPath) * (size_t)c->num_layers);
    for (int k = 0; k < N_LAYER_KINDS; k++) { /* the GPU table's rows are the registry's */
        if (strcmp(GPU_KINDS[k].name, LAYER_KINDS[k].name) != 0) {
            llmc_die("GPU_KINDS row %d is '%s', the registry's is '%s' (kinds/registry_gpu.cu)", k,
                     GPU_KINDS[k].name, LAYER_KINDS[k].name);
        }
    }
    for (int l = 0; l < c->num_layers; l++) { /* each layer's two stages, its mixer on its path */
        const GpuKind *k = &GPU_KINDS[c->layer[l].kind];
        m->proj[l] = k->proj;
        m->mix[l] = softmax_stage(path[l], k->mix);
    }
    param_layout_init(&m->layout, c);
    char err[512];
    if (!shard_plan_init(&m->shard, &m->layout, c, zero_stage, mg->nproc, mg->rank, err, sizeof(err))) {
        llmc_die("%s", err);
    }
    index_segments(m);
    act_plan_init(&m->alloc, c, B, T, opt->recompute, path);
    m->cur = m->alloc;
    /* gpt2gpu_choose_paths built the cuDNN graphs for its (B, T); the same shape here only finds
     * them in the cache, and a caller that passed another shape stops now, not in the first step */
    for (int l = 0; l < c->num_layers; l++) {
        if (path[l] != ATT_PATH_CUDNN) continue;
        const LayerSpec *ls = &c->layer[l];
        if (!cudnn_att_try_prepare(cudnn, B, ls->n_head, T, ls->head_size, !opt->inference, err, sizeof(err))) {
            llmc_die("layer %d: %s (the paths were chosen for another B, T?)", l, err);
        }
    }

    const size_t P = m->layout.total, S = m->shard.shard_total;
    m->params = (floatX *)dmalloc(P * sizeof(floatX), "parameters");
    if (!opt->inference) { /* an evaluator never touches these: 10-14 bytes per parameter */
        m->grads = (floatX *)dmalloc(P * sizeof(floatX), "gradients");
        m->m = (float *)dmalloc(S * sizeof(float), "AdamW m");
        m->v = (float *)dmalloc(S * sizeof(float), "AdamW v");
        /* on the trainer's stream: a legacy-stream memset is not ordered with a non-blocking stream */
        CUDA_CHECK(cudaMemsetAsync(m->m, 0, S * sizeof(float), ctx->stream));
        CUDA_CHECK(cudaMemsetAsync(m->v, 0, S * sizeof(float), ctx->stream));
        if (opt->master_weights) m->master = (float *)dmalloc(S * sizeof(float), "master weights");
    }
    m->acts_bf16 = (floatX *)dmalloc(m->alloc.bf16_total * sizeof(floatX), "bf16 activations");
    m->acts_f32 = (float *)dmalloc(m->alloc.f32_total * sizeof(float), "fp32 activations");
    const size_t N = (size_t)B * T, C = (size_t)c->channels;
    const int widest = (int)LLMC_MAX(4 * C, 3 * (size_t)m->alloc.A_max);
    m->colsum_scratch = (float *)dmalloc(colsum_scratch_floats(N, widest) * sizeof(float), "reduction scratch");
    m->norm_partials = (float *)dmalloc((size_t)SHARD_MAX_SEGS * NORM_BLOCKS * sizeof(float), "norm partials");
    m->scalars = (float *)dmalloc(4 * sizeof(float), "scalars");
    m->d_inputs = (int *)dmalloc(N * sizeof(int), "inputs");
    m->d_targets = (int *)dmalloc(N * sizeof(int), "targets");
    m->d_uniq = (int *)dmalloc(N * sizeof(int), "token buckets");
    m->d_start = (int *)dmalloc((N + 1) * sizeof(int), "token buckets");
    m->d_pos = (int *)dmalloc(N * sizeof(int), "token buckets");
    m->h_inputs = (int *)hmalloc(N * sizeof(int));
    m->h_targets = (int *)hmalloc(N * sizeof(int));
    m->h_uniq = (int *)hmalloc(N * sizeof(int));
    m->h_start = (int *)hmalloc((N + 1) * sizeof(int));
    m->h_pos = (int *)hmalloc(N * sizeof(int));
    m->h_scalars = (float *)hmalloc(4 * sizeof(float));
    m->h_count = (int *)xmalloc((size_t)c->vocab_size * sizeof(int));
    CUDA_CHECK(cudaEventCreateWithFlags(&m->upload_done, cudaEventDisableTiming));
    CUDA_CHECK(cudaEventRecord(m->upload_done, ctx->stream));
    /* the stochastic-rounding RNG: the same on every rank, so that ZeRO-0 ranks round alike */
    m->rng_state = ROUNDING_RNG_SEED; /* llm.c's, the same on every rank */
    m->rng_state_last_update = m->rng_state;
}

void gpt2gpu_free(GPT2GPU *m) {
    CUDA_CHECK(cudaStreamSynchronize(m->ctx->stream));
    void *dev[] = {m->params, m->grads, m->m, m->v, m->master, m->acts_bf16, m->acts_f32,
                   m->colsum_scratch, m->norm_partials, m->scalars, m->d_inputs, m->d_targets,
                   m->d_uniq, m->d_start, m->d_pos};
    for (size_t i = 0; i < sizeof(dev) / sizeof(dev[0]); i++)
        if (dev[i]) CUDA_CHECK(cudaFree(dev[i]));
    void *host[] = {m->h_inputs, m->h_targets, m->h_uniq, m->h_start, m->h_pos, m->h_scalars};
    for (size_t i = 0; i < sizeof(host) / sizeof(host[0]); i++)
        if (host[i]) CUDA_CHECK(cudaFreeHost(host[i]));
    free(m->h_count);
    free(m->eval_inputs);
    free(m->eval_targets);
    free(m->eval_losses);
    free(m->eval_row);
    free(m->eval_out_argmax);
    CUDA_CHECK(cudaEventDestroy(m->upload_done));
    memset(m, 0, sizeof(*m));
}

size_t gpt2gpu_param_bytes(const GPT2GPU *m) {
    const size_t P = m->layout.total, S = m->shard.shard_total;
    if (m->opt.inference) return P * sizeof(floatX);
    return P * 2 * sizeof(floatX) + S * (m->opt.master_weights ? 3 : 2) * sizeof(float);
}

void gpt2gpu_set_params(GPT2GPU *m, const float *host_params) {
    const size_t P = m->layout.total;
    uint16_t *bits = (uint16_t *)xmalloc(P * sizeof(uint16_t));
    for (size_t i = 0; i < P; i++) bits[i] = f32_to_bf16(host_params[i]);
    gpt2gpu_set_params_bf16(m, bits);
    free(bits);
    if (m->master != NULL) {
        /* masters keep the full fp32 values of an fp32 source (exact copies of a bf16 one) */
        for (int i = 0; i < m->shard.nseg; i++) {
            const ShardSeg *g = &m->shard.seg[i];
            CUDA_CHECK(cudaMemcpyAsync(m->master + g->shard_off, host_params + g->global_off,
                                       g->count * sizeof(float), cudaMemcpyHostToDevice, m->ctx->stream));
        }
        CUDA_CHECK(cudaStreamSynchronize(m->ctx->stream));
    }
}

/* Host-to-device copies go through the trainer's stream and wait for it: a plain cudaMemcpy from
 * pageable memory runs on the legacy stream, which a non-blocking stream does not wait for, and
 * may return before its last DMA lands; the next kernels on the stream could then read old data. */
void gpt2gpu_set_params_bf16(GPT2GPU *m, const uint16_t *host) {
    cudaStream_t s = m->ctx->stream; /* queued kernels that still read the parameters come first */
    CUDA_CHECK(cudaMemcpyAsync(m->params, host, m->layout.total * sizeof(floatX), cudaMemcpyHostToDevice, s));
    CUDA_CHECK(cudaStreamSynchronize(s));
}

void gpt2gpu_get_params_bf16(GPT2GPU *m, uint16_t *host) {
    CUDA_CHECK(cudaStreamSynchronize(m->ctx->stream));
    CUDA_CHECK(cudaMemcpy(host, m->params, m->layout.total * sizeof(floatX), cudaMemcpyDeviceToHost));
}

void gpt2gpu_get_grads_f32(GPT2GPU *m, float *host) {
    const size_t P = m->layout.total;
    float *d = (float *)dmalloc(P * sizeof(float), "gradient copy");
    cast_bf16_to_f32(d, m->grads, P, m->ctx->stream);
    CUDA_CHECK(cudaStreamSynchronize(m->ctx->stream));
    CUDA_CHECK(cudaMemcpy(host, d, P * sizeof(float), cudaMemcpyDeviceToHost));
    CUDA_CHECK(cudaFree(d));
}

void gpt2gpu_get_opt_state(GPT2GPU *m, float *mm, float *vv, float *master) {
    const size_t S = m->shard.shard_total * sizeof(float);
    CUDA_CHECK(cudaStreamSynchronize(m->ctx->stream));
    CUDA_CHECK(cudaMemcpy(mm, m->m, S, cudaMemcpyDeviceToHost));
    CUDA_CHECK(cudaMemcpy(vv, m->v, S, cudaMemcpyDeviceToHost));
    if (m->master != NULL && master != NULL) CUDA_CHECK(cudaMemcpy(master, m->master, S, cudaMemcpyDeviceToHost));
}

void gpt2gpu_set_opt_state(GPT2GPU *m, const float *mm, const float *vv, const float *master) {
    const size_t S = m->shard.shard_total * sizeof(float);
    cudaStream_t s = m->ctx->stream; /* as gpt2gpu_set_params_bf16 */
    CUDA_CHECK(cudaMemcpyAsync(m->m, mm, S, cudaMemcpyHostToDevice, s));
    CUDA_CHECK(cudaMemcpyAsync(m->v, vv, S, cudaMemcpyHostToDevice, s));
    if (m->master != NULL && master != NULL) CUDA_CHECK(cudaMemcpyAsync(m->master, master, S, cudaMemcpyHostToDevice, s));
    CUDA_CHECK(cudaStreamSynchronize(s));
}

/* ----------------------------------------------------------------------------------------------
 * Forward */

/* Tokens to the device through pinned staging buffers. The previous upload must have left the
 * staging buffers before they are overwritten; the kernels of the previous micro-step that read
 * the device copies come before this copy on the same stream. */
static void upload_batch(GPT2GPU *m, const int *inputs, const int *targets, int B, int T, int buckets) {
    const int N = B * T, V = m->config.vocab_size;
    /* evaluation batches mark unscored positions with target -1; training scores every one */
    const int lowest_target = buckets ? 0 : -1;
    for (int i = 0; i < N; i++) {
        if (inputs[i] < 0 || inputs[i] >= V || (targets && (targets[i] < lowest_target || targets[i] >= V))) {
            llmc_die("forward: token %d at position %d is outside the vocabulary [0, %d)",
                     inputs[i] < 0 || inputs[i] >= V ? inputs[i] : targets[i], i, V);
        }
    }
    CUDA_CHECK(cudaEventSynchronize(m->upload_done));
    cudaStream_t s = m->ctx->stream;
    memcpy(m->h_inputs, inputs, (size_t)N * sizeof(int));
    CUDA_CHECK(cudaMemcpyAsync(m->d_inputs, m->h_inputs, (size_t)N * sizeof(int), cudaMemcpyHostToDevice, s));
    if (targets != NULL) {
        memcpy(m->h_targets, targets, (size_t)N * sizeof(int));
        CUDA_CHECK(cudaMemcpyAsync(m->d_targets, m->h_targets, (size_t)N * sizeof(int), cudaMemcpyHostToDevice, s));
    }
    if (buckets) {
        m->n_uniq = encoder_buckets(inputs, N, V, m->h_uniq, m->h_start, m->h_pos, m->h_count);
        CUDA_CHECK(cudaMemcpyAsync(m->d_uniq, m->h_uniq, (size_t)m->n_uniq * sizeof(int), cudaMemcpyHostToDevice, s));
        CUDA_CHECK(cudaMemcpyAsync(m->d_start, m->h_start, ((size_t)m->n_uniq + 1) * sizeof(int), cudaMemcpyHostToDevice, s));
        CUDA_CHECK(cudaMemcpyAsync(m->d_pos, m->h_pos, (size_t)N * sizeof(int), cudaMemcpyHostToDevice, s));
    }
    CUDA_CHECK(cudaEventRecord(m->upload_done, s));
}

/* ----------------------------------------------------------------------------------------------
 * The attention sub-block: the layer kind's projection and mixer (llmc/gpu/kind_gpu.cuh); a
 * softmax layer runs on the path chosen for it (llmc/attention/paths.h). */

/* Q | K | V = x W^T + b: the framework's projection (mha, lin). */
static void qkv_projection_forward(const GpuStageArgs *a) {
    const int C = a->c->channels, A = attn_width(a->ls);
    matmul_forward(a->qkv, a->x, a->w[P_QKVW], a->w[P_QKVB], a->N, C, 3 * A, NULL, a->ctx);
}

static void qkv_projection_backward(const GpuStageArgs *a) {
    const int C = a->c->channels, A = attn_width(a->ls);
    matmul_backward(a->dx, a->g[P_QKVW], a->g[P_QKVB], a->colsum_scratch, a->dqkv, a->x, a->w[P_QKVW], a->N, C,
                    3 * A, NULL, a->ctx);
}

const GpuStage QKV_PROJECTION_GPU = {qkv_projection_forward, qkv_projection_backward, NULL};

/* Softmax attention qkv -> atty on each path of llmc/attention/ (the cuDNN, flash and mma paths
 * also save the rows' log-sum-exps for their backward; the own path the weights att). Which path
 * runs which layer is llmc/attention/paths.h's choice; the model looks its stage up once. */
static void softmax_own_forward(const GpuStageArgs *a) {
    attention_own_forward(a->atty, a->att, a->att_scratch, a->qkv, a->B, a->T, a->ls->n_head, a->ls->head_size,
                          a->ctx);
}
static void softmax_own_backward(const GpuStageArgs *a) {
    attention_own_backward(a->dqkv, a->datt, a->att_scratch, a->datty, a->qkv, a->att, a->B, a->T, a->ls->n_head,
                           a->ls->head_size, a->ctx);
}
static void softmax_cudnn_forward(const GpuStageArgs *a) {
    cudnn_att_forward(a->cudnn, a->atty, a->stats, a->qkv, a->B, a->ls->n_head, a->T, a->ls->head_size);
}
static void softmax_cudnn_backward(const GpuStageArgs *a) {
    cudnn_att_backward(a->cudnn, a->dqkv, a->datty, a->qkv, a->atty, a->stats, a->B, a->ls->n_head, a->T,
                       a->ls->head_size);
}
static void softmax_flash_forward(const GpuStageArgs *a) {
    attention_flash_forward(a->atty, a->stats, a->qkv, a->B, a->T, a->ls->n_head, a->ls->head_size, a->ctx);
}
static void softmax_flash_backward(const GpuStageArgs *a) {
    attention_flash_backward(a->dqkv, a->flash_d, a->datty, a->qkv, a->atty, a->stats, a->B, a->T, a->ls->n_head,
                             a->ls->head_size, a->ctx);
}
static void softmax_mma_forward(const GpuStageArgs *a) {
    attention_flash_mma_forward(a->atty, a->stats, a->qkv, a->B, a->T, a->ls->n_head, a->ls->head_size, a->ctx);
}
static void softmax_mma_backward(const GpuStageArgs *a) {
    attention_flash_mma_backward(a->dqkv, a->flash_d, a->datty, a->qkv, a->atty, a->stats, a->B, a->T,
                                 a->ls->n_head, a->ls->head_size, a->ctx);
}

const GpuStage SOFTMAX_MIXER_GPU = {softmax_own_forward, softmax_own_backward, NULL};
const GpuStage SOFTMAX_CUDNN_GPU = {softmax_cudnn_forward, softmax_cudnn_backward, NULL};
const GpuStage SOFTMAX_FLASH_GPU = {softmax_flash_forward, softmax_flash_backward, NULL};
const GpuStage SOFTMAX_MMA_GPU = {softmax_mma_forward, softmax_mma_backward, NULL};

/* The stage arguments of layer l for the current plan; dx, dqkv and datty for the backward. */
static GpuStageArgs stage_args(const GPT2GPU *m, int l, const LayerActs *a, floatX *dx, floatX *dqkv,
                               const floatX *datty) {
    GpuStageArgs s = {
        .c = &m->config, .ls = &m->config.layer[l], .B = m->cur.B, .T = m->cur.T, .N = ntok(m),
        .w = {}, .g = {},
        .x = a->ln1, .qkv = a->qkv, .atty = a->atty, .proj_state = a->proj_state, .stats = a->stats, .att = a->att,
        .dx = dx, .dqkv = dqkv, .datty = datty,
        .proj_scratch = actb(m, ACT_PROJ_SCRATCH), .proj_scratch_f32 = actf(m, ACT_PROJ_SCRATCH_F32),
        .mix_scratch = actf(m, ACT_MIX_SCRATCH), .att_scratch = actb(m, ACT_ATT_SCRATCH), .datt = actb(m, ACT_DATT),
        .flash_d = actf(m, ACT_FLASH_D), .colsum_scratch = m->colsum_scratch,
        .cudnn = m->cudnn, .ctx = m->ctx};
    for (int slot = 0; slot < param_slot_count(); slot++) {
        s.w[slot] = param(m->params, m, slot, l);
        s.g[slot] = m->grads ? param(m->grads, m, slot, l) : NULL;
    }
    return s;
}

static void attention_forward_layer(GPT2GPU *m, int l, const LayerActs *a) {
    const GpuStageArgs s = stage_args(m, l, a, NULL, NULL, NULL);
    m->proj[l]->forward(&s);
    m->mix[l]->forward(&s);
}

/* res_out = a + b, then (with LayerNorms) normed = LN(res_out) with slot's weights of layer l. */
static void residual_and_norm(GPT2GPU *m, floatX *res_out, const floatX *a, const floatX *b, floatX *normed,
                              float *mean, float *rstd, int w_slot, int b_slot, int l) {
    const size_t N = ntok(m);
    const int C = m->config.channels;
    cudaStream_t s = m->ctx->stream;
    if (m->config.use_ln) {
        fused_residual_layernorm_forward(res_out, normed, mean, rstd, a, b, param(m->params, m, w_slot, l),
                                         param(m->params, m, b_slot, l), N, C, s);
    } else {
        residual_forward(res_out, a, b, N * (size_t)C, s);
    }
}

void gpt2gpu_forward(GPT2GPU *m, const int *inputs, const int *targets, int B, int T,
                     ForwardMode mode, float dloss) {
    const GPT2Config *c = &m->config;
    if (B < 1 || T < 1 || B > m->B || T > m->T) {
        llmc_die("forward: B %d, T %d outside the allocated 1..%d x 1..%d", B, T, m->B, m->T);
    }
    if (mode != FWD_LOGITS && targets == NULL) llmc_die("forward: a loss needs targets");
    if (mode == FWD_TRAIN && (B != m->B || T != m->T)) llmc_die("forward: training runs at the allocated B, T");
    if (mode == FWD_TRAIN && m->opt.inference) llmc_die("forward: the model was built for inference (no gradients)");
    act_plan_init(&m->cur, c, B, T, m->opt.recompute, m->path);
    m->cur_training = mode == FWD_TRAIN;
    upload_batch(m, inputs, mode != FWD_LOGITS ? targets : NULL, B, T, mode == FWD_TRAIN);

    const GpuCtx *ctx = m->ctx;
    cudaStream_t s = ctx->stream;
    const size_t N = (size_t)B * T;
    const int C = c->channels, L = c->num_layers;
    floatX *w = m->params;
    floatX *encoded = actb(m, ACT_ENCODED), *out = actb(m, ACT_OUT);

    encoder_forward(encoded, m->d_inputs, param(w, m, P_WTE, 0), param(w, m, P_WPE, 0), B, T, C, c->emb_scale, s);
    if (c->use_ln) {
        const LayerActs a0 = layer_acts(m, 0);
        layernorm_forward(a0.ln1, a0.ln1_mean, a0.ln1_rstd, encoded, param(w, m, P_LN1W, 0),
                          param(w, m, P_LN1B, 0), N, C, s);
    }
    for (int l = 0; l < L; l++) {
        const int A = attn_width(&c->layer[l]);
        const LayerActs a = layer_acts(m, l);
        const floatX *residual = l == 0 ? encoded : layer_acts(m, l - 1).residual3;
        attention_forward_layer(m, l, &a);
        matmul_forward(out, a.atty, param(w, m, P_ATTPROJW, l), param(w, m, P_ATTPROJB, l), N, A, C, NULL, ctx);
        residual_and_norm(m, a.residual2, residual, out, a.ln2, a.ln2_mean, a.ln2_rstd, P_LN2W, P_LN2B, l);
        if (m->opt.gelu_fusion >= 1) {
            matmul_forward(a.fch_gelu, a.ln2, param(w, m, P_FCW, l), param(w, m, P_FCB, l), N, C, 4 * C, a.fch, ctx);
        } else {
            matmul_forward(a.fch, a.ln2, param(w, m, P_FCW, l), param(w, m, P_FCB, l), N, C, 4 * C, NULL, ctx);
            gelu_forward(a.fch_gelu, a.fch, N * 4 * C, s);
        }
        matmul_forward(out, a.fch_gelu, param(w, m, P_FCPROJW, l), param(w, m, P_FCPROJB, l), N, 4 * C, C, NULL, ctx);
        if (l + 1 < L) {
            const LayerActs an = layer_acts(m, l + 1);
            residual_and_norm(m, a.residual3, a.residual2, out, an.ln1, an.ln1_mean, an.ln1_rstd, P_LN1W, P_LN1B, l + 1);
        } else { /* ln_f is kept with -ln 0 too */
            fused_residual_layernorm_forward(a.residual3, actb(m, ACT_LNF), actf(m, ACT_LNF_MEAN),
                                             actf(m, ACT_LNF_RSTD), a.residual2, out,
                                             param(w, m, P_LNFW, 0), param(w, m, P_LNFB, 0), N, C, s);
        }
    }
    /* LM head tied to wte, over the padded vocabulary (the padded rows are zero) */
    floatX *logits = actb(m, ACT_LOGITS);
    matmul_forward(logits, actb(m, ACT_LNF), param(w, m, P_WTE, 0), NULL, N, C, c->padded_vocab_size, NULL, ctx);
    if (mode != FWD_LOGITS) {
        /* the loss buffer keeps the allocation plan's place for every (B, T): it accumulates
         * over micro-steps and evaluation batches, and smaller shapes' tensors end before it */
        fused_classifier(logits, m->acts_f32 + m->alloc.off[ACT_LOSSES], m->d_targets, dloss, N, c->vocab_size,
                         c->padded_vocab_size, mode == FWD_TRAIN, s);
    }
}

void gpt2gpu_zero_losses(GPT2GPU *m) {
    CUDA_CHECK(cudaMemsetAsync(m->acts_f32 + m->alloc.off[ACT_LOSSES], 0,
                               m->alloc.n[ACT_LOSSES] * sizeof(float), m->ctx->stream));
}

void gpt2gpu_stream_sq(GPT2GPU *m, double *out) {
    cudaStream_t s = m->ctx->stream;
    const size_t n = ntok(m) * (size_t)m->config.channels;
    float partials[NORM_BLOCKS];
    for (int l = 0; l <= m->config.num_layers; l++) {
        /* the input of block l: the embedding, then each block's output residual3 (the last one's
         * enters ln_f); residuals are kept per layer whatever -r recomputes */
        const floatX *x = l == 0 ? actb(m, ACT_ENCODED) : layer_acts(m, l - 1).residual3;
        norm_squared_partial(m->norm_partials, x, n, s); /* the gradient norm's scratch: free here */
        CUDA_CHECK(cudaMemcpyAsync(partials, m->norm_partials, sizeof(partials), cudaMemcpyDeviceToHost, s));
        CUDA_CHECK(cudaStreamSynchronize(s));
        double sum = 0.0;
        for (int i = 0; i < NORM_BLOCKS; i++) sum += partials[i];
        out[l] = sum / (double)n;
    }
}

float gpt2gpu_mean_loss(GPT2GPU *m, double tokens) {
    cudaStream_t s = m->ctx->stream;
    sum_partials(m->scalars, m->acts_f32 + m->alloc.off[ACT_LOSSES], m->alloc.n[ACT_LOSSES], false, s);
    multi_gpu_allreduce_f32(m->mg, m->scalars, 1, 1, s);
    CUDA_CHECK(cudaMemcpyAsync(m->h_scalars, m->scalars, sizeof(float), cudaMemcpyDeviceToHost, s));
    CUDA_CHECK(cudaStreamSynchronize(s));
    return (float)((double)m->h_scalars[0] / tokens);
}

void gpt2gpu_read_losses(GPT2GPU *m, float *host) {
    CUDA_CHECK(cudaStreamSynchronize(m->ctx->stream));
    CUDA_CHECK(cudaMemcpy(host, m->acts_f32 + m->alloc.off[ACT_LOSSES], ntok(m) * sizeof(float),
                          cudaMemcpyDeviceToHost));
}

void gpt2gpu_logits_row(GPT2GPU *m, int b, int t, float *out) {
    const int V = m->config.vocab_size, Vp = m->config.padded_vocab_size;
    const size_t row = (size_t)b * m->cur.T + t;
    float *d = (float *)m->norm_partials; /* V floats of scratch: the partials are free here */
    if ((size_t)V > (size_t)SHARD_MAX_SEGS * NORM_BLOCKS) llmc_die("logits_row: vocabulary too large");
    cast_bf16_to_f32(d, actb(m, ACT_LOGITS) + row * Vp, (size_t)V, m->ctx->stream);
    CUDA_CHECK(cudaStreamSynchronize(m->ctx->stream));
    CUDA_CHECK(cudaMemcpy(out, d, (size_t)V * sizeof(float), cudaMemcpyDeviceToHost));
}

/* Evaluation batches (the trainer's -h 1 and eval_gpt2cu): the (B', T') batch is padded into the
 * allocated (B, T) with EOT and unscored targets, so every batch runs on the attention graphs
 * prepared at start-up; causal attention keeps the padding, which follows every scored position,
 * out of the scores. The argmax is taken over the bf16 logits (first maximum on a tie), one
 * vocabulary row copied per scored position: greedy files score one to a few tokens per example. */
void gpt2gpu_sum_over_ranks(GPT2GPU *m, float *v, int n) {
    if (n < 1 || n > 2) llmc_die("gpt2gpu_sum_over_ranks: %d values, at most 2", n);
    float *d = m->scalars + 2;
    cudaStream_t s = m->ctx->stream;
    CUDA_CHECK(cudaMemcpyAsync(d, v, (size_t)n * sizeof(float), cudaMemcpyHostToDevice, s));
    multi_gpu_allreduce_f32(m->mg, d, (size_t)n, 0, s);
    CUDA_CHECK(cudaMemcpyAsync(v, d, (size_t)n * sizeof(float), cudaMemcpyDeviceToHost, s));
    CUDA_CHECK(cudaStreamSynchronize(s));
}

void gpt2gpu_eval_forward(void *ctx, const int *inputs, const int *targets, int B, int T, int need_argmax,
                          const float **losses_out, const int **argmax_out) {
    GPT2GPU *m = (GPT2GPU *)ctx;
    const int BF = m->B, TF = m->T, V = m->config.vocab_size;
    if (B > BF || T > TF) llmc_die("eval batch (%d, %d) exceeds the allocated (%d, %d)", B, T, BF, TF);
    const size_t NF = (size_t)BF * TF;
    if (m->eval_inputs == NULL) {
        m->eval_inputs = (int *)xmalloc(NF * sizeof(int));
        m->eval_targets = (int *)xmalloc(NF * sizeof(int));
        m->eval_losses = (float *)xmalloc(NF * sizeof(float));
        m->eval_row = (float *)xmalloc((size_t)V * sizeof(float));
        m->eval_out_argmax = (int *)xmalloc(NF * sizeof(int));
    }
    float *losses = m->eval_losses;
    int *argmax = m->eval_out_argmax;
    *losses_out = losses;
    *argmax_out = argmax;
    for (size_t i = 0; i < NF; i++) {
        m->eval_inputs[i] = LLMC_MIN(EVAL_PAD_TOKEN, V - 1); /* as eval_run_range pads */
        m->eval_targets[i] = -1;
    }
    for (int b = 0; b < B; b++) {
        memcpy(m->eval_inputs + (size_t)b * TF, inputs + (size_t)b * T, (size_t)T * sizeof(int));
        memcpy(m->eval_targets + (size_t)b * TF, targets + (size_t)b * T, (size_t)T * sizeof(int));
    }
    gpt2gpu_zero_losses(m);
    gpt2gpu_forward(m, m->eval_inputs, m->eval_targets, BF, TF, FWD_EVAL, 0.0f);
    gpt2gpu_read_losses(m, m->eval_losses);
    /* rows of TF -> rows of T in place: row b's destination ends at (b+1) T <= (b+1) TF, where the
     * next source row starts */
    for (int b = 1; b < B; b++) {
        memmove(losses + (size_t)b * T, m->eval_losses + (size_t)b * TF, (size_t)T * sizeof(float));
    }
    if (!need_argmax) return;
    for (int b = 0; b < B; b++) {
        for (int t = 0; t < T; t++) {
            int *out = argmax + (size_t)b * T + t;
            *out = -1;
            if (targets[(size_t)b * T + t] < 0) continue;
            gpt2gpu_logits_row(m, b, t, m->eval_row);
            *out = eval_argmax(m->eval_row, V);
        }
    }
}

/* ----------------------------------------------------------------------------------------------
 * Backward */
void gpt2gpu_zero_grads(GPT2GPU *m) {
    if (m->opt.inference) llmc_die("zero_grads: the model was built for inference (no gradients)");
    CUDA_CHECK(cudaMemsetAsync(m->grads, 0, m->layout.total * sizeof(floatX), m->ctx->stream));
}

/* From datty to dqkv (the mixer) and on to dx = dln, overwritten, and the projection's parameter
 * gradients (the projection). */
static void attention_backward_layer(GPT2GPU *m, int l, const LayerActs *a, floatX *dln, floatX *dqkv,
                                     const floatX *datty) {
    const GpuStageArgs s = stage_args(m, l, a, dln, dqkv, datty);
    m->mix[l]->backward(&s);
    m->proj[l]->backward(&s);
}

/* dresidual += the gradient through the LayerNorm of slots (w_slot, b_slot) of layer l, whose
 * input was x; with -ln 0 straight through (CPU: norm_backward_into). */
static void norm_backward(GPT2GPU *m, floatX *dresidual, const floatX *dnormed, const floatX *x, int w_slot,
                          int b_slot, int l, const float *mean, const float *rstd) {
    const size_t N = ntok(m);
    const int C = m->config.channels;
    if (m->config.use_ln) {
        layernorm_backward(dresidual, param(m->grads, m, w_slot, l), param(m->grads, m, b_slot, l), m->colsum_scratch,
                           dnormed, x, param(m->params, m, w_slot, l), mean, rstd, N, C, m->ctx->stream);
    } else {
        residual_accumulate(dresidual, dnormed, N * (size_t)C, m->ctx->stream);
    }
}

void gpt2gpu_backward(GPT2GPU *m, int last_micro_step) {
    const GPT2Config *c = &m->config;
    if (!m->cur_training) llmc_die("backward: the last forward was not a training forward");
    const GpuCtx *ctx = m->ctx;
    cudaStream_t s = ctx->stream;
    const size_t N = ntok(m);
    const int C = c->channels, L = c->num_layers;
    floatX *w = m->params, *g = m->grads;
    floatX *dresidual = actb(m, ACT_DRESIDUAL), *dbig = actb(m, ACT_DBIG), *dsmall = actb(m, ACT_DSMALL);
    float *scratch = m->colsum_scratch;
    const int reduce = last_micro_step && m->mg->nproc > 1;
    const int relayernorm = m->opt.recompute >= 2 && c->use_ln;

    /* classifier: dlogits are in the logits buffer (fused_classifier in the forward) */
    matmul_backward(dsmall, param(g, m, P_WTE, 0), NULL, scratch, actb(m, ACT_LOGITS), actb(m, ACT_LNF),
                    param(w, m, P_WTE, 0), N, C, c->padded_vocab_size, NULL, ctx);
    CUDA_CHECK(cudaMemsetAsync(dresidual, 0, N * C * sizeof(floatX), s));
    const LayerActs last = layer_acts(m, L - 1);
    layernorm_backward(dresidual, param(g, m, P_LNFW, 0), param(g, m, P_LNFB, 0), scratch, dsmall,
                       last.residual3, param(w, m, P_LNFW, 0), actf(m, ACT_LNF_MEAN), actf(m, ACT_LNF_RSTD), N, C, s);
    for (int l = L - 1; l >= 0; l--) {
        const int A = attn_width(&c->layer[l]);
        const LayerActs a = layer_acts(m, l);
        const floatX *residual = l == 0 ? actb(m, ACT_ENCODED) : layer_acts(m, l - 1).residual3;
        /* MLP */
        if (m->opt.recompute >= 1) gelu_forward(a.fch_gelu, a.fch, N * 4 * C, s);
        floatX *dfch = dbig;
        matmul_backward(dfch, param(g, m, P_FCPROJW, l), param(g, m, P_FCPROJB, l), scratch, dresidual,
                        a.fch_gelu, param(w, m, P_FCPROJW, l), N, 4 * C, C,
                        m->opt.gelu_fusion >= 2 ? a.fch : NULL, ctx);
        if (m->opt.gelu_fusion < 2) gelu_backward_inplace(dfch, a.fch, N * 4 * C, s);
        if (relayernorm) {
            layernorm_apply(a.ln2, a.residual2, a.ln2_mean, a.ln2_rstd, param(w, m, P_LN2W, l),
                            param(w, m, P_LN2B, l), N, C, s);
        }
        floatX *dln = dsmall;
        matmul_backward(dln, param(g, m, P_FCW, l), param(g, m, P_FCB, l), scratch, dfch, a.ln2,
                        param(w, m, P_FCW, l), N, C, 4 * C, NULL, ctx);
        norm_backward(m, dresidual, dln, a.residual2, P_LN2W, P_LN2B, l, a.ln2_mean, a.ln2_rstd);
        /* attention */
        floatX *datty = dsmall, *dqkv = dbig;
        matmul_backward(datty, param(g, m, P_ATTPROJW, l), param(g, m, P_ATTPROJB, l), scratch, dresidual,
                        a.atty, param(w, m, P_ATTPROJW, l), N, A, C, NULL, ctx);
        if (relayernorm) { /* the projection's backward reads ln1; the mixer's does not */
            layernorm_apply(a.ln1, residual, a.ln1_mean, a.ln1_rstd, param(w, m, P_LN1W, l),
                            param(w, m, P_LN1B, l), N, C, s);
        }
        attention_backward_layer(m, l, &a, dln, dqkv, datty); /* dln = dsmall once datty is read */
        norm_backward(m, dresidual, dln, residual, P_LN1W, P_LN1B, l, a.ln1_mean, a.ln1_rstd);
        /* this layer's gradients are final: reduce them while the next layer's backward runs */
        if (reduce) multi_gpu_reduce_grads(m->mg, m->grads, m->shard.seg, m->layer_seg[l], m->n_layer_seg[l], s);
    }
    encoder_backward(param(g, m, P_WTE, 0), param(g, m, P_WPE, 0), dresidual, m->d_uniq, m->d_start,
                     m->d_pos, m->n_uniq, m->cur.B, m->cur.T, C, m->config.emb_scale, s);
    if (reduce) {
        multi_gpu_reduce_grads(m->mg, m->grads, m->shard.seg, m->tail_seg, m->n_tail_seg, s);
        multi_gpu_join(m->mg, s);
    }
}

/* ----------------------------------------------------------------------------------------------
 * Norm and update */
float gpt2gpu_grad_norm(GPT2GPU *m) {
    cudaStream_t s = m->ctx->stream;
    for (int r = 0; r < m->n_runs; r++) {
        norm_squared_partial(m->norm_partials + (size_t)r * NORM_BLOCKS, m->grads + m->run_off[r], m->run_len[r], s);
    }
    sum_partials(m->scalars + 1, m->norm_partials, (size_t)m->n_runs * NORM_BLOCKS, false, s);
    /* ZeRO-1: each rank holds the reduced gradients of its slices only */
    if (m->shard.zero_stage == 1) multi_gpu_allreduce_f32(m->mg, m->scalars + 1, 1, 0, s);
    CUDA_CHECK(cudaMemcpyAsync(m->h_scalars + 1, m->scalars + 1, sizeof(float), cudaMemcpyDeviceToHost, s));
    CUDA_CHECK(cudaStreamSynchronize(s));
    return sqrtf(m->h_scalars[1]);
}

void gpt2gpu_update(GPT2GPU *m, const AdamWHyper *h, float grad_scale, int t) {
    cudaStream_t s = m->ctx->stream;
    AdamWArgs a;
    a.lr = h->lr;
    a.beta1 = h->beta1;
    a.beta2 = h->beta2;
    a.eps = h->eps;
    a.grad_scale = grad_scale;
    a.bias_corr1 = 1.0f - powf(h->beta1, (float)t);
    a.bias_corr2 = 1.0f - powf(h->beta2, (float)t);
    m->rng_state_last_update = m->rng_state;
    int i = 0;
    for (int slot = 0; slot < param_slot_count(); slot++) {
        a.seed = xorshift_u32(&m->rng_state); /* one seed per tensor slot, every update */
        a.weight_decay = slot_has_weight_decay(slot, h->decay_mask) ? h->weight_decay : 0.0f;
        for (; i < m->shard.nseg && m->shard.seg[i].slot == slot; i++) {
            const ShardSeg *g = &m->shard.seg[i];
            adamw_update(m->params, m->master, m->grads, m->m, m->v, g->global_off, g->shard_off,
                         g->count, &a, s);
        }
    }
    multi_gpu_allgather_params(m->mg, m->params, m->shard.seg, m->shard.nseg, s);
}
