/*
 * llmc/args.h: the trainers' command line, llm.c's `train_gpt2cu` flags plus ours.
 *
 * Defines:
 *   TrainArgs           every option, with llm.c's defaults
 *   ARG_TABLE           one row per framework flag (llmc/cli.h): name, type, field, range or
 *                       choices, scope (all / GPU only), help
 *   train_arg_table     ARG_TABLE with the kinds' option flags (llmc/kind_option.h) after -ln,
 *                       their values in TrainArgs.kind_opt. The parser, the range checks, --help,
 *                       flags.txt and the start-up table are all generated from it, so the help
 *                       text cannot drift from what the parser does (llm.c's help did).
 *   train_args_parse    parse argv (flag value pairs); --help prints the table and exits 0;
 *                       any bad flag or value is one error line and exit 1
 *   train_args_check    checks that involve several flags
 *   train_args_print    the start-up table of the effective settings
 *
 * Differences from llm.c, all deliberate: every value is validated (llm.c uses atoi); help is
 * `--help` (llm.c's -h is HellaSwag); flags may be longer than 3 characters (-prism); a GPU-only
 * flag given to the CPU trainer is a warning that names it, not silently accepted.
 */
#ifndef LLMC_ARGS_H
#define LLMC_ARGS_H

#include <errno.h>
#include <limits.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "kind_option.h"
#include "utils.h"

#define ARG_STR_CAP 1024

typedef struct {
    /* data, model, output */
    char train_pattern[ARG_STR_CAP]; /* -i */
    char val_pattern[ARG_STR_CAP];   /* -j */
    char init[ARG_STR_CAP];          /* -e */
    char out_dir[ARG_STR_CAP];       /* -o */
    char layers[ARG_STR_CAP];        /* -layers: a layer table */
    char prism[ARG_STR_CAP];         /* -prism: a layer table held to Prism's rules */
    int seed;                        /* -seed */
    int data_seed;                   /* -data_seed: the train loader's shuffle seed (+ rank) */
    int rows;                        /* -rows: 1, independent rows per batch; 0, llm.c's spans */
    /* model options for a descriptor -e (a checkpoint carries its own) */
    int ln;                          /* -ln */
    float emb_scale;                 /* -emb_scale */
    KindOptValue kind_opt[LLMC_MAX_KIND_OPTIONS]; /* the kinds' flags: KIND_OPTIONS[i] in [i] */
    int checkpoint_every;            /* -n */
    int keep_last;                   /* -nk */
    int major_every;                 /* -nm */
    int resume;                      /* -y */
    int start_over;                  /* -start_over */
    /* batch and length */
    int B;           /* -b */
    int T;           /* -t */
    int total_batch; /* -d, tokens; -1 = B*T*nproc */
    int max_steps;   /* -x, -1 = one epoch */
    /* optimization */
    char lr_schedule[32]; /* -k */
    float lr;             /* -l */
    int warmup;           /* -u */
    float final_lr_frac;  /* -q */
    float decay_frac;     /* -decay_frac: -k wsd's final fraction of decay */
    float weight_decay;   /* -c */
    float skip_loss_z;    /* -sl */
    float skip_norm_z;    /* -sg */
    /* evaluation and sampling */
    int val_every;   /* -v */
    int val_batches; /* -m */
    int sample_every; /* -s */
    int gen_tokens;  /* -g */
    int hellaswag;   /* -h */
    int hellaswag_max; /* -hn */
    char eval_tasks[256]; /* -ht */
    char tokenizer[ARG_STR_CAP]; /* -tok: the tokenizer file samples are decoded with */
    int overfit;     /* -a */
    /* GPU trainer only */
    int log_gpu_every;  /* -lg */
    int tf32;           /* -f */
    int master_weights; /* -w */
    int gelu_fusion;    /* -ge */
    int zero_stage;     /* -z */
    int recompute;      /* -r */
    int num_processes;  /* -pn */
    int process_rank;   /* -pr */
    int gpus_per_node;  /* -pg */
    char init_method[16];          /* -pi */
    char server_ip[256];           /* -ps */
    char fs_path[ARG_STR_CAP];     /* -pf */
    char attn[16];                 /* -attn: auto, cudnn, own, flash or mma attention per layer */
} TrainArgs;

