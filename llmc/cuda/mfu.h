/*
 * llmc/cuda/mfu.h: the MFU of llm.c's step line (doc/formats.md 12), unit-tested on the CPU.
 *
 * Defines:
 *   train_flops_per_token   6 N plus each layer's attention work (its kind's stages)
 *   GpuPeak, GPU_PEAKS, gpu_peak_bf16_tflops   the dense bf16 peak by device name
 *   mfu_estimate            tokens in dt seconds against the peak
 */
#ifndef LLMC_MFU_H
#define LLMC_MFU_H

#include <stddef.h>
#include <string.h>

#include "../config.h"
#include "../layer_kind.h"

/* ----------------------------------------------------------------------------------------------
 * MFU (doc/formats.md 12): FLOPs per trained token = 6 N + sum_l f_l, where N counts every parameter
 * (padded wte rows included) and f_l is the attention's own work, forward + backward (3x the
 * forward): softmax layers 6 T A_l (llm.c's 6 L C T when every A_l = C: the causal half of
 * 4 T A_l forward, times 3); linear layers 12 A_l d_l (forward 2 A d for the state update k~^T v
 * and 2 A d for q~ P, per token; doc/methods.md 3.12); S-D layers add 6 A_l d_l for the fold
 * (2 A d forward). The bf16 dense peak comes from the device name; -1 when the GPU is not in
 * the table. */
static inline double train_flops_per_token(const GPT2Config *c, size_t num_params, int T) {
    double attn = 0.0;
    for (int l = 0; l < c->num_layers; l++) {
        const LayerSpec *ls = &c->layer[l];
        const LayerKind *k = layer_kind_of(ls->kind);
        /* the mixer's forward products (softmax: the causal half of the square), then the
         * projection's own (S-D: the fold), times 3 for forward + backward */
        attn += 3.0 * k->mix->flops(ls, T) * k->mix->causal_share;
        if (k->proj->extra_flops) attn += 3.0 * k->proj->extra_flops(ls);
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

#endif /* LLMC_MFU_H */
