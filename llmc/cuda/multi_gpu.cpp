/*
 * llmc/cuda/multi_gpu.cpp: process rendezvous, NCCL collectives and ZeRO-1 communication (the
 * interface and its semantics are in multi_gpu.h). Host code only, compiled once per variant:
 *   -DMULTI_GPU -DUSE_MPI   NCCL + Open MPI
 *   -DMULTI_GPU             NCCL, rendezvous over TCP or a shared directory
 *   (neither)               one process; collectives are no-ops
 * Every NCCL call runs on the NCCL stream, ordered after the compute stream by events, so NCCL
 * never blocks the compute stream and every rank issues the same collectives in the same order.
 */
#include "multi_gpu.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../utils.h"
#include "local_rank.h"

#ifdef MULTI_GPU
#include <arpa/inet.h>
#include <dirent.h>
#include <nccl.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>
#ifdef USE_MPI
#define OMPI_SKIP_MPICXX 1 /* the C API only: no deprecated C++ bindings */
#define MPICH_SKIP_MPICXX 1
#include <mpi.h>
#endif

struct MultiGpuImpl {
    ncclComm_t comm;
    cudaStream_t stream;
    cudaEvent_t compute_done; /* recorded on the compute stream, waited on by the NCCL stream */
    cudaEvent_t nccl_done;    /* recorded on the NCCL stream, waited on by the compute stream */
    float *barrier_buf;       /* one device float for NCCL-based barriers */
};

static void nccl_ok(ncclResult_t r, const char *what) {
    if (r != ncclSuccess) llmc_die("NCCL: %s: %s", what, ncclGetErrorString(r));
}
static void cuda_ok(cudaError_t e, const char *what) {
    if (e != cudaSuccess) llmc_die("llmc/cuda/multi_gpu.cpp: %s: %s", what, cudaGetErrorString(e));
}

void multi_gpu_build_features(char *buf, size_t cap) {
    int v = 0;
    ncclGetVersion(&v);
#ifdef USE_MPI
    snprintf(buf, cap, "NCCL %d.%d.%d, MPI", v / 10000, (v / 100) % 100, v % 100);
#else
    snprintf(buf, cap, "NCCL %d.%d.%d (no MPI: -pi tcp or fs)", v / 10000, (v / 100) % 100, v % 100);
#endif
}

/* ---------------------------------------------------------------------------------------------
 * Unique-id exchange */
#define NCCL_TCP_PORT 12345

