/*
 * llmc/cpu/cpu_eval.h: the CPU model's two evaluations, shared by ./train_gpt2, ./eval_gpt2 and
 * sd_surgery.c:
 *   gpt2_val_loss        the val loss as ./train_gpt2 reports it ("val loss" in the log, and the
 *                        residual stream's size per layer, "stream rms") and
 *                        sd_surgery reports it before and after an operation: the mean of the
 *                        per-batch mean losses over the first N batches of the val data, read in
 *                        order from the start (no shuffle), so every call sees the same tokens
 *   GPT2Eval / gpt2_eval_init / gpt2_eval_forward / gpt2_eval_free
 *                        the zero-shot evaluator's forward (llmc/evalloader.h EvalForwardFn, ctx =
 *                        a GPT2Eval): the logits, then the losses (and for greedy files the argmax)
 *                        at the scored positions, in (B, T) buffers it owns
 * The GPU model has its own of both (train_gpt2.cu's val loss stays on the device and is averaged
 * over ranks; gpt2gpu_eval_forward pads into the allocated shape).
 */
#ifndef LLMC_CPU_EVAL_H
#define LLMC_CPU_EVAL_H

#include "../dataloader.h"
#include "../evalloader.h"
#include "gpt2_cpu.h"
#include "../utils.h"

/* batches: how many (dataloader_val_batches gives -m's count); the loader is rewound first.
 * stream_rms: NULL, or L + 1 floats that receive the root mean square of the residual stream
 * entering each block and ln_f over the same windows (gpt2_stream_sq_accumulate). */
static inline float gpt2_val_loss(GPT2 *model, DataLoader *val, int batches, float *stream_rms) {
    dataloader_reset(val);
    double sum = 0.0;
    double sq[LLMC_MAX_LAYERS + 1] = {0};
    for (int i = 0; i < batches; i++) {
        dataloader_next_batch(val);
        gpt2_forward(model, val->inputs, val->targets, val->B, val->T);
        sum += model->mean_loss;
        if (stream_rms) gpt2_stream_sq_accumulate(model, val->B, val->T, sq);
    }
    if (stream_rms) {
        for (int l = 0; l <= model->config.num_layers; l++) stream_rms[l] = (float)sqrt(sq[l] / batches);
    }
    return (float)(sum / batches);
}

typedef struct {
    GPT2 *model;
    float *losses; /* (B, T) */
    int *argmax;   /* (B, T) */
} GPT2Eval;

static inline void gpt2_eval_init(GPT2Eval *e, GPT2 *model, int B, int T) {
    e->model = model;
    e->losses = (float *)xmalloc((size_t)B * T * sizeof(float));
    e->argmax = (int *)xmalloc((size_t)B * T * sizeof(int));
}

static inline void gpt2_eval_forward(void *ctx, const int *inputs, const int *targets, int B, int T,
                                     int need_argmax, const float **losses, const int **argmax) {
    GPT2Eval *e = (GPT2Eval *)ctx;
    gpt2_forward(e->model, inputs, NULL, B, T);
    eval_losses_from_logits(e->model->acts.logits, targets, B * T, e->model->config.vocab_size, e->losses,
                            need_argmax ? e->argmax : NULL);
    *losses = e->losses;
    *argmax = e->argmax;
}

static inline void gpt2_eval_free(GPT2Eval *e) {
    free(e->losses);
    free(e->argmax);
    e->losses = NULL;
    e->argmax = NULL;
}

#endif /* LLMC_CPU_EVAL_H */
