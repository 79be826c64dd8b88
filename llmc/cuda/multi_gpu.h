/*
 * llmc/cuda/multi_gpu.h: data parallelism over processes, one GPU each (doc/formats.md "Multi-GPU").
 *
 * Implemented in llmc/cuda/multi_gpu.cpp, compiled per build variant: with NCCL and MPI (the default
 * where both are found), NCCL without MPI (NO_USE_MPI=1: tcp/fs rendezvous only), or single-GPU
 * (NO_MULTI_GPU=1: every collective is a no-op, more than one process is an error). The trainer
 * code is the same for all three.
 *
 *   multi_gpu_init      who am I: rank, process count, local GPU; from MPI (-pi mpi, when
 *                       started by an MPI launcher) or from -pn/-pr/-pg (-pi tcp|fs). A run of
 *                       one process needs neither MPI nor NCCL (doc/formats.md "Upstream weak spots" #12)
 *   multi_gpu_connect   after the GPU is selected: NCCL unique-id exchange (MPI broadcast, TCP
 *                       from rank 0 on port 12345, or <-pf dir>/ncclUniqueId.sync), communicator,
 *                       the NCCL stream and its events
 *   multi_gpu_reduce_grads   gradients of a list of (tensor, layer) segments, averaged over ranks:
 *                       ZeRO-0 all-reduce in place, ZeRO-1 reduce-scatter into this rank's slice.
 *                       Enqueued on the NCCL stream after the compute stream's work so far, so the
 *                       reduction of layer l overlaps the backward of layer l-1.
 *   multi_gpu_allgather_params   ZeRO-1: every rank's updated slice to every rank
 *   multi_gpu_join      the compute stream waits for the NCCL work enqueued so far
 *   multi_gpu_allreduce_f32      sum or average of a few device floats (loss, norm^2)
 *   multi_gpu_barrier   all processes (checkpoints)
 */
#ifndef LLMC_MULTI_GPU_H
#define LLMC_MULTI_GPU_H

#include <cuda_runtime.h>
#include <stddef.h>

#include "zero_plan.h"

typedef struct MultiGpuImpl MultiGpuImpl;

typedef struct {
    int rank, nproc, local_device;
    int zero_stage;
    int use_mpi;      /* MPI was initialized by this process */
    MultiGpuImpl *impl; /* NCCL communicator, stream, events; NULL for one process */
} MultiGpu;

/* "NCCL 2.28.9, MPI", "NCCL 2.28.9 (no MPI: ...)" or "single GPU (NO_MULTI_GPU=1)" */
void multi_gpu_build_features(char *buf, size_t cap);

void multi_gpu_init(MultiGpu *mg, int *argc, char ***argv, const char *init_method, int num_processes,
                    int process_rank, int gpus_per_node, int zero_stage);
/* One process on one GPU (the evaluator, the tests): no rendezvous, ZeRO-0. */
static inline void multi_gpu_init_single(MultiGpu *mg) {
    multi_gpu_init(mg, NULL, NULL, "fs", /*num_processes*/ 1, /*process_rank*/ 0, /*gpus_per_node*/ 1,
                   /*zero_stage*/ 0);
}
void multi_gpu_connect(MultiGpu *mg, const char *init_method, const char *server_ip,
                       const char *fs_path);
void multi_gpu_free(MultiGpu *mg);

void multi_gpu_reduce_grads(MultiGpu *mg, void *grads_bf16, const ShardSeg *segs, const int *idx,
                            int n, cudaStream_t compute);
void multi_gpu_allgather_params(MultiGpu *mg, void *params_bf16, const ShardSeg *segs, int n,
                                cudaStream_t compute);
void multi_gpu_join(MultiGpu *mg, cudaStream_t compute);
void multi_gpu_allreduce_f32(MultiGpu *mg, float *dev, size_t n, int average, cudaStream_t compute);
void multi_gpu_barrier(MultiGpu *mg);

#endif /* LLMC_MULTI_GPU_H */
