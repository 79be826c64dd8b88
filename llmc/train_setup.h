/*
 * llmc/train_setup.h: the host-side run logic both trainers share (train_gpt2.c on the CPU,
 * train_gpt2.cu on GPUs), so that the two cannot drift apart in what a flag means.
 *
 * Defines:
 *   TrainLoop            the loaders, LR schedule, outlier detectors and step counts of a run
 *   train_flags_save / train_flags_restore   the run's flags in <-o>/flags.txt, so that -y 1
 *                        resumes from the run folder alone (a flag given again wins, and a changed
 *                        value is stated); train_flags_hash, dataloader_hash: fingerprints the
 *                        ranks of a multi-GPU run compare
 *   train_resume_point   -y 1: the step to resume from (-1: none) and the model file to start from
 *   train_loop_setup     -d into micro-steps, the loaders, -m, -x, the LR schedule (llm.c's rules)
 *   train_loop_free
 *   train_step_judge     one step's lr, loss/norm z-scores, skip decision and clip scale
 *   train_state_at       the state-file header of a rank at a step (also what a resume expects)
 *   train_checkpoint_done  a checkpoint's DONE_ marker and the pruning of older ones
 *   train_due_*          which of val loss, evals, sample, checkpoint step `step` does
 *   EtaClock             the time left, from the wall time of the last ETA_WINDOW steps (val
 *                        losses, samples and checkpoints included)
 *   RunRecord, train_summary_print   what the run did, printed at its end (elapsed, best val
 *                        loss, last checkpoint, the commands that come next)
 *   train_stop_report    a run stopped by Ctrl-C: what was saved and the command that goes on
 *   train_stream_print   the residual stream's size per layer at a val step, for -ln 0 models
 *
 * Plain C (static inline, explicit casts): gcc -std=c11 compiles it, and so does nvcc's host
 * compiler as C++ (test/test_headers_cxx.cpp checks that).
 */
#ifndef LLMC_TRAIN_SETUP_H
#define LLMC_TRAIN_SETUP_H

#include <math.h>
#include <signal.h>
#include <stdio.h>

#include "args.h"
#include "checkpoint.h" /* TRAIN_FLAGS_FILE, FlagsFile */
#include "optimizer.h"
#include "dataloader.h"
#include "outlier.h"
#include "schedulers.h"
#include "state.h"
#include "utils.h"

#if FLAGS_FILE_LINE_CAP < ARG_STR_CAP + 64
#error "llmc/checkpoint.h FLAGS_FILE_LINE_CAP must hold a flag and a value of ARG_STR_CAP characters"
#endif

typedef struct {
    DataLoader train_loader, val_loader;
    LRSchedule lr_schedule;
    OutlierDetector loss_outliers, norm_outliers;
    int grad_accum;  /* micro-steps per update (per process) */
    int num_steps;   /* updates in the run */
    int start_step;  /* 0, or the step resumed from */
    int resumed;     /* 1 while in the iteration that was resumed into (its checkpoint exists) */
    int val_batches; /* per evaluation (per process) */
} TrainLoop;

/* ----------------------------------------------------------------------------------------------
 * <-o>/flags.txt: one "flag value" line per flag (the value to the end of the line), written at
 * the start of every run with -o. -y 1 on a folder that holds one takes every flag the command line
 * does not give from it, so `./train_gpt2 -o DIR -y 1` continues the run as it was started (from
 * its newest complete checkpoint, or from scratch when it has none: llmc/run_folder.h). The flags
 * of one launch (-y, -start_over, -o and the process and rendezvous flags, which differ per rank)
 * are neither saved nor restored. */

static inline int train_flag_per_launch(const char *flag) {
    static const char *const per_launch[] = {"-y", "-start_over", "-o", "-pn", "-pr", "-pg", "-pi", "-ps", "-pf"};
    for (size_t i = 0; i < sizeof(per_launch) / sizeof(per_launch[0]); i++)
        if (strcmp(flag, per_launch[i]) == 0) return 1;
    return 0;
}

