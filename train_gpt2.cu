/*
 * train_gpt2.cu: the CUDA trainer for GPT-2 with per-layer head tables (Prism), bf16 with fp32
 * master weights, one or many GPUs.
 *
 *   ./train_gpt2cu -e d12 -prism prism/schedules/d12_prism.txt -i 'fineweb_train_*.bin'
 *       -j 'fineweb_val_*.bin' -b 64 -t 1024 -d 524288 -l 6e-4 -u 700 -q 0 -c 0.1 -z 1 -o log/
 *   mpirun -np 8 ./train_gpt2cu ...          (data parallel; -pi tcp|fs for Slurm without MPI)
 *   ./train_gpt2cu --help
 *
 * The same flags, files, step line and main.log as llm.c's train_gpt2cu (llmc/args.h; -attn
 * picks the attention path), and the same training loop as the CPU trainer train_gpt2.c, which it
 * mirrors function by function. The model is llmc/gpu/gpt2_gpu.cu; this file is the run: set-up,
 * evaluation, sampling, HellaSwag, checkpoints and resume, the optimizer step and its report.
 * Checkpoints: bf16 v5 (llm.c) for uniform models, v105 with the layer table and the model flags
 * otherwise (S-D, linear and -ln 0 models too); the CPU trainer and train_gpt2.py read both.
 */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "llmc/args.h"
#include "llmc/checkpoint.h"
#include "llmc/config.h"
#include "llmc/dataloader.h"
#include "llmc/train_evals.h"
#include "llmc/evalloader.h"
#include "llmc/gpu/gpt2_gpu.cuh"
#include "llmc/attention/paths.h"
#include "llmc/gpu/act_plan.h"
#include "llmc/cuda/mfu.h"
#include "llmc/model_init.h" /* model options, layer table and the torch-identical init */
#include "llmc/logger.h"
#include "llmc/run_folder.h"
#include "llmc/stop_signal.h"
#include "llmc/cuda/multi_gpu.h"
#include "llmc/state.h"
#include "llmc/tokenizer.h"
#include "llmc/train_setup.h"
#include "kinds/registry.h"
#include "prism/rules.h"

/* Everything one training run owns. */
typedef struct {
    const char *program; /* argv[0], for the command that resumes */
    TrainArgs args;
    int given[TRAIN_ARGS_MAX_FLAGS];
    MultiGpu mg;
    GpuCtx ctx;
    CudnnAtt *cudnn;
    GPT2GPU model;
    AttPath path[LLMC_MAX_LAYERS];
    TrainLoop loop; /* loaders, LR schedule, outlier detectors, step counts (llmc/train_setup.h) */
    Tokenizer tokenizer;
    int sample_start;   /* the token samples start from: -tok's end-of-text (llmc/tokenizer.h) */
    Logger logger;
    TrainEvals evals;  /* -h 1: the zero-shot evals at every val step (-ht) */
    double flops_per_token, peak_tflops;
    cudaEvent_t ev_start, ev_end;
} Run;

static int is_rank0(const Run *r) { return r->mg.rank == 0; }

/* ----------------------------------------------------------------------------------------------
 * Set-up */

/* The starting parameters in fp32 on the host: a checkpoint (v3/v5/v103/v105, bf16 widened) or
 * GPT-2's init from the descriptor, the model options and the layer table, drawn exactly as
 * train_gpt2.py and the CPU trainer draw it (llmc/model_init.h). */
static float *load_or_init(Run *r, const char *init_path, int resuming, GPT2Config *c) {
    const TrainArgs *a = &r->args;
    const int is_file = !config_is_descriptor_like(init_path);
    char err[8192];
    if (!model_config_from_args(a, r->given, init_path, is_file, resuming, prism_rules_check, c, err, sizeof(err))) llmc_die("%s", err);
    if (is_file) {
        int is_bf16 = 0;
        float *p = checkpoint_load_fp32(init_path, c, &is_bf16);
        if (is_rank0(r)) printf("loaded %s (%s)\n", init_path, is_bf16 ? "bf16" : "fp32");
        return p;
    }
    float *params = model_init_params_host(c, (uint32_t)a->seed);
    if (is_rank0(r)) printf("initialized %s from scratch (seed %d)\n", init_path, a->seed);
    return params;
}

