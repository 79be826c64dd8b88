/*
 * llmc/eval_cli.h: the zero-shot evaluator's front end, shared by eval_gpt2.c (CPU, fp32) and
 * eval_gpt2.cu (GPU, bf16): flags, task names to files, the scoring loop with progress, the table,
 * the JSON and the per-option scores (doc/evals.md). A back end supplies the model through
 * EvalModel: its config, a line saying where it runs, and the forward callback of
 * llmc/evalloader.h; everything a user sees is the same for both programs.
 *
 * Defines:
 *   EvalArgs, eval_args_parse   -e -tasks -n -b -t -dir -json -scores (one table, --help from it)
 *   EvalModel, EvalOpenFn       what a back end fills in / the function that builds it
 *   eval_choose_T               -t against the model's maxT (0: the tasks' longest example)
 *   eval_main                   parse, check every task file, build the model, score, report
 *
 * Header-only; C11 and C++17 (the GPU program is compiled by nvcc as C++).
 */
#ifndef LLMC_EVAL_CLI_H
#define LLMC_EVAL_CLI_H

#include <errno.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli.h"
#include "config.h"
#include "checkpoint.h"
#include "evalloader.h"
#include "model_init.h"
#include "utils.h"

#define EVAL_PATH_CAP 4096
#define EVAL_DEFAULT_DIR "dev/data" /* -dir, relative to the working directory */

/* -tasks knows the tasks of llmc/evalloader.h (EVAL_TASKS) by name; any other entry is taken as
 * the path of an eval file. */
#define EVAL_MAX_TASKS 32

/* ----------------------------------------------------------------------------------------------
 * Command line: one table drives the parser and --help. */
typedef struct {
    char model[EVAL_PATH_CAP];  /* -e */
    char tasks[EVAL_PATH_CAP];  /* -tasks */
    char dir[EVAL_PATH_CAP];    /* -dir */
    char json[EVAL_PATH_CAP];   /* -json */
    char scores[EVAL_PATH_CAP]; /* -scores */
    int n, B, T;                /* -n -b -t */
} EvalArgs;

static const CliOpt EVAL_FLAGS[] = {
    CLI_STR(EvalArgs, "-e", model, NULL, 0,
            "model: a .bin checkpoint, or a descriptor (random init, seed 42); GPT-2 vocabulary (V 50257) only"),
    CLI_STR(EvalArgs, "-tasks", tasks, NULL, 0,
            "'all' or a comma list of hellaswag,piqa,arc_easy,winogrande,lambada or eval-file paths"),
    CLI_INT(EvalArgs, "-n", n, 0, INT32_MAX, 0, "score only the first N examples of each task (0: all)"),
    CLI_INT(EvalArgs, "-b", B, 1, INT32_MAX, 0, "batch rows B; an example takes one row per option"),
    CLI_INT(EvalArgs, "-t", T, 0, INT32_MAX, 0,
            "sequence length T, at most the model's maxT (0: the longest scored example, rounded up to 64)"),
    CLI_STR(EvalArgs, "-dir", dir, NULL, 0, "where the task files live: <dir>/<task>/<task>_<split>.bin"),
    CLI_STR(EvalArgs, "-json", json, NULL, 0, "also write the results as JSON to this file"),
    CLI_STR(EvalArgs, "-scores", scores, NULL, 0, "also write every option's loss to this TSV file"),
};
#define EVAL_NUM_FLAGS ((int)(sizeof(EVAL_FLAGS) / sizeof(EVAL_FLAGS[0])))

static inline void eval_args_defaults(EvalArgs *a) {
    memset(a, 0, sizeof(*a));
    strcpy(a->tasks, "all");
    strcpy(a->dir, EVAL_DEFAULT_DIR);
    a->B = 8; /* two HellaSwag examples per forward; the scores do not depend on B */
}