/* The value as it is written to the file: floats with 9 significant digits (exact for fp32). */
static inline void train_flag_text(const ArgSpec *s, const TrainArgs *a, char *buf, size_t cap) {
    const char *base = (const char *)a + s->offset;
    if (s->type == CLI_TYPE_FLOAT) snprintf(buf, cap, "%.9g", (double)*(const float *)base);
    else if (s->type == CLI_TYPE_INT) snprintf(buf, cap, "%d", *(const int *)base);
    else snprintf(buf, cap, "%s", base);
}

static inline void train_flags_save(const TrainArgs *a) {
    char path[ARG_STR_CAP + 32];
    path_join(path, sizeof(path), a->out_dir, TRAIN_FLAGS_FILE);
    AtomicFile af;
    atomic_open(&af, path);
    fprintf(af.f, "# the flags of this run, read by -y 1 (llmc/train_setup.h); one \"flag value\" per line\n");
    int n;
    const ArgSpec *t = train_arg_table(&n);
    for (int i = 0; i < n; i++) {
        if (train_flag_per_launch(t[i].flag)) continue;
        char val[ARG_STR_CAP + 8];
        train_flag_text(&t[i], a, val, sizeof(val));
        fprintf(af.f, "%s %s\n", t[i].flag, val);
    }
    atomic_commit(&af);
}

/* A fingerprint of one flag's value, or of all the saved ones (flag < 0): what the ranks of a
 * multi-GPU run compare at start-up. */
static inline uint64_t train_flags_hash(const TrainArgs *a, int flag) {
    uint64_t h = FNV64_START;
    int n;
    const ArgSpec *t = train_arg_table(&n);
    for (int i = 0; i < n; i++) {
        if ((flag >= 0 && i != flag) || train_flag_per_launch(t[i].flag)) continue;
        char val[ARG_STR_CAP + 8];
        train_flag_text(&t[i], a, val, sizeof(val));
        h = fnv1a64(h, t[i].flag, strlen(t[i].flag) + 1);
        h = fnv1a64(h, val, strlen(val) + 1);
    }
    return h;
}

/* The data a loader reads: its files' names and sizes, in its order. */
static inline uint64_t dataloader_hash(const DataLoader *dl, uint64_t h) {
    for (size_t i = 0; i < dl->glob.gl_pathc; i++) {
        const char *path = dl->glob.gl_pathv[i];
        const int64_t size = file_size_or_neg(path);
        h = fnv1a64(h, path, strlen(path) + 1);
        h = fnv1a64(h, &size, sizeof(size));
    }
    return h;
}

/* -y 1 on a folder with flags.txt: every flag not on the command line (given[]) from it; one
 * given with another value than the run's is stated (verbose: print the notes). With a complete
 * checkpoint to resume from, -b and -t must stay the run's: the state file holds the data loader's
 * order of B x T windows. A checkpoint without flags.txt beside it (written by an older version)
 * keeps the command line's flags, with a note. An unknown flag in the file is one error naming
 * the file and line. Returns 1 if flags were restored. */
