/*
 * eval_gpt2.cu: zero-shot evaluation of a GPT-2 checkpoint on one GPU (doc/evals.md).
 *
 *   make eval_gpt2cu [USE_CUDNN=1]
 *   ./eval_gpt2cu -e model.bin -tasks all -b 32
 *
 * The same program as eval_gpt2 (llmc/eval_cli.h: flags, tasks, table, JSON, -scores) on the GPU
 * model of the trainer (llmc/gpu/gpt2_gpu.cu): bf16 weights and activations, every layer's attention
 * path chosen as train_gpt2cu's -attn auto, except that cuDNN only has to serve the forward (the
 * model is built forward-only: gpt2gpu_choose_paths(..., 0, ...)), each batch padded to the allocated (B, T)
 * so one set of cuDNN graphs serves the whole run (gpt2gpu_eval_forward). Scores agree with the fp32
 * CPU program up to bf16 rounding: dev/gpu_check.sh compares the two on the same weights
 * (dev/eval_compare.py). One process, the first visible GPU (CUDA_VISIBLE_DEVICES selects).
 */
#include <stdio.h>
#include <stdlib.h>

#include "llmc/cuda/cuda_common.cuh"
#include "llmc/attention/cudnn.h"
#include "llmc/eval_cli.h"
#include "llmc/gpu/gpt2_gpu.cuh"
#include "llmc/attention/paths.h"
#include "llmc/cuda/multi_gpu.h"
#include "llmc/utils.h"
#include "kinds/registry.h"

/* The GPU back end: everything the model needs on the device, and the callback's outputs. */
typedef struct {
    MultiGpu mg; /* one process; the model's reductions then do nothing */
    GpuCtx ctx;
    CudnnAtt *cudnn;
    AttPath path[LLMC_MAX_LAYERS];
    GPT2GPU model; /* the forward's context: gpt2gpu_eval_forward */
} GpuEval;

static void gpu_eval_open(EvalModel *em, const char *spec, int B, int T_request, int needed) {
    GpuEval *g = (GpuEval *)xcalloc(1, sizeof(GpuEval));
    GPT2Config c;
    float *params = eval_host_params(spec, &c);
    em->T = eval_choose_T(T_request, needed, c.max_seq_len);
    gpt2gpu_check_shapes(&c, em->T);
    multi_gpu_init_single(&g->mg);
    gpu_ctx_init(&g->ctx, 0);
    g->cudnn = gpt2gpu_choose_paths(&c, "auto", 0, B, em->T, &g->ctx, g->path); /* forward-only support */
    attn_print_paths(&c, g->path, stdout);
    GPT2GPUOptions opt = {0, 0, 0, 1}; /* forward only: no gradients or optimizer state */
    gpt2gpu_init(&g->model, &c, B, em->T, &opt, g->path, 0, &g->ctx, g->cudnn, &g->mg);
    gpt2gpu_set_params(&g->model, params);
    free(params);

    em->config = c;
    em->num_params = g->model.layout.total;
    int n_cudnn = 0;
    for (int l = 0; l < c.num_layers; l++) n_cudnn += g->path[l] == ATT_PATH_CUDNN;
    snprintf(em->where, sizeof(em->where), "%.160s (SM %d.%d) bf16, attention on cuDNN in %d of %d layers",
             g->ctx.name, g->ctx.sm / 10, g->ctx.sm % 10, n_cudnn, c.num_layers);
    em->forward = gpt2gpu_eval_forward;
    em->ctx = &g->model;
    em->backend = g;
}

static void gpu_eval_close(EvalModel *em) {
    GpuEval *g = (GpuEval *)em->backend;
    gpt2gpu_free(&g->model);
    cudnn_att_destroy(g->cudnn);
    multi_gpu_free(&g->mg);
    gpu_ctx_free(&g->ctx);
    free(g);
}

int main(int argc, char **argv) { return eval_main(argc, argv, "eval_gpt2cu", gpu_eval_open, gpu_eval_close); }
