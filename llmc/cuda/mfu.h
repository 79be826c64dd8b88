/*
 * llmc/cuda/mfu.h: the MFU of llm.c's step line (doc/formats.md "Throughput and MFU"), unit-tested on the CPU.
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
 * MFU (doc/formats.md "Throughput and MFU"): FLOPs per trained token = 6 N + sum_l f_l, where N counts every parameter
 * (padded wte rows included) and f_l is the attention's own work, forward + backward (3x the
 * forward): softmax layers 6 T A_l (llm.c's 6 L C T when every A_l = C: the causal half of
 * 4 T A_l forward, times 3); linear layers 12 A_l d_l (forward 2 A d for the state update k~^T v
 * and 2 A d for q~ P, per token; doc/methods.md "ELU+1 causal linear attention"); S-D layers add 6 A_l d_l for the fold
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

/* Dense bf16 with fp32 accumulation, TFLOP/s (doc/formats.md "Throughput and MFU"). llm.c's method for a part
 * without its own datasheet value: the architecture's reference card scaled by tensor cores and
 * boost clock, e.g. H100 SXM = 756 x (528/456) x (1830/1620) = 988.8. The references (whitepaper
 * values): Ampere data centre 312 (432 TCs, 1410 MHz); Ampere consumer and RTX A-series 80 (RTX 3090
 * Ti: 336 TCs, 1860 MHz); GeForce Ada 165.2 (RTX 4090: 512 TCs, 2520 MHz), whose fp32-accumulate
 * rate is half its fp16-accumulate one. Datasheet values: H200 is the H100 SXM die with more memory
 * (989); NVL parts 1671 sparse / 2; L40 181.0 and L40S 366 (733 sparse / 2); RTX 6000 Ada 364.2
 * (full-rate fp32 accumulate, as L40S); Blackwell B100 1750, B200 2250, GB200 2500 per GPU; GeForce
 * RTX 5090 209.5 (half rate, as GeForce Ada). A device missing here prints no MFU. */
static const GpuPeak GPU_PEAKS[] = {
    /* Ampere, data centre */
    {"NVIDIA A100", 312.0},
    {"NVIDIA A800", 312.0},
    {"NVIDIA A10", 125.0},
    {"NVIDIA A30", 165.0},
    {"NVIDIA A40", 149.7},
    /* Ampere, workstation and GeForce: 80 x (TCs / 336) x (MHz / 1860) */
    {"NVIDIA RTX A2000", 16.0},   /* 104 TCs, 1200 MHz */
    {"NVIDIA RTX A4000", 38.3},   /* 192, 1560 */
    {"NVIDIA RTX A4500", 47.3},   /* 224, 1650 */
    {"NVIDIA RTX A5000", 55.5},   /* 256, 1695 */
    {"NVIDIA RTX A5500", 72.5},   /* 320, 1770 */
    {"NVIDIA RTX A6000", 77.4},   /* 336, 1800 */
    {"NVIDIA GeForce RTX 3060", 25.5},    /* 112, 1777 */
    {"NVIDIA GeForce RTX 3060 Ti", 32.4}, /* 152, 1665 */
    {"NVIDIA GeForce RTX 3070", 40.6},    /* 184, 1725 */
    {"NVIDIA GeForce RTX 3070 Ti", 43.5}, /* 192, 1770 */
    {"NVIDIA GeForce RTX 3080", 59.5},    /* 272, 1710 */
    {"NVIDIA GeForce RTX 3080 Ti", 68.2}, /* 320, 1665 */
    {"NVIDIA GeForce RTX 3090", 71.2},    /* 328, 1695 */
    {"NVIDIA GeForce RTX 3090 Ti", 80.0}, /* 336, 1860 */
    /* Ada: GeForce 165.2 x (TCs / 512) x (MHz / 2520) */
    {"NVIDIA L4", 121.0},
    {"NVIDIA L40", 181.0},
    {"NVIDIA L40S", 366.0},
    {"NVIDIA RTX 6000 Ada", 364.2},
    {"NVIDIA GeForce RTX 4060", 30.2},          /* 96, 2460 */
    {"NVIDIA GeForce RTX 4060 Ti", 44.1},       /* 136, 2535 */
    {"NVIDIA GeForce RTX 4070", 58.3},          /* 184, 2475 */
    {"NVIDIA GeForce RTX 4070 SUPER", 71.0},    /* 224, 2475 */
    {"NVIDIA GeForce RTX 4070 Ti", 80.2},       /* 240, 2610 */
    {"NVIDIA GeForce RTX 4070 Ti SUPER", 88.2}, /* 264, 2610 */
    {"NVIDIA GeForce RTX 4080", 97.5},          /* 304, 2505 */
    {"NVIDIA GeForce RTX 4080 SUPER", 104.5},   /* 320, 2550 */
    {"NVIDIA GeForce RTX 4090", 165.2},         /* 512, 2520 */
    /* Hopper */
    {"NVIDIA H100 PCIe", 756.0},
    {"NVIDIA H100 80GB HBM3", 988.8},
    {"NVIDIA H100 SXM", 988.8},
    {"NVIDIA H100 NVL", 835.5},
    {"NVIDIA H800", 988.8},
    {"NVIDIA H200", 988.8},
    {"NVIDIA H200 NVL", 835.5},
    {"NVIDIA GH200", 988.8},
    /* Blackwell */
    {"NVIDIA B100", 1750.0},
    {"NVIDIA B200", 2250.0},
    {"NVIDIA GB200", 2500.0},
    {"NVIDIA GeForce RTX 5090", 209.5},
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
