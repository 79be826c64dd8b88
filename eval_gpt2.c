/*
 * eval_gpt2.c: zero-shot evaluation of a GPT-2 checkpoint on the CPU (doc/evals.md).
 *
 *   make eval_gpt2
 *   ./eval_gpt2 -e model.bin -tasks all                  # hellaswag,piqa,arc_easy,winogrande,lambada
 *   ./eval_gpt2 -e model.bin -tasks hellaswag,piqa -n 500 -json out.json
 *   ./eval_gpt2 --help
 *
 * Reads the eval files the dev/data/<task>.py writers produce (llmc/evalloader.h: llm.c's
 * version-1 HellaSwag file, or our version 2), runs the fp32 CPU model (llmc/gpt2_cpu.h) on
 * batches of whole examples, and prints per task the examples scored, acc, acc_norm where the
 * task has per-option completions, and for greedy tasks (LAMBADA) the perplexity of the
 * continuation. -json writes the same numbers; -scores writes every option's loss, one per line.
 * The flags, the loop and the report are llmc/eval_cli.h, shared with the GPU program
 * eval_gpt2.cu; this file is the CPU back end.
 *
 * Scoring is llm.c's completion style (FORMATS.md 6): an option's loss is the cross-entropy of its
 * completion tokens given its context; acc_norm = argmin of the mean (llm.c's HellaSwag number),
 * acc = argmin of the sum.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#ifdef _OPENMP
#include <omp.h>
#endif

#include "llmc/eval_cli.h"
#include "llmc/gpt2_cpu.h"
#include "llmc/utils.h"

/* The CPU back end: the fp32 model's logits, then the losses (and argmax) at the scored positions. */
typedef struct {
    GPT2 model;
    float *losses; /* (B, T) */
    int *argmax;   /* (B, T) */
} CpuEval;

static void cpu_eval_forward(void *ctx, const int *inputs, const int *targets, int B, int T, int need_argmax,
                             const float **losses, const int **argmax) {
    CpuEval *ce = (CpuEval *)ctx;
    GPT2 *m = &ce->model;
    gpt2_forward(m, inputs, NULL, B, T);
    eval_losses_from_logits(m->acts.logits, targets, B * T, m->config.vocab_size, ce->losses,
                            need_argmax ? ce->argmax : NULL);
    *losses = ce->losses;
    *argmax = ce->argmax;
}

static void cpu_eval_open(EvalModel *em, const char *spec, int B, int T_request, int needed) {
    CpuEval *ce = (CpuEval *)xcalloc(1, sizeof(CpuEval));
    if (!config_is_descriptor_like(spec)) {
        if (!file_exists(spec)) llmc_die("-e %s: checkpoint not found", spec);
        gpt2_build_from_checkpoint(&ce->model, spec);
    } else {
        GPT2Config c;
        char msg[EVAL_PATH_CAP + 512];
        if (!config_from_descriptor(spec, &c, msg, sizeof(msg))) llmc_die("-e: %s", msg);
        gpt2_build_from_config(&ce->model, &c, 42u);
    }
    em->config = ce->model.config;
    em->num_params = ce->model.layout.total;
    em->T = eval_choose_T(T_request, needed, em->config.max_seq_len);
    ce->losses = (float *)xmalloc((size_t)B * em->T * sizeof(float));
    ce->argmax = (int *)xmalloc((size_t)B * em->T * sizeof(int));
#ifdef _OPENMP
    snprintf(em->where, sizeof(em->where), "CPU fp32, %d thread(s)", omp_get_max_threads());
#else
    snprintf(em->where, sizeof(em->where), "CPU fp32, 1 thread");
#endif
    em->forward = cpu_eval_forward;
    em->ctx = ce;
}

static void cpu_eval_close(EvalModel *em) {
    CpuEval *ce = (CpuEval *)em->ctx;
    gpt2_free(&ce->model);
    free(ce->losses);
    free(ce->argmax);
    free(ce);
}

int main(int argc, char **argv) { return eval_main(argc, argv, "eval_gpt2", cpu_eval_open, cpu_eval_close); }
