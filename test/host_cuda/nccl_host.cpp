/*
 * test/host_cuda/nccl_host.cpp: the NCCL calls of llmc/cuda/multi_gpu.cpp for processes on one machine
 * without GPUs, so that several train_gpt2cu_host processes (test/host_cuda/README.md) train one
 * model data-parallel: the rendezvous (-pi fs / tcp), ZeRO-1's reduce-scatter and all-gather, the
 * all-reduces of -z 0, the loss and norm reductions and the barriers all run for real, on host
 * memory.
 *
 * The communicator is a file mapped by every rank (its path travels in the unique id, which
 * multi_gpu.cpp exchanges by its own rendezvous): a process-shared barrier and one slot per rank.
 * A collective copies this rank's input into its slot, waits for every rank, computes its own
 * output from all slots in rank order (fp32 sums; bf16 rounded once), and waits again. Calls run
 * when made, so a group (ncclGroupStart/End) is a sequence of collectives that every rank issues
 * in the same order, which is what NCCL requires of the program anyway. A rank that issued a
 * different collective, or a different count, than rank 0 stops with an error instead of
 * computing garbage: the slot header records what each rank asked for. Buffers that overlap
 * other than in NCCL's in-place layout are an error too (NCCL would read a half-written input).
 */
#include <errno.h>
#include <fcntl.h>
#include <nccl.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "../../llmc/scalar_math.h" /* bf16_to_f32, f32_to_bf16 */

#define MAX_RANKS 16
#define DEFAULT_SLOT_BYTES ((size_t)64 << 20) /* per rank; LLMC_NCCL_HOST_SLOT_MB overrides */

typedef struct {
    int kind;          /* 1 all-reduce, 2 reduce-scatter, 3 all-gather */
    size_t count;
    int dtype, op;
} CallTag;

typedef struct {
    volatile int ready; /* set by rank 0 once the barrier is initialized */
    int nranks;
    size_t slot_bytes;
    pthread_barrier_t barrier;
    CallTag tag[MAX_RANKS];
} Header;

struct ncclComm {
    int rank, nranks;
    Header *hdr;
    char *slots; /* nranks x slot_bytes */
    size_t map_bytes;
};

static size_t header_bytes(void) { return (sizeof(Header) + 4095) & ~(size_t)4095; }

static void die(const char *msg) {
    fflush(stdout);
    fprintf(stderr, "error: test/host_cuda/nccl_host: %s\n", msg);
    exit(1);
}

