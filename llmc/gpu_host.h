/*
 * llmc/gpu_host.h: the host-side decisions of the CUDA trainer, in plain C11/C++17 so that they
 * are unit-tested on a machine without a GPU (test/test_gpu_host.c).
 *
 * Defines:
 *   AttPath, AttnRequest, AttnEnv   the attention implementations (cuDNN, own softmax kernels,
 *                              own tiled "flash" kernels, linear scan) and what the machine offers
 *   cudnn_sdpa_supports        can cuDNN's flash attention run a causal bf16 head of size d here?
 *                              (FORMATS.md 15.2 support matrix, 15.3 version pitfalls)
 *   flash_path_supports        can the own tiled kernels (llmc/flash_attention.h) run it here?
 *   flash_args_init            their arguments for one layer's call
 *   mma_path_supports          can the register-tile kernels (llmc/flash_mma.h) run it here?
 *   mma_args_init              their arguments for one layer's call
 *   attn_select_paths          one path per layer for -attn auto|cudnn|own|flash|mma, or a one-line error;
 *                              softmax layers (mha, sd) by head size, linear layers (lin, sdlin)
 *                              always on the linear scan
 *   attn_print_paths           the start-up table of paths, one line per run of equal layers
 *   LtAlgoKey / LtAlgoTable    the cuBLASLt algorithm cache's keys (llmc/matmul.cu keeps the
 *                              algorithms): lt_algo_find, lt_algo_insert
 *   ActPlan / act_plan_init    every activation and scratch buffer of the GPU model, sized from the
 *                              layer table (sum of h_l for per-layer attention state, max h_l for
 *                              scratch; S-D generators per layer, the S-D and linear scratch by
 *                              the widest such layer; no LayerNorm buffers with -ln 0), with
 *                              per-layer prefix offsets, all in 64-bit
 *   ShardPlan / shard_plan_init  ZeRO-0/1 optimizer segments per (tensor, layer), llm.c's state-file
 *                              order (FORMATS.md 8, 14)
 *   gpu_peak_bf16_tflops / train_flops_per_token   the MFU of llm.c's step line (FORMATS.md 12),
 *                              with H100 and H200 in the table
 *   encoder_buckets            positions grouped by token id, so the wte gradient is summed on the
 *                              GPU in a fixed order (deterministic, no atomics)
 *   sr_hash / sr_bf16_bits     the stochastic rounding of fp32 master weights to bf16 (LLMC_HD:
 *                              the same code runs in the AdamW kernel and in the CPU test)
 *   AdamWArgs, adamw_element   one parameter's AdamW update (LLMC_HD: the kernel's body)
 *
 * Nothing here touches CUDA; every size is size_t because B*h*T*T and 3*B*T*C pass 2^31 for
 * realistic runs (FORMATS.md 18 #2).
 */
#ifndef LLMC_GPU_HOST_H
#define LLMC_GPU_HOST_H

#include <math.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "config.h"
#include "flash_attention.h" /* flash_choose */
#include "flash_mma.h"       /* fmma_supports_dir */
#include "gpu_shared.h"      /* LLMC_HD */
#include "linear_scan.h"
#include "param_layout.h"
#include "rand.h" /* xorshift_u32: the stochastic-rounding seeds */
#include "utils.h"

/* ----------------------------------------------------------------------------------------------
 * Attention paths (FORMATS.md 15). */
/* own, cudnn, flash and mma are softmax paths (mha and sd layers; an sd layer hands them
 * U | U L^T | V): own materializes P (any d, llmc/attention_own.cu), flash is the own tiled
 * tensor-core kernels with shared-memory tiles (d a multiple of 16, llmc/attention_flash.cu), mma
 * the register-tile ones (d a multiple of 16 up to 256, llmc/attention_flash_mma.cu;
 * not yet run on a GPU); linear is the chunked ELU+1 scan of lin and sdlin layers
 * (llmc/linear_attention.cu). cudnn, flash and mma keep the logsumexp of each row between forward
 * and backward (flash and mma also a D scratch in the backward), own keeps P. */
typedef enum { ATT_PATH_OWN = 0, ATT_PATH_CUDNN = 1, ATT_PATH_LINEAR = 2, ATT_PATH_FLASH = 3, ATT_PATH_MMA = 4 } AttPath;
static const char *const ATT_PATH_NAMES[5] = {"own", "cudnn", "linear", "flash", "mma"};

typedef enum { ATTN_REQ_AUTO = 0, ATTN_REQ_CUDNN = 1, ATTN_REQ_OWN = 2, ATTN_REQ_FLASH = 3, ATTN_REQ_MMA = 4 } AttnRequest;

static inline int attn_request_from_name(const char *name, AttnRequest *out) {
    if (strcmp(name, "auto") == 0) *out = ATTN_REQ_AUTO;
    else if (strcmp(name, "cudnn") == 0) *out = ATTN_REQ_CUDNN;
    else if (strcmp(name, "own") == 0) *out = ATTN_REQ_OWN;
    else if (strcmp(name, "flash") == 0) *out = ATTN_REQ_FLASH;
    else if (strcmp(name, "mma") == 0) *out = ATTN_REQ_MMA;
    else return 0;
    return 1;
}