static void id_over_tcp(ncclUniqueId *id, int rank, int nproc, const char *server_ip) {
    if (rank == 0) {
        const int srv = socket(AF_INET, SOCK_STREAM, 0);
        if (srv < 0) llmc_die("-pi tcp: socket: %s", strerror(errno));
        const int one = 1;
        setsockopt(srv, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
        struct sockaddr_in addr;
        memset(&addr, 0, sizeof(addr));
        addr.sin_family = AF_INET;
        addr.sin_addr.s_addr = htonl(INADDR_ANY);
        addr.sin_port = htons(NCCL_TCP_PORT);
        if (bind(srv, (struct sockaddr *)&addr, sizeof(addr)) != 0) {
            llmc_die("-pi tcp: bind to port %d: %s", NCCL_TCP_PORT, strerror(errno));
        }
        if (listen(srv, nproc) != 0) llmc_die("-pi tcp: listen: %s", strerror(errno));
        for (int i = 1; i < nproc; i++) {
            /* a rank that never connects (a wrong -ps, a process that died) must not hang rank 0 */
            struct pollfd p;
            p.fd = srv;
            p.events = POLLIN;
            p.revents = 0;
            const int ready = poll(&p, 1, 300 * 1000);
            if (ready < 0) llmc_die("-pi tcp: poll: %s", strerror(errno));
            if (ready == 0) {
                llmc_die("-pi tcp: rank 0: %d of %d ranks connected to port %d within 300 s (check -ps and -pn "
                         "on the others)", i - 1, nproc - 1, NCCL_TCP_PORT);
            }
            const int c = accept(srv, NULL, NULL);
            if (c < 0) llmc_die("-pi tcp: accept: %s", strerror(errno));
            /* MSG_NOSIGNAL: a client that went away is an error line here, not a SIGPIPE that ends
             * rank 0 without a word */
            if (send(c, id, sizeof(*id), MSG_NOSIGNAL) != (ssize_t)sizeof(*id)) {
                llmc_die("-pi tcp: rank 0: send of the NCCL id to a connected rank failed: %s", strerror(errno));
            }
            close(c);
        }
        close(srv);
        return;
    }
    struct sockaddr_in addr;
    memset(&addr, 0, sizeof(addr));
    addr.sin_family = AF_INET;
    addr.sin_port = htons(NCCL_TCP_PORT);
    if (inet_pton(AF_INET, server_ip, &addr.sin_addr) != 1) {
        llmc_die("-ps '%s': expected an IPv4 address of rank 0", server_ip);
    }
    for (int attempt = 0;; attempt++) {
        const int s = socket(AF_INET, SOCK_STREAM, 0);
        if (s < 0) llmc_die("-pi tcp: socket: %s", strerror(errno));
        if (connect(s, (struct sockaddr *)&addr, sizeof(addr)) == 0) {
            size_t got = 0;
            while (got < sizeof(*id)) {
                const ssize_t r = recv(s, (char *)id + got, sizeof(*id) - got, 0);
                if (r <= 0) llmc_die("-pi tcp: rank %d: connection to %s closed early", rank, server_ip);
                got += (size_t)r;
            }
            close(s);
            return;
        }
        close(s);
        if (attempt >= 300) llmc_die("-pi tcp: rank %d: no server at %s:%d after 300 s", rank, server_ip, NCCL_TCP_PORT);
        sleep(1);
    }
}

/* The id file of this launch. Every process of a launch must derive the same name, so it depends
 * only on what the whole launch shares: under Slurm the job id (set for every process of the
 * allocation, whether srun or an mpirun inside it started it; the step id is not, so it is not
 * used), else nothing. Rank 0 removes the file once all ranks are connected; a file it finds
 * before writing was left by a launch that stopped during the rendezvous, and is an error
 * (doc/formats.md "Multi-GPU"). */
static void fs_id_path(char *path, size_t cap, const char *dir) {
    const char *job = getenv("SLURM_JOB_ID");
    char name[128];
    if (job != NULL && job[0] != '\0') {
        snprintf(name, sizeof(name), "ncclUniqueId.%.40s.sync", job);
    } else {
        snprintf(name, sizeof(name), "ncclUniqueId.sync");
    }
    path_join(path, cap, dir, name);
}

/* For a rank that waited in vain: the other id files in the directory, which a rank 0 started
 * with another SLURM_JOB_ID (or none) would have written. */
static void fs_other_ids(char *buf, size_t cap, const char *dir, const char *mine) {
    buf[0] = '\0';
    DIR *d = opendir(dir);
    if (d == NULL) return;
    const char *slash = strrchr(mine, '/');
    const char *base = slash != NULL ? slash + 1 : mine;
    size_t used = 0;
    for (struct dirent *e; (e = readdir(d)) != NULL;) {
        if (strncmp(e->d_name, "ncclUniqueId.", 13) != 0 || strcmp(e->d_name, base) == 0) continue;
        const int w = snprintf(buf + used, cap - used, "%s%.60s", used == 0 ? "" : ", ", e->d_name);
        if (w < 0 || (size_t)w >= cap - used) break;
        used += (size_t)w;
    }
    closedir(d);
}

static void id_over_fs(ncclUniqueId *id, int rank, const char *dir) {
    char path[4200];
    fs_id_path(path, sizeof(path), dir);
    if (rank == 0) {
        if (file_size_or_neg(path) >= 0) {
            llmc_die("%s exists: an earlier launch stopped before its ranks connected, and a rank "
                     "may have read its id; remove the file and start all ranks again", path);
        }
        AtomicFile af;
        atomic_open(&af, path);
        atomic_write(&af, id, sizeof(*id), 1);
        atomic_commit(&af); /* rename: readers never see a partial id */
        return;
    }
    for (int attempt = 0;; attempt++) {
        if (file_size_or_neg(path) == (int64_t)sizeof(*id)) {
            FILE *f = xfopen(path, "rb");
            xfread(id, sizeof(*id), 1, f, path, "NCCL unique id");
            xfclose(f, path);
            return;
        }
        if (attempt >= 600) {
            char others[512];
            fs_other_ids(others, sizeof(others), dir, path);
            llmc_die("%s: rank %d waited 300 s for rank 0 to write it%s%s%s", path, rank,
                     others[0] ? " (found " : "", others,
                     others[0] ? ": rank 0 has another SLURM_JOB_ID; start every rank under one launcher)" : "");
        }
        usleep(500000);
    }
}

#endif /* MULTI_GPU */

/* ---------------------------------------------------------------------------------------------
 * Process identity */

/* The number of processes an MPI-style launcher (mpirun, srun with PMI) started, 0 if none. */
static int launcher_world_size(void) {
    const char *vars[] = {"OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "PMIX_SIZE", "MPI_LOCALNRANKS"};
    for (size_t i = 0; i < sizeof(vars) / sizeof(vars[0]); i++) {
        const char *v = getenv(vars[i]);
        if (v != NULL && atoi(v) > 0) return atoi(v);
    }
    return getenv("PMIX_RANK") != NULL ? 1 : 0;
}

/* -pg: the GPU of a process is its rank on the node; where the launcher shows each process only
 * its own GPU (srun --gpus-per-task=1, CUDA_VISIBLE_DEVICES per rank) that GPU is device 0. */
static int visible_device(int local_rank) {
    int count = 0;
    if (cudaGetDeviceCount(&count) == cudaSuccess && count == 1) return 0;
    return local_rank;
}
void multi_gpu_init(MultiGpu *mg, int *argc, char ***argv, const char *init_method, int num_processes,
                    int process_rank, int gpus_per_node, int zero_stage) {
    memset(mg, 0, sizeof(*mg));
    mg->zero_stage = zero_stage;
    mg->nproc = num_processes;
    mg->rank = process_rank;
    const int mpi_mode = strcmp(init_method, "mpi") == 0;
#if defined(MULTI_GPU) && defined(USE_MPI)
    /* MPI only under an MPI launcher: a plain single-process start must not depend on a working
     * MPI runtime (llm.c's MPI builds exited there, doc/formats.md "Upstream weak spots" #12) */
    const int launched = launcher_world_size() > 0;
    if (mpi_mode && !launched && num_processes > 1) {
        llmc_die("-pi mpi with -pn %d: start the processes with mpirun (or use -pi tcp / -pi fs)", num_processes);
    }
    if (mpi_mode && launched) {
        if (MPI_Init(argc, argv) != MPI_SUCCESS) llmc_die("-pi mpi: MPI_Init failed");
        mg->use_mpi = 1;
        MPI_Comm_size(MPI_COMM_WORLD, &mg->nproc);
        MPI_Comm_rank(MPI_COMM_WORLD, &mg->rank);
        /* the local GPU is the rank among the processes of this node */
        MPI_Comm node;
        MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, mg->rank, MPI_INFO_NULL, &node);
        int local_rank = 0;
        MPI_Comm_rank(node, &local_rank);
        MPI_Comm_free(&node);
        mg->local_device = visible_device(local_rank);
        if (num_processes > 1 && num_processes != mg->nproc) {
            llmc_warn("-pn %d ignored: MPI started %d processes", num_processes, mg->nproc);
        }
        return;
    }
#else
    (void)argc;
    (void)argv;
    if (mpi_mode && num_processes > 1) {
        llmc_die("-pi mpi with -pn %d: this binary was built without MPI; use -pi tcp or -pi fs",
                 num_processes);
    }
    /* N copies of a one-process run on one GPU, all writing the same files, is never what
     * `mpirun -np N` meant */
    if (mpi_mode && launcher_world_size() > 1) {
        llmc_die("-pi mpi: started by an MPI launcher with %d processes, but this binary was built without "
                 "MPI (the build looks for mpi.h: make train_gpt2cu OPENMPI_DIR=...; or use -pi tcp / -pi fs)",
                 launcher_world_size());
    }
#endif
#ifndef MULTI_GPU
    if (num_processes > 1) {
        llmc_die("-pn %d: this binary was built with NO_MULTI_GPU=1 (one process only)", num_processes);
    }
#endif
    mg->local_device = mg->nproc > 1 ? visible_device(local_rank_from_env(mg->rank, gpus_per_node, NULL)) : 0;
}

#ifndef MULTI_GPU

void multi_gpu_build_features(char *buf, size_t cap) { snprintf(buf, cap, "single GPU (NO_MULTI_GPU=1)"); }
void multi_gpu_connect(MultiGpu *mg, const char *init_method, const char *server_ip, const char *fs_path) {
    (void)mg; (void)init_method; (void)server_ip; (void)fs_path;
}
void multi_gpu_free(MultiGpu *mg) { (void)mg; }
void multi_gpu_reduce_grads(MultiGpu *mg, void *grads, const ShardSeg *segs, const int *idx, int n,
                            cudaStream_t compute) {
    (void)mg; (void)grads; (void)segs; (void)idx; (void)n; (void)compute;
}
void multi_gpu_allgather_params(MultiGpu *mg, void *params, const ShardSeg *segs, int n, cudaStream_t compute) {
    (void)mg; (void)params; (void)segs; (void)n; (void)compute;
}
void multi_gpu_join(MultiGpu *mg, cudaStream_t compute) { (void)mg; (void)compute; }
void multi_gpu_allreduce_f32(MultiGpu *mg, float *dev, size_t n, int average, cudaStream_t compute) {
    (void)mg; (void)dev; (void)n; (void)average; (void)compute;
}
void multi_gpu_barrier(MultiGpu *mg) { (void)mg; }

#else /* MULTI_GPU */

void multi_gpu_connect(MultiGpu *mg, const char *init_method, const char *server_ip, const char *fs_path) {
    if (mg->nproc == 1) return; /* nothing to talk to */
    ncclUniqueId id;
    if (mg->rank == 0) nccl_ok(ncclGetUniqueId(&id), "ncclGetUniqueId");
    if (strcmp(init_method, "mpi") == 0) {
#ifdef USE_MPI
        MPI_Bcast(&id, sizeof(id), MPI_BYTE, 0, MPI_COMM_WORLD);
#endif
    } else if (strcmp(init_method, "tcp") == 0) {
        id_over_tcp(&id, mg->rank, mg->nproc, server_ip);
    } else {
        id_over_fs(&id, mg->rank, fs_path);
    }
    MultiGpuImpl *im = (MultiGpuImpl *)xcalloc(1, sizeof(MultiGpuImpl));
    nccl_ok(ncclCommInitRank(&im->comm, mg->nproc, id, mg->rank), "ncclCommInitRank");
    cuda_ok(cudaStreamCreateWithFlags(&im->stream, cudaStreamNonBlocking), "NCCL stream");
    cuda_ok(cudaEventCreateWithFlags(&im->compute_done, cudaEventDisableTiming), "event");
    cuda_ok(cudaEventCreateWithFlags(&im->nccl_done, cudaEventDisableTiming), "event");
    cuda_ok(cudaMalloc(&im->barrier_buf, sizeof(float)), "cudaMalloc");
    /* the barrier sums this float: zero, it stays zero (an uninitialised one could be a NaN) */
    cuda_ok(cudaMemsetAsync(im->barrier_buf, 0, sizeof(float), im->stream), "cudaMemsetAsync");
    mg->impl = im;
    multi_gpu_barrier(mg);
    /* every rank has the id now: remove the file so that a later run cannot read a stale one */
    if (mg->rank == 0 && strcmp(init_method, "fs") == 0) {
        char path[4200];
        fs_id_path(path, sizeof(path), fs_path);
        remove(path);
    }
}

void multi_gpu_free(MultiGpu *mg) {
    MultiGpuImpl *im = mg->impl;
    if (im != NULL) {
        cudaStreamSynchronize(im->stream);
        ncclCommDestroy(im->comm);
        cudaStreamDestroy(im->stream);
        cudaEventDestroy(im->compute_done);
        cudaEventDestroy(im->nccl_done);
        cudaFree(im->barrier_buf);
        free(im);
        mg->impl = NULL;
    }
#ifdef USE_MPI
    if (mg->use_mpi) MPI_Finalize();
#endif
}

/* The NCCL stream continues after everything enqueued on the compute stream so far. */
static void after_compute(MultiGpuImpl *im, cudaStream_t compute) {
    cuda_ok(cudaEventRecord(im->compute_done, compute), "cudaEventRecord");
    cuda_ok(cudaStreamWaitEvent(im->stream, im->compute_done, 0), "cudaStreamWaitEvent");
}

void multi_gpu_join(MultiGpu *mg, cudaStream_t compute) {
    MultiGpuImpl *im = mg->impl;
    if (im == NULL) return;
    cuda_ok(cudaEventRecord(im->nccl_done, im->stream), "cudaEventRecord");
    cuda_ok(cudaStreamWaitEvent(compute, im->nccl_done, 0), "cudaStreamWaitEvent");
}

void multi_gpu_reduce_grads(MultiGpu *mg, void *grads, const ShardSeg *segs, const int *idx, int n,
                            cudaStream_t compute) {
    MultiGpuImpl *im = mg->impl;
    if (im == NULL || n == 0) return;
    after_compute(im, compute);
    uint16_t *g = (uint16_t *)grads; /* bf16 elements */
    nccl_ok(ncclGroupStart(), "ncclGroupStart");
    for (int i = 0; i < n; i++) {
        const ShardSeg *s = &segs[idx ? idx[i] : i];
        if (mg->zero_stage == 1) {
            /* in place: this rank's slice [global_off, +count) receives the average */
            nccl_ok(ncclReduceScatter(g + s->block_off, g + s->global_off, s->count, ncclBfloat16,
                                      ncclAvg, im->comm, im->stream), "ncclReduceScatter");
        } else {
            nccl_ok(ncclAllReduce(g + s->block_off, g + s->block_off, s->block_size, ncclBfloat16,
                                  ncclAvg, im->comm, im->stream), "ncclAllReduce");
        }
    }
    nccl_ok(ncclGroupEnd(), "ncclGroupEnd");
}

void multi_gpu_allgather_params(MultiGpu *mg, void *params, const ShardSeg *segs, int n, cudaStream_t compute) {
    MultiGpuImpl *im = mg->impl;
    if (im == NULL || mg->zero_stage != 1) return;
    after_compute(im, compute);
    uint16_t *p = (uint16_t *)params; /* bf16 elements */
    nccl_ok(ncclGroupStart(), "ncclGroupStart");
    for (int i = 0; i < n; i++) {
        nccl_ok(ncclAllGather(p + segs[i].global_off, p + segs[i].block_off, segs[i].count,
                              ncclBfloat16, im->comm, im->stream), "ncclAllGather");
    }
    nccl_ok(ncclGroupEnd(), "ncclGroupEnd");
    multi_gpu_join(mg, compute);
}

void multi_gpu_allreduce_f32(MultiGpu *mg, float *dev, size_t n, int average, cudaStream_t compute) {
    MultiGpuImpl *im = mg->impl;
    if (im == NULL) return;
    after_compute(im, compute);
    nccl_ok(ncclAllReduce(dev, dev, n, ncclFloat, average ? ncclAvg : ncclSum, im->comm, im->stream),
            "ncclAllReduce");
    multi_gpu_join(mg, compute);
}

void multi_gpu_barrier(MultiGpu *mg) {
#ifdef USE_MPI
    if (mg->use_mpi) {
        MPI_Barrier(MPI_COMM_WORLD);
        return;
    }
#endif
    MultiGpuImpl *im = mg->impl;
    if (im == NULL) return;
    nccl_ok(ncclAllReduce(im->barrier_buf, im->barrier_buf, 1, ncclFloat, ncclSum, im->comm, im->stream),
            "ncclAllReduce (barrier)");
    cuda_ok(cudaStreamSynchronize(im->stream), "cudaStreamSynchronize (barrier)");
}

#endif /* MULTI_GPU */
