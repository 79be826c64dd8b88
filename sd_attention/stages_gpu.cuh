/*
 * sd_attention/stages_gpu.cuh: the S-D projection and the linear mixer on the GPU
 * (llmc/gpu/kind_gpu.cuh), in sd_attention/stages_gpu.cu over the launchers of sd_fold.cu and
 * linear_scan.cu.
 */
#ifndef SD_STAGES_GPU_CUH
#define SD_STAGES_GPU_CUH

#include "../llmc/gpu/kind_gpu.cuh"
#include "stages.h" /* their options and slots */

extern const GpuStage SD_PROJECTION_GPU;
extern const GpuStage LINEAR_MIXER_GPU;

#endif /* SD_STAGES_GPU_CUH */