typedef struct {
    int sm;            /* compute capability as 10*major + minor, e.g. 90 for H100/H200 */
    int cudnn_built;   /* 1 when the binary was built with USE_CUDNN=1 */
    long cudnn_version; /* cudnnGetVersion() of the loaded library, e.g. 91900; 0 if none */
    size_t smem_optin; /* shared memory a block may opt in to (the flash kernels' tiles) */
} AttnEnv;

/* The flash kernels: SM 8.0+ (bf16 tensor cores) and d a multiple of 16 whose tiles fit. Returns
 * their tile rows (flash_choose), or 0 with the reason. */
static inline int flash_path_supports(const AttnEnv *env, int d, char *why, size_t cap) {
    if (env->sm < 80) {
        snprintf(why, cap, "the flash kernels need SM 8.0 or newer (bf16 tensor cores); this GPU is SM %d.%d",
                 env->sm / 10, env->sm % 10);
        return 0;
    }
    return flash_choose(d, env->smem_optin, why, cap);
}

/* Can the register-tile kernels (llmc/flash_mma.h) run head size d here (training: the backward
 * too: its shared memory)? 0 with the reason when not. */
static inline int mma_path_supports(const AttnEnv *env, int d, int training, char *why, size_t cap) {
    return fmma_supports_dir(d, training, env->sm, env->smem_optin, why, cap);
}

/* The FlashArgs of one layer's call on qkv (B, T, 3 h d): tile rows, shape and the scale 1/sqrt(d)
 * (the own path's and the CPU reference's expression); the output pointers are the caller's. 0 with
 * the reason when the kernels cannot run it (the path selection asks flash_path_supports first, so
 * this guards direct callers). Shared by llmc/attention_flash.cu and test/host_cuda. */
static inline int flash_args_init(FlashArgs *a, const uint16_t *qkv, int B, int T, int h, int d, const AttnEnv *env,
                                  char *why, size_t cap) {
    memset(a, 0, sizeof(*a));
    a->BLK = flash_path_supports(env, d, why, cap);
    if (a->BLK == 0) return 0;
    if ((T + 31) / 32 > 65535) { /* the grid's y dimension counts the tiles */
        snprintf(why, cap, "T = %d: more than 65535 tiles", T);
        return 0;
    }
    a->qkv = qkv;
    a->B = B;
    a->T = T;
    a->h = h;
    a->d = d;
    a->scale = 1.0f / sqrtf((float)d);
    return a->BLK;
}

/* The FlashArgs of one call of the register-tile kernels (llmc/flash_mma.h): the rows of a block's
 * tile (BLK = fmma_block_rows(d)), shape and scale; 0 with the reason when they cannot
 * run it (d, SM, shared memory, the backward's when training, the grid's 65535 tiles of 64 rows).
 * Shared by llmc/attention_flash_mma.cu and test/host_cuda. */
static inline int mma_args_init(FlashArgs *a, const uint16_t *qkv, int B, int T, int h, int d, int training,
                                const AttnEnv *env, char *why, size_t cap) {
    memset(a, 0, sizeof(*a));
    if (!mma_path_supports(env, d, training, why, cap)) return 0;
    if ((T + FMMA_BQ - 1) / FMMA_BQ > 65535) {
        snprintf(why, cap, "T = %d: more than 65535 tiles", T);
        return 0;
    }
    a->qkv = qkv;
    a->B = B;
    a->T = T;
    a->h = h;
    a->d = d;
    a->BLK = fmma_block_rows(d);
    a->scale = 1.0f / sqrtf((float)d);
    return 1;
}

/*
 * Whether cuDNN's fused flash attention (causal, bf16) serves a head of size d; `training` asks
 * for forward with stats plus backward. Rules (FORMATS.md 15.2, 15.3):
 *   SM >= 8.0; d a multiple of 8 and <= 256;
 *   backward: d <= 128 except on Hopper (SM 9.x), which takes up to 256;
 *   forward d > 128 on SM 8.x needs backend >= 9.10 (older ones cap it at 128);
 *   backends 9.10.0 and 9.10.1 have the backward blocked by the frontend (known bug).
 */
