/*
 * train_gpt2.c: the CPU fp32 reference trainer for GPT-2 with per-layer head tables (Prism).
 *
 *   ./train_gpt2 -e d12 -prism prism/schedules/d12_prism.txt -i TRAIN_GLOB -j VAL_GLOB -o out/
 *   ./train_gpt2 --help
 *
 * Same flags, files and log lines as llm.c's train_gpt2cu (llmc/args.h): a uniform model's
 * checkpoints load in llm.c and back, and main.log plots with llm.c's tools. The model is
 * llmc/cpu/gpt2_cpu.h; this file is the training loop: set-up, evaluation, sampling, checkpoints and
 * resume, and the optimizer step.
 */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#ifdef _OPENMP
#include <omp.h>
#endif

#include "llmc/args.h"
#include "llmc/checkpoint.h"
#include "llmc/config.h"
#include "llmc/dataloader.h"
#include "llmc/evalloader.h"
#include "llmc/cpu/gpt2_cpu.h"
#include "llmc/logger.h"
#include "llmc/model_init.h"
#include "llmc/run_folder.h"
#include "llmc/state.h"
#include "llmc/stop_signal.h"
#include "llmc/tokenizer.h"
#include "llmc/train_evals.h"
#include "llmc/train_setup.h"
#include "llmc/cpu/cpu_eval.h"
#include "kinds/registry_cpu.h"
#include "prism/rules.h"

/* Everything one training run owns. */
typedef struct {
    const char *program; /* argv[0], for the command that resumes */
    TrainArgs args;
    int given[TRAIN_ARGS_MAX_FLAGS]; /* which flags were on the command line */
    GPT2 model;
    TrainLoop loop; /* loaders, LR schedule, outlier detectors, step counts (llmc/train_setup.h) */
    Tokenizer tokenizer;
    int sample_start;   /* the token samples start from: -tok's end-of-text (llmc/tokenizer.h) */
    Logger logger;
    TrainEvals evals;   /* -h 1: the zero-shot evals run at every val step (-ht) */
    GPT2Eval eval;      /* their forward (llmc/cpu/cpu_eval.h) */
    uint64_t sample_rng;
} Run;

/* ----------------------------------------------------------------------------------------------
 * Set-up */

/* The model the run starts from (llmc/model_init.h, shared with the GPU trainer): with -y 1 the
 * newest complete checkpoint, else -e, a checkpoint or a descriptor plus an optional layer table
 * (Prism schedule, attention kinds) and model options. A resumed run repeats its original command
 * line, so its model flags are not errors there: the checkpoint's values win. Returns the step
 * resumed from, or -1. */
static int build_model(Run *r) {
    TrainArgs *a = &r->args;
    char *init_path;
    const int resume_step = train_resume_point(a, 1, &init_path);
    const int is_file = !config_is_descriptor_like(init_path);
    GPT2Config c;
    char err[2048];
    if (!model_config_from_args(a, r->given, init_path, is_file, resume_step >= 0, prism_rules_check, &c, err,
                                sizeof(err))) {
        llmc_die("%s", err);
    }
    if (is_file) {
        gpt2_build_from_checkpoint(&r->model, init_path);
        printf("loaded %s\n", init_path);
    } else {
        gpt2_build_from_config(&r->model, &c, (uint32_t)a->seed);
        printf("initialized %s from scratch (seed %d)\n", init_path, a->seed);
    }
    free(init_path);
    return resume_step;
}

/* -y 1: the AdamW moments and the train loader's position at the checkpoint's step. */
static void resume_state(Run *r, int resume_step) {
    TrainLoop *t = &r->loop;
    char path[4200];
    ckpt_state_path(path, sizeof(path), r->args.out_dir, resume_step, 0);
    const size_t n = r->model.layout.total;
    r->model.m = (float *)xcalloc(n, sizeof(float));
    r->model.v = (float *)xcalloc(n, sizeof(float));
    const TrainState expect = train_state_at(&t->train_loader, run_shape_single(), resume_step,
                                             rounding_rng(ROUNDING_RNG_SEED, ROUNDING_RNG_SEED));
    TrainState got;
    state_read(path, &got, r->model.m, r->model.v, NULL, n, &t->train_loader, &expect);
    printf("resumed from step %d (%s)\n", resume_step, path);
}