static inline int train_flags_restore(TrainArgs *a, const int *given, int verbose) {
    if (!a->resume || a->out_dir[0] == '\0') return 0;
    const int ckpt = find_max_done_step(a->out_dir);
    char path[ARG_STR_CAP + 32];
    path_join(path, sizeof(path), a->out_dir, TRAIN_FLAGS_FILE);
    if (!file_exists(path)) {
        if (verbose && ckpt >= 0) printf("note: %s not found: resuming with the flags of this command line only\n", path);
        return 0;
    }
    FlagsFile ff;
    flags_file_open(&ff, path);
    const char *flag, *val;
    int changed = 0, n;
    const ArgSpec *t = train_arg_table(&n);
    while (flags_file_next(&ff, &flag, &val)) {
        const int k = cli_find(t, n, flag);
        if (k < 0) /* -prism_unchecked 1 once read a -prism table without Prism's rules */
            llmc_die("%s:%d: %s: not a flag of this trainer%s", path, ff.lineno, flag,
                     strcmp(flag, "-prism_unchecked") == 0 ? " (a table without Prism's rules is -layers FILE)" : "");
        if (train_flag_per_launch(flag)) continue;
        char err[1400];
        if (!given[k]) {
            if (!cli_try_set(&t[k], a, val, err, sizeof(err))) llmc_die("%s:%d: %s", path, ff.lineno, err);
            continue;
        }
        TrainArgs saved = *a; /* the file's value, compared in the file's notation */
        if (!cli_try_set(&t[k], &saved, val, err, sizeof(err))) llmc_die("%s:%d: %s", path, ff.lineno, err);
        char now[ARG_STR_CAP + 8], then[ARG_STR_CAP + 8];
        train_flag_text(&t[k], a, now, sizeof(now));
        train_flag_text(&t[k], &saved, then, sizeof(then));
        if (strcmp(now, then) != 0) {
            if (ckpt >= 0 && (strcmp(flag, "-b") == 0 || strcmp(flag, "-t") == 0 || strcmp(flag, "-rows") == 0)) {
                llmc_die("%s %s: this run's checkpoints were written with %s %s (%s); its state file holds the "
                         "data order of B x T windows (or rows), so resume with %s %s (or leave %s out)",
                         flag, now, flag, then, path, flag, then, flag);
            }
            changed++;
            cli_value_text(&t[k], a, now, sizeof(now)); /* shown as the start-up table shows it */
            cli_value_text(&t[k], &saved, then, sizeof(then));
            if (verbose) printf("note: %s %s replaces this run's %s %s (%s)\n", flag, now, flag, then, path);
        }
    }
    flags_file_close(&ff);
    if (verbose && ckpt >= 0) printf("resuming with the flags of %s%s\n", path, changed ? " and the changes above" : "");
    return 1;
}

/* -y 1: the newest checkpoint in -o with a DONE_ marker. Returns its step, or -1 for a fresh
 * start; none found is a fresh start, as in llm.c, so that a restart loop can pass -y 1 from its
 * first launch (llmc/run_folder.h decides before whether the folder allows one). *init_path gets the model file to start from, that checkpoint or -e (allocated:
 * free it). A resumed run takes its layer table from the checkpoint, so -layers / -prism is dropped. */
static inline int train_resume_point(TrainArgs *a, int verbose, char **init_path) {
    const size_t cap = 4200; /* -o (ARG_STR_CAP) and the checkpoint's file name */
    char *path = (char *)xmalloc(cap);
    *init_path = path;
    const int step = a->resume ? find_max_done_step(a->out_dir) : -1;
    if (step >= 0) {
        ckpt_model_path(path, cap, a->out_dir, step);
        const char *flag = a->layers[0] != '\0' ? "-layers" : a->prism[0] != '\0' ? "-prism" : NULL;
        if (flag != NULL && verbose) printf("resuming: the layer table comes from %s; %s is not used\n", path, flag);
        a->layers[0] = '\0';
        a->prism[0] = '\0';
        return step;
    }
    snprintf(path, cap, "%s", a->init);
    return -1;
}

/* The run's shape, as llm.c's: -d -1 is one micro-batch of all processes, otherwise a multiple of
 * B*T*processes; -m -1 is the whole val data; -x -1 is one epoch of the train data. Each rank
 * reads its own slice of the shards (-rows 1: its own rows); -a 1 (overfit) reads without shuffling. The outlier
 * detectors start empty; the loop starts at resume_step (or 0 for -1), which must not lie past
 * the last step. */