static inline int cudnn_sdpa_supports(const AttnEnv *env, int d, int training, char *why, size_t cap) {
    if (!env->cudnn_built) {
        snprintf(why, cap, "this binary was built without cuDNN (make USE_CUDNN=1)");
        return 0;
    }
    if (env->sm < 80) {
        snprintf(why, cap, "cuDNN flash attention needs SM 8.0 or newer; this GPU is SM %d.%d",
                 env->sm / 10, env->sm % 10);
        return 0;
    }
    if (d % 8 != 0) {
        snprintf(why, cap, "head size %d is not a multiple of 8", d);
        return 0;
    }
    if (d > 256) {
        snprintf(why, cap, "head size %d exceeds cuDNN's limit of 256", d);
        return 0;
    }
    const int hopper = env->sm >= 90 && env->sm < 100;
    if (training && d > 128 && !hopper) {
        snprintf(why, cap, "head size %d: cuDNN's backward takes at most 128 on SM %d.%d (256 only "
                 "on Hopper)", d, env->sm / 10, env->sm % 10);
        return 0;
    }
    if (d > 128 && env->sm >= 80 && env->sm < 90 && env->cudnn_version < 91000) {
        snprintf(why, cap, "head size %d: cuDNN %ld caps the forward at 128 on SM %d.%d (9.10+ "
                 "needed)", d, env->cudnn_version, env->sm / 10, env->sm % 10);
        return 0;
    }
    if (training && env->cudnn_version >= 91000 && env->cudnn_version < 91002) {
        snprintf(why, cap, "cuDNN %ld: the frontend blocks the attention backward on 9.10.0/9.10.1",
                 env->cudnn_version);
        return 0;
    }
    if (why && cap) why[0] = '\0';
    return 1;
}

/*
 * One path per layer. Linear layers (lin, sdlin) always take the linear scan: -attn chooses among
 * softmax implementations only. Softmax layers (mha, sd): auto: cuDNN where it can serve the head
 * size, own kernels elsewhere; cudnn: every softmax layer on cuDNN, else a one-line error naming
 * the first layer it cannot serve; own: every softmax layer on the own kernels (any d, any T);
 * flash: every softmax layer on the own tiled kernels, else the same one-line error; mma: every
 * softmax layer on the register-tile kernels (not yet run on a GPU; auto never chooses them
 * until they have been measured), else the same one-line error. auto never
 * chooses flash: on the H200 those kernels pass every check but are slower than the materializing
 * own kernels at every head size measured (d 16-256, 1.04-6.0x; doc/gpu.md "GPU results"), so they
 * are for a run whose B h T^2 attention matrices do not fit, chosen by hand.
 * Returns 1, or 0 with the message in err.
 */
static inline int attn_select_paths(const GPT2Config *c, AttnRequest req, const AttnEnv *env,
                                    int training, AttPath *out, char *err, size_t cap) {
    for (int l = 0; l < c->num_layers; l++) {
        const LayerSpec *ls = &c->layer[l];
        char why[256];
        if (ls->kind < 0 || ls->kind >= ATTN_NUM_KINDS) {
            snprintf(err, cap, "layer %d: unknown attention kind %d", l, ls->kind);
            return 0;
        }
        if (attn_kind_is_linear(ls->kind)) {
            out[l] = ATT_PATH_LINEAR;
            continue;
        }
        if (req == ATTN_REQ_FLASH || req == ATTN_REQ_MMA) {
            const int flash = req == ATTN_REQ_FLASH;
            if (flash ? !flash_path_supports(env, ls->head_size, why, sizeof(why))
                      : !mma_path_supports(env, ls->head_size, training, why, sizeof(why))) {
                snprintf(err, cap, "-attn %s: layer %d (%d heads x %d%s%s): %s; use -attn auto or "
                         "-attn own", flash ? "flash" : "mma", l, ls->n_head, ls->head_size,
                         ls->kind == ATTN_MHA ? "" : ", ", ls->kind == ATTN_MHA ? "" : ATTN_KIND_NAMES[ls->kind], why);
                return 0;
            }
            out[l] = flash ? ATT_PATH_FLASH : ATT_PATH_MMA;
            continue;
        }
        const int ok = cudnn_sdpa_supports(env, ls->head_size, training, why, sizeof(why));
        if (req == ATTN_REQ_OWN) {
            out[l] = ATT_PATH_OWN;
        } else if (req == ATTN_REQ_CUDNN) {
            if (!ok) {
                snprintf(err, cap, "-attn cudnn: layer %d (%d heads x %d%s%s): %s; use -attn auto or "
                         "-attn own", l, ls->n_head, ls->head_size, ls->kind == ATTN_MHA ? "" : ", ",
                         ls->kind == ATTN_MHA ? "" : ATTN_KIND_NAMES[ls->kind], why);
                return 0;
            }
            out[l] = ATT_PATH_CUDNN;
        } else {
            out[l] = ok ? ATT_PATH_CUDNN : ATT_PATH_OWN;
        }
    }
    return 1;
}

/* "attention: layers 0-1:   3 heads x 256 mha   -> cudnn" per run of layers with equal
 * (h, d, kind, path). */
