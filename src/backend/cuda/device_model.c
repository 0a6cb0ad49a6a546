// The CUDA device model (device_model.h).
#include "device_model.h"

#include <math.h>

// What a field the driver did not report is taken to be: an H100 SXM5 (device_model.h).
static const CuDevice CUDEV_DEFAULT = {
    .sms = 132,
    .threads_sm = 2048,
    .regs_sm = 65536,
    .smem_sm = 233472, // 228 KiB
    .smem_block = 49152,
    .smem_optin = 0, // smem_block
    .l2 = 50 << 20,
    .clock = 1.755e9,
    .dram_bw = 3.35e12,
    .cc_major = 0,
};

CuDevice cudev_of(const CudaHw *hw) {
    static const CudaHw none;
    const CuDevice *z = &CUDEV_DEFAULT;
    CuDevice d = *z;
    if (!hw)
        hw = &none;
    d.sms = hw->sm_count > 0 ? hw->sm_count : z->sms;
    d.threads_sm = hw->max_threads_per_sm > 0 ? hw->max_threads_per_sm : z->threads_sm;
    d.regs_sm = hw->regs_per_sm > 0 ? hw->regs_per_sm : z->regs_sm;
    d.smem_sm = hw->smem_per_sm > 0 ? hw->smem_per_sm : z->smem_sm;
    d.smem_block = hw->smem_per_block > 0 ? hw->smem_per_block : z->smem_block;
    d.smem_optin = hw->smem_per_block_optin > 0 ? hw->smem_per_block_optin : d.smem_block;
    d.l2 = hw->l2_bytes > 0 ? hw->l2_bytes : z->l2;
    d.clock = hw->clock_khz > 0 ? hw->clock_khz * 1e3 : z->clock;
    d.dram_bw = hw->dram_bw > 0 ? hw->dram_bw : z->dram_bw;
    d.cc_major = hw->cc_major;
    return d;
}

int64_t cudev_regs_alloc(int64_t regs) {
    return (regs + 7) / 8 * 8;
}

int cudev_blocks_per_sm(const CuDevice *d, int64_t threads, int64_t regs, int64_t smem) {
    if (threads < 1)
        return 0;
    int64_t b = ORCH_MIN((int64_t)d->threads_sm / threads, (int64_t)CUDA_ARCH.max_blocks);
    if (regs > 0)
        b = ORCH_MIN(b, (int64_t)d->regs_sm / (threads * regs));
    if (smem > 0)
        b = ORCH_MIN(b, d->smem_sm / (smem + CUDA_ARCH.smem_reserved));
    return (int)ORCH_MAX(b, 0);
}

double cudev_per_sm(const CuDevice *d, double blocks) {
    return ceil(blocks / d->sms);
}

double cudev_slots(const CuDevice *d, int bpsm) {
    return (double)d->sms * bpsm;
}

double cudev_waves(const CuDevice *d, double blocks, int bpsm) {
    return ceil(blocks / cudev_slots(d, bpsm));
}

double cudev_wave_eff(const CuDevice *d, double blocks, int bpsm) {
    double slots = cudev_slots(d, bpsm);
    return blocks / (ceil(blocks / slots) * slots);
}

double cudev_lane_rate(const CuDevice *d) {
    return (double)d->sms * CUDA_ARCH.fp32_lanes * d->clock;
}

double cudev_fp32_peak(const CuDevice *d) {
    return (double)d->sms * CUDA_ARCH.fp32_lanes * 2.0 * d->clock;
}

double cudev_issue_rate(const CuDevice *d) {
    return (double)d->sms * CUDA_ARCH.schedulers * d->clock;
}

double cudev_l2_bw(const CuDevice *d) {
    return (double)d->sms * CUDA_ARCH.l2_bytes_clock * d->clock;
}
