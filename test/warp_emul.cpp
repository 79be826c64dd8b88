/*
 * test/warp_emul.cpp: the block scheduler and the warp instructions of test/warp_emul.h.
 *
 * Scheduling: the threads run in turn (tid order), each until it blocks on a warp instruction or
 * the barrier, or returns. When none can run, of the warps whose 32 lanes all wait on the same
 * warp instruction a random half (at least one; a fixed xorshift sequence, so runs repeat) have
 * it carried out: warps drift apart as on a GPU, and a phase that lacks its barrier lets one warp
 * overwrite shared memory another still reads, which the result then shows. If no warp could go
 * on, the barrier is released when every thread waits on it. Anything else is a deadlock or a
 * divergence and ends the run.
 *
 * Fragment layouts of mma.m16n8k16 with .bf16 inputs and .f32 accumulators (PTX ISA, "Matrix
 * Fragments for mma.m16n8k16 with floating point type"), for lane L, g = L >> 2, t = L % 4:
 *   A (16 x 16, row): register r holds elements a_{2r}, a_{2r+1} (low half first); element i is
 *                     at row g + 8 ((i >> 1) & 1), column 2t + (i & 1) + 8 (i >= 4)
 *   B (16 x 8, col):  register r holds b_{2r}, b_{2r+1}; element i is at row (k) 2t + (i & 1) +
 *                     8 (i >= 2), column (n) g
 *   C, D (16 x 8):    element i is at row g + 8 (i >= 2), column 2t + (i & 1)
 */
#include "warp_emul.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <ucontext.h>

#include <vector>

#include "../llmc/scalar_math.h"

/* Under AddressSanitizer (make test SANITIZE=1) every switch between the scheduler's stack and a
 * thread's stack is announced, so that ASan tracks which stack is live (its fiber interface). */
#if defined(__SANITIZE_ADDRESS__)
#include <sanitizer/common_interface_defs.h>
#define FIBER_START(save, bottom, size) __sanitizer_start_switch_fiber((save), (bottom), (size))
#define FIBER_FINISH(save, bottom, size) __sanitizer_finish_switch_fiber((save), (bottom), (size))
#else
#define FIBER_START(save, bottom, size) ((void)(save), (void)(bottom), (void)(size))
#define FIBER_FINISH(save, bottom, size) ((void)(save), (void)(bottom), (void)(size))
#endif