static inline void attn_print_paths(const GPT2Config *c, const AttPath *path, FILE *out) {
    int start = 0;
    for (int l = 1; l <= c->num_layers; l++) {
        if (l < c->num_layers && path[l] == path[start] &&
            c->layer[l].n_head == c->layer[start].n_head &&
            c->layer[l].head_size == c->layer[start].head_size &&
            c->layer[l].kind == c->layer[start].kind)
            continue;
        if (l - 1 == start) fprintf(out, "attention: layer  %2d   ", start);
        else fprintf(out, "attention: layers %2d-%-2d", start, l - 1);
        fprintf(out, ": %3d heads x %3d %-5s -> %s\n", c->layer[start].n_head,
                c->layer[start].head_size, ATTN_KIND_NAMES[c->layer[start].kind],
                ATT_PATH_NAMES[path[start]]);
        start = l;
    }
}

/* ----------------------------------------------------------------------------------------------
 * cuBLASLt algorithm cache. cublasLtMatmulAlgoGetHeuristic costs host time on every call, and a
 * training step repeats a few dozen distinct matmul problems, so llmc/matmul.cu asks once per
 * problem and keeps the answer (the algorithm, in an array parallel to these keys). A key holds
 * every input of the heuristic except the operand pointers, whose alignments it holds instead:
 * the heuristic sees the pointers only through the alignment preferences (A, B, C = D), and the
 * bias and aux alignments are kept too, so a cached algorithm never meets an operand less aligned
 * than the one it was chosen for. The table is small and fixed; when it is full a new problem
 * is simply not cached (the heuristic then runs on each of its calls, as without the cache). */
#define LT_ALGO_SLOTS 256

typedef struct { /* int64_t fields only: no padding, so memcmp compares two keys */
    int64_t m, n, k, lda, ldb, ldd, ld_aux; /* D is m x n; op(A) m x k */
    int64_t trans_a, trans_b, epilogue, has_bias, has_aux;
    int64_t dtype, compute_type; /* cudaDataType_t of every operand, cublasComputeType_t */
    int64_t align_a, align_b, align_d, align_bias, align_aux; /* bytes, powers of two <= 256 */
    int64_t workspace;           /* bytes the algorithm may use */
} LtAlgoKey;

typedef struct {
    int count;
    LtAlgoKey key[LT_ALGO_SLOTS];
} LtAlgoTable;

/* The slot holding k, or -1. */
static inline int lt_algo_find(const LtAlgoTable *t, const LtAlgoKey *k) {
    for (int i = 0; i < t->count; i++)
        if (memcmp(&t->key[i], k, sizeof(*k)) == 0) return i;
    return -1;
}

/* A new slot for k (not in the table), or -1 when the table is full. */
static inline int lt_algo_insert(LtAlgoTable *t, const LtAlgoKey *k) {
    if (t->count == LT_ALGO_SLOTS) return -1;
    t->key[t->count] = *k;
    return t->count++;
}

/* ----------------------------------------------------------------------------------------------
 * Activation plan. Two arenas: bf16 (activations, scratch) and fp32 (LayerNorm statistics, cuDNN
 * softmax statistics, per-token losses). Every tensor, and every layer's block inside a per-layer
 * tensor, starts on a multiple of ACT_ALIGN elements (256 bytes for bf16), which keeps 16-byte
 * vector loads and cuBLASLt's alignment preferences valid whatever the head sizes are. */
#define ACT_ALIGN 128

static inline size_t act_round_up(size_t n) { return (n + ACT_ALIGN - 1) / ACT_ALIGN * ACT_ALIGN; }

typedef enum {
    /* bf16 arena */
    ACT_ENCODED = 0, /* (B, T, C) */
    ACT_LN1,         /* L or 1 (recompute >= 2) x (B, T, C) */
    ACT_QKV,         /* per layer (B, T, 3 A_l): Q | K | V, head k at columns k d_l */
    ACT_ATTY,        /* per layer (B, T, A_l) attention output */
    ACT_ATT,         /* per own-path layer (B, h_l, T, T) softmax probabilities */
    ACT_RESIDUAL2,   /* L x (B, T, C) */
    ACT_LN2,         /* L or 1 x (B, T, C) */
    ACT_FCH,         /* L x (B, T, 4C) pre-GELU */
    ACT_FCH_GELU,    /* L or 1 (recompute >= 1) x (B, T, 4C) */
    ACT_RESIDUAL3,   /* L x (B, T, C) */
    ACT_LNF,         /* (B, T, C) */
    ACT_LOGITS,      /* (B, T, Vp): logits, then dlogits in place */
    ACT_OUT,         /* (B, T, C) forward scratch: projection outputs before the residual add */
    ACT_DRESIDUAL,   /* (B, T, C) gradient of the residual stream */
    ACT_DBIG,        /* (B, T, max(4C, 3 A_max)): d fch_gelu / d fch, d qkv */
    ACT_DSMALL,      /* (B, T, max(C, A_max)): d ln, d atty */
    ACT_ATT_SCRATCH, /* own path: 7 x (B, T, A_own_max): q k v, dO, dq dk dv in (B, h, T, d) */
    ACT_DATT,        /* own path: max over own layers of (B, h_l, T, T): d att, d preatt */
    ACT_SDUV,        /* S-D layers: (B, T, 2 A_sd_max): the U | V projection, then d(U | V) */
    /* fp32 arena */
    ACT_LN1_MEAN,    /* L x (B, T) */
    ACT_LN1_RSTD,
    ACT_LN2_MEAN,
    ACT_LN2_RSTD,
    ACT_LNF_MEAN,    /* (B, T) */
    ACT_LNF_RSTD,
    ACT_STATS,       /* per cuDNN- or flash-path layer (B, h_l, T): logsumexp of each softmax row */
    ACT_SDL,         /* per S-D layer (h_l, d_l, d_l): the generators L, built in the forward */
    ACT_SDDL,        /* S-D: max over S-D layers of h_l d_l^2: dL of the layer in the backward */
    ACT_LIN_SCRATCH, /* linear layers: lin_scratch_floats(B T, h, d) of the widest such layer */
    ACT_FLASH_D,     /* flash and mma layers: (B, max h_l, T): D = dO . O of the layer in the backward */
    /* last, always: the loss accumulator is addressed through the allocation plan while smaller
     * evaluation shapes lay out their own tensors, which then all end before it */
    ACT_LOSSES,      /* (B, T) per-token losses, accumulated over micro-steps */
    NUM_ACTS
} ActTensor;

