// Described CUDA devices for the tests that emit and compile kernels without the device (and
// plan for devices other than the one present): a CudaHw filled from a data sheet's figures, the
// rest as every NVIDIA GPU since Volta has it (32-thread warps, 1024 threads a block, 64K
// registers, 48 KiB of shared memory a block without opt-in, opt-in to all but 1 KiB of an SM's).
#ifndef ORCH_TEST_CUDA_HW_H
#define ORCH_TEST_CUDA_HW_H

#include "backend/cuda/cuda_api.h"

#include <stdint.h>
#include <stdio.h>
#include <string.h>

// Device `name` of compute capability cc (90: 9.0), sms SMs of smem_sm bytes of shared memory
// and threads_sm threads each, l2 bytes of L2, clock_khz and bw bytes/s of DRAM bandwidth.
static inline void cuda_hw_described(CudaHw *h, const char *name, int cc, int sms, int64_t smem_sm,
                                     int64_t l2, int clock_khz, double bw, int threads_sm) {
    memset(h, 0, sizeof *h);
    snprintf(h->name, sizeof h->name, "%s", name);
    h->cc_major = cc / 10;
    h->cc_minor = cc % 10;
    cuda_arch_name(h->cc_major, h->cc_minor, h->arch, sizeof h->arch);
    h->sm_count = sms;
    h->warp_size = 32;
    h->max_threads_per_block = 1024;
    h->max_threads_per_sm = threads_sm;
    h->regs_per_block = h->regs_per_sm = 65536;
    h->smem_per_block = 49152;
    h->smem_per_block_optin = smem_sm - 1024;
    h->smem_per_sm = smem_sm;
    h->l2_bytes = l2;
    h->clock_khz = clock_khz;
    h->dram_bw = bw;
}

#endif