static inline void eval_args_parse(EvalArgs *a, int argc, char **argv) {
    eval_args_defaults(a);
    if (cli_wants_help(argc, argv)) {
        printf("usage: %s -e MODEL [-flag value ...]   (--help: this text)\n", argv[0]);
        printf("Zero-shot accuracy on HellaSwag, PIQA, ARC-Easy, WinoGrande, LAMBADA (doc/evals.md).\n");
        printf("options:\n");
        cli_print_options(EVAL_FLAGS, EVAL_NUM_FLAGS, a, -1, stdout);
        printf("task files: ");
        for (int i = 0; i < NUM_EVAL_TASKS; i++) printf("%s%s (%s)", i ? ", " : "", EVAL_TASKS[i].file, EVAL_TASKS[i].writer);
        printf("\n");
        exit(0);
    }
    cli_parse(EVAL_FLAGS, EVAL_NUM_FLAGS, a, argc, argv, NULL, NULL, 0);
    if (a->model[0] == '\0') llmc_die("-e: a model is required (a .bin checkpoint; see %s --help)", argv[0]);
    if (a->tasks[0] == '\0') llmc_die("-tasks: expected 'all' or a comma list of tasks");
}

/* ----------------------------------------------------------------------------------------------
 * Tasks: names to files. One -tasks entry: the name it is reported under, its file, and the
 * dev/data writer that makes the file (NULL for a file given by path). */
typedef struct {
    char name[64];
    char path[EVAL_PATH_CAP];
    const char *writer; /* NULL for a file given by path */
} EvalJob;

static inline int eval_resolve_one(const EvalArgs *a, const char *item, EvalJob *t) {
    const EvalTask *known = eval_task_find(item);
    if (known) {
        snprintf(t->name, sizeof(t->name), "%s", item);
        path_join(t->path, sizeof(t->path), a->dir, known->file);
        t->writer = known->writer;
        return 1;
    }
    size_t n = strlen(item);
    if (strchr(item, '/') == NULL && !(n > 4 && strcmp(item + n - 4, ".bin") == 0)) return 0;
    /* a file: named after its version-2 header name, else its file name */
    const char *base = strrchr(item, '/') ? strrchr(item, '/') + 1 : item;
    snprintf(t->name, sizeof(t->name), "%s", base);
    snprintf(t->path, sizeof(t->path), "%s", item);
    t->writer = NULL;
    return 1;
}

static inline int eval_resolve_tasks(const EvalArgs *a, EvalJob *tasks) {
    if (strcmp(a->tasks, "all") == 0) {
        for (int k = 0; k < NUM_EVAL_TASKS; k++) eval_resolve_one(a, EVAL_TASKS[k].name, &tasks[k]);
        return NUM_EVAL_TASKS;
    }
    char buf[EVAL_PATH_CAP];
    snprintf(buf, sizeof(buf), "%s", a->tasks);
    int n = 0;
    for (char *save = NULL, *item = strtok_r(buf, ",", &save); item; item = strtok_r(NULL, ",", &save)) {
        if (n == EVAL_MAX_TASKS) llmc_die("-tasks: more than %d entries", EVAL_MAX_TASKS);
        if (!eval_resolve_one(a, item, &tasks[n])) {
            llmc_die("-tasks: '%s': expected all, hellaswag, piqa, arc_easy, winogrande, lambada or an eval-file "
                     "path (.bin)", item);
        }
        n++;
    }
    if (n == 0) llmc_die("-tasks '%s': no task named", a->tasks);
    return n;
}

/* The working directory, which relative paths (the default -dir among them) are read from. */
static inline void eval_working_dir(char *out, size_t cap) {
    if (getcwd(out, cap) == NULL) snprintf(out, cap, "(unknown: %s)", strerror(errno));
}

/* Where a missing task file was looked for, for its message: "-dir D, working directory W", D
 * marked "(the default)" when -dir was not changed. A relative -dir (the default dev/data is one)
 * is taken from the working directory, so a program started from another folder looks in that
 * folder's dev/data; naming both says where the file was expected. */