static void choose_attention(Run *r, const GPT2Config *c) {
    r->cudnn = gpt2gpu_choose_paths(c, r->args.attn, 1, r->args.B, r->args.T, &r->ctx, r->path);
    if (is_rank0(r)) attn_print_paths(c, r->path, stdout);
}

static void print_device(const Run *r) {
    if (!is_rank0(r)) return;
    char mg[128];
    multi_gpu_build_features(mg, sizeof(mg));
    const long cv = cudnn_att_version();
    int rt = 0, drv = 0;
    cudaRuntimeGetVersion(&rt);
    cudaDriverGetVersion(&drv);
    printf("device: %s, SM %d.%d, %d SMs, %.1f GiB; CUDA runtime %d.%d, driver %d.%d\n", r->ctx.name,
           r->ctx.sm / 10, r->ctx.sm % 10, r->ctx.sm_count, r->ctx.total_mem / 1073741824.0, rt / 1000,
           (rt % 1000) / 10, drv / 1000, (drv % 1000) / 10);
    if (cv > 0) printf("build: cuDNN %ld.%ld.%ld; %s\n", cv / 10000, (cv / 100) % 100, cv % 100, mg);
    else printf("build: no cuDNN (own attention kernels only); %s\n", mg);
    printf("processes: %d (this is rank %d on local GPU %d)\n", r->mg.nproc, r->mg.rank, r->mg.local_device);
}

/* Whether every rank holds the same 64-bit value. A value's 16 hex digits d are summed over the N
 * ranks as floats, with their squares (exact integers: N <= 4096 keeps the sums below 2^24):
 * N sum(d^2) = (sum d)^2 exactly when every rank has the same d (Cauchy-Schwarz), and every rank
 * sees the same sums, so all of them conclude the same (none goes on alone into a collective the
 * others never reach). */
static int ranks_agree(Run *r, uint64_t value) {
    if (r->mg.nproc == 1) return 1;
    int agree = 1;
    for (int k = 0; k < 16; k++) {
        const float d = (float)((value >> (4 * k)) & 15u);
        float v[2] = {d, d * d};
        gpt2gpu_sum_over_ranks(&r->model, v, 2);
        if ((double)r->mg.nproc * v[1] != (double)v[0] * v[0]) agree = 0;
    }
    return agree;
}

/* Before the first step, the ranks check that they run one job: the step they resume from (each
 * found it in -o by itself: a stale directory cache on a network file system can show a rank an
 * older DONE_), the flags, the model and the data. On any difference every rank stops with one
 * line naming what differs and its own value. */
static void check_ranks_agree(Run *r, int resume_step, const GPT2Config *c) {
    if (r->mg.nproc == 1) return;
    if (r->mg.nproc > 4096) llmc_die("-pn %d: the start-up agreement check handles up to 4096 processes", r->mg.nproc);
    const TrainArgs *a = &r->args;
    const int rank = r->mg.rank;
    if (!ranks_agree(r, (uint64_t)(int64_t)resume_step)) {
        llmc_die("rank %d: the ranks disagree on the step to resume from (this rank: %d, from -o %s); every rank "
                 "must see the same checkpoints", rank, resume_step, a->out_dir);
    }
    if (!ranks_agree(r, train_flags_hash(a, -1))) {
        int n;
        const ArgSpec *t = train_arg_table(&n);
        for (int i = 0; i < n; i++) { /* name the first flag that differs */
            if (train_flag_per_launch(t[i].flag) || ranks_agree(r, train_flags_hash(a, i))) continue;
            char val[ARG_STR_CAP + 8];
            cli_value_text(&t[i], a, val, sizeof(val));
            llmc_die("rank %d: the ranks disagree on %s (this rank: %s); every rank needs the same flags", rank,
                     t[i].flag, val);
        }
    }
    char *text = NULL;
    size_t len = 0;
    FILE *mem = open_memstream(&text, &len);
    if (mem == NULL) llmc_die("open_memstream: out of memory");
    config_print(c, mem); /* every field of the model, layer table included */
    fclose(mem);
    const uint64_t model = fnv1a64(FNV64_START, text, len);
    free(text);
    if (!ranks_agree(r, model)) {
        llmc_die("rank %d: the ranks disagree on the model (layers, widths or kinds; this rank's checkpoint or -e "
                 "%s)", rank, a->init);
    }
    const uint64_t data = dataloader_hash(&r->loop.val_loader, dataloader_hash(&r->loop.train_loader, FNV64_START));
    if (!ranks_agree(r, data)) {
        llmc_die("rank %d: the ranks disagree on the data (this rank reads %zu train and %zu val shards for -i %s "
                 "-j %s); every node needs the same files", rank, r->loop.train_loader.glob.gl_pathc,
                 r->loop.val_loader.glob.gl_pathc, a->train_pattern, a->val_pattern);
    }
}

