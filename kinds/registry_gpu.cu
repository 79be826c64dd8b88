/*
 * kinds/registry_gpu.cu: the GPU model's stages of every kind (llmc/gpu/kind_gpu.cuh GPU_KINDS),
 * one row per code of kinds/list.h, named as in kinds/registry.h (gpt2gpu_init checks the names);
 * linked into every program that runs the GPU model.
 */
#include "../llmc/gpu/kind_gpu.cuh"
#include "../sd_attention/stages_gpu.cuh"
#include "list.h"

const GpuKind GPU_KINDS[] = {
    /* name     projection             mixer */
    {"mha", &QKV_PROJECTION_GPU, &SOFTMAX_MIXER_GPU},
    {"sd", &SD_PROJECTION_GPU, &SOFTMAX_MIXER_GPU},
    {"lin", &QKV_PROJECTION_GPU, &LINEAR_MIXER_GPU},
    {"sdlin", &SD_PROJECTION_GPU, &LINEAR_MIXER_GPU},
};
KINDS_ROWS_CHECK(GPU_KINDS, GPU_KINDS);
