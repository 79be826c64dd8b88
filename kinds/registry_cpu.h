/*
 * kinds/registry_cpu.h: the CPU model's stages of every kind (llmc/cpu/kind_cpu.h CPU_KINDS),
 * expanded from kinds/list.h. Include it in exactly one translation unit of a program that runs
 * the CPU model; it brings kinds/registry.h.
 */
#ifndef KINDS_REGISTRY_CPU_H
#define KINDS_REGISTRY_CPU_H

#include "../llmc/cpu/kind_cpu.h"
#include "../sd_attention/linear_cpu.h"
#include "../sd_attention/sd_cpu.h"
#include "list.h"
#include "registry.h"

#define KINDS_CPU_ROW_(code, name, proj, mix) {&proj##_PROJECTION_CPU, &mix##_MIXER_CPU},
extern const CpuKind CPU_KINDS[];
const CpuKind CPU_KINDS[] = {LLMC_LAYER_KINDS(KINDS_CPU_ROW_)};
#undef KINDS_CPU_ROW_

#endif /* KINDS_REGISTRY_CPU_H */