namespace {

enum State { RUNNABLE, WAITING, DONE };
enum Op { OP_NONE, OP_SYNCTHREADS, OP_SHFL, OP_MMA, OP_LDSM, OP_LDSM_T };
const char *const OP_NAMES[] = {"-", "__syncthreads", "shfl.xor", "mma.m16n8k16", "ldmatrix.x4", "ldmatrix.x4.trans"};

struct Lane {
    ucontext_t ctx;
    State state;
    Op op;
    float v;      /* shfl: in and out */
    int mask;     /* shfl: the xor mask */
    float *c;     /* mma: the lane's accumulators, updated in place */
    uint32_t a[4], b[2];
    const char *row; /* ldmatrix: the row address this lane supplies */
    uint32_t *d;     /* ldmatrix: the lane's four destination registers */
};

/* One cp.async of a thread: 16 bytes from src (zeros past src_bytes) to dst in shared memory,
 * carried out when the thread waits for its group (cp.async.wait_group 0) */
struct AsyncCopy {
    char *dst;
    const char *src;
    int src_bytes;
    bool committed;
};

const size_t STACK_BYTES = 256 * 1024;

struct Block {
    Lane *lane = nullptr;
    char *stacks = nullptr;
    int n = 0;
    int cur = -1;
    ucontext_t sched;
    WarpEmulFn fn = nullptr;
    void *arg = nullptr;
    const void *sched_stack = nullptr; /* the scheduler's stack, for the sanitizer's switches */
    size_t sched_stack_size = 0;
};

Block g_block;
long long g_count = 0;
WarpEmulCounts g_counts; /* per kind: warp instructions, block barriers, ldmatrix wavefronts */
std::vector<std::vector<AsyncCopy>> g_async; /* per thread: its copies in flight, oldest first */

/* Race tracking over the registered shared memory: per byte, the barrier interval (epoch) and
 * thread of the last write, and of the reads in the interval (-2: more than one thread). Epochs
 * only grow, across barriers and blocks (a new block starts a new one), so a record left by an
 * earlier interval or block never matches and the shadow needs no clearing. `pending` is 1 + the
 * thread whose cp.async into the byte is in flight (0: none): any access to it then is a race,
 * since the copy lands at an unknown time before that thread's wait. */
struct Shadow {
    uint32_t w_epoch, r_epoch;
    int16_t writer, reader;
    uint16_t pending;
};
char *g_smem = nullptr;
size_t g_smem_bytes = 0;
Shadow *g_shadow = nullptr;
size_t g_shadow_cap = 0;
uint32_t g_epoch = 1;

[[noreturn]] void race(int tid, size_t byte, const char *what, int other, const char *other_did) {
    char who[32];
    if (other >= 0) snprintf(who, sizeof who, "thread %d", other);
    else snprintf(who, sizeof who, "other threads");
    fprintf(stderr, "warp_emul: shared-memory race: thread %d %s byte %zu, which %s %s in the same barrier "
            "interval (%u)\n", tid, what, byte, who, other_did, g_epoch);
    exit(1);
}

bool in_smem(const char *c, size_t bytes) { return g_smem != nullptr && c >= g_smem && c + bytes <= g_smem + g_smem_bytes; }

/* While a shared memory is registered, an instruction that can only address shared memory
 * (ldmatrix, cp.async's destination) must stay inside it: outside is a wild address. */
void require_smem(int tid, const char *what, const void *p, size_t bytes) {
    if (g_smem != nullptr && !in_smem((const char *)p, bytes)) {
        fprintf(stderr, "warp_emul: thread %d: %s %p (%zu bytes) outside the block's shared memory [%p, +%zu)\n", tid,
                what, p, bytes, (void *)g_smem, g_smem_bytes);
        exit(1);
    }
}

/* An access by thread tid of `bytes` bytes at p (a store if write): races are checked and the
 * access recorded when p is in the registered shared memory, ignored elsewhere. */
void smem_check(int tid, const void *p, size_t bytes, int write) {
    const char *c = (const char *)p;
    if (!in_smem(c, bytes)) return;
    const size_t off = (size_t)(c - g_smem);
    for (size_t i = off; i < off + bytes; i++) {
        Shadow &s = g_shadow[i];
        if (s.pending) {
            fprintf(stderr, "warp_emul: shared-memory race: thread %d %s byte %zu, to which thread %d has a cp.async "
                    "in flight (its thread has not waited for it yet; interval %u)\n", tid, write ? "writes" : "reads",
                    i, s.pending - 1, g_epoch);
            exit(1);
        }
        const bool wrote_now = s.w_epoch == g_epoch && s.writer != tid;
        if (write) {
            if (wrote_now) race(tid, i, "writes", s.writer, "wrote");
            if (s.r_epoch == g_epoch && s.reader != tid) race(tid, i, "writes", s.reader, "read");
            s.w_epoch = g_epoch;
            s.writer = (int16_t)tid;
        } else {
            if (wrote_now) race(tid, i, "reads", s.writer, "wrote");
            if (s.r_epoch != g_epoch) {
                s.r_epoch = g_epoch;
                s.reader = (int16_t)tid;
            } else if (s.reader != tid) {
                s.reader = -2;
            }
        }
    }
}

[[noreturn]] void die(const char *msg, int tid, Op a, Op b) {
    fprintf(stderr, "warp_emul: %s (thread %d: %s, its warp: %s)\n", msg, tid, OP_NAMES[a], OP_NAMES[b]);
    exit(1);
}

void trampoline() {
    FIBER_FINISH(nullptr, &g_block.sched_stack, &g_block.sched_stack_size);
    const int tid = g_block.cur;
    g_block.fn(tid, g_block.arg);
    g_block.lane[tid].state = DONE; /* uc_link returns to the scheduler */
    FIBER_START(nullptr, g_block.sched_stack, g_block.sched_stack_size); /* this stack ends here */
}

/* The thread's switch back to the scheduler, and its return when scheduled again. */
void yield_to_scheduler(Lane *l) {
    void *fake_stack = nullptr;
    FIBER_START(&fake_stack, g_block.sched_stack, g_block.sched_stack_size);
    swapcontext(&l->ctx, &g_block.sched);
    FIBER_FINISH(fake_stack, &g_block.sched_stack, &g_block.sched_stack_size);
}

/* The calling thread's lane (a warp instruction outside warp_emul_block is an error). */
Lane *self(Op op) {
    if (g_block.cur < 0) {
        fprintf(stderr, "warp_emul: %s called outside warp_emul_block\n", OP_NAMES[op]);
        exit(1);
    }
    return &g_block.lane[g_block.cur];
}

/* The calling thread's id, for an instruction (what) that only it carries out. */
int caller(const char *what) {
    if (g_block.cur < 0) {
        fprintf(stderr, "warp_emul: %s called outside warp_emul_block\n", what);
        exit(1);
    }
    return g_block.cur;
}

/* The calling thread waits on op until the scheduler carries it out. */
Lane *wait_on(Op op) {
    Lane *l = self(op);
    l->op = op;
    l->state = WAITING;
    yield_to_scheduler(l);
    return l;
}

float bf(uint32_t reg, int high) { return bf16_to_f32((uint16_t)(high ? reg >> 16 : reg & 0xffffu)); }

void do_mma(Lane *w) {
    float A[16][16], Bm[16][8], C[16][8];
    for (int L = 0; L < 32; L++) {
        const int g = L >> 2, t = L & 3;
        for (int i = 0; i < 8; i++) {
            A[g + 8 * ((i >> 1) & 1)][2 * t + (i & 1) + 8 * (i >= 4)] = bf(w[L].a[i >> 1], i & 1);
        }
        for (int i = 0; i < 4; i++) Bm[2 * t + (i & 1) + 8 * (i >= 2)][g] = bf(w[L].b[i >> 1], i & 1);
        for (int i = 0; i < 4; i++) C[g + 8 * (i >= 2)][2 * t + (i & 1)] = w[L].c[i];
    }
    for (int L = 0; L < 32; L++) {
        const int g = L >> 2, t = L & 3;
        for (int i = 0; i < 4; i++) {
            const int r = g + 8 * (i >= 2), col = 2 * t + (i & 1);
            float s = C[r][col];
            for (int k = 0; k < 16; k++) s += A[r][k] * Bm[k][col];
            w[L].c[i] = s;
        }
    }
}

void do_shfl(Lane *w) {
    float in[32];
    for (int L = 0; L < 32; L++) in[L] = w[L].v;
    for (int L = 0; L < 32; L++) w[L].v = in[(L ^ w[L].mask) & 31];
}

/* ldmatrix.sync.aligned.m8n8.x4(.trans).shared.b16: lane 8i + r supplies the address of row r of
 * matrix i (16 bytes, 16-byte aligned; the read is that lane's); lane L = 4 g + t receives in
 * register i the elements (g, 2t) and (g, 2t + 1) of matrix i, low half first, or with .trans
 * (2t, g) and (2t + 1, g): the matrix read column-major. */
/* Shared-memory wavefronts of one ldmatrix.x4 (registered shared memory only): per 8 x 8 matrix,
 * 8 rows of 16 bytes, the most distinct 4-byte words that one of the 32 banks (word offset mod 32)
 * must serve. 1 per matrix when its rows fall on different banks; a row given twice is one. */
int ldsm_wavefronts(const Lane *w) {
    int total = 0;
    for (int i = 0; i < 4; i++) {
        int words[32] = {0};
        for (int r = 0; r < 8; r++) {
            const char *row = w[8 * i + r].row;
            bool again = false;
            for (int q = 0; q < r; q++) again |= w[8 * i + q].row == row;
            if (again) continue;
            const size_t word = (size_t)(row - g_smem) / 4;
            for (int k = 0; k < 4; k++) words[(word + (size_t)k) % 32]++;
        }
        int most = 0;
        for (int b = 0; b < 32; b++) most = words[b] > most ? words[b] : most;
        total += most;
    }
    return total;
}

void do_ldsm(Lane *w, int tid0, bool trans) {
    uint16_t m[4][8][8];
    for (int i = 0; i < 4; i++)
        for (int r = 0; r < 8; r++) {
            const char *row = w[8 * i + r].row;
            if ((uintptr_t)row % 16 != 0) {
                fprintf(stderr, "warp_emul: ldmatrix: thread %d supplies the row address %p, not 16-byte aligned\n",
                        tid0 + 8 * i + r, (const void *)row);
                exit(1);
            }
            require_smem(tid0 + 8 * i + r, "ldmatrix row", row, 16);
            smem_check(tid0 + 8 * i + r, row, 16, 0);
            memcpy(m[i][r], row, 16);
        }
    if (g_smem != nullptr) g_counts.ldmatrix_wavefronts += ldsm_wavefronts(w);
    for (int L = 0; L < 32; L++) {
        const int g = L >> 2, t = L & 3;
        for (int i = 0; i < 4; i++) {
            const uint16_t lo = trans ? m[i][2 * t][g] : m[i][g][2 * t], hi = trans ? m[i][2 * t + 1][g] : m[i][g][2 * t + 1];
            w[L].d[i] = (uint32_t)lo | ((uint32_t)hi << 16);
        }
    }
}

uint64_t g_rng = 0x9e3779b97f4a7c15ull;
uint64_t next_random() {
    g_rng ^= g_rng << 13;
    g_rng ^= g_rng >> 7;
    g_rng ^= g_rng << 17;
    return g_rng;
}

/* The instruction warp w's lanes wait on (OP_NONE when none waits); dies when the lanes disagree. */
Op check_warp(int w) {
    Lane *l = g_block.lane + 32 * w;
    int waiting = 0;
    Op op = OP_NONE;
    for (int L = 0; L < 32; L++)
        if (l[L].state == WAITING) {
            waiting++;
            op = l[L].op;
        }
    if (waiting == 0) return OP_NONE;
    for (int L = 0; L < 32; L++) {
        if (l[L].state == DONE && op != OP_SYNCTHREADS) die("a lane returned while its warp waits", 32 * w + L, OP_NONE, op);
        if (l[L].state == WAITING && l[L].op != op) die("the lanes of a warp wait on different instructions", 32 * w + L, l[L].op, op);
    }
    return op;
}

/* Carries out the warp instruction every lane of warp w waits on; 1 if it did. */
int resolve_warp(int w) {
    Lane *l = g_block.lane + 32 * w;
    const Op op = check_warp(w);
    if (op == OP_NONE || op == OP_SYNCTHREADS) return 0; /* the barrier is block-wide: resolved below */
    for (int L = 0; L < 32; L++)
        if (l[L].state != WAITING) return 0;
    if (op == OP_MMA) do_mma(l), g_counts.mma++;
    else if (op == OP_LDSM || op == OP_LDSM_T) do_ldsm(l, 32 * w, op == OP_LDSM_T), g_counts.ldmatrix++;
    else do_shfl(l), g_counts.shfl++;
    for (int L = 0; L < 32; L++) l[L].state = RUNNABLE;
    g_count++;
    return 1;
}

} // namespace