/* -h 1 (llm.c's in-training HellaSwag, doc/formats.md "Eval files and scoring", plus the -ht tasks): scored with the
 * training B and T. */
static void evals_setup(Run *r) {
    const TrainArgs *a = &r->args;
    if (!a->hellaswag) return;
    train_evals_setup(&r->evals, a->eval_tasks, a->hellaswag_max, a->B, a->T, a->init, r->model.config.vocab_size,
                      is_rank0(r));
    /* an eval file missing on some node only would leave the ranks issuing different numbers of
     * all-reduces (a hang) */
    const int mask = train_evals_mask(&r->evals);
    if (!ranks_agree(r, (uint64_t)mask)) {
        llmc_die("-h 1: the ranks found different eval files under dev/data (this rank's task mask %d): "
                 "every node needs the same files", mask);
    }
}

/* -y 1: the AdamW moments (and master weights) of this rank's shard, the stochastic-rounding RNG and
 * the train loader's position at the checkpoint's step. */
static void resume_state(Run *r, int resume_step) {
    const TrainArgs *a = &r->args;
    GPT2GPU *m = &r->model;
    char path[4200];
    ckpt_state_path(path, sizeof(path), a->out_dir, resume_step, r->mg.rank);
    const size_t n = m->shard.shard_total;
    float *mm = (float *)xmalloc(n * sizeof(float)), *vv = (float *)xmalloc(n * sizeof(float));
    float *master = a->master_weights ? (float *)xmalloc(n * sizeof(float)) : NULL;
    const RunShape shape = run_shape(r->mg.nproc, r->mg.rank, a->master_weights);
    const TrainState expect = train_state_at(&r->loop.train_loader, shape, resume_step, rounding_rng(0, 0));
    TrainState got;
    state_read(path, &got, mm, vv, master, n, &r->loop.train_loader, &expect);
    gpt2gpu_set_opt_state(m, mm, vv, master);
    m->rng_state = got.rng_state;
    m->rng_state_last_update = got.rng_state_last_update;
    free(mm);
    free(vv);
    free(master);
    if (is_rank0(r)) printf("resumed from step %d (%s)\n", resume_step, path);
}