#define ACT_FIRST_F32 ACT_LN1_MEAN

static const char *const ACT_NAMES[NUM_ACTS] = {
    "encoded", "ln1", "qkv", "atty", "att", "residual2", "ln2", "fch", "fch_gelu", "residual3",
    "lnf", "logits", "out", "dresidual", "dbig", "dsmall", "att_scratch", "datt", "sduv",
    "ln1_mean", "ln1_rstd", "ln2_mean", "ln2_rstd", "lnf_mean", "lnf_rstd", "stats", "sdl", "sddl",
    "lin_scratch", "flash_d", "losses"};

typedef struct {
    int B, T, recompute;
    size_t n[NUM_ACTS];   /* elements of each tensor (0: not needed) */
    size_t off[NUM_ACTS]; /* element offset in its arena */
    /* element offset of layer l's block inside the per-layer tensors; [L] = end */
    size_t qkv_off[LLMC_MAX_LAYERS + 1];
    size_t atty_off[LLMC_MAX_LAYERS + 1];
    size_t att_off[LLMC_MAX_LAYERS + 1];   /* own-path layers only (others: empty block) */
    size_t stats_off[LLMC_MAX_LAYERS + 1]; /* cuDNN- and flash-path layers only */
    size_t sdl_off[LLMC_MAX_LAYERS + 1];   /* S-D layers only */
    int A_max, A_own_max, A_sd_max;
    size_t bf16_total, f32_total; /* arena sizes in elements */
} ActPlan;

static inline int act_is_f32(int t) { return t >= ACT_FIRST_F32; }