static void setup(Run *r) {
    TrainArgs *a = &r->args;
    train_flags_restore(a, r->given, 1); /* -y 1: the run's own flags, from <-o>/flags.txt */
    train_args_check(a, TRAINER_CPU);
    if (a->out_dir[0] != '\0') {
        /* resume, start, start over or refuse, before anything in the folder is written */
        run_folder_open(a->out_dir, a->resume, a->start_over, train_args_given(r->given, "-e"));
        train_flags_save(a);
    }
    if (a->overfit) strcpy(a->train_pattern, a->val_pattern); /* llm.c's -a: one val batch */

    const int resume_step = build_model(r);
    const GPT2Config *c = &r->model.config;
    config_print(c, stdout);
    printf("parameters: %zu\n", r->model.layout.total);

    if (a->T > c->max_seq_len) llmc_die("-t %d exceeds the model's maxT = %d", a->T, c->max_seq_len);
    if (a->T < c->max_seq_len) printf("note: -t %d is shorter than the model's maxT %d\n", a->T, c->max_seq_len);
    TrainLoop *t = &r->loop;
    train_loop_setup(t, a, 0, 1, c->vocab_size, resume_step); /* one process: rank 0 of 1 */
    if (a->hellaswag) {
        /* llm.c's -h 1 (doc/formats.md "Eval files and scoring"), scored with the training B and T, plus the -ht tasks */
        train_evals_setup(&r->evals, a->eval_tasks, a->hellaswag_max, a->B, a->T, a->init, c->vocab_size, 1);
        gpt2_eval_init(&r->eval, &r->model, a->B, a->T);
    }
    r->sample_start = tokenizer_init_for_model(&r->tokenizer, a->tokenizer, c->vocab_size);
    r->sample_rng = SAMPLE_RNG_SEED;
    if (resume_step >= 0) resume_state(r, resume_step);
    logger_init(&r->logger, a->out_dir, 0, resume_step);

    train_args_print(a, TRAINER_CPU, stdout);
#ifdef _OPENMP
    printf("threads: %d (OMP_NUM_THREADS)\n", omp_get_max_threads());
#endif
#ifdef USE_BLAS
    blas_print_config(stdout);
#endif
    printf("batch: B %d x T %d x %d micro-steps = %d tokens per step, %d steps\n", a->B, a->T,
           t->grad_accum, a->total_batch, t->num_steps);
    printf("train: %lld tokens in %d shard(s), %s; val: %d batches per eval\n",
           (long long)t->train_loader.total_tokens, t->train_loader.n_files, train_loader_mode(&t->train_loader),
           t->val_batches);
}

/* ----------------------------------------------------------------------------------------------
 * Evaluation and sampling */

/* Every -ht task: the headline accuracy (acc_norm for HellaSwag, as llm.c), printed and logged. */
static void run_evals(Run *r, int step) {
    for (int i = 0; i < r->evals.count; i++) {
        const TrainEval *e = &r->evals.e[i];
        EvalResults res;
        eval_run(&e->file, e->n, r->args.B, r->args.T, r->model.config.vocab_size, gpt2_eval_forward, &r->eval, &res);
        train_eval_report(e, step, eval_headline_correct(&e->file, &res), &r->logger, 1);
        eval_results_free(&res);
    }
}

/* A sample as llm.c's train_gpt2.c draws it: -g is its genT, so genT - 1 tokens follow the
 * end-of-text token (-tok's; GPT-2's <|endoftext|> by default), at temperature 1, with one sampling
 * RNG (seed 1337) carried from sample to sample. */
static void generate(Run *r) {
    const GPT2Config *c = &r->model.config;
    const int genT = r->args.gen_tokens, window = r->args.T, V = c->vocab_size;
    int *tokens = (int *)xmalloc((size_t)genT * sizeof(int));
    tokens[0] = r->sample_start;
    printf("generating:\n---\n");
    for (int t = 1; t < genT; t++) {
        const int len = LLMC_MIN(t, window);
        gpt2_forward(&r->model, tokens + t - len, NULL, 1, len);
        const int next = sample_softmax(r->model.acts.logits + (size_t)(len - 1) * V, V, &r->sample_rng);
        tokens[t] = next;
        tokenizer_print(&r->tokenizer, (uint32_t)next, stdout);
        fflush(stdout);
    }
    printf("\n---\n");
    free(tokens);
}

/* ----------------------------------------------------------------------------------------------
 * Checkpoints */

static void save_checkpoint(Run *r, int step) {
    const TrainArgs *a = &r->args;
    char path[4200];
    ckpt_model_path(path, sizeof(path), a->out_dir, step);
    checkpoint_write_fp32(path, &r->model.config, r->model.params);
    ckpt_state_path(path, sizeof(path), a->out_dir, step, 0);
    const DataLoader *dl = &r->loop.train_loader;
    const TrainState s = train_state_at(dl, run_shape_single(), step, rounding_rng(ROUNDING_RNG_SEED, ROUNDING_RNG_SEED));
    state_write(path, &s, r->model.m, r->model.v, NULL, r->model.layout.total, dl);
    train_checkpoint_done(a, step, 1);
}

/* ----------------------------------------------------------------------------------------------
 * One optimizer step: grad_accum micro-batches, clipping, AdamW. Returns the mean loss. */
