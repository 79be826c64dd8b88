/*
 * kinds/list.h: the layer kinds' codes, one per kind. The code is the kind's number in checkpoints
 * (doc/formats.md "Per-layer heads") and its row in each registry table: kinds/registry.h (shapes),
 * kinds/registry_cpu.h (the CPU model's stages), kinds/registry_gpu.cu (the GPU model's). Append
 * new kinds, never reorder.
 *
 *   mha    GPT-2's softmax attention (the framework's two stages)
 *   sd     S-D attention: logits u_i (S -/+ D) u_j^T / sqrt(d) (sd_attention/, doc/methods.md "Formulation A")
 *   lin    ELU+1 linear attention on q, k (doc/methods.md "ELU+1 causal linear attention")
 *   sdlin  the linear mixer on S-D's u and u L^T
 */
#ifndef KINDS_LIST_H
#define KINDS_LIST_H

typedef enum { ATTN_MHA, ATTN_SD, ATTN_LIN, ATTN_SDLIN, ATTN_NUM_KINDS } AttnKind;

/* A registry table with one row per code, checked where it is defined: KINDS_ROWS_CHECK(t). */
#define KINDS_ROWS_CHECK(table, what)                                                              \
    typedef char what##_has_one_row_per_kind[(sizeof(table) / sizeof(table[0]) == ATTN_NUM_KINDS) ? 1 : -1]

#endif /* KINDS_LIST_H */
