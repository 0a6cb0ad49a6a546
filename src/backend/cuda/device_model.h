// The CUDA device model that every cost model and config ranker of the CUDA target reads
// (pointwise and reduction kernels, matmul and convolution, MLP chains, attention): the numbers
// of the detected device (CudaHw, cuda_api.h), one set of defaults where the driver reported
// nothing (or no device is given), the architecture constants the models assume, and the
// occupancy, wave and rate arithmetic they share.
//
// Defaults (CUDEV_DEFAULT in device_model.c) are an H100 SXM5's as cuda_hw_detect reads it:
// 132 SMs, 2048 threads and 65536 registers an SM, 228 KiB of shared memory an SM, 48 KiB a
// block without opting in (and, where the driver reports no opt-in limit, with it), 50 MiB of L2,
// 3.35 TB/s of DRAM bandwidth, and a 1.755 GHz SM clock (the clock the pointwise and linear
// models have always assumed; the SXM5's boost clock is 1.98 GHz). Each field falls back on its
// own: a device that reports its SM count but not its clock keeps its SM count.
//
// Needs: nothing (a NULL CudaHw gives every default). Guarantees: pure functions of their
// arguments; the arithmetic of each helper is the one written in its comment, operation for
// operation, so the emitters' estimates do not move in the last bit when they call it.
#ifndef ORCH_CUDA_DEVICE_MODEL_H
#define ORCH_CUDA_DEVICE_MODEL_H

#include "cuda_api.h"

// What the models assume of every architecture orch targets (sm_75 to sm_90). Not read from the
// driver; where a described device differs (sm_75 has 64 FP32 lanes and 16 resident blocks an
// SM) the models keep these values, which their fitted constants were measured with.
typedef struct CudaArchModel {
    int fp32_lanes;        // FP32 FMA lanes an SM (4 sub-partitions of 32; sm_80, sm_90)
    int schedulers;        // warp schedulers an SM, each issuing one warp instruction a clock
    double l2_bytes_clock; // bytes L2 delivers to one SM a clock (about 64; not recorded)
    int64_t smem_reserved; // shared memory the runtime reserves a resident block (1 KiB, sm_80+)
    int max_blocks;        // resident blocks an SM holds at most (32 on sm_80 and sm_90)
    double launch_s;       // a kernel launch's overhead in seconds, added to every estimate
                           // (3 us: the measurement is not recorded)
    int max_regs;          // registers a thread may have at most
    // The opt-in shared memory a block has on every GPU orch targets (99 KiB on sm_86 and sm_89;
    // more on sm_80 and sm_90): what the supports answers, which know no device, check the
    // smallest config against.
    int64_t smem_optin_any;
} CudaArchModel;

static const CudaArchModel CUDA_ARCH = {
    .fp32_lanes = 128,
    .schedulers = 4,
    .l2_bytes_clock = 64.0,
    .smem_reserved = 1024,
    .max_blocks = 32,
    .launch_s = 3e-6,
    .max_regs = 255,
    .smem_optin_any = 99 * 1024,
};

// The device as the models see it: CudaHw's fields, each with its default where it is 0.
typedef struct CuDevice {
    int sms;            // SMs
    int threads_sm;     // resident threads an SM holds
    int regs_sm;        // 32-bit registers an SM holds
    int64_t smem_sm;    // shared memory an SM holds (bytes)
    int64_t smem_block; // shared memory a block may use without opting in
    int64_t smem_optin; // ... after opting in (smem_block where the driver reports no limit)
    int64_t l2;         // L2 bytes
    double clock;       // SM clock, Hz
    double dram_bw;     // DRAM bytes/s: measured (the target's calibrate slot) or theoretical
    int cc_major;       // compute capability major; 0 where unknown (no default: the emitters
                        // decide themselves what an unknown device is assumed to have)
} CuDevice;

// The model of hw (NULL: every default).
CuDevice cudev_of(const CudaHw *hw);

// Registers a thread of `regs` is allocated: rounded up to a multiple of 8 (the hardware
// allocates 256 a warp). The attention and persistent MLP models round; the linear and block
// MLP models pass their estimates as they are (their fitted constants were measured so).
int64_t cudev_regs_alloc(int64_t regs);

// Blocks of `threads` threads, `regs` registers a thread (<= 0: no register limit) and `smem`
// bytes of shared memory (<= 0: no shared-memory limit) an SM holds at once: the smallest of
// floor(threads_sm / threads), floor(regs_sm / (threads * regs)),
// floor(smem_sm / (smem + smem_reserved)) and CUDA_ARCH.max_blocks; 0 where none fits.
int cudev_blocks_per_sm(const CuDevice *d, int64_t threads, int64_t regs, int64_t smem);

// The blocks the busiest SM runs when `blocks` are spread evenly: ceil(blocks / sms).
double cudev_per_sm(const CuDevice *d, double blocks);
// Resident slots: sms * bpsm.
double cudev_slots(const CuDevice *d, int bpsm);
// Waves of `blocks` over the slots: ceil(blocks / (sms * bpsm)).
double cudev_waves(const CuDevice *d, double blocks, int bpsm);
// The busy fraction of the waves' slots: blocks / (waves * sms * bpsm) (below 1 for a single
// partial wave too).
double cudev_wave_eff(const CuDevice *d, double blocks, int bpsm);

// Rates: FP32 lane instructions a second (sms * fp32_lanes * clock); FP32 flop/s at one FMA a
// lane and clock (sms * fp32_lanes * 2 * clock); warp instructions a second
// (sms * schedulers * clock); L2 bytes a second (sms * l2_bytes_clock * clock).
double cudev_lane_rate(const CuDevice *d);
double cudev_fp32_peak(const CuDevice *d);
double cudev_issue_rate(const CuDevice *d);
double cudev_l2_bw(const CuDevice *d);

#endif
