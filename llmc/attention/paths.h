/*
 * llmc/attention/paths.h: the GPU model's softmax attention paths, one selection table, in plain
 * C11/C++17 so that the choice is unit-tested on a machine without a GPU (test/test_paths.c).
 *
 * A layer whose kind mixes by softmax (llmc/layer_kind.h: mha, sd; an sd layer hands the path
 * U | U L^T | V) runs on one of these paths; a layer with another mixer runs its kind's own GPU
 * kernels (ATT_PATH_MIXER; the linear scan of lin and sdlin, sd_attention/linear_scan.cu):
 *   own    materializes P: any d, any T (llmc/attention/own.cu); keeps P for the backward
 *   cudnn  cuDNN's fused flash attention (llmc/attention/cudnn.cpp; doc/gpu.md "cuDNN SDPA head-size support", "cuDNN version and build facts")
 *   flash  own tiled tensor-core kernels with shared-memory tiles, d a multiple of 16
 *          (llmc/attention/flash.cu)
 *   mma    own register-tile kernels, d a multiple of 16 up to 256 (llmc/attention/mma.cu)
 * cudnn, flash and mma keep the logsumexp of each row between forward and backward (flash and
 * mma also a D scratch in the backward).
 *
 * Defines:
 *   AttPath, ATT_PATH_NAMES, AttnRequest, attn_request_from_name, AttnEnv
 *   cudnn_sdpa_supports / flash_path_supports / mma_path_supports   whether a path serves a head
 *                              size here, else why
 *   SoftmaxPath, SOFTMAX_PATHS  the table: each path's name, -attn request and predicate
 *   flash_args_init / mma_args_init   the arguments of one layer's call of the own tiled kernels
 *   attn_select_paths          one path per layer for -attn auto|cudnn|own|flash|mma, or a
 *                              one-line error
 *   attn_print_paths           the start-up table of paths, one line per run of equal layers
 */
#ifndef LLMC_ATTENTION_PATHS_H
#define LLMC_ATTENTION_PATHS_H

#include <math.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "../config.h"
#include "../layer_kind.h"
#include "flash_tiles.h" /* FlashArgs, flash_choose */
#include "mma_tiles.h"   /* fmma_supports_dir, fmma_block_rows, FMMA_BQ */

/* ATT_PATH_MIXER: the layer's kind mixes by its own kernels, not by softmax */
typedef enum { ATT_PATH_OWN = 0, ATT_PATH_CUDNN = 1, ATT_PATH_MIXER = 2, ATT_PATH_FLASH = 3, ATT_PATH_MMA = 4 } AttPath;
#define NUM_ATT_PATHS 5
static const char *const ATT_PATH_NAMES[NUM_ATT_PATHS] = {"own", "cudnn", "mixer", "flash", "mma"};

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

/* The flash kernels: SM 8.0+ (bf16 tensor cores) and d a multiple of 16 whose tiles fit (forward
 * and backward alike). Returns their tile rows (flash_choose), or 0 with the reason. */
static inline int flash_path_supports(const AttnEnv *env, int d, char *why, size_t cap) {
    if (env->sm < 80) {
        snprintf(why, cap, "the flash kernels need SM 8.0 or newer (bf16 tensor cores); this GPU is SM %d.%d",
                 env->sm / 10, env->sm % 10);
        return 0;
    }
    return flash_choose(d, env->smem_optin, why, cap);
}

/* Can the register-tile kernels (llmc/attention/mma.h) run head size d here (training: the backward
 * too: its shared memory)? 0 with the reason when not. */
static inline int mma_path_supports(const AttnEnv *env, int d, int training, char *why, size_t cap) {
    return fmma_supports_dir(d, training, env->sm, env->smem_optin, why, cap);
}

/* The FlashArgs of one layer's call on qkv (B, T, 3 h d): tile rows, shape and the scale 1/sqrt(d)
 * (the own path's and the CPU reference's expression); the output pointers are the caller's. 0 with
 * the reason when the kernels cannot run it (the path selection asks flash_path_supports first, so
 * this guards direct callers). Shared by llmc/attention/flash.cu and test/host_cuda. */
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

/* The FlashArgs of one call of the register-tile kernels (llmc/attention/mma.h): the rows of a block's
 * tile (BLK = fmma_block_rows(d)), shape and scale; 0 with the reason when they cannot
 * run it (d, SM, shared memory, the backward's when training, the grid's 65535 tiles of 64 rows).
 * Shared by llmc/attention/mma.cu and test/host_cuda. */
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
 * for forward with stats plus backward. Rules (doc/gpu.md "cuDNN SDPA head-size support", "cuDNN version and build facts"):
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

