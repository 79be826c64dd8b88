/*
 * kinds/list.h: the layer kinds, one line each: the enum name of its code, the word of layer
 * tables, its projection and its mixer (llmc/layer_kind.h). The line's position is the kind's
 * code in checkpoints (doc/formats.md 2.4): append new kinds, never reorder.
 *
 *   mha    GPT-2's softmax attention (the framework's two stages)
 *   sd     S-D attention: logits u_i (S -/+ D) u_j^T / sqrt(d) (sd_attention/, doc/methods.md 3.4)
 *   lin    ELU+1 linear attention on q, k (doc/methods.md 3.12)
 *   sdlin  the linear mixer on S-D's u and u L^T
 *
 * Expanded by kinds/registry.h (shapes), kinds/registry_cpu.h (the CPU model's stages) and
 * kinds/registry_gpu.cu (the GPU model's).
 */
#ifndef KINDS_LIST_H
#define KINDS_LIST_H

#define LLMC_LAYER_KINDS(X)              \
    X(ATTN_MHA, "mha", QKV, SOFTMAX)     \
    X(ATTN_SD, "sd", SD, SOFTMAX)        \
    X(ATTN_LIN, "lin", QKV, LINEAR)      \
    X(ATTN_SDLIN, "sdlin", SD, LINEAR)

#define KINDS_ENUM_(code, name, proj, mix) code,
typedef enum { LLMC_LAYER_KINDS(KINDS_ENUM_) ATTN_NUM_KINDS } AttnKind;
#undef KINDS_ENUM_

#endif /* KINDS_LIST_H */
