/*
 * eval_gpt2.c: zero-shot evaluation of a GPT-2 checkpoint on the CPU (doc/evals.md).
 *
 *   make eval_gpt2
 *   ./eval_gpt2 -e model.bin -tasks all                  # hellaswag,piqa,arc_easy,winogrande,lambada
 *   ./eval_gpt2 -e model.bin -tasks hellaswag,piqa -n 500 -json out.json
 *   ./eval_gpt2 --help
 *
 * Reads the eval files the dev/data/<task>.py writers produce (llmc/evalloader.h: llm.c's
 * version-1 HellaSwag file, or our version 2), runs the fp32 CPU model (llmc/cpu/gpt2_cpu.h) on
 * batches of whole examples, and prints per task the examples scored, acc, acc_norm where the
 * task has per-option completions, and for greedy tasks (LAMBADA) the perplexity of the
 * continuation. -json writes the same numbers; -scores writes every option's loss, one per line.
 * The flags, the loop and the report are llmc/eval_cli.h, shared with the GPU program
 * eval_gpt2.cu; this file is the CPU back end.
 *
 * Scoring is llm.c's completion style (doc/formats.md "Eval files and scoring"): an option's loss is the cross-entropy of its
 * completion tokens given its context; acc_norm = argmin of the mean (llm.c's HellaSwag number),
 * acc = argmin of the sum.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#ifdef _OPENMP
#include <omp.h>
#endif

#include "llmc/cpu/cpu_eval.h"
#include "llmc/eval_cli.h"
#include "llmc/cpu/gpt2_cpu.h"
#include "llmc/utils.h"
#include "kinds/registry_cpu.h"

/* The CPU back end: the fp32 model and the evaluator's forward over it (llmc/cpu/cpu_eval.h). */
typedef struct {
    GPT2 model;
    GPT2Eval eval;
} CpuEval;

static void cpu_eval_open(EvalModel *em, const char *spec, int B, int T_request, int needed) {
    CpuEval *ce = (CpuEval *)xcalloc(1, sizeof(CpuEval));
    GPT2Config c;
    float *params = eval_host_params(spec, &c); /* the checkpoint, or a descriptor's init (seed 42) */
    gpt2_alloc(&ce->model, &c, spec);
    free(ce->model.params); /* the model takes the loaded parameters: same layout, no second copy */
    ce->model.params = params;
    em->config = c;
    em->num_params = ce->model.layout.total;
    em->T = eval_choose_T(T_request, needed, c.max_seq_len);
    gpt2_eval_init(&ce->eval, &ce->model, B, em->T);
#ifdef _OPENMP
    snprintf(em->where, sizeof(em->where), "CPU fp32, %d thread(s)", omp_get_max_threads());
#else
    snprintf(em->where, sizeof(em->where), "CPU fp32, 1 thread");
#endif
    em->forward = gpt2_eval_forward;
    em->ctx = &ce->eval;
    em->backend = ce;
}

static void cpu_eval_close(EvalModel *em) {
    CpuEval *ce = (CpuEval *)em->backend;
    gpt2_eval_free(&ce->eval);
    gpt2_free(&ce->model);
    free(ce);
}

int main(int argc, char **argv) { return eval_main(argc, argv, "eval_gpt2", cpu_eval_open, cpu_eval_close); }
