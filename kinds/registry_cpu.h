/*
 * kinds/registry_cpu.h: the CPU model's stages of every kind (llmc/cpu/kind_cpu.h CPU_KINDS), one
 * row per code of kinds/list.h, named as in kinds/registry.h (gpt2_alloc checks the names).
 * Include it in exactly one translation unit of a program that runs the CPU model; it brings
 * kinds/registry.h.
 */
#ifndef KINDS_REGISTRY_CPU_H
#define KINDS_REGISTRY_CPU_H

#include "../llmc/cpu/kind_cpu.h"
#include "../sd_attention/linear_cpu.h"
#include "../sd_attention/sd_cpu.h"
#include "list.h"
#include "registry.h"

extern const CpuKind CPU_KINDS[];
const CpuKind CPU_KINDS[] = {
    /* name     projection             mixer */
    {"mha", &QKV_PROJECTION_CPU, &SOFTMAX_MIXER_CPU},
    {"sd", &SD_PROJECTION_CPU, &SOFTMAX_MIXER_CPU},
    {"lin", &QKV_PROJECTION_CPU, &LINEAR_MIXER_CPU},
    {"sdlin", &SD_PROJECTION_CPU, &LINEAR_MIXER_CPU},
};
KINDS_ROWS_CHECK(CPU_KINDS, CPU_KINDS);

#endif /* KINDS_REGISTRY_CPU_H */