static inline void eval_where_looked(const EvalArgs *a, char *out, size_t cap) {
    char cwd[EVAL_PATH_CAP];
    eval_working_dir(cwd, sizeof(cwd));
    snprintf(out, cap, "-dir %s%s, working directory %s", a->dir,
             strcmp(a->dir, EVAL_DEFAULT_DIR) == 0 ? " (the default)" : "", cwd);
}

/* Loads and checks a task's file (its token ids are checked once the model's vocabulary is known:
 * evalfile_check_vocab); a missing file names the path tried, where it was looked for (-dir and the
 * working directory) and the writer that makes it. */
static inline void eval_load_task(const EvalArgs *a, const EvalJob *t, EvalFile *ef) {
    if (!file_exists(t->path)) {
        char where[2 * EVAL_PATH_CAP + 64];
        if (t->writer) {
            eval_where_looked(a, where, sizeof(where));
            llmc_die("%s: eval file not found (%s; make evals writes the five; or: python %s)", t->path, where,
                     t->writer);
        }
        eval_working_dir(where, sizeof(where)); /* a file given by path: -dir plays no part */
        llmc_die("%s: eval file not found (working directory %s)", t->path, where);
    }
    evalfile_load(ef, t->path, 0);
}

/* Every missing task file in one line, with where they were looked for, before any is read (make
 * evals writes them all). */
static inline void eval_check_files(const EvalArgs *a, const EvalJob *tasks, int n) {
    char missing[2048] = "";
    int count = 0;
    size_t used = 0;
    for (int i = 0; i < n; i++) {
        if (file_exists(tasks[i].path) || !tasks[i].writer) continue;
        count++;
        const int w = snprintf(missing + used, sizeof(missing) - used, "%s%s", used ? ", " : "", tasks[i].path);
        if (w > 0) used = LLMC_MIN(used + (size_t)w, sizeof(missing) - 1);
    }
    if (count > 1) {
        char where[2 * EVAL_PATH_CAP + 64];
        eval_where_looked(a, where, sizeof(where));
        llmc_die("%d eval files not found (%s): %s (make evals writes them)", count, where, missing);
    }
}

/* ----------------------------------------------------------------------------------------------
 * The back end */
typedef struct {
    GPT2Config config;
    size_t num_params;
    int T;              /* the sequence length every batch is scored at (eval_choose_T) */
    char where[256];    /* printed at start-up: "CPU fp32, 2 thread(s)", or the GPU and its paths */
    EvalForwardFn forward;
    void *ctx;          /* the forward's context */
    void *backend;      /* what the back end's open allocated, for its close */
} EvalModel;

/* Builds the model of -e (a checkpoint, or a descriptor initialized with seed 42) for batches of up
 * to B rows, sets em->T = eval_choose_T(T_request, needed, maxT), fills em, and dies with one line
 * on a problem. needed: the most positions any scored example takes. */
typedef void (*EvalOpenFn)(EvalModel *em, const char *spec, int B, int T_request, int needed);
typedef void (*EvalCloseFn)(EvalModel *em);

/* -t: an explicit T above maxT is an error (the position table has no row for it). -t 0 takes
 * the longest scored example of the tasks (`needed` positions) rounded up to 64, at most maxT and
 * 1024 (llm.c's HellaSwag shape; a longer example is then reported by evalfile_check_shape): the
 * GPU pads every batch to T, so T = 1024 for 150-token examples would cost ~7x the work. */
static inline int eval_choose_T(int T_request, int needed, int maxT) {
    if (T_request > 0) {
        if (T_request > maxT) llmc_die("-t %d exceeds the model's maxT = %d", T_request, maxT);
        return T_request;
    }
    const int rounded = (LLMC_MAX(needed, 1) + 63) / 64 * 64;
    return LLMC_MIN(rounded, LLMC_MIN(maxT, 1024));
}

/* The config and fp32 parameters of -e: a checkpoint's, or GPT-2's init of a descriptor with seed
 * 42 (the same draw as the CPU model's, so both programs score identical weights). Used by the
 * GPU back end; the CPU one builds its model struct directly. */