static StepResult train_step(Run *r, int step) {
    GPT2 *m = &r->model;
    TrainLoop *t = &r->loop;
    DataLoader *dl = &t->train_loader;
    const TrainArgs *a = &r->args;
    if (a->overfit) dataloader_reset(dl);
    gpt2_zero_grad(m);
    double loss_sum = 0.0;
    const float dloss = 1.0f / ((float)a->B * a->T * t->grad_accum);
    for (int micro = 0; micro < t->grad_accum; micro++) {
        dataloader_next_batch(dl);
        gpt2_forward(m, dl->inputs, dl->targets, a->B, a->T);
        gpt2_backward(m, dloss);
        loss_sum += m->mean_loss;
    }
    const StepResult res = train_step_judge(t, a, step, (float)(loss_sum / t->grad_accum), gpt2_grad_norm(m));
    if (!res.skipped) {
        const AdamWHyper h = adamw_gpt2(res.lr, a->weight_decay, param_decay_mask(a->kind_opt));
        gpt2_update(m, &h, res.clip_scale, step + 1);
    }
    return res;
}

/* ----------------------------------------------------------------------------------------------
 * The loop, as llm.c's: step t = start..N; the t = N iteration only evaluates, samples and saves. */
static void teardown(Run *r);

/* SIGINT/SIGTERM (llmc/stop_signal.h), seen before training step `step`: the steps done are kept in
 * a checkpoint (unless this step has one already), the resume command is printed, and the process
 * exits with 128 + the signal. */
static void stop_on_signal(Run *r, int step, int have_checkpoint, int sig) {
    const TrainArgs *a = &r->args;
    int ckpt = -1;
    if (a->out_dir[0] != '\0' && step > 0) {
        if (!have_checkpoint) save_checkpoint(r, step);
        ckpt = step;
    }
    train_stop_report(a, sig, step, r->loop.num_steps, ckpt, r->program, stdout);
    teardown(r);
    exit(128 + sig);
}

static void train(Run *r) {
    const TrainArgs *a = &r->args;
    TrainLoop *t = &r->loop;
    const int N = t->num_steps;
    double total_time = 0.0;
    int timed_steps = 0;
    RunRecord rec;
    run_record_init(&rec);
    EtaClock clock = {{0}, 0};
    stop_signal_install(); /* from here on Ctrl-C keeps the steps done */
    eta_tick(&clock, rec.start_wall);
    for (int step = t->start_step; step <= N; step++) {
        const int last = step == N;
        if (train_due_val(a, step, last)) {
            float rms[LLMC_MAX_LAYERS + 1];
            const float val = gpt2_val_loss(&r->model, &t->val_loader, t->val_batches, rms);
            printf("val loss %f\n", val);
            train_stream_print(r->model.config.use_ln, r->model.config.num_layers, rms, stdout);
            logger_log_val(&r->logger, step, val);
            logger_log_stream(&r->logger, step, rms, r->model.config.num_layers + 1);
            run_record_val(&rec, step, val);
        }
        if (r->evals.count > 0 && train_due_evals(a, step, last)) run_evals(r, step);
        if (train_due_sample(a, step, last)) generate(r);
        int have_checkpoint = t->resumed;
        if (train_due_checkpoint(a, t, step, last)) {
            save_checkpoint(r, step);
            rec.last_ckpt_step = step;
            have_checkpoint = 1;
        }
        t->resumed = 0;
        if (last) break;
        if (stop_signal_pending()) stop_on_signal(r, step, have_checkpoint, stop_signal_pending());

        const double t0 = wall_seconds();
        StepResult res = train_step(r, step);
        const double dt = wall_seconds() - t0;
        if (step > t->start_step) { /* the first step warms caches; llm.c also excludes it */
            total_time += dt;
            timed_steps++;
        }
        eta_tick(&clock, wall_seconds());
        char eta[32];
        format_duration(eta_seconds(&clock, N - step - 1), eta, sizeof(eta));
        printf("step %4d/%d | loss %7.6f (%+.2fz)| norm %6.4f (%+.2fz)| lr %.2e | %.2f ms | %.0f tok/s | eta %s%s\n",
               step + 1, N, res.loss, res.loss_z, res.norm, res.norm_z, res.lr, dt * 1000.0,
               a->total_batch / dt, eta, res.skipped ? " | update skipped" : "");
        fflush(stdout);
        logger_log_train(&r->logger, step, res.loss, res.lr, res.norm);
    }
    if (timed_steps > 0) printf("total average iteration time: %f ms\n", 1000.0 * total_time / timed_steps);
    train_summary_print(&rec, a, N - t->start_step, N, "./eval_gpt2", stdout);
}

static void teardown(Run *r) {
    train_evals_free(&r->evals);
    gpt2_eval_free(&r->eval);
    logger_free(&r->logger);
    tokenizer_free(&r->tokenizer);
    train_loop_free(&r->loop);
    gpt2_free(&r->model);
}

int main(int argc, char **argv) {
    static Run run; /* large (the loader and schedule tables); static keeps it off the stack */
    stdout_line_buffered();
    run.program = argv[0];
    train_args_parse(&run.args, argc, argv, TRAINER_CPU, run.given);
    setup(&run);
    train(&run);
    teardown(&run);
    return 0;
}