static void setup(Run *r, int *argc, char ***argv) {
    TrainArgs *a = &r->args;
    train_args_check(a, TRAINER_GPU);
    multi_gpu_init(&r->mg, argc, argv, a->init_method, a->num_processes, a->process_rank,
                   a->gpus_per_node, a->zero_stage);
    /* -y 1: the run's own flags from <-o>/flags.txt (every rank reads them; the process and
     * rendezvous flags above are per launch and never restored) */
    if (train_flags_restore(a, r->given, is_rank0(r))) {
        train_args_check(a, TRAINER_GPU);
        if (a->zero_stage >= 2) a->zero_stage = 0; /* as main does for the command line */
        r->mg.zero_stage = a->zero_stage;
    }
    if (strcmp(a->attn, "cudnn") == 0 && !cudnn_att_built()) {
        llmc_die("-attn cudnn: this binary was built without cuDNN (make train_gpt2cu USE_CUDNN=1)");
    }
    if (a->out_dir[0] != '\0' && is_rank0(r)) {
        /* resume, start, start over or refuse, before anything in the folder is written; before the
         * ranks connect, so that a refusal leaves the others at the rendezvous's time limit rather
         * than in a barrier */
        run_folder_open(a->out_dir, a->resume, a->start_over, train_args_given(r->given, "-e"));
        train_flags_save(a);
    }
    gpu_ctx_init(&r->ctx, r->mg.local_device);
    multi_gpu_connect(&r->mg, a->init_method, a->server_ip, a->fs_path);
    print_device(r);
    multi_gpu_barrier(&r->mg); /* rank 0 has prepared the folder before any rank looks for a checkpoint */
    if (a->overfit) strcpy(a->train_pattern, a->val_pattern); /* llm.c's -a: one val batch */

    char *init_path;
    const int resume_step = train_resume_point(a, is_rank0(r), &init_path);
    GPT2Config c;
    float *host_params = load_or_init(r, init_path, resume_step >= 0, &c);
    free(init_path);
    gpt2gpu_check_shapes(&c, a->T);
    if (is_rank0(r)) config_print(&c, stdout);
    choose_attention(r, &c);

    GPT2GPUOptions opt;
    opt.recompute = a->recompute;
    opt.gelu_fusion = a->gelu_fusion;
    opt.master_weights = a->master_weights;
    opt.inference = 0;
    gpt2gpu_init(&r->model, &c, a->B, a->T, &opt, r->path, a->zero_stage, &r->ctx, r->cudnn, &r->mg);
    gpt2gpu_set_params(&r->model, host_params);
    free(host_params);
    if (is_rank0(r)) {
        printf("parameters: %zu; device memory: %.2f GiB parameters and optimizer state, %.2f GiB "
               "activations (B %d, T %d, -r %d)\n", r->model.layout.total,
               gpt2gpu_param_bytes(&r->model) / 1073741824.0, act_plan_bytes(&r->model.alloc) / 1073741824.0,
               a->B, a->T, a->recompute);
    }
    TrainLoop *t = &r->loop;
    train_loop_setup(t, a, r->mg.rank, r->mg.nproc, c.vocab_size, resume_step);
    check_ranks_agree(r, resume_step, &c);
    evals_setup(r);
    r->sample_start = tokenizer_init_for_model(&r->tokenizer, a->tokenizer, c.vocab_size);
    if (resume_step >= 0) resume_state(r, resume_step);
    logger_init(&r->logger, a->out_dir, r->mg.rank, resume_step);
    r->flops_per_token = train_flops_per_token(&c, r->model.layout.total, a->T);
    r->peak_tflops = gpu_peak_bf16_tflops(r->ctx.name);
    CUDA_CHECK(cudaEventCreate(&r->ev_start));
    CUDA_CHECK(cudaEventCreate(&r->ev_end));
    if (is_rank0(r)) {
        train_args_print(a, TRAINER_GPU, stdout);
        printf("batch: B %d x T %d x %d processes x %d micro-steps = %d tokens per step, %d steps\n",
               a->B, a->T, r->mg.nproc, t->grad_accum, a->total_batch, t->num_steps);
        printf("train: %lld tokens in %d shard(s), %s; val: %d batches per eval\n",
               (long long)t->train_loader.total_tokens, t->train_loader.n_files,
               train_loader_mode(&t->train_loader), t->val_batches);
        if (r->peak_tflops > 0) printf("MFU: %.3g GFLOP per token against %.1f TFLOP/s bf16 peak\n", r->flops_per_token / 1e9, r->peak_tflops);
        else printf("MFU: %s is not in the peak table (llmc/cuda/mfu.h); MFU prints -100%%\n", r->ctx.name);
    }
}

/* ----------------------------------------------------------------------------------------------
 * Evaluation, HellaSwag, sampling */

/* Mean loss over the first val_batches batches of each rank's val slice, averaged over ranks; and
 * stream_rms[0..L], the residual stream's root mean square entering each block and ln_f over the
 * same windows (the mean over batches and ranks of each batch's mean square, as the CPU trainer's
 * gpt2_val_loss). */
static float evaluate(Run *r, float *stream_rms) {
    DataLoader *dl = &r->loop.val_loader;
    const int batches = r->loop.val_batches, L = r->model.config.num_layers;
    double sq[LLMC_MAX_LAYERS + 1] = {0}, one[LLMC_MAX_LAYERS + 1];
    dataloader_reset(dl);
    gpt2gpu_zero_losses(&r->model);
    for (int i = 0; i < batches; i++) {
        dataloader_next_batch(dl);
        gpt2gpu_forward(&r->model, dl->inputs, dl->targets, dl->B, dl->T, FWD_EVAL, 0.0f);
        gpt2gpu_stream_sq(&r->model, one);
        for (int l = 0; l <= L; l++) sq[l] += one[l];
    }
    for (int l = 0; l <= L; l += 2) { /* over ranks, two values at a time */
        float v[2] = {(float)(sq[l] / batches), l + 1 <= L ? (float)(sq[l + 1] / batches) : 0.0f};
        if (r->mg.nproc > 1) gpt2gpu_sum_over_ranks(&r->model, v, 2);
        stream_rms[l] = sqrtf(v[0] / r->mg.nproc);
        if (l + 1 <= L) stream_rms[l + 1] = sqrtf(v[1] / r->mg.nproc);
    }
    return gpt2gpu_mean_loss(&r->model, (double)dl->B * dl->T * batches);
}