static inline float *eval_host_params(const char *spec, GPT2Config *c) {
    if (!config_is_descriptor_like(spec)) {
        if (!file_exists(spec)) llmc_die("-e %s: checkpoint not found", spec);
        return checkpoint_load_fp32(spec, c, NULL);
    }
    char msg[EVAL_PATH_CAP + 512];
    if (!config_from_descriptor(spec, c, msg, sizeof(msg))) llmc_die("-e: %s", msg);
    return model_init_params_host(c, 42u);
}

/* -e must have GPT-2's vocabulary (the eval files are GPT-2-tokenized): read from the checkpoint's
 * header or the descriptor, and refused with one line naming -e. A checkpoint or descriptor that
 * cannot be read is left to the back end's open, which names the problem. */
static inline void eval_require_gpt2_vocab(const char *spec) {
    GPT2Config c;
    char msg[EVAL_PATH_CAP + 512];
    if (config_is_descriptor_like(spec)) {
        if (!config_from_descriptor(spec, &c, msg, sizeof(msg))) return;
    } else {
        if (!file_exists(spec)) return;
        int is_bf16 = 0;
        checkpoint_read_header(spec, &c, &is_bf16);
    }
    if (!eval_model_vocab_ok(spec, c.vocab_size, msg, sizeof(msg))) llmc_die("-e %s", msg);
}

/* ----------------------------------------------------------------------------------------------
 * One task: score, time, report */
typedef struct {
    EvalJob task;
    int version, scoring, uses_norm, n;
    double acc, acc_norm, ppl, seconds;
} EvalReport;

/* Scores the first -n examples of the task's loaded file ef. */
static inline void eval_score_task(EvalModel *em, const EvalArgs *a, const EvalJob *t, const EvalFile *ef, FILE *scores,
                                   EvalReport *rep) {
    const int V = em->config.vocab_size, T = em->T;
    char why[EVAL_PATH_CAP + 256];
    const int n = a->n > 0 ? LLMC_MIN(a->n, ef->num_examples) : ef->num_examples;
    const int bad = evalfile_check_shape(ef, n, a->B, T, why, sizeof(why));
    if (bad >= 0) llmc_die("%s: %s", t->path, why);
    memset(rep, 0, sizeof(*rep));
    rep->task = *t;
    if (t->writer == NULL && ef->name[0] != '\0') snprintf(rep->task.name, sizeof(rep->task.name), "%s", ef->name);
    rep->version = ef->version;
    rep->scoring = ef->scoring;
    rep->uses_norm = evalfile_uses_norm(ef);
    rep->n = n;

    EvalResults res;
    eval_results_init(&res, ef, n);
    const double t0 = wall_seconds();
    double last_report = t0;
    const int chunk = 64; /* progress every chunk once a task runs longer than 30 s */
    for (int lo = 0; lo < n; lo += chunk) {
        eval_run_range(ef, lo, LLMC_MIN(n, lo + chunk), a->B, T, V, em->forward, em->ctx, &res);
        if (wall_seconds() - last_report > 30.0 && lo + chunk < n) {
            last_report = wall_seconds();
            const double rate = (lo + chunk) / (last_report - t0);
            char left[32];
            format_duration((n - lo - chunk) / rate, left, sizeof(left));
            printf("  %s: %d/%d examples, %.1f examples/s, about %s left in this task\n", rep->task.name, lo + chunk, n,
                   rate, left);
            fflush(stdout);
        }
    }
    rep->seconds = wall_seconds() - t0;
    rep->acc = (double)res.correct_sum / n;
    rep->acc_norm = (double)res.correct_mean / n;
    rep->ppl = ef->scoring == EVAL_SCORE_GREEDY ? exp(res.greedy_loss / n) : 0.0;
    if (scores) {
        for (int i = 0; i < n; i++) {
            for (int r = 0; r < ef->ex[i].n_rows; r++) {
                const EvalRowScore *s = &res.rows[res.row_offset[i] + r];
                fprintf(scores, "%s\t%d\t%d\t%d\t%d\t%.9g\t%.9g\t%d\n", rep->task.name, i, r, res.label[i], s->n_tok,
                        s->sum_loss, s->sum_loss / s->n_tok, s->all_argmax);
            }
        }
    }
    eval_results_free(&res);
}