typedef enum { SCOPE_ALL = 0, SCOPE_GPU = 1 } ArgScope; /* the CliOpt group of a flag */
typedef enum { TRAINER_CPU = 0, TRAINER_GPU = 1 } TrainerKind;
typedef CliOpt ArgSpec;

#define A_INT(f, field, lo, hi, sc, h) CLI_INT(TrainArgs, f, field, lo, hi, sc, h)
#define A_FLT(f, field, lo, hi, sc, h) CLI_FLT(TrainArgs, f, field, lo, hi, sc, h)
#define A_STR(f, field, ch, sc, h) CLI_STR(TrainArgs, f, field, ch, sc, h)

static const ArgSpec ARG_TABLE[] = {
    A_STR("-i", train_pattern, NULL, SCOPE_ALL, "train token shards (glob pattern)"),
    A_STR("-j", val_pattern, NULL, SCOPE_ALL, "val token shards (glob pattern)"),
    A_STR("-e", init, NULL, SCOPE_ALL,
          "init: a .bin checkpoint, or a descriptor dN, gpt2:dN, gpt3:cC, tiny, L<l>C<c>H<h>[T<t>][V<v>] "
          "(V256: the byte vocabulary)"),
    A_STR("-o", out_dir, NULL, SCOPE_ALL, "output directory for main.log and checkpoints (empty: none)"),
    A_STR("-layers", layers, NULL, SCOPE_ALL,
          "layer table file: heads, head size and kind per layer (doc/formats.md 'Per-layer heads'); with a "
          "descriptor -e"),
    A_STR("-prism", prism, NULL, SCOPE_ALL,
          "a layer table checked by Prism's rules (doc/prism.md): a Prism schedule; with a descriptor -e"),
    A_INT("-seed", seed, 0, INT_MAX, SCOPE_ALL, "init seed of the model weights (the data order is -data_seed's)"),
    A_INT("-data_seed", data_seed, 0, INT_MAX, SCOPE_ALL,
          "shuffle seed of the training data order (llm.c: 42; with -rows 0 each rank adds its rank)"),
    A_INT("-rows", rows, 0, 1, SCOPE_ALL,
          "1: each of the B rows of a batch its own window of T+1 tokens (a seeded permutation of all such "
          "windows); 0: llm.c's batch, one span of B*T+1 tokens (doc/formats.md 'DataLoader semantics')"),
    A_INT("-ln", ln, 0, 1, SCOPE_ALL, "0: blocks without ln_1/ln_2 (ln_f kept); with a descriptor -e"),
    A_FLT("-emb_scale", emb_scale, 1e-30, 1e4, SCOPE_ALL,
          "input scale F: the blocks read F (wte[x] + wpe[t]), the tied head wte unscaled (35.36: unit RMS "
          "at GPT-2's init, for -ln 0); with a descriptor -e"),
    A_INT("-n", checkpoint_every, 0, INT_MAX, SCOPE_ALL, "write a checkpoint every N steps and at the end (0: off)"),
    A_INT("-nk", keep_last, 0, INT_MAX, SCOPE_ALL, "keep only the last K checkpoints (0: keep all)"),
    A_INT("-nm", major_every, 0, INT_MAX, SCOPE_ALL, "never delete checkpoints at multiples of this step (0: none)"),
    A_INT("-y", resume, 0, 1, SCOPE_ALL,
          "1: resume the run in -o from its newest complete checkpoint, with its flags (flags.txt); without "
          "a checkpoint, start that run over; where -o holds no run, start one only if -e is given"),
    A_INT("-start_over", start_over, 0, 1, SCOPE_ALL,
          "1: start this run in an -o that holds another; that run's files move into <-o>/replaced_<n>/"),
    A_INT("-b", B, 1, INT_MAX, SCOPE_ALL, "micro-batch size B per process"),
    A_INT("-t", T, 1, INT_MAX, SCOPE_ALL, "sequence length T (<= the model's maxT)"),
    A_INT("-d", total_batch, -1, INT_MAX, SCOPE_ALL,
          "total batch in tokens, a multiple of B*T*processes (-1: B*T*processes)"),
    A_INT("-x", max_steps, -1, INT_MAX, SCOPE_ALL, "number of steps (-1: one epoch of the train data; 0: only the val loss of the model, as -e loads it)"),
    A_STR("-k", lr_schedule, "cosine|linear|constant|wsd", SCOPE_ALL, "learning-rate schedule"),
    A_FLT("-l", lr, 0.0, 1e3, SCOPE_ALL, "peak learning rate"),
    A_INT("-u", warmup, 0, INT_MAX, SCOPE_ALL, "warmup steps"),
    A_FLT("-q", final_lr_frac, 0.0, 1.0, SCOPE_ALL, "final learning rate as a fraction of the peak"),
    A_FLT("-decay_frac", decay_frac, 0.0, 1.0, SCOPE_ALL,
          "-k wsd: the final fraction of the steps over which the learning rate decays (llm.c: 0.2)"),
    A_FLT("-c", weight_decay, 0.0, 1e3, SCOPE_ALL, "AdamW weight decay (2-D tensors only)"),
    A_FLT("-sl", skip_loss_z, 0.0, 1e9, SCOPE_ALL, "skip the update if the loss z-score exceeds this (0: off)"),
    A_FLT("-sg", skip_norm_z, 0.0, 1e9, SCOPE_ALL, "skip the update if the grad-norm z-score exceeds this (0: off)"),
    A_INT("-v", val_every, 0, INT_MAX, SCOPE_ALL, "val loss every N steps and at the last step (0: last only)"),
    A_INT("-m", val_batches, -1, INT_MAX, SCOPE_ALL, "val batches per evaluation (-1: the whole val data)"),
    A_INT("-s", sample_every, 0, INT_MAX, SCOPE_ALL, "generate a sample every N steps and at the end (0: off)"),
    A_INT("-g", gen_tokens, 1, INT_MAX, SCOPE_ALL, "genT, as llm.c: a sample is genT - 1 tokens after the end-of-text token"),
    A_INT("-h", hellaswag, 0, 1, SCOPE_ALL, "1: HellaSwag eval at each val step (llm.c's -h; help is --help)"),
    A_INT("-hn", hellaswag_max, 0, 65535, SCOPE_ALL, "-h 1 scores only the first N examples of each task (0: all)"),
    A_STR("-ht", eval_tasks, NULL, SCOPE_ALL, "-h 1 tasks: a comma list of hellaswag, piqa, arc_easy, winogrande, lambada (dev/data/<task>/)"),
    A_STR("-tok", tokenizer, NULL, SCOPE_ALL,
          "tokenizer file (llm.c's format) that decodes samples, which start from its end-of-text token; "
          "bytes_tokenizer.bin for V256 models (make prose_bytes)"),
    A_INT("-a", overfit, 0, 1, SCOPE_ALL, "1: overfit a single val batch (debugging)"),
    A_INT("-lg", log_gpu_every, -1, INT_MAX, SCOPE_GPU, "log GPU state every N steps (-1: off)"),
    A_INT("-f", tf32, 0, 1, SCOPE_GPU, "llm.c's TF32 switch for FP32 builds; accepted, no effect in this bf16 build"),
    A_INT("-w", master_weights, 0, 1, SCOPE_GPU, "1: keep fp32 master weights"),
    A_INT("-ge", gelu_fusion, 0, 2, SCOPE_GPU, "GELU fusion into cuBLASLt: 0 none, 1 forward, 2 forward+backward"),
    A_INT("-z", zero_stage, 0, 3, SCOPE_GPU, "ZeRO stage: 0 or 1 (optimizer state sharded over processes); 2 and 3 run 0, as llm.c"),
    A_INT("-r", recompute, 0, 2, SCOPE_GPU, "recompute in backward: 0 none, 1 GELU, 2 GELU + LayerNorm"),
    A_INT("-pn", num_processes, 1, INT_MAX, SCOPE_GPU, "number of processes (tcp/fs init)"),
    A_INT("-pr", process_rank, 0, INT_MAX, SCOPE_GPU, "this process's rank (tcp/fs init)"),
    A_INT("-pg", gpus_per_node, 1, INT_MAX, SCOPE_GPU, "GPUs per node (tcp/fs): local device = rank % this, unless SLURM_LOCALID or the like is set"),
    A_STR("-pi", init_method, "mpi|tcp|fs", SCOPE_GPU, "NCCL rendezvous: mpi, tcp (-ps) or a shared directory (-pf)"),
    A_STR("-ps", server_ip, NULL, SCOPE_GPU, "rank-0 server IP for -pi tcp"),
    A_STR("-pf", fs_path, NULL, SCOPE_GPU, "shared directory for -pi fs"),
    A_STR("-attn", attn, "auto|cudnn|own|flash|mma", SCOPE_GPU,
          "attention per layer: cuDNN where it serves the head size, else own kernels (auto); or force one "
          "(flash: own tiled kernels, d % 16 == 0; mma: register-tile kernels, d % 16 == 0, not yet "
          "verified on a GPU)"),
};
#define ARG_TABLE_LEN ((int)(sizeof(ARG_TABLE) / sizeof(ARG_TABLE[0])))
#define TRAIN_ARGS_MAX_FLAGS (ARG_TABLE_LEN + LLMC_MAX_KIND_OPTIONS) /* the size of given[] */