/* Every -ht task: rank r scores the r-th contiguous block of examples (llm.c), the correct counts
 * are summed over ranks; the headline accuracy (acc_norm for HellaSwag) is printed and logged. */
static void run_evals(Run *r, int step) {
    for (int t = 0; t < r->evals.count; t++) {
        const TrainEval *e = &r->evals.e[t];
        const int n = e->n, per = (n + r->mg.nproc - 1) / r->mg.nproc;
        const int lo = LLMC_MIN(n, r->mg.rank * per), hi = LLMC_MIN(n, lo + per);
        EvalResults res;
        eval_results_init(&res, &e->file, n);
        /* gpt2gpu_eval_forward pads each batch into the training shape, so that every evaluation
         * runs the attention graphs prepared at start-up */
        eval_run_range(&e->file, lo, hi, r->args.B, r->args.T, r->model.config.vocab_size, gpt2gpu_eval_forward,
                       &r->model, &res);
        float correct = (float)eval_headline_correct(&e->file, &res); /* exact: counts stay far below 2^24 */
        gpt2gpu_sum_over_ranks(&r->model, &correct, 1);
        train_eval_report(e, step, (int)correct, &r->logger, is_rank0(r));
        eval_results_free(&res);
    }
}

/* A sample as llm.c's train_gpt2.cu draws it: -g is its genT, so genT - 1 tokens follow the
 * end-of-text token (-tok's; GPT-2's <|endoftext|> by default), at temperature 1, with the sampling
 * RNG reset to 1337 for every sample (so two samples of the same weights are equal). One (1, T)
 * forward per token: the window sits at positions 0..len-1 and causal attention ignores the filler
 * (the end-of-text token) after it (rank 0 only). */
static void generate(Run *r) {
    const int genT = r->args.gen_tokens, window = r->args.T, V = r->model.config.vocab_size;
    int *tokens = (int *)xmalloc((size_t)genT * sizeof(int));
    int *batch = (int *)xmalloc((size_t)window * sizeof(int));
    float *logits = (float *)xmalloc((size_t)V * sizeof(float));
    uint64_t rng = SAMPLE_RNG_SEED;
    tokens[0] = r->sample_start;
    printf("generating:\n---\n");
    for (int t = 1; t < genT; t++) {
        const int len = LLMC_MIN(t, window);
        for (int i = 0; i < window; i++) batch[i] = i < len ? tokens[t - len + i] : r->sample_start;
        gpt2gpu_forward(&r->model, batch, NULL, 1, window, FWD_LOGITS, 0.0f);
        gpt2gpu_logits_row(&r->model, 0, len - 1, logits);
        tokens[t] = sample_softmax(logits, V, &rng);
        tokenizer_print(&r->tokenizer, (uint32_t)tokens[t], stdout);
        fflush(stdout);
    }
    printf("\n---\n");
    free(tokens);
    free(batch);
    free(logits);
}

/* ----------------------------------------------------------------------------------------------
 * Checkpoints (doc/formats.md "Optimizer/DataLoader state"): rank 0 the model, every rank its state, a barrier, rank 0 DONE_. */
static void save_checkpoint(Run *r, int step) {
    const TrainArgs *a = &r->args;
    GPT2GPU *m = &r->model;
    char path[4200];
    if (is_rank0(r)) {
        uint16_t *p = (uint16_t *)xmalloc(m->layout.total * sizeof(uint16_t));
        gpt2gpu_get_params_bf16(m, p);
        ckpt_model_path(path, sizeof(path), a->out_dir, step);
        checkpoint_write_bf16(path, &m->config, p);
        free(p);
    }
    const size_t n = m->shard.shard_total;
    float *mm = (float *)xmalloc(n * sizeof(float)), *vv = (float *)xmalloc(n * sizeof(float));
    float *master = a->master_weights ? (float *)xmalloc(n * sizeof(float)) : NULL;
    gpt2gpu_get_opt_state(m, mm, vv, master);
    const DataLoader *dl = &r->loop.train_loader;
    const TrainState s = train_state_at(dl, run_shape(r->mg.nproc, r->mg.rank, a->master_weights), step,
                                        rounding_rng(m->rng_state, m->rng_state_last_update));
    ckpt_state_path(path, sizeof(path), a->out_dir, step, r->mg.rank);
    state_write(path, &s, mm, vv, master, n, dl);
    free(mm);
    free(vv);
    free(master);
    multi_gpu_barrier(&r->mg);
    if (is_rank0(r)) train_checkpoint_done(a, step, r->mg.nproc);
}

