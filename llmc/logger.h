/*
 * llmc/logger.h: `<out>/main.log`, the per-run metrics file llm.c's plotting tools parse
 * (doc/formats.md "main.log and stdout"). `s` is the 0-based step.
 *
 * Defines:
 *   Logger, logger_init (a new main.log, or on resume the old one without the records of the
 *   resumed step and later: llmc/run_folder.h run_log_keep_before), logger_log_train ("s:%d trl:%.4f lr:%.6f
 *   norm:%.2f"), logger_log_val ("s:%d tel:%.4f"), logger_log_eval ("s:%d eval:%.4f", HellaSwag),
 *   logger_log_eval_task ("s:%d eval_<task>:%.4f", the other evals),
 *   logger_free. Without an output directory every call is a no-op. Lines are flushed at once so
 *   a crashed run keeps its log.
 */
#ifndef LLMC_LOGGER_H
#define LLMC_LOGGER_H

#include <stdio.h>

#include "run_folder.h"
#include "utils.h"

typedef struct {
    FILE *f;
    char path[4096];
} Logger;

/* resume_step: the step a resumed run starts at, -1 for a new run. A new run's main.log must not
 * exist (llmc/run_folder.h moved an earlier run's aside): it is created, never truncated. */
static inline void logger_init(Logger *lg, const char *out_dir, int rank, int resume_step) {
    lg->f = NULL;
    lg->path[0] = '\0';
    if (out_dir == NULL || out_dir[0] == '\0' || rank != 0) return;
    path_join(lg->path, sizeof(lg->path), out_dir, RUN_FOLDER_LOG);
    if (resume_step >= 0) {
        run_log_keep_before(out_dir, resume_step);
        lg->f = xfopen(lg->path, "a");
        return;
    }
    lg->f = fopen(lg->path, "wx");
    if (lg->f == NULL) {
        llmc_die("%s: cannot create the run's log: %s", lg->path,
                 errno == EEXIST ? "it exists (an earlier run's; this run does not replace it)" : strerror(errno));
    }
}

static inline void logger_line_(Logger *lg) {
    if (fflush(lg->f) != 0) llmc_die("%s: write failed", lg->path);
}

static inline void logger_log_train(Logger *lg, int step, float loss, float lr, float norm) {
    if (lg->f == NULL) return;
    fprintf(lg->f, "s:%d trl:%.4f lr:%.6f norm:%.2f\n", step, loss, lr, norm);
    logger_line_(lg);
}

static inline void logger_log_val(Logger *lg, int step, float loss) {
    if (lg->f == NULL) return;
    fprintf(lg->f, "s:%d tel:%.4f\n", step, loss);
    logger_line_(lg);
}

static inline void logger_log_eval(Logger *lg, int step, float acc) {
    if (lg->f == NULL) return;
    fprintf(lg->f, "s:%d eval:%.4f\n", step, acc);
    logger_line_(lg);
}

/* The residual stream's root mean square entering each block and ln_f, at a val step:
 * "s:%d rms0:%.4g rms1:%.4g ... rmsL:%.4g" (L + 1 fields; llm.c's dev/vislog reads the first
 * field of a line as one more stream, as it reads trl of the train line). */
static inline void logger_log_stream(Logger *lg, int step, const float *rms, int n) {
    if (lg->f == NULL) return;
    fprintf(lg->f, "s:%d", step);
    for (int i = 0; i < n; i++) fprintf(lg->f, " rms%d:%.4g", i, rms[i]);
    fprintf(lg->f, "\n");
    logger_line_(lg);
}

/* Other in-training evals: "s:%d eval_<task>:%.4f" (the HellaSwag line stays llm.c's "eval:"). */
static inline void logger_log_eval_task(Logger *lg, int step, const char *task, float acc) {
    if (lg->f == NULL) return;
    fprintf(lg->f, "s:%d eval_%s:%.4f\n", step, task, acc);
    logger_line_(lg);
}

static inline void logger_free(Logger *lg) {
    if (lg->f != NULL) xfclose(lg->f, lg->path);
    lg->f = NULL;
}

#endif /* LLMC_LOGGER_H */
