/*
 * llmc/cuda/encoder_buckets.h: positions grouped by token id, so that the GPU sums the wte gradient
 * in a fixed order (deterministic, no atomics); unit-tested on the CPU.
 *
 * Defines: encoder_buckets
 */
#ifndef LLMC_ENCODER_BUCKETS_H
#define LLMC_ENCODER_BUCKETS_H

#include <string.h>

/* ----------------------------------------------------------------------------------------------
 * Encoder backward buckets. dwte[v] += sum over positions p with inputs[p] = v of dout[p]. On the
 * GPU, one thread block per distinct token sums its positions in increasing order, so the result
 * is the same on every run (atomics would add in a random order). Fills:
 *   uniq[u]   the u-th distinct token id, increasing
 *   start[u]  its positions are pos[start[u] .. start[u+1])
 *   pos       every position 0..n-1, grouped by token, increasing inside a group
 * count: V ints of scratch. Returns the number of distinct tokens U (start has U+1 entries). */
static inline int encoder_buckets(const int *inputs, int n, int V, int *uniq, int *start, int *pos,
                                  int *count) {
    memset(count, 0, (size_t)V * sizeof(int));
    for (int i = 0; i < n; i++) count[inputs[i]]++;
    int U = 0, acc = 0;
    for (int v = 0; v < V; v++) {
        if (count[v] == 0) continue;
        uniq[U] = v;
        start[U] = acc;
        acc += count[v];
        count[v] = start[U]; /* now: the next free slot of token v */
        U++;
    }
    start[U] = acc;
    for (int i = 0; i < n; i++) pos[count[inputs[i]]++] = i;
    return U;
}

#endif /* LLMC_ENCODER_BUCKETS_H */
