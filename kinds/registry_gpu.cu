/*
 * kinds/registry_gpu.cu: the GPU model's stages of every kind (llmc/gpu/kind_gpu.cuh GPU_KINDS),
 * expanded from kinds/list.h; linked into every program that runs the GPU model.
 */
#include "../llmc/gpu/kind_gpu.cuh"
#include "../sd_attention/stages_gpu.cuh"
#include "list.h"

#define KINDS_GPU_ROW_(code, name, proj, mix) {&proj##_PROJECTION_GPU, &mix##_MIXER_GPU},
const GpuKind GPU_KINDS[] = {LLMC_LAYER_KINDS(KINDS_GPU_ROW_)};
#undef KINDS_GPU_ROW_
