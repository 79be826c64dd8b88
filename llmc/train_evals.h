/*
 * llmc/train_evals.h: the zero-shot evals a trainer runs at its val steps (-h 1, -ht, -hn),
 * shared by train_gpt2.c and train_gpt2.cu (each supplies its own forward and, on the GPU, sums
 * the counts over ranks).
 *
 * Defines:
 *   TrainEval / TrainEvals   the loaded eval files and how many examples each scores
 *   train_evals_setup        -ht "hellaswag,piqa,..." (names of llmc/evalloader.h EVAL_TASKS);
 *                            a model whose V is not GPT-2's 50257 is an error (the files are
 *                            GPT-2-tokenized);
 *                            a missing file is one message naming the working directory
 *                            dev/data/ was looked for from, and the run goes on without it (as
 *                            llm.c does for HellaSwag); a file the batch shape cannot hold is
 *                            an error. Greedy (last-word) files are scored too: both trainers'
 *                            forwards return the argmax at the scored positions
 *   train_eval_report        prints "HellaSwag: %d/%d = %f" (llm.c) or "<task>: ..." and logs
 *                            "s:%d eval:%.4f" for HellaSwag (llm.c's line, which its plotting
 *                            parses) or "s:%d eval_<task>:%.4f" for the others
 *   train_evals_free
 */
#ifndef LLMC_TRAIN_EVALS_H
#define LLMC_TRAIN_EVALS_H

#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "evalloader.h"
#include "logger.h"
#include "utils.h"

#define TRAIN_EVALS_MAX 8

typedef struct {
    const EvalTask *task;
    EvalFile file; /* file.path: dev/data/<task file> */
    int n; /* examples scored per eval */
} TrainEval;

typedef struct {
    TrainEval e[TRAIN_EVALS_MAX];
    int count;
} TrainEvals;

/* The set of tasks that will be scored, one bit per EVAL_TASKS entry: ranks must agree on it (every
 * task is one all-reduce per evaluation), which train_gpt2.cu checks at set-up. */
static inline int train_evals_mask(const TrainEvals *te) {
    int mask = 0;
    for (int i = 0; i < te->count; i++) mask |= 1 << (int)(te->e[i].task - EVAL_TASKS);
    return mask;
}

/* The name in messages: llm.c's "HellaSwag" for hellaswag, else the task name. */
static inline const char *train_eval_display_name(const EvalTask *task) {
    return strcmp(task->name, "hellaswag") == 0 ? "HellaSwag" : task->name;
}

/* tasks: comma list; max_n: -hn (0: all examples); model: -e, named in errors; V: the model's
 * vocabulary; verbose: print (rank 0). */
static inline void train_evals_setup(TrainEvals *te, const char *tasks, int max_n, int B, int T, const char *model,
                                     int V, int verbose) {
    memset(te, 0, sizeof(*te));
    char vocab_err[1400];
    if (!eval_model_vocab_ok(model, V, vocab_err, sizeof(vocab_err))) llmc_die("-h 1: -e %s", vocab_err);
    char list[512];
    if (strlen(tasks) >= sizeof(list)) llmc_die("-ht: list longer than %zu characters", sizeof(list) - 1);
    strcpy(list, tasks);
    for (char *save = NULL, *name = strtok_r(list, ",", &save); name; name = strtok_r(NULL, ",", &save)) {
        const EvalTask *task = eval_task_find(name);
        if (task == NULL) {
            llmc_die("-ht '%s': unknown task (expected a comma list of hellaswag, piqa, arc_easy, winogrande, "
                     "lambada)", name);
        }
        for (int i = 0; i < te->count; i++)
            if (te->e[i].task == task) llmc_die("-ht: task '%s' listed twice", name);
        if (te->count == TRAIN_EVALS_MAX) llmc_die("-ht: at most %d tasks", TRAIN_EVALS_MAX);
        TrainEval *e = &te->e[te->count];
        char path[512];
        snprintf(path, sizeof(path), "dev/data/%s", task->file);
        if (!file_exists(path)) {
            if (verbose) { /* the path is relative: name the folder it was looked for from */
                char cwd[4096];
                if (getcwd(cwd, sizeof(cwd)) == NULL) snprintf(cwd, sizeof(cwd), "(unknown: %s)", strerror(errno));
                printf("%s: %s not found in the working directory %s, skipping it (write it with: python %s)\n",
                       train_eval_display_name(task), path, cwd, task->writer);
            }
            continue;
        }
        evalfile_load(&e->file, path, V);
        e->n = max_n > 0 ? LLMC_MIN(max_n, e->file.num_examples) : e->file.num_examples;
        char why[256];
        if (evalfile_check_shape(&e->file, e->n, B, T, why, sizeof(why)) >= 0) {
            llmc_die("-h 1: %s: %s (scored with the training -b/-t; -hn N scores fewer examples)", path, why);
        }
        e->task = task;
        if (verbose) {
            printf("%s: %d of %d examples of %s at every val step\n", train_eval_display_name(task), e->n,
                   e->file.num_examples, path);
        }
        te->count++;
    }
}

static inline void train_eval_report(const TrainEval *e, int step, int correct, Logger *lg, int print) {
    const float acc = (float)correct / (float)e->n;
    if (print) printf("%s: %d/%d = %f\n", train_eval_display_name(e->task), correct, e->n, acc);
    if (strcmp(e->task->name, "hellaswag") == 0) logger_log_eval(lg, step, acc);
    else logger_log_eval_task(lg, step, e->task->name, acc);
}

static inline void train_evals_free(TrainEvals *te) {
    for (int i = 0; i < te->count; i++) evalfile_free(&te->e[i].file);
    memset(te, 0, sizeof(*te));
}

#endif /* LLMC_TRAIN_EVALS_H */
