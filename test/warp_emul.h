/*
 * test/warp_emul.h: a CUDA thread block on the CPU, thread by thread, for device routines whose
 * threads talk through warp instructions (shuffles, tensor-core mma.sync) and not only through
 * shared memory.
 *
 * The routines of llmc/attention/flash.h can be run by one CPU thread doing every warp's work,
 * because their threads meet only at barriers. A routine that keeps its tiles in registers, split
 * over the 32 lanes of a warp by the PTX fragment layouts (llmc/attention/mma.h), cannot: each lane
 * holds a different part of a tile and the lanes exchange values in the middle of a loop. Here
 * every thread of the block runs the routine's own code on its own stack (a ucontext coroutine)
 * until it reaches a warp instruction or a barrier; when every lane of the warp (every thread of
 * the block, for the barrier) has reached the same one, the instruction is carried out for all of
 * them at once, with PTX's semantics, and they go on. A lane that reaches a different instruction
 * than its warp, or finishes while its warp waits, is a divergence the hardware would not allow
 * for these .sync.aligned instructions: the run dies with one line naming both. Warps advance at
 * random relative speeds (warp_emul.cpp), so a missing barrier between shared-memory phases
 * changes the result instead of going unseen.
 *
 * Defines:
 *   warp_emul_block(nthreads, fn, arg)   runs fn(tid, arg) for tid = 0 .. nthreads - 1 (a multiple
 *                                        of 32, at most WARP_EMUL_MAX_THREADS) as one block
 *   warp_emul_syncthreads()              __syncthreads()
 *   warp_emul_shfl_xor(v, mask)          __shfl_xor_sync(0xffffffff, v, mask)
 *   warp_emul_mma_bf16_16816(c, a, b)    mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 with
 *                                        D = C: c (4 fp32) += A (16 x 16, 4 x 2 bf16) B (16 x 8,
 *                                        2 x 2 bf16), the PTX ISA's fragment layouts (warp_emul.cpp)
 *   warp_emul_ldmatrix_x4(d, row, trans)  ldmatrix.sync.aligned.m8n8.x4(.trans).shared.b16: lane
 *                                        8i + r gives row r of matrix i; register i of lane 4g + t
 *                                        gets elements (g, 2t..2t+1) of matrix i, or with trans
 *                                        (2t..2t+1, g) (warp_emul.cpp)
 *   warp_emul_cp_async16(dst, src, n)    cp.async.cg.shared.global [dst], [src], 16, n (n 0 or 16:
 *                                        zeros past n), landing at the thread's wait
 *   warp_emul_cp_async_commit()          cp.async.commit_group (all of the thread's copies so far)
 *   warp_emul_cp_async_wait_all()        cp.async.wait_group 0: the committed copies land now
 *   warp_emul_count()                    warp instructions carried out so far (a test can check
 *                                        that a routine used them)
 *   warp_emul_counts()                   the same by kind (mma, ldmatrix, shuffles, barriers), and
 *                                        the shared-memory wavefronts of the ldmatrix (per 8 x 8
 *                                        matrix the most words one of the 32 banks serves: 4 per
 *                                        x4 without bank conflicts): the work of a kernel,
 *                                        counted exactly (its speed is the GPU's)
 *   warp_emul_shared(base, bytes)        the shared memory of the next blocks, for race tracking
 *   warp_emul_smem_access(p, bytes, w)   called by the routine's memory accessors for every load
 *                                        (w 0) and store (w 1); accesses outside the registered
 *                                        shared memory, or outside a block, are ignored
 * Race tracking: between two barriers, a byte of shared memory that one thread writes may not be
 * read or written by another, nor written after another thread read it (read-after-write,
 * write-after-write, write-after-read: what racecheck reports on a GPU, where the threads of a
 * block are unordered between barriers). The first such access ends the run with one line naming
 * both threads, the byte and the barrier interval. Unlike the random warp speeds, this does not
 * depend on the schedule. While shared memory is registered, an ldmatrix row or a cp.async
 * destination outside it ends the run (those instructions address shared memory only). A cp.async's 16 bytes are in flight from its issue to its thread's wait:
 * any access to them meanwhile, by any thread, is a race; at the wait they count as that thread's
 * write (so another thread needs a barrier before it reads them). A thread that returns with a
 * copy not waited for ends the run.
 * Sums inside one mma are fp32 in k order; the tensor cores' order is unspecified, so results
 * agree with a GPU to fp32 rounding, not bit for bit.
 */
#ifndef TEST_WARP_EMUL_H
#define TEST_WARP_EMUL_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define WARP_EMUL_MAX_THREADS 1024

typedef void (*WarpEmulFn)(int tid, void *arg);
typedef struct {
    long long mma, ldmatrix, shfl, barriers; /* warp instructions (per warp, not per lane); barriers */
    long long ldmatrix_wavefronts;           /* of the ldmatrix in registered shared memory */
} WarpEmulCounts;

void warp_emul_block(int nthreads, WarpEmulFn fn, void *arg);
void warp_emul_syncthreads(void);
float warp_emul_shfl_xor(float v, int lane_mask);
void warp_emul_mma_bf16_16816(float c[4], const uint32_t a[4], const uint32_t b[2]);
void warp_emul_ldmatrix_x4(uint32_t d[4], const void *row, int trans);
void warp_emul_cp_async16(void *dst, const void *src, int src_bytes);
void warp_emul_cp_async_commit(void);
void warp_emul_cp_async_wait_all(void);
long long warp_emul_count(void);
WarpEmulCounts warp_emul_counts(void);
void warp_emul_shared(void *base, size_t bytes);
void warp_emul_smem_access(const void *p, size_t bytes, int write);

#ifdef __cplusplus
}
#endif

#endif /* TEST_WARP_EMUL_H */