/* Every flag of the trainers: ARG_TABLE's rows, the kinds' options after -ln. Built on the first
 * call (from main, before any thread); *n gets the row count. */
static inline const ArgSpec *train_arg_table(int *n) {
    static ArgSpec table[TRAIN_ARGS_MAX_FLAGS];
    static int len = 0;
    if (len == 0) {
        if (N_KIND_OPTIONS > LLMC_MAX_KIND_OPTIONS) llmc_die("the registry lists more than %d kind options", LLMC_MAX_KIND_OPTIONS);
        for (int i = 0; i < ARG_TABLE_LEN; i++) {
            table[len++] = ARG_TABLE[i];
            if (strcmp(ARG_TABLE[i].flag, "-ln") != 0) continue;
            for (int k = 0; k < N_KIND_OPTIONS; k++) {
                ArgSpec o = KIND_OPTIONS[k]->cli;
                o.offset = offsetof(TrainArgs, kind_opt) + (size_t)k * sizeof(KindOptValue);
                o.group = SCOPE_ALL;
                table[len++] = o;
            }
        }
    }
    *n = len;
    return table;
}

static inline void train_args_defaults(TrainArgs *a, TrainerKind who) {
    memset(a, 0, sizeof(*a));
    strcpy(a->train_pattern, "dev/data/tinyshakespeare/tiny_shakespeare_train.bin");
    strcpy(a->val_pattern, "dev/data/tinyshakespeare/tiny_shakespeare_val.bin");
    strcpy(a->init, who == TRAINER_GPU ? "gpt2_124M_bf16.bin" : "gpt2_124M.bin");
    a->seed = 42;
    a->data_seed = 42;
    a->ln = 1;
    a->emb_scale = 1.0f;
    kind_options_defaults(a->kind_opt);
    a->B = 4;
    a->T = 1024;
    a->total_batch = -1;
    a->max_steps = -1;
    strcpy(a->lr_schedule, "cosine");
    a->lr = 3e-4f;
    a->final_lr_frac = 1.0f;
    a->decay_frac = 0.2f;
    a->val_every = 20;
    a->val_batches = 20;
    a->sample_every = 20;
    a->gen_tokens = 64;
    a->log_gpu_every = -1;
    a->tf32 = 1;
    a->master_weights = 1;
    a->recompute = 1; /* llm.c: recompute GELU in the backward */
    a->num_processes = 1;
    a->gpus_per_node = 8;
    strcpy(a->init_method, "mpi");
    strcpy(a->eval_tasks, "hellaswag");
    strcpy(a->tokenizer, "gpt2_tokenizer.bin");
    strcpy(a->attn, "auto");
}

