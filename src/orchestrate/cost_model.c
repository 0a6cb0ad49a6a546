// Roofline estimates of candidate kernels (see cost_model.h). A kernel is assumed to read each
// external input once from main memory and write its output once; what stays inside the kernel
// costs no traffic, only FLOPs. That is the whole point of fusion, so it is what the estimate
// must capture; caches, occupancy and tile shapes are left to the targets' measurements.
#include "cost_model.h"

#include <stdio.h>
#include <strings.h>
#include <unistd.h>

// Datasheet numbers. FP32 peaks are the non-tensor-core figures: the primitives compute in fp32
// and the first generated kernels will not use tensor cores. The launch overhead is a round
// figure for back-to-back cudaLaunchKernel calls on current drivers (2-5 us is what microbench-
// marks of an empty kernel report; CUDA graph replay lowers it, which the CUDA target will
// measure).
static const Device gpus[] = {
    // NVIDIA H100 Tensor Core GPU datasheet, SXM5 80 GB: HBM3 3.35 TB/s, FP32 67 TFLOP/s.
    {"h100", "NVIDIA H100 SXM5 (datasheet: 3.35 TB/s HBM3, 67 TFLOP/s fp32)", 3.35e12, 67e12, 3e-6},
    // NVIDIA H200 datasheet, SXM 141 GB: HBM3e 4.8 TB/s, FP32 67 TFLOP/s (same GH100 compute).
    {"h200", "NVIDIA H200 SXM (datasheet: 4.8 TB/s HBM3e, 67 TFLOP/s fp32)", 4.8e12, 67e12, 3e-6},
    // NVIDIA A100 datasheet, SXM 80 GB: HBM2e 2.039 TB/s, FP32 19.5 TFLOP/s.
    {"a100", "NVIDIA A100 SXM 80 GB (datasheet: 2.04 TB/s HBM2e, 19.5 TFLOP/s fp32)", 2.039e12,
     19.5e12, 3e-6},
};

// The CPU without reading /proc/cpuinfo: 20 GB/s is what one socket's DRAM sustains in a STREAM
// triad on a desktop or a cloud VM slice; 100 GFLOP/s per core is an AVX2 core at ~3 GHz (2 FMA
// units x 8 lanes x 2 FLOPs x 3 GHz = 96); 1 us stands for handing a kernel to a thread pool.
#define CPU_BANDWIDTH 20e9
#define CPU_FLOPS_PER_CORE 100e9
#define CPU_LAUNCH 1e-6

const Device *cost_model_find(const char *name) {
    for (size_t i = 0; i < ORCH_COUNT(gpus); i++)
        if (strcasecmp(name, gpus[i].name) == 0)
            return &gpus[i];
    if (strcasecmp(name, "cpu") != 0)
        return NULL;
    static Device cpu;
    static char desc[128];
    long cores = sysconf(_SC_NPROCESSORS_ONLN);
    if (cores < 1)
        cores = 1;
    snprintf(desc, sizeof desc, "this CPU, %ld core%s (defaults: 20 GB/s, 100 GFLOP/s per core)",
             cores, cores == 1 ? "" : "s");
    cpu = (Device){"cpu", desc, CPU_BANDWIDTH, CPU_FLOPS_PER_CORE * (double)cores, CPU_LAUNCH};
    return &cpu;
}

const char *cost_model_names(void) {
    return "h100, h200, a100, cpu";
}

CostEstimate cost_model_estimate(const PrimGraph *pg, const Candidate *c, const Device *d) {
    CostEstimate r = {0, 0, 0};
    for (int i = 0; i < c->n_inputs; i++)
        r.bytes += (double)tensor_nbytes(pg->tensors[c->inputs[i]]);
    r.bytes += (double)tensor_nbytes(pg->tensors[c->output]);
    for (int i = 0; i < c->n_prims; i++)
        r.flops += prim_flops(pg, pg->prims[c->prims[i]]);
    double mem = r.bytes / d->bandwidth, compute = r.flops / d->peak_flops;
    r.seconds = (mem > compute ? mem : compute) + d->launch;
    return r;
}

void cost_model_fill(CandidateSet *cs, const Device *d) {
    for (int i = 0; i < cs->n; i++)
        cs->c[i].cost = cost_model_estimate(cs->pg, &cs->c[i], d).seconds;
}