/* The perplexity as the table prints it, within its EVAL_PPL_WIDTH-character column: "%.6g" while
 * that is a plain number (below 1e6: "12.3457"); then the whole number up to 9,999,999 (a random
 * model's LAMBADA perplexity is about 3e6, which "%.6g" made the 11-character "3.06432e+06"); above
 * that 4 significant digits and a power of ten ("1.235e+07", "1.798e+308" at most). The JSON keeps
 * every digit ("%.6f", eval_write_json). Returns out (cap: at least 16 bytes). */
#define EVAL_PPL_WIDTH 10

static inline const char *eval_format_ppl(double ppl, char *out, size_t cap) {
    snprintf(out, cap, "%.6g", ppl);
    if (strlen(out) <= EVAL_PPL_WIDTH && strchr(out, 'e') == NULL) return out; /* also inf, nan */
    if (ppl >= 1 && ppl < 1e7) { /* 999999.5 and up: "%.6g" wrote "1e+06" */
        snprintf(out, cap, "%.0f", ppl);
        if (strlen(out) <= 7) return out; /* else it rounded up to 10000000 */
    }
    snprintf(out, cap, "%.3e", ppl);
    if (strlen(out) > EVAL_PPL_WIDTH) snprintf(out, cap, "%.2e", ppl); /* a negative ppl with a 3-digit power */
    return out;
}

static inline void eval_print_report(const EvalReport *r) {
    char norm[32] = "-", ppl[32] = "-";
    if (r->uses_norm) snprintf(norm, sizeof(norm), "%.4f", r->acc_norm);
    if (r->scoring == EVAL_SCORE_GREEDY) eval_format_ppl(r->ppl, ppl, sizeof(ppl));
    printf("| %-12s | %8d | %6.4f | %8s | %10s | %10.1f |\n", r->task.name, r->n, r->acc, norm, ppl,
           r->n / (r->seconds > 0 ? r->seconds : 1e-9));
    fflush(stdout);
}

/* JSON: {"model":..., "B":..., "T":..., "tasks": {name: {...}}}; written to .tmp, then renamed. */
static inline void eval_write_json(const char *path, const EvalArgs *a, int T, const EvalReport *reps, int n) {
    AtomicFile af;
    atomic_open(&af, path);
    FILE *f = af.f;
    fprintf(f, "{\n  \"model\": ");
    json_string(f, a->model);
    fprintf(f, ",\n  \"B\": %d,\n  \"T\": %d,\n  \"tasks\": {\n", a->B, T);
    for (int i = 0; i < n; i++) {
        const EvalReport *r = &reps[i];
        fprintf(f, "    ");
        json_string(f, r->task.name);
        fprintf(f, ": {\"file\": ");
        json_string(f, r->task.path);
        fprintf(f, ", \"version\": %d, \"scoring\": \"%s\", \"examples\": %d, \"acc\": %.6f", r->version,
                r->scoring == EVAL_SCORE_GREEDY ? "greedy" : "choice", r->n, r->acc);
        if (r->uses_norm) fprintf(f, ", \"acc_norm\": %.6f", r->acc_norm);
        if (r->scoring == EVAL_SCORE_GREEDY) fprintf(f, ", \"ppl\": %.6f", r->ppl);
        fprintf(f, ", \"seconds\": %.3f, \"examples_per_s\": %.3f}%s\n", r->seconds,
                r->n / (r->seconds > 0 ? r->seconds : 1e-9), i + 1 < n ? "," : "");
    }
    fprintf(f, "  }\n}\n");
    atomic_commit(&af);
}