static inline void train_args_help(const char *prog, TrainerKind who, FILE *out) {
    TrainArgs d;
    train_args_defaults(&d, who);
    fprintf(out, "usage: %s [-flag value ...]   (every flag takes exactly one value; --help: this text)\n", prog);
    fprintf(out, "options:\n");
    int n;
    const ArgSpec *t = train_arg_table(&n);
    cli_print_options(t, n, &d, SCOPE_ALL, out);
    fprintf(out, "GPU trainer options%s:\n", who == TRAINER_CPU ? " (accepted and ignored by the CPU trainer)" : "");
    cli_print_options(t, n, &d, SCOPE_GPU, out);
}

/* given[i] is set for every train_arg_table row that appeared on the command line (given holds
 * TRAIN_ARGS_MAX_FLAGS). */
static inline void train_args_parse(TrainArgs *a, int argc, char **argv, TrainerKind who, int *given) {
    train_args_defaults(a, who);
    if (cli_wants_help(argc, argv)) {
        train_args_help(argv[0], who, stdout);
        exit(0);
    }
    int n;
    const ArgSpec *t = train_arg_table(&n);
    cli_parse(t, n, a, argc, argv, given, NULL, 0);
    for (int i = 0; i < n; i++) {
        if (given[i] && t[i].group == SCOPE_GPU && who == TRAINER_CPU) {
            llmc_warn("%s is a GPU trainer flag; the CPU trainer ignores it", t[i].flag);
        }
    }
}