/* Sizes every tensor for (B, T), the layer table (widths, kinds, -ln 0) and the attention paths. */
static inline void act_plan_init(ActPlan *p, const GPT2Config *c, int B, int T, int recompute,
                                 const AttPath *path) {
    memset(p, 0, sizeof(*p));
    p->B = B;
    p->T = T;
    p->recompute = recompute;
    const size_t N = (size_t)B * (size_t)T, C = (size_t)c->channels, L = (size_t)c->num_layers;
    const size_t Vp = (size_t)c->padded_vocab_size;
    size_t qkv = 0, atty = 0, att = 0, stats = 0, datt = 0, sdl = 0, sddl = 0, lin = 0, flash_d = 0;
    int A_max = 0, A_own_max = 0, A_sd_max = 0;
    for (int l = 0; l < c->num_layers; l++) {
        const size_t h = (size_t)c->layer[l].n_head, d = (size_t)c->layer[l].head_size;
        const int A = attn_width(&c->layer[l]), kind = c->layer[l].kind;
        A_max = LLMC_MAX(A_max, A);
        p->qkv_off[l] = qkv;
        p->atty_off[l] = atty;
        p->att_off[l] = att;
        p->stats_off[l] = stats;
        p->sdl_off[l] = sdl;
        qkv += act_round_up(N * 3 * (size_t)A); /* S-D layers too: U | U L^T | V */
        atty += act_round_up(N * (size_t)A);
        if (attn_kind_is_sd(kind)) {
            sdl += act_round_up(h * d * d);
            sddl = LLMC_MAX(sddl, h * d * d);
            A_sd_max = LLMC_MAX(A_sd_max, A);
        }
        if (path[l] == ATT_PATH_LINEAR) {
            lin = LLMC_MAX(lin, lin_scratch_floats(N, (int)h, (int)d));
        } else if (path[l] == ATT_PATH_OWN) {
            const size_t block = (size_t)B * h * (size_t)T * (size_t)T;
            att += act_round_up(block);
            datt = LLMC_MAX(datt, block);
            A_own_max = LLMC_MAX(A_own_max, A);
        } else { /* cudnn, flash, mma: the logsumexp of each row */
            stats += act_round_up((size_t)B * h * (size_t)T);
            if (path[l] == ATT_PATH_FLASH || path[l] == ATT_PATH_MMA) flash_d = LLMC_MAX(flash_d, (size_t)B * h * (size_t)T);
        }
    }
    p->qkv_off[L] = qkv;
    p->atty_off[L] = atty;
    p->att_off[L] = att;
    p->stats_off[L] = stats;
    p->sdl_off[L] = sdl;
    p->A_max = A_max;
    p->A_own_max = A_own_max;
    p->A_sd_max = A_sd_max;
    /* -ln 0: the sub-blocks read the residual stream itself; no ln1/ln2 tensors or statistics */
    const size_t ln = c->use_ln ? 1 : 0;
    const size_t ln_layers = recompute >= 2 ? 1 : L;
    const size_t gelu_layers = recompute >= 1 ? 1 : L;
    p->n[ACT_ENCODED] = N * C;
    p->n[ACT_LN1] = ln * ln_layers * N * C;
    p->n[ACT_QKV] = qkv;
    p->n[ACT_ATTY] = atty;
    p->n[ACT_ATT] = att;
    p->n[ACT_RESIDUAL2] = L * N * C;
    p->n[ACT_LN2] = ln * ln_layers * N * C;
    p->n[ACT_FCH] = L * N * 4 * C;
    p->n[ACT_FCH_GELU] = gelu_layers * N * 4 * C;
    p->n[ACT_RESIDUAL3] = L * N * C;
    p->n[ACT_LNF] = N * C;
    p->n[ACT_LOGITS] = N * Vp;
    p->n[ACT_OUT] = N * C;
    p->n[ACT_DRESIDUAL] = N * C;
    p->n[ACT_DBIG] = N * LLMC_MAX(4 * C, 3 * (size_t)A_max);
    p->n[ACT_DSMALL] = N * LLMC_MAX(C, (size_t)A_max);
    p->n[ACT_ATT_SCRATCH] = 7 * N * (size_t)A_own_max;
    p->n[ACT_DATT] = datt;
    p->n[ACT_SDUV] = N * 2 * (size_t)A_sd_max;
    p->n[ACT_LN1_MEAN] = ln * L * N;
    p->n[ACT_LN1_RSTD] = ln * L * N;
    p->n[ACT_LN2_MEAN] = ln * L * N;
    p->n[ACT_LN2_RSTD] = ln * L * N;
    p->n[ACT_LNF_MEAN] = N;
    p->n[ACT_LNF_RSTD] = N;
    p->n[ACT_STATS] = stats;
    p->n[ACT_LOSSES] = N;
    p->n[ACT_SDL] = sdl;
    p->n[ACT_SDDL] = sddl;
    p->n[ACT_LIN_SCRATCH] = lin;
    p->n[ACT_FLASH_D] = flash_d;
    size_t b16 = 0, f32 = 0;
    for (int t = 0; t < NUM_ACTS; t++) {
        size_t *arena = act_is_f32(t) ? &f32 : &b16;
        p->off[t] = *arena;
        *arena += act_round_up(p->n[t]);
    }
    p->bf16_total = b16;
    p->f32_total = f32;
}

/* Bytes of both arenas. */
static inline size_t act_plan_bytes(const ActPlan *p) { return p->bf16_total * 2 + p->f32_total * 4; }

/* ----------------------------------------------------------------------------------------------
 * ZeRO shard plan (FORMATS.md 8, 14). The optimizer state (m, v, fp32 master weights) is a list of
 * segments, one per (tensor slot, layer) in checkpoint order: with ZeRO-0 each segment is the whole
 * block; with ZeRO-1 it is this rank's contiguous 1/nproc slice of the block. The rank's state
 * buffers hold the segments back to back, which is exactly llm.c's state-file body. */
typedef struct {
    int slot, layer;   /* layer 0 for wte, wpe, lnfw, lnfb */
    size_t block_off;  /* offset of the whole (slot, layer) block in the parameter buffer */
    size_t block_size; /* elements of the block */
    size_t global_off; /* offset of this rank's part in the parameter buffer */
    size_t count;      /* elements this rank updates */
    size_t shard_off;  /* offset in this rank's m / v / master buffers */
} ShardSeg;

#define SHARD_MAX_SEGS (NUM_PARAM_SLOTS * LLMC_MAX_LAYERS)

typedef struct {
    int zero_stage, nproc, rank;
    int nseg;
    ShardSeg seg[SHARD_MAX_SEGS];
    size_t shard_total; /* elements of this rank's optimizer buffers */
} ShardPlan;

