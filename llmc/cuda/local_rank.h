/*
 * llmc/cuda/local_rank.h: which GPU of its node a process takes under -pi tcp / -pi fs
 * (doc/gpu.md "Multi-GPU").
 *
 * Defines: local_rank_from_env (the launcher's node-local rank when it sets one, else
 * rank % -pg). Under -pi mpi the node-local MPI rank is used instead (llmc/cuda/multi_gpu.cpp).
 *
 * A launcher knows where it placed each process; rank % -pg is right only when ranks fill the
 * nodes in order. srun sets SLURM_LOCALID, mpirun OMPI_COMM_WORLD_LOCAL_RANK, torchrun-style
 * launchers LOCAL_RANK. Plain C and C++, no CUDA: the rule is tested on the CPU.
 */
#ifndef LLMC_CUDA_LOCAL_RANK_H
#define LLMC_CUDA_LOCAL_RANK_H

#include <stdlib.h>

/* The node-local rank, and in *source the variable it came from ("-pg" for rank % gpus_per_node).
 * A variable that is not a non-negative integer is passed over. */
static inline int local_rank_from_env(int rank, int gpus_per_node, const char **source) {
    static const char *const vars[] = {"SLURM_LOCALID", "OMPI_COMM_WORLD_LOCAL_RANK", "LOCAL_RANK"};
    for (size_t i = 0; i < sizeof(vars) / sizeof(vars[0]); i++) {
        const char *v = getenv(vars[i]);
        if (v == NULL || v[0] == '\0') continue;
        char *end = NULL;
        const long x = strtol(v, &end, 10);
        if (*end != '\0' || x < 0 || x > 1 << 20) continue;
        if (source != NULL) *source = vars[i];
        return (int)x;
    }
    if (source != NULL) *source = "-pg";
    return rank % gpus_per_node;
}

#endif /* LLMC_CUDA_LOCAL_RANK_H */