extern "C" {

void warp_emul_block(int nthreads, WarpEmulFn fn, void *arg) {
    if (nthreads < 32 || nthreads % 32 != 0 || nthreads > WARP_EMUL_MAX_THREADS) {
        fprintf(stderr, "warp_emul: %d threads per block: expected a multiple of 32 up to %d\n", nthreads,
                WARP_EMUL_MAX_THREADS);
        exit(1);
    }
    Block &b = g_block;
    if (b.n < nthreads) {
        free(b.lane);
        free(b.stacks);
        b.lane = (Lane *)calloc((size_t)nthreads, sizeof(Lane));
        b.stacks = (char *)malloc((size_t)nthreads * STACK_BYTES);
        if (!b.lane || !b.stacks) {
            fprintf(stderr, "warp_emul: out of memory for %d threads\n", nthreads);
            exit(1);
        }
        b.n = nthreads;
    }
    g_async.assign((size_t)nthreads, std::vector<AsyncCopy>());
    b.fn = fn;
    b.arg = arg;
    for (int i = 0; i < nthreads; i++) {
        Lane &l = b.lane[i];
        getcontext(&l.ctx);
        l.ctx.uc_stack.ss_sp = b.stacks + (size_t)i * STACK_BYTES;
        l.ctx.uc_stack.ss_size = STACK_BYTES;
        l.ctx.uc_link = &b.sched;
        makecontext(&l.ctx, trampoline, 0);
        l.state = RUNNABLE;
        l.op = OP_NONE;
    }
    const int warps = nthreads / 32;
    g_epoch++; /* a fresh block: every recorded access belongs to an older interval */
    for (;;) {
        for (int i = 0; i < nthreads; i++) {
            if (b.lane[i].state != RUNNABLE) continue;
            b.cur = i;
            void *fake_stack = nullptr;
            FIBER_START(&fake_stack, b.stacks + (size_t)i * STACK_BYTES, STACK_BYTES);
            swapcontext(&b.sched, &b.lane[i].ctx);
            FIBER_FINISH(fake_stack, nullptr, nullptr);
        }
        b.cur = -1;
        int done = 0, at_barrier = 0;
        for (int i = 0; i < nthreads; i++) {
            done += b.lane[i].state == DONE;
            at_barrier += b.lane[i].state == WAITING && b.lane[i].op == OP_SYNCTHREADS;
        }
        if (done == nthreads) {
            for (int i = 0; i < nthreads; i++)
                if (!g_async[(size_t)i].empty()) {
                    fprintf(stderr, "warp_emul: thread %d returned with %zu cp.async copies not waited for\n", i,
                            g_async[(size_t)i].size());
                    exit(1);
                }
            return;
        }
        /* warps go on at different speeds: of the warps whose instruction is ready, each is
         * carried out with probability 1/2 (the first ready one always), so a warp can run ahead
         * of the others by many instructions and a missing barrier shows up as a wrong result */
        int progressed = 0;
        const int start = (int)(next_random() % (unsigned)warps);
        for (int k = 0; k < warps; k++) {
            const int w = (start + k) % warps;
            if (progressed && (next_random() & 1)) {
                check_warp(w);
                continue;
            }
            progressed |= resolve_warp(w);
        }
        if (progressed) continue;
        if (at_barrier == nthreads) {
            for (int i = 0; i < nthreads; i++) b.lane[i].state = RUNNABLE;
            g_count++;
            g_counts.barriers++;
            g_epoch++; /* accesses before the barrier are ordered before those after it */
            continue;
        }
        for (int i = 0; i < nthreads; i++) {
            if (b.lane[i].state == DONE && at_barrier > 0) die("a thread returned while others wait at the barrier", i, OP_NONE, OP_SYNCTHREADS);
        }
        die("deadlock: warps wait on different instructions", 0, b.lane[0].op, b.lane[nthreads - 1].op);
    }
}

void warp_emul_syncthreads(void) { wait_on(OP_SYNCTHREADS); }

float warp_emul_shfl_xor(float v, int lane_mask) {
    Lane *l = self(OP_SHFL);
    l->v = v;
    l->mask = lane_mask;
    return wait_on(OP_SHFL)->v;
}

void warp_emul_mma_bf16_16816(float c[4], const uint32_t a[4], const uint32_t b[2]) {
    Lane *l = self(OP_MMA);
    l->c = c;
    memcpy(l->a, a, sizeof(l->a));
    memcpy(l->b, b, sizeof(l->b));
    wait_on(OP_MMA);
}

long long warp_emul_count(void) { return g_count; }
WarpEmulCounts warp_emul_counts(void) { return g_counts; }

void warp_emul_shared(void *base, size_t bytes) {
    g_smem = (char *)base;
    g_smem_bytes = base != nullptr ? bytes : 0;
    if (g_smem_bytes > g_shadow_cap) {
        free(g_shadow);
        g_shadow = (Shadow *)calloc(g_smem_bytes, sizeof(Shadow));
        if (g_shadow == nullptr) {
            fprintf(stderr, "warp_emul: out of memory for the shadow of %zu bytes of shared memory\n", bytes);
            exit(1);
        }
        g_shadow_cap = g_smem_bytes;
    }
}

void warp_emul_smem_access(const void *p, size_t bytes, int write) {
    if (g_block.cur >= 0) smem_check(g_block.cur, p, bytes, write);
}

void warp_emul_ldmatrix_x4(uint32_t d[4], const void *row, int trans) {
    Lane *l = self(trans ? OP_LDSM_T : OP_LDSM);
    l->row = (const char *)row;
    l->d = d;
    wait_on(trans ? OP_LDSM_T : OP_LDSM);
}

void warp_emul_cp_async16(void *dst, const void *src, int src_bytes) {
    const int tid = caller("cp.async");
    if ((uintptr_t)dst % 16 != 0 || (uintptr_t)src % 16 != 0 || (src_bytes != 0 && src_bytes != 16)) {
        fprintf(stderr, "warp_emul: thread %d: cp.async of 16 bytes needs 16-byte aligned addresses and 0 or 16 "
                "source bytes (got %p, %p, %d)\n", tid, dst, src, src_bytes);
        exit(1);
    }
    require_smem(tid, "cp.async destination", dst, 16);
    smem_check(tid, dst, 16, 1); /* as a write at the issue ... */
    char *c = (char *)dst;
    if (in_smem(c, 16)) /* ... and in flight until the thread's wait */
        for (size_t i = 0; i < 16; i++) g_shadow[(size_t)(c - g_smem) + i].pending = (uint16_t)(tid + 1);
    g_async[(size_t)tid].push_back(AsyncCopy{c, (const char *)src, src_bytes, false});
}

void warp_emul_cp_async_commit(void) {
    const int tid = caller("cp.async.commit_group");
    for (AsyncCopy &c : g_async[(size_t)tid]) c.committed = true;
}

void warp_emul_cp_async_wait_all(void) {
    const int tid = caller("cp.async.wait_group");
    std::vector<AsyncCopy> &q = g_async[(size_t)tid], rest;
    for (const AsyncCopy &c : q) {
        if (!c.committed) { /* wait_group waits only for committed groups */
            rest.push_back(c);
            continue;
        }
        if (in_smem(c.dst, 16))
            for (size_t i = 0; i < 16; i++) g_shadow[(size_t)(c.dst - g_smem) + i].pending = 0;
        smem_check(tid, c.dst, 16, 1); /* lands now: visible to the others after a barrier */
        if (c.src_bytes) memcpy(c.dst, c.src, 16);
        else memset(c.dst, 0, 16);
    }
    q.swap(rest);
}

} // extern "C"