/* Returns 1, or 0 with the reason in err (ZeRO-1 needs every block divisible by nproc). */
static inline int shard_plan_init(ShardPlan *s, const ParamLayout *pl, const GPT2Config *c,
                                  int zero_stage, int nproc, int rank, char *err, size_t cap) {
    memset(s, 0, sizeof(*s));
    s->zero_stage = zero_stage;
    s->nproc = nproc;
    s->rank = rank;
    if (nproc < 1 || rank < 0 || rank >= nproc) {
        snprintf(err, cap, "rank %d of %d processes: expected 0 <= rank < processes", rank, nproc);
        return 0;
    }
    const int sharded = zero_stage == 1 && nproc > 1;
    size_t shard_off = 0;
    for (int slot = 0; slot < NUM_PARAM_SLOTS; slot++) {
        const int layers = slot_is_per_layer(slot) ? c->num_layers : 1;
        for (int l = 0; l < layers; l++) {
            const size_t block_off = param_offset(pl, slot, l);
            const size_t size = slot_is_per_layer(slot) ? layer_slot_size(c, l, slot) : pl->slot_size[slot];
            if (size == 0) continue;
            if (sharded && size % (size_t)nproc != 0) {
                snprintf(err, cap, "-z 1: tensor %s, layer %d: %zu elements are not divisible by %d "
                         "processes (ZeRO-1 shards every tensor evenly); use -z 0",
                         PARAM_SLOT_NAMES[slot], l, size, nproc);
                return 0;
            }
            ShardSeg *g = &s->seg[s->nseg++];
            g->slot = slot;
            g->layer = l;
            g->block_off = block_off;
            g->block_size = size;
            g->count = sharded ? size / (size_t)nproc : size;
            g->global_off = block_off + (sharded ? (size_t)rank * g->count : 0);
            g->shard_off = shard_off;
            shard_off += g->count;
        }
    }
    s->shard_total = shard_off;
    return 1;
}

/* ----------------------------------------------------------------------------------------------
 * MFU (FORMATS.md 12): FLOPs per trained token = 6 N + sum_l f_l, where N counts every parameter
 * (padded wte rows included) and f_l is the attention's own work, forward + backward (3x the
 * forward): softmax layers 6 T A_l (llm.c's 6 L C T when every A_l = C: the causal half of
 * 4 T A_l forward, times 3); linear layers 12 A_l d_l (forward 2 A d for the state update k~^T v
 * and 2 A d for q~ P, per token; METHODS.md 3.12); S-D layers add 6 A_l d_l for the fold
 * (2 A d forward). The bf16 dense peak comes from the device name; -1 when the GPU is not in
 * the table. */
static inline double train_flops_per_token(const GPT2Config *c, size_t num_params, int T) {
    double attn = 0.0;
    for (int l = 0; l < c->num_layers; l++) {
        const LayerSpec *ls = &c->layer[l];
        const double A = (double)attn_width(ls), d = (double)ls->head_size;
        attn += attn_kind_is_linear(ls->kind) ? 12.0 * A * d : 6.0 * (double)T * A;
        if (attn_kind_is_sd(ls->kind)) attn += 6.0 * A * d;
    }
    return 6.0 * (double)num_params + attn;
}

typedef struct {
    const char *name_prefix; /* matched against cudaDeviceProp.name; the longest prefix wins */
    double bf16_tflops;      /* dense bf16 with fp32 accumulation */
} GpuPeak;

/* llm.c's method: the architecture's whitepaper value scaled by tensor cores and boost clock,
 * e.g. H100 SXM = 756 x (528/456) x (1830/1620) = 988.8. H200 is the H100 SXM chip with more
 * memory: the same dense bf16 rate (datasheet 989 TFLOPS). NVL parts: datasheet 1671 sparse / 2. */
static const GpuPeak GPU_PEAKS[] = {
    {"NVIDIA A100", 312.0},
    {"NVIDIA A800", 312.0},
    {"NVIDIA A10", 125.0},
    {"NVIDIA A30", 165.0},
    {"NVIDIA L4", 121.0},
    {"NVIDIA L40S", 366.0},
    {"NVIDIA GeForce RTX 3090", 71.0},
    {"NVIDIA GeForce RTX 4090", 165.2},
    {"NVIDIA H100 PCIe", 756.0},
    {"NVIDIA H100 80GB HBM3", 988.8},
    {"NVIDIA H100 SXM", 988.8},
    {"NVIDIA H100 NVL", 835.5},
    {"NVIDIA H800", 988.8},
    {"NVIDIA H200", 988.8},
    {"NVIDIA H200 NVL", 835.5},
    {"NVIDIA GH200", 988.8},
};

static inline double gpu_peak_bf16_tflops(const char *device_name) {
    double best = -1.0;
    size_t best_len = 0;
    for (size_t i = 0; i < sizeof(GPU_PEAKS) / sizeof(GPU_PEAKS[0]); i++) {
        const size_t n = strlen(GPU_PEAKS[i].name_prefix);
        if (strncmp(device_name, GPU_PEAKS[i].name_prefix, n) == 0 && n > best_len) {
            /* a prefix must end at a word boundary: "NVIDIA A10" must not match "NVIDIA A100" */
            const char next = device_name[n];
            if (next != '\0' && next != ' ' && next != '-') continue;
            best = GPU_PEAKS[i].bf16_tflops;
            best_len = n;
        }
    }
    return best;
}