/* The own kernels serve every head size and T. */
static inline int own_path_supports(const AttnEnv *env, int d, int training, char *why, size_t cap) {
    (void)env, (void)d, (void)training;
    if (why && cap) why[0] = '\0';
    return 1;
}
static inline int flash_path_supports_dir(const AttnEnv *env, int d, int training, char *why, size_t cap) {
    (void)training;
    return flash_path_supports(env, d, why, cap) != 0;
}

/* The selection table: -attn NAME asks for path `path` on every softmax layer; auto takes the
 * first path of the table that serves a layer, among those marked `in_auto`. */
typedef struct {
    AttnRequest request;
    AttPath path;
    int in_auto;
    int (*supports)(const AttnEnv *env, int d, int training, char *why, size_t cap);
} SoftmaxPath;

/* auto: cuDNN where it can serve the head size, the own materializing kernels elsewhere. It never
 * chooses flash: on the H200 those kernels pass every check but are slower than the materializing
 * own kernels at every head size measured (d 16-256, 1.04-6.0x; doc/gpu.md "GPU results"), so
 * they are for a run whose B h T^2 attention matrices do not fit, chosen by hand. It does not
 * choose mma either: the register-tile kernels have been checked on the CPU (test/warp_emul.cpp)
 * but not yet timed on a GPU against cuDNN. */
static const SoftmaxPath SOFTMAX_PATHS[] = {
    {ATTN_REQ_CUDNN, ATT_PATH_CUDNN, 1, cudnn_sdpa_supports},
    {ATTN_REQ_OWN, ATT_PATH_OWN, 1, own_path_supports},
    {ATTN_REQ_FLASH, ATT_PATH_FLASH, 0, flash_path_supports_dir},
    {ATTN_REQ_MMA, ATT_PATH_MMA, 0, mma_path_supports},
};
#define N_SOFTMAX_PATHS ((int)(sizeof(SOFTMAX_PATHS) / sizeof(SOFTMAX_PATHS[0])))

/* "layer 2 (3 heads x 24, sd)": a layer in an error message; mha, the default, is not named. */
static inline void attn_layer_label(const GPT2Config *c, int l, char *buf, size_t cap) {
    const LayerSpec *ls = &c->layer[l];
    snprintf(buf, cap, "layer %d (%d heads x %d%s%s)", l, ls->n_head, ls->head_size,
             ls->kind == LAYER_KIND_MHA ? "" : ", ", ls->kind == LAYER_KIND_MHA ? "" : layer_kind_of(ls->kind)->name);
}

/*
 * One path per layer. A layer whose mixer is not softmax takes ATT_PATH_MIXER: -attn chooses among
 * softmax implementations only. Softmax layers: auto as above; cudnn, own, flash, mma: every
 * softmax layer on that path, else a one-line error naming the first layer it cannot serve
 * (own serves every layer). Returns 1, or 0 with the message in err.
 */
static inline int attn_select_paths(const GPT2Config *c, AttnRequest req, const AttnEnv *env,
                                    int training, AttPath *out, char *err, size_t cap) {
    for (int l = 0; l < c->num_layers; l++) {
        const LayerSpec *ls = &c->layer[l];
        const LayerKind *k = layer_kind_of(ls->kind);
        char why[256];
        if (k == NULL) {
            snprintf(err, cap, "layer %d: unknown attention kind %d", l, ls->kind);
            return 0;
        }
        if (!k->mix->softmax) {
            out[l] = ATT_PATH_MIXER;
            continue;
        }
        int chosen = 0;
        for (int p = 0; p < N_SOFTMAX_PATHS && !chosen; p++) {
            const SoftmaxPath *sp = &SOFTMAX_PATHS[p];
            if (req == ATTN_REQ_AUTO ? !sp->in_auto : sp->request != req) continue;
            if (sp->supports(env, ls->head_size, training, why, sizeof(why))) {
                out[l] = sp->path;
                chosen = 1;
            } else if (req != ATTN_REQ_AUTO) {
                char label[96];
                attn_layer_label(c, l, label, sizeof(label));
                snprintf(err, cap, "-attn %s: %s: %s; use -attn auto or -attn own", ATT_PATH_NAMES[sp->path], label, why);
                return 0;
            }
        }
        if (!chosen) {
            snprintf(err, cap, "layer %d: no attention path for request %d", l, (int)req);
            return 0;
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
        const LayerKind *k = layer_kind_of(c->layer[start].kind);
        fprintf(out, ": %3d heads x %3d %-5s -> %s\n", c->layer[start].n_head,
                c->layer[start].head_size, k->name,
                path[start] == ATT_PATH_MIXER ? k->mix->name : ATT_PATH_NAMES[path[start]]);
        start = l;
    }
}

#endif /* LLMC_ATTENTION_PATHS_H */