/* ----------------------------------------------------------------------------------------------
 * One optimizer step: grad_accum micro-batches, the reduced loss and norm, clipping, AdamW. */
static StepResult train_step(Run *r, int step) {
    GPT2GPU *m = &r->model;
    TrainLoop *t = &r->loop;
    DataLoader *dl = &t->train_loader;
    const TrainArgs *a = &r->args;
    if (a->overfit) dataloader_reset(dl);
    gpt2gpu_zero_grads(m);
    gpt2gpu_zero_losses(m);
    const double tokens = (double)a->B * a->T * t->grad_accum;
    for (int micro = 0; micro < t->grad_accum; micro++) {
        dataloader_next_batch(dl);
        gpt2gpu_forward(m, dl->inputs, dl->targets, a->B, a->T, FWD_TRAIN, (float)(1.0 / tokens));
        gpt2gpu_backward(m, micro == t->grad_accum - 1);
    }
    const float loss = gpt2gpu_mean_loss(m, tokens);
    const StepResult res = train_step_judge(t, a, step, loss, gpt2gpu_grad_norm(m));
    if (!res.skipped) {
        const AdamWHyper h = adamw_gpt2(res.lr, a->weight_decay, param_decay_mask(a->kind_opt));
        gpt2gpu_update(m, &h, res.clip_scale, step + 1);
    }
    return res;
}

static void log_gpu(const Run *r) {
    size_t free_b = 0, total_b = 0;
    CUDA_CHECK(cudaMemGetInfo(&free_b, &total_b));
    printf("                  GPU %d (%s): %.1f of %.1f GiB in use\n", r->ctx.device, r->ctx.name,
           (total_b - free_b) / 1073741824.0, total_b / 1073741824.0);
}

/* ----------------------------------------------------------------------------------------------
 * The loop, as llm.c's: step t = start..N; the t = N iteration only evaluates, samples and saves. */
static void teardown(Run *r);

/* SIGINT/SIGTERM (llmc/stop_signal.h) on any rank: all ranks stop before the same step. One
 * process needs no agreement; several sum their flags (one small all-reduce per step). Returns the
 * signal to exit with, 0 to go on. */
static int stop_agreed(Run *r) {
    const int own = stop_signal_pending();
    if (r->mg.nproc == 1) return own;
    float any = own != 0 ? 1.0f : 0.0f;
    gpt2gpu_sum_over_ranks(&r->model, &any, 1);
    return any > 0.0f ? (own != 0 ? own : SIGTERM) : 0;
}

/* Before training step `step`: the steps done are kept in a checkpoint (unless this step has one
 * already), rank 0 prints the resume command, and every rank exits with 128 + the signal. */
static void stop_on_signal(Run *r, int step, int have_checkpoint, int sig) {
    const TrainArgs *a = &r->args;
    int ckpt = -1;
    if (a->out_dir[0] != '\0' && step > 0) {
        if (!have_checkpoint) save_checkpoint(r, step);
        ckpt = step;
    }
    if (is_rank0(r)) train_stop_report(a, sig, step, r->loop.num_steps, ckpt, r->program, stdout);
    teardown(r);
    exit(128 + sig);
}