/* MFU of one process: tokens processed in dt seconds against the peak; -1 if the peak is unknown. */
static inline double mfu_estimate(double flops_per_token, double tokens, double dt_s, double peak_tflops) {
    if (peak_tflops <= 0.0 || dt_s <= 0.0) return -1.0;
    return flops_per_token * tokens / dt_s / (peak_tflops * 1e12);
}

/* ----------------------------------------------------------------------------------------------
 * Encoder backward buckets. dwte[v] += sum over positions p with inputs[p] = v of dout[p]. On the
 * GPU, one thread block per distinct token sums its positions in increasing order, so the result
 * is the same on every run (atomics would add in a random order). Fills:
 *   uniq[u]   the u-th distinct token id, increasing
 *   start[u]  its positions are pos[start[u] .. start[u+1])
 *   pos       every position 0..n-1, grouped by token, increasing inside a group
 * count: V ints of scratch. Returns the number of distinct tokens U (start has U+1 entries). */
static inline int encoder_buckets(const int *inputs, int n, int V, int *uniq, int *start, int *pos,
                                  int *count) {
    memset(count, 0, (size_t)V * sizeof(int));
    for (int i = 0; i < n; i++) count[inputs[i]]++;
    int U = 0, acc = 0;
    for (int v = 0; v < V; v++) {
        if (count[v] == 0) continue;
        uniq[U] = v;
        start[U] = acc;
        acc += count[v];
        count[v] = start[U]; /* now: the next free slot of token v */
        U++;
    }
    start[U] = acc;
    for (int i = 0; i < n; i++) pos[count[inputs[i]]++] = i;
    return U;
}

/* ----------------------------------------------------------------------------------------------
 * Stochastic rounding fp32 -> bf16 for the updated weights (FORMATS.md 11: the master weights are
 * rounded with a per-tensor seed from the model RNG). The random bits depend on (seed, global
 * parameter index) only, so ZeRO-0 and ZeRO-1 round every parameter identically. */
static inline LLMC_HD uint32_t sr_hash(uint32_t seed, uint64_t index) {
    /* splitmix64 finalizer over (seed, index): every input bit reaches every output bit */
    uint64_t z = index + 0x9e3779b97f4a7c15ull * ((uint64_t)seed + 1ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    z ^= z >> 31;
    return (uint32_t)(z >> 32);
}

/* bf16 bits of x rounded down or up with probability proportional to the distance: add 16 random
 * bits below the bf16 mantissa and truncate. NaN/inf pass through unchanged. */
static inline LLMC_HD uint16_t sr_bf16_bits(float x, uint32_t rnd) {
    uint32_t u;
    memcpy(&u, &x, 4);
    if ((u & 0x7f800000u) == 0x7f800000u) return (uint16_t)(u >> 16); /* inf / NaN */
    const uint32_t r = u + (rnd & 0xffffu);
    if ((r & 0x7f800000u) == 0x7f800000u) return (uint16_t)(u >> 16); /* would round to inf */
    return (uint16_t)(r >> 16);
}

/* ----------------------------------------------------------------------------------------------
 * AdamW (FORMATS.md 11), one parameter, in the CPU model's expression order (gpt2_cpu.h
 * gpt2_update):
 *   g = s grad;  m = b1 m + (1-b1) g;  v = b2 v + (1-b2) g^2;  p -= lr (mhat / (sqrt(vhat) + eps) + wd p)
 * p is the fp32 master (or the bf16 parameter widened); returns the new bf16 parameter, p rounded
 * stochastically with bits from (seed, global index gi). The AdamW kernel (llmc/gpu_kernels.cu)
 * and test/host_cuda run this. */
typedef struct {
    float lr, beta1, beta2, eps, weight_decay, grad_scale;
    float bias_corr1, bias_corr2; /* 1 - beta^t */
    uint32_t seed;                /* stochastic rounding seed of this tensor */
} AdamWArgs;

static inline LLMC_HD uint16_t adamw_element(const AdamWArgs *a, float grad, float *m, float *v, float *p,
                                             uint64_t gi) {
    const float g = grad * a->grad_scale;
    *m = a->beta1 * *m + (1.0f - a->beta1) * g;
    *v = a->beta2 * *v + (1.0f - a->beta2) * g * g;
    const float mhat = *m / a->bias_corr1, vhat = *v / a->bias_corr2;
    *p -= a->lr * (mhat / (sqrtf(vhat) + a->eps) + a->weight_decay * *p);
    return sr_bf16_bits(*p, sr_hash(a->seed, gi));
}

/* bf16 checkpoints: checkpoint_write_bf16 (the GPU trainer's writer) and the readers are in
 * llmc/checkpoint.h, one writer for both element sizes. */
#include "checkpoint.h"

#endif /* LLMC_GPU_HOST_H */