extern "C" {

const char *ncclGetErrorString(ncclResult_t r) { return r == ncclSuccess ? "no error" : "host NCCL error"; }

ncclResult_t ncclGetVersion(int *version) {
    *version = NCCL_VERSION_CODE;
    return ncclSuccess;
}

/* The id names the communicator's file: $TMPDIR (or /tmp), this process, the time. */
ncclResult_t ncclGetUniqueId(ncclUniqueId *id) {
    memset(id, 0, sizeof(*id));
    const char *dir = getenv("TMPDIR");
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    snprintf(id->internal, sizeof(id->internal), "%.60s/llmc_nccl_host.%d.%ld.%ld", dir && dir[0] ? dir : "/tmp",
             (int)getpid(), (long)ts.tv_sec, ts.tv_nsec);
    return ncclSuccess;
}

ncclResult_t ncclCommInitRank(ncclComm_t *comm, int nranks, ncclUniqueId id, int rank) {
    if (nranks < 1 || nranks > MAX_RANKS || rank < 0 || rank >= nranks) die("ncclCommInitRank: bad nranks/rank");
    const char *mb = getenv("LLMC_NCCL_HOST_SLOT_MB");
    const size_t slot = mb != NULL ? (size_t)atol(mb) << 20 : DEFAULT_SLOT_BYTES;
    const size_t bytes = header_bytes() + (size_t)nranks * slot;
    int fd = -1;
    if (rank == 0) {
        fd = open(id.internal, O_RDWR | O_CREAT | O_EXCL, 0600);
        if (fd < 0 || ftruncate(fd, (off_t)bytes) != 0) die("rank 0 cannot create the communicator file");
    } else {
        for (int i = 0; fd < 0; i++) { /* rank 0 may not have created it yet */
            fd = open(id.internal, O_RDWR);
            if (fd < 0) {
                if (i > 3000) die("no communicator file from rank 0 within 300 s");
                usleep(100000);
            }
        }
        struct stat st;
        for (int i = 0; fstat(fd, &st) == 0 && (size_t)st.st_size < bytes; i++) {
            if (i > 3000) die("the communicator file never reached its size");
            usleep(100000);
        }
    }
    void *p = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    close(fd);
    if (p == MAP_FAILED) die("mmap of the communicator file failed");
    ncclComm *c = (ncclComm *)calloc(1, sizeof(ncclComm));
    c->rank = rank;
    c->nranks = nranks;
    c->hdr = (Header *)p;
    c->slots = (char *)p + header_bytes();
    c->map_bytes = bytes;
    if (rank == 0) {
        pthread_barrierattr_t a;
        pthread_barrierattr_init(&a);
        pthread_barrierattr_setpshared(&a, PTHREAD_PROCESS_SHARED);
        pthread_barrier_init(&c->hdr->barrier, &a, (unsigned)nranks);
        c->hdr->nranks = nranks;
        c->hdr->slot_bytes = slot;
        __atomic_store_n(&c->hdr->ready, 1, __ATOMIC_RELEASE);
    } else {
        for (int i = 0; !__atomic_load_n(&c->hdr->ready, __ATOMIC_ACQUIRE); i++) {
            if (i > 3000) die("rank 0 never initialized the communicator");
            usleep(100000);
        }
        if (c->hdr->nranks != nranks || c->hdr->slot_bytes != slot) die("ranks disagree on nranks or the slot size");
    }
    pthread_barrier_wait(&c->hdr->barrier);
    if (rank == 0) unlink(id.internal); /* every rank has it mapped: nothing is left behind */
    *comm = c;
    return ncclSuccess;
}

ncclResult_t ncclCommDestroy(ncclComm_t c) {
    if (c == NULL) return ncclSuccess;
    pthread_barrier_wait(&c->hdr->barrier);
    munmap(c->hdr, c->map_bytes);
    free(c);
    return ncclSuccess;
}

ncclResult_t ncclGroupStart(void) { return ncclSuccess; }
ncclResult_t ncclGroupEnd(void) { return ncclSuccess; }

} /* extern "C" */

static size_t dtype_bytes(ncclDataType_t t) {
    if (t == ncclBfloat16) return 2;
    if (t == ncclFloat32) return 4;
    die("only bf16 and fp32 collectives are emulated");
    return 0;
}

static float load(const char *p, size_t i, ncclDataType_t t) {
    if (t == ncclBfloat16) return bf16_to_f32(((const uint16_t *)p)[i]);
    return ((const float *)p)[i];
}

static void store(void *p, size_t i, float x, ncclDataType_t t) {
    if (t == ncclBfloat16) ((uint16_t *)p)[i] = f32_to_bf16(x);
    else ((float *)p)[i] = x;
}

/* this rank's input into its slot; then every rank has arrived and agrees on the call */
static char *post(ncclComm_t c, const void *send, size_t bytes, CallTag tag) {
    if (bytes > c->hdr->slot_bytes) die("a collective larger than the slot (set LLMC_NCCL_HOST_SLOT_MB)");
    char *mine = c->slots + (size_t)c->rank * c->hdr->slot_bytes;
    memcpy(mine, send, bytes);
    c->hdr->tag[c->rank] = tag;
    pthread_barrier_wait(&c->hdr->barrier);
    /* every rank checks every rank's call, so all of them stop together on a mismatch (NCCL itself
     * would hang) */
    for (int r = 0; r < c->nranks; r++) {
        const CallTag t = c->hdr->tag[r];
        if (t.kind != tag.kind || t.count != tag.count || t.dtype != tag.dtype || t.op != tag.op) {
            char msg[200];
            snprintf(msg, sizeof(msg), "rank %d issued collective %d (count %zu) while rank %d issued %d (count %zu)",
                     c->rank, tag.kind, tag.count, r, t.kind, t.count);
            die(msg);
        }
    }
    return c->slots;
}