/* Whether `flag` was on the command line (given[] from train_args_parse). */
static inline int train_args_given(const int *given, const char *flag) {
    int n;
    const ArgSpec *t = train_arg_table(&n);
    for (int i = 0; i < n; i++)
        if (strcmp(t[i].flag, flag) == 0) return given[i];
    return 0;
}

/* Checks involving several flags. Shape checks that need the model (-t <= maxT) and the process
 * count (-d) are done by the trainer. */
static inline void train_args_check(const TrainArgs *a, TrainerKind who) {
    if (a->resume && a->out_dir[0] == '\0') llmc_die("-y 1 resumes from -o, but -o is not set");
    if (a->start_over && a->resume) llmc_die("-start_over 1 starts the run in -o over; -y 1 resumes it: give one of them");
    if (a->start_over && a->out_dir[0] == '\0') llmc_die("-start_over 1 starts the run in -o over, but -o is not set");
    if (a->checkpoint_every > 0 && a->out_dir[0] == '\0') {
        llmc_die("-n %d writes checkpoints to -o, but -o is not set", a->checkpoint_every);
    }
    if (a->keep_last > 0 && a->checkpoint_every == 0) llmc_die("-nk %d needs checkpoints (-n > 0)", a->keep_last);
    if (a->layers[0] != '\0' && a->prism[0] != '\0') {
        llmc_die("-layers and -prism both give a layer table: -layers FILE for any table, -prism FILE "
                 "for a Prism schedule (its rules checked)");
    }
    char msg[256];
    if (!kind_options_validate(a->kind_opt, msg, sizeof(msg))) llmc_die("%s", msg);
    if (a->decay_frac != 0.2f && strcmp(a->lr_schedule, "wsd") != 0) {
        llmc_die("-decay_frac %g: only -k wsd decays over a final fraction of the steps (this run: -k %s)",
                 (double)a->decay_frac, a->lr_schedule);
    }
    if (strcmp(a->lr_schedule, "constant") == 0 && a->warmup > 0) {
        llmc_die("-k constant ignores warmup (as llm.c); drop -u %d or use -k cosine/linear/wsd", a->warmup);
    }
    if (who == TRAINER_GPU) {
        if (a->process_rank >= a->num_processes) {
            llmc_die("-pr %d: the rank must be below -pn %d", a->process_rank, a->num_processes);
        }
        if (strcmp(a->init_method, "tcp") == 0 && a->server_ip[0] == '\0' && a->num_processes > 1) {
            llmc_die("-pi tcp needs the rank-0 server address (-ps IP)");
        }
        if (strcmp(a->init_method, "fs") == 0 && a->fs_path[0] == '\0' && a->num_processes > 1) {
            llmc_die("-pi fs needs a shared directory (-pf DIR)");
        }
    }
}

static inline void train_args_print(const TrainArgs *a, TrainerKind who, FILE *out) {
    fprintf(out, "+-------------------+--------------------------------------------------------+\n");
    int n;
    const ArgSpec *t = train_arg_table(&n);
    for (int i = 0; i < n; i++) {
        const ArgSpec *s = &t[i];
        if (s->group == SCOPE_GPU && who == TRAINER_CPU) continue;
        char val[ARG_STR_CAP + 8];
        cli_value_text(s, a, val, sizeof(val));
        fprintf(out, "| %-17s | %-54s |\n", s->flag, val);
    }
    fprintf(out, "+-------------------+--------------------------------------------------------+\n");
}

#endif /* LLMC_ARGS_H */