/* ----------------------------------------------------------------------------------------------
 * The program: every task file is read and checked once, before the model is built or anything
 * is scored. */
static inline int eval_main(int argc, char **argv, const char *prog, EvalOpenFn open_model, EvalCloseFn close_model) {
    static EvalArgs a;
    stdout_line_buffered();
    eval_args_parse(&a, argc, argv);
    eval_require_gpt2_vocab(a.model); /* before any file is read or the model is built */
    if (a.json[0]) require_output_path("-json", a.json); /* before minutes of scoring */
    if (a.scores[0]) require_output_path("-scores", a.scores);
    static EvalJob tasks[EVAL_MAX_TASKS];
    const int ntasks = eval_resolve_tasks(&a, tasks);
    eval_check_files(&a, tasks, ntasks);
    EvalFile *files = (EvalFile *)xcalloc((size_t)ntasks, sizeof(EvalFile)); /* all read up front */
    int needed = 1;
    for (int i = 0; i < ntasks; i++) {
        eval_load_task(&a, &tasks[i], &files[i]);
        const int n = a.n > 0 ? LLMC_MIN(a.n, files[i].num_examples) : files[i].num_examples;
        for (int k = 0; k < n; k++) needed = LLMC_MAX(needed, eval_example_positions(&files[i].ex[k]));
    }
    static EvalModel em;
    open_model(&em, a.model, a.B, a.T, needed);
    for (int i = 0; i < ntasks; i++) { /* every file's token ids against this model, before any scoring */
        char why[EVAL_PATH_CAP + 256];
        if (!evalfile_check_vocab(&files[i], em.config.vocab_size, why, sizeof(why))) llmc_die("%s", why);
    }
    printf("%s: %s (%d layers, C %d, maxT %d, %zu parameters), B %d, T %d, %s\n", prog, a.model,
           em.config.num_layers, em.config.channels, em.config.max_seq_len, em.num_params, a.B, em.T, em.where);
    FILE *scores = NULL;
    AtomicFile scores_file;
    if (a.scores[0]) {
        atomic_open(&scores_file, a.scores);
        scores = scores_file.f;
        fprintf(scores, "task\texample\toption\tlabel\tn_tok\tsum_loss\tmean_loss\tall_argmax\n");
    }
    static EvalReport reps[EVAL_MAX_TASKS];
    printf("| task         | examples | acc    | acc_norm | ppl        | examples/s |\n");
    printf("|--------------|----------|--------|----------|------------|------------|\n");
    fflush(stdout);
    double total_s = 0.0;
    long long total_n = 0;
    long long all_n = 0; /* the examples of every task, for the estimate of the time left */
    for (int i = 0; i < ntasks; i++) all_n += a.n > 0 ? LLMC_MIN(a.n, files[i].num_examples) : files[i].num_examples;
    for (int i = 0; i < ntasks; i++) {
        eval_score_task(&em, &a, &tasks[i], &files[i], scores, &reps[i]);
        evalfile_free(&files[i]);
        eval_print_report(&reps[i]);
        total_s += reps[i].seconds;
        total_n += reps[i].n;
        if (i + 1 < ntasks && total_n > 0) {
            char left[32];
            format_duration(total_s / total_n * (double)(all_n - total_n), left, sizeof(left));
            printf("  %lld of %lld examples scored, about %s left at this rate (-n N: the first N of each task)\n",
                   total_n, all_n, left);
        }
    }
    printf("%lld examples in %.1f s (%.1f examples/s)\n", total_n, total_s, total_n / (total_s > 0 ? total_s : 1e-9));
    if (scores) {
        atomic_commit(&scores_file);
        printf("wrote %s\n", a.scores);
    }
    if (a.json[0]) {
        eval_write_json(a.json, &a, em.T, reps, ntasks);
        printf("wrote %s\n", a.json);
    }
    close_model(&em);
    free(files);
    return 0;
}

#endif /* LLMC_EVAL_CLI_H */