static inline void train_loop_setup(TrainLoop *t, TrainArgs *a, int rank, int nproc, int vocab_size, int resume_step) {
    const long long tokens_per_micro = (long long)a->B * a->T * nproc;
    if (a->total_batch == -1) a->total_batch = (int)tokens_per_micro;
    if (a->total_batch % tokens_per_micro != 0) {
        llmc_die("-d %d is not a multiple of B*T*processes = %lld", a->total_batch, tokens_per_micro);
    }
    t->grad_accum = (int)(a->total_batch / tokens_per_micro);
    dataloader_init(&t->train_loader, a->train_pattern, a->B, a->T, rank, nproc, !a->overfit, vocab_size);
    if (a->rows) dataloader_set_rows(&t->train_loader, 1);
    if (a->data_seed != 42 && !a->overfit) dataloader_set_seed(&t->train_loader, (uint32_t)a->data_seed);
    dataloader_init(&t->val_loader, a->val_pattern, a->B, a->T, rank, nproc, 0, vocab_size);
    t->val_batches = dataloader_val_batches(a->val_batches, &t->val_loader);
    t->num_steps = a->max_steps;
    if (t->num_steps == -1) {
        t->num_steps = (int)(t->train_loader.total_tokens / a->total_batch);
        if (t->num_steps < 1) llmc_die("-x -1: the train data holds less than one batch of -d %d tokens", a->total_batch);
    }
    if (resume_step > t->num_steps) {
        llmc_die("%s: checkpoint step %d is past the run's last step %d (-x)", a->out_dir, resume_step, t->num_steps);
    }
    LRKind kind = LR_COSINE;
    lr_kind_from_name(a->lr_schedule, &kind);
    lr_schedule_init(&t->lr_schedule, kind, a->lr, a->warmup, t->num_steps, a->final_lr_frac, a->decay_frac);
    outlier_init(&t->loss_outliers);
    outlier_init(&t->norm_outliers);
    t->start_step = LLMC_MAX(resume_step, 0);
    t->resumed = resume_step >= 0;
}

/* The start-up line's words for how the train loader draws its batches. */
static inline const char *train_loader_mode(const DataLoader *dl) {
    if (!dl->should_shuffle) return "batches in file order (-a 1)";
    return dl->rows ? "rows drawn independently (-rows 1)" : "batches of one span each (-rows 0, llm.c)";
}

static inline void train_loop_free(TrainLoop *t) {
    dataloader_free(&t->train_loader);
    dataloader_free(&t->val_loader);
}

/* ----------------------------------------------------------------------------------------------
 * One optimizer step, after the forward/backward passes gave its mean loss and gradient norm. */
typedef struct {
    float loss, norm, lr;
    double loss_z, norm_z; /* against the recent steps (llmc/outlier.h) */
    int skipped;           /* -sl / -sg: the update is skipped (and a non-finite norm always) */
    float clip_scale;      /* the gradient factor that clips the norm to 1.0 */
} StepResult;

static inline StepResult train_step_judge(TrainLoop *t, const TrainArgs *a, int step, float loss, float norm) {
    StepResult res;
    res.loss = loss;
    res.norm = norm;
    res.lr = lr_at(&t->lr_schedule, step);
    res.loss_z = outlier_update(&t->loss_outliers, loss);
    res.norm_z = outlier_update(&t->norm_outliers, norm);
    res.skipped = (a->skip_loss_z > 0 && res.loss_z > a->skip_loss_z) ||
                  (a->skip_norm_z > 0 && res.norm_z > a->skip_norm_z) || !isfinite(norm);
    const float clip = 1.0f;
    res.clip_scale = norm > clip ? clip / norm : 1.0f;
    return res;
}

/* ----------------------------------------------------------------------------------------------
 * The loop's schedule, as llm.c's: steps start..N, the N iteration only evaluates, samples and
 * saves. The val loss is also taken at step 0; evals and samples wait for step > 0. A checkpoint is
 * not rewritten in the iteration that resumed from it. */
static inline int train_due_val(const TrainArgs *a, int step, int last) {
    return last || (a->val_every > 0 && step % a->val_every == 0);
}

static inline int train_due_evals(const TrainArgs *a, int step, int last) {
    return (step > 0 && a->val_every > 0 && step % a->val_every == 0) || last;
}