static void train(Run *r) {
    const TrainArgs *a = &r->args;
    TrainLoop *t = &r->loop;
    const int N = t->num_steps;
    double total_time = 0.0, ema_tok = 0.0;
    int timed_steps = 0;
    RunRecord rec;
    run_record_init(&rec);
    stop_signal_install(); /* from here on Ctrl-C keeps the steps done */
    for (int step = t->start_step; step <= N; step++) {
        const int last = step == N;
        if (train_due_val(a, step, last)) {
            float rms[LLMC_MAX_LAYERS + 1];
            const float val = evaluate(r, rms);
            if (is_rank0(r)) {
                printf("val loss %f\n", val);
                train_stream_print(r->model.config.use_ln, r->model.config.num_layers, rms, stdout);
            }
            logger_log_val(&r->logger, step, val);
            logger_log_stream(&r->logger, step, rms, r->model.config.num_layers + 1);
            run_record_val(&rec, step, val);
        }
        if (r->evals.count > 0 && train_due_evals(a, step, last)) run_evals(r, step);
        if (is_rank0(r) && train_due_sample(a, step, last)) generate(r);
        int have_checkpoint = t->resumed;
        if (train_due_checkpoint(a, t, step, last)) {
            save_checkpoint(r, step);
            rec.last_ckpt_step = step;
            have_checkpoint = 1;
        }
        t->resumed = 0;
        if (last) break;
        const int sig = stop_agreed(r);
        if (sig != 0) stop_on_signal(r, step, have_checkpoint, sig);

        CUDA_CHECK(cudaEventRecord(r->ev_start, r->ctx.stream));
        const StepResult res = train_step(r, step);
        CUDA_CHECK(cudaEventRecord(r->ev_end, r->ctx.stream));
        CUDA_CHECK(cudaEventSynchronize(r->ev_end));
        float ms = 0.0f;
        CUDA_CHECK(cudaEventElapsedTime(&ms, r->ev_start, r->ev_end));
        const double dt = ms / 1000.0;
        const double tok_s = (double)a->total_batch / dt; /* all processes' tokens */
        double tok_s_shown = tok_s;
        if (step > t->start_step) { /* the first step warms up cuBLAS/cuDNN; llm.c excludes it too */
            total_time += dt;
            timed_steps++;
            ema_tok = 0.95 * ema_tok + 0.05 * tok_s;
            tok_s_shown = ema_tok / (1.0 - pow(0.95, timed_steps));
        }
        const double mfu = mfu_estimate(r->flops_per_token, (double)a->B * a->T * t->grad_accum, dt, r->peak_tflops);
        if (is_rank0(r)) {
            printf("step %4d/%d | loss %7.6f (%+.2fz)| norm %6.4f (%+.2fz)| lr %.2e | %.2f ms | %.1f%% bf16 MFU | %.0f tok/s%s\n",
                   step + 1, N, res.loss, res.loss_z, res.norm, res.norm_z, res.lr, ms, 100.0 * mfu,
                   tok_s_shown, res.skipped ? " | update skipped" : "");
            if (a->log_gpu_every > 0 && (step + 1) % a->log_gpu_every == 0) log_gpu(r);
            fflush(stdout);
        }
        logger_log_train(&r->logger, step, res.loss, res.lr, res.norm);
    }
    if (timed_steps > 0 && is_rank0(r)) printf("total average iteration time: %f ms\n", 1000.0 * total_time / timed_steps);
    if (is_rank0(r)) train_summary_print(&rec, a, N - t->start_step, N, "./eval_gpt2cu", stdout);
}

static void teardown(Run *r) {
    train_evals_free(&r->evals);
    logger_free(&r->logger);
    tokenizer_free(&r->tokenizer);
    train_loop_free(&r->loop);
    CUDA_CHECK(cudaEventDestroy(r->ev_start));
    CUDA_CHECK(cudaEventDestroy(r->ev_end));
    gpt2gpu_free(&r->model);
    cudnn_att_destroy(r->cudnn);
    multi_gpu_free(&r->mg);
    gpu_ctx_free(&r->ctx);
}

int main(int argc, char **argv) {
    static Run run; /* large (loaders, tables); static keeps it off the stack */
    stdout_line_buffered();
    run.program = argv[0];
    train_args_parse(&run.args, argc, argv, TRAINER_GPU, run.given);
    if (train_args_given(run.given, "-f")) {
        printf("note: -f %d has no effect: this trainer is bf16 (TF32 applies to llm.c's FP32 builds)\n",
               run.args.tf32);
    }
    if (run.args.zero_stage >= 2) { /* llm.c's behaviour: a notice, then stage 0 */
        printf("note: -z %d: ZeRO stages 2 and 3 are not implemented (nor in llm.c); running stage 0\n",
               run.args.zero_stage);
        run.args.zero_stage = 0;
    }
    setup(&run, &argc, &argv);
    train(&run);
    teardown(&run);
    return 0;
}