static float reduce_at(ncclComm_t c, size_t i, ncclDataType_t t, ncclRedOp_t op) {
    float s = 0.0f;
    for (int r = 0; r < c->nranks; r++) s += load(c->slots + (size_t)r * c->hdr->slot_bytes, i, t);
    if (op == ncclAvg) s /= (float)c->nranks;
    else if (op != ncclSum) die("only sum and avg reductions are emulated");
    return s;
}

/* NCCL's buffer rule: send and recv do not overlap, or the call is exactly in place, i.e. this
 * rank's chunk of the larger buffer is the smaller one (reduce-scatter: recv = send + rank recvcount;
 * all-gather: send = recv + rank sendcount). The copies here would survive any overlap, NCCL's
 * would not, so anything else is an error. */
static void check_in_place(const char *what, const void *big, size_t big_bytes, const void *small, size_t small_bytes,
                           size_t chunk_off) {
    const char *b = (const char *)big, *sm = (const char *)small;
    const int overlap = sm < b + big_bytes && b < sm + small_bytes;
    if (overlap && sm != b + chunk_off) {
        char msg[160];
        snprintf(msg, sizeof(msg), "%s: send and recv overlap without being NCCL's in-place layout", what);
        die(msg);
    }
}

extern "C" {

ncclResult_t ncclAllReduce(const void *send, void *recv, size_t count, ncclDataType_t t, ncclRedOp_t op,
                           ncclComm_t c, cudaStream_t) {
    check_in_place("ncclAllReduce", recv, count * dtype_bytes(t), send, count * dtype_bytes(t), 0);
    post(c, send, count * dtype_bytes(t), CallTag{1, count, (int)t, (int)op});
    for (size_t i = 0; i < count; i++) store(recv, i, reduce_at(c, i, t, op), t);
    pthread_barrier_wait(&c->hdr->barrier); /* the slots may be reused only when every rank has read them */
    return ncclSuccess;
}

ncclResult_t ncclReduceScatter(const void *send, void *recv, size_t recvcount, ncclDataType_t t, ncclRedOp_t op,
                               ncclComm_t c, cudaStream_t) {
    const size_t eb = dtype_bytes(t);
    check_in_place("ncclReduceScatter", send, (size_t)c->nranks * recvcount * eb, recv, recvcount * eb,
                   (size_t)c->rank * recvcount * eb);
    post(c, send, (size_t)c->nranks * recvcount * dtype_bytes(t), CallTag{2, recvcount, (int)t, (int)op});
    const size_t base = (size_t)c->rank * recvcount;
    for (size_t i = 0; i < recvcount; i++) store(recv, i, reduce_at(c, base + i, t, op), t);
    pthread_barrier_wait(&c->hdr->barrier);
    return ncclSuccess;
}

ncclResult_t ncclAllGather(const void *send, void *recv, size_t sendcount, ncclDataType_t t, ncclComm_t c,
                           cudaStream_t) {
    const size_t bytes = sendcount * dtype_bytes(t);
    check_in_place("ncclAllGather", recv, (size_t)c->nranks * bytes, send, bytes, (size_t)c->rank * bytes);
    post(c, send, bytes, CallTag{3, sendcount, (int)t, 0});
    for (int r = 0; r < c->nranks; r++) memcpy((char *)recv + (size_t)r * bytes, c->slots + (size_t)r * c->hdr->slot_bytes, bytes);
    pthread_barrier_wait(&c->hdr->barrier);
    return ncclSuccess;
}

} /* extern "C" */