static inline int train_due_sample(const TrainArgs *a, int step, int last) {
    return a->sample_every > 0 && ((step > 0 && step % a->sample_every == 0) || last);
}

static inline int train_due_checkpoint(const TrainArgs *a, const TrainLoop *t, int step, int last) {
    return a->checkpoint_every > 0 && !t->resumed && step > 0 && (step % a->checkpoint_every == 0 || last);
}

/* ----------------------------------------------------------------------------------------------
 * Checkpoints (doc/formats.md "Optimizer/DataLoader state") */

/* The part of a state file's header that is the run's shape: how many processes, which one writes,
 * whether fp32 master weights are kept. */
typedef struct {
    int nproc, rank, master_weights;
} RunShape;

static inline RunShape run_shape(int nproc, int rank, int master_weights) {
    RunShape r;
    r.nproc = nproc;
    r.rank = rank;
    r.master_weights = master_weights;
    return r;
}

/* The CPU trainer's: one process, no master weights (its parameters are fp32 already). */
static inline RunShape run_shape_single(void) { return run_shape(1, 0, 0); }

/* The stochastic-rounding RNG of the GPU's bf16 update, and its value before the last update. */
typedef struct {
    uint64_t state, last_update;
} RoundingRng;

static inline RoundingRng rounding_rng(uint64_t state, uint64_t last_update) {
    RoundingRng g;
    g.state = state;
    g.last_update = last_update;
    return g;
}

/* The state-file header of a rank at `step`: the run's shape, the train loader's position and the
 * rounding RNG. As the expectation of a resume only the shape and the step are compared. */
static inline TrainState train_state_at(const DataLoader *train, RunShape shape, int step, RoundingRng rng) {
    TrainState s;
    s.num_processes = shape.nproc;
    s.process_rank = shape.rank;
    s.use_master_weights = shape.master_weights;
    s.should_shuffle = train->should_shuffle;
    s.rows = train->rows;
    s.step = step;
    s.rng_state = rng.state;
    s.rng_state_last_update = rng.last_update;
    s.shard_idx = (uint64_t)train->current_shard_idx;
    s.sample_idx = (uint64_t)train->current_sample_idx;
    return s;
}

/* A checkpoint's last act, once (rank 0) after every rank wrote its files: the DONE_ marker that
 * makes it complete (-y 1 resumes only from those), then the -nk/-nm pruning of older ones. */
static inline void train_checkpoint_done(const TrainArgs *a, int step, int nproc) {
    char path[4200];
    ckpt_done_path(path, sizeof(path), a->out_dir, step);
    touch_file_atomic(path);
    ckpt_remove_old(a->out_dir, step, a->keep_last, a->major_every, nproc);
    printf("wrote checkpoint %s/model_%08d.bin\n", a->out_dir, step);
}

/* ----------------------------------------------------------------------------------------------
 * The time left. The mean of every step so far misleads on a machine whose load changes, and a
 * step's own time leaves out the evaluations between steps: the clock keeps the wall time at the
 * last ETA_WINDOW + 1 step ends, so the estimate is the recent wall time per step. */
#define ETA_WINDOW 20

typedef struct {
    double t[ETA_WINDOW + 1]; /* wall times at step ends, a ring */
    int n;                    /* ticks so far */
} EtaClock;

static inline void eta_tick(EtaClock *c, double now) {
    c->t[c->n % (ETA_WINDOW + 1)] = now;
    c->n++;
}

/* Seconds for steps_left more steps; NaN before two ticks. */
static inline double eta_seconds(const EtaClock *c, int steps_left) {
    if (c->n < 2) return NAN;
    const int span = c->n - 1 < ETA_WINDOW ? c->n - 1 : ETA_WINDOW;
    const double newest = c->t[(c->n - 1) % (ETA_WINDOW + 1)];
    const double oldest = c->t[(c->n - 1 - span) % (ETA_WINDOW + 1)];
    return (newest - oldest) / span * steps_left;
}

/* ----------------------------------------------------------------------------------------------
 * The end-of-run summary: what a user looks for once a run stops. */
typedef struct {
    double start_wall;   /* wall_seconds() at the start of the loop */
    float best_val;      /* lowest val loss seen (NaN: none) */
    int best_val_step;
    int last_ckpt_step;  /* -1: none written by this run */
} RunRecord;

static inline void run_record_init(RunRecord *r) {
    r->start_wall = wall_seconds();
    r->best_val = NAN;
    r->best_val_step = -1;
    r->last_ckpt_step = -1;
}

static inline void run_record_val(RunRecord *r, int step, float val) {
    if (isfinite(val) && !(val >= r->best_val)) {
        r->best_val = val;
        r->best_val_step = step;
    }
}

static inline void train_summary_print(const RunRecord *r, const TrainArgs *a, int steps_done, int num_steps,
                                       const char *eval_program, FILE *out) {
    char took[32];
    format_duration(wall_seconds() - r->start_wall, took, sizeof(took));
    fprintf(out, "run summary: %d of %d steps in %s", steps_done, num_steps, took);
    if (r->best_val_step >= 0) fprintf(out, "; best val loss %.4f at step %d", r->best_val, r->best_val_step);
    fprintf(out, "\n");
    const char *py = file_exists("/usr/bin/python3") ? "/usr/bin/python3" : "python3"; /* as the Makefile */
    if (r->last_ckpt_step >= 0) {
        fprintf(out, "  checkpoint: %s/model_%08d.bin (to go on: -o %s -y 1, and any flag to change)\n",
                a->out_dir, r->last_ckpt_step, a->out_dir);
        fprintf(out, "  evaluate:   %s -e %s/model_%08d.bin -tasks all -n 500\n", eval_program, a->out_dir,
                r->last_ckpt_step);
        fprintf(out, "  sample:     %s scripts/sample.py -e %s/model_%08d.bin --prompt \"...\"\n", py, a->out_dir,
                r->last_ckpt_step);
    }
    if (a->out_dir[0] != '\0') fprintf(out, "  plot:       %s scripts/plot_logs.py %s\n", py, a->out_dir);
}

/* The residual stream's root mean square entering each block and ln_f at a val step (rms[0..L]),
 * printed for LayerNorm-free blocks, whose stream nothing bounds (main.log's "rms0: ... rmsL:"
 * record has it for every model: llmc/logger.h logger_log_stream). */
static inline void train_stream_print(int use_ln, int num_layers, const float *rms, FILE *out) {
    if (use_ln) return;
    fprintf(out, "stream rms (block inputs, then ln_f's):");
    for (int l = 0; l <= num_layers; l++) fprintf(out, " %.3g", rms[l]);
    fprintf(out, "\n");
}

/* A run stopped by SIGINT or SIGTERM (llmc/stop_signal.h) after `step` of num_steps steps: what
 * was kept and the command that goes on. ckpt_step: the checkpoint the run can resume from, -1
 * if none (no -o, or no step trained yet). */
static inline void train_stop_report(const TrainArgs *a, int sig, int step, int num_steps, int ckpt_step,
                                     const char *program, FILE *out) {
    const char *name = sig == SIGINT ? "SIGINT (Ctrl-C)" : sig == SIGTERM ? "SIGTERM" : "a stop signal";
    fprintf(out, "stopped by %s after step %d of %d", name, step, num_steps);
    if (ckpt_step >= 0) {
        fprintf(out, "; checkpoint %s/model_%08d.bin\n  to go on: %s -o %s -y 1\n", a->out_dir, ckpt_step, program,
                a->out_dir);
    } else if (a->out_dir[0] == '\0') {
        fprintf(out, "; nothing was saved (no -o)\n");
    } else {
        fprintf(out, "; no step was trained, so nothing was saved\n");
    }
}

#endif /* LLMC_TRAIN_SETUP_H */
