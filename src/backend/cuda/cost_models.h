// The fitted and chosen constants of the CUDA target's cost models and config rankers, one table
// per kernel family: pointwise and reduction kernels (CUDA_POINTWISE_MODEL), matmul and
// convolution kernels with the library calls' place among them (CUDA_MATMUL_MODEL), MLP chains
// (CUDA_MLP_MODEL) and fused attention (CUDA_ATTN_MODEL). The device itself (SMs, clocks,
// bandwidth, occupancy) is device_model.h's; what every family assumes of the architecture
// (lanes, schedulers, the launch overhead) is CUDA_ARCH there.
//
// Each field says what it is and the measurement and device that fitted it, where the code's
// comments or docs/kernels/*.md record them ("not recorded" where nothing does). Instruction
// counts that follow from the emitted code's structure (the FMAs of a k step, the loads of a
// staged tile) stay in the scoring functions beside the code they count; what is here was
// measured, fitted or chosen, and changing it changes which configs are offered or their order.
// Needs: nothing. Guarantees: plain constant data.
#ifndef ORCH_CUDA_COST_MODELS_H
#define ORCH_CUDA_COST_MODELS_H

#include <stdint.h>

// ---- pointwise and reduction kernels (emit_pointwise_cuda.c, emit_reduce_cuda.c) ----

typedef struct CudaPointwiseModel {
    // The share of the DRAM bandwidth a streaming kernel reaches (cupw_bandwidth): 0.85; the
    // measurement is not recorded.
    double stream_eff;
    // A grid-stride kernel launches at most this many rounds of resident blocks (the launch
    // geometry of pointwise kernels); not recorded.
    int grid_rounds;
    // Full bandwidth needs about this share of the SMs' resident threads with a load in flight
    // (a pointwise kernel's elements in flight); a smaller grid reaches a proportional share.
    // Not recorded.
    double inflight_share;
    // Issue instructions an element spends per output axis on its index digits; not recorded.
    double digit_instr;
    // Scalar accesses against float4 groups: 4-byte ones reach this share of the 128-bit
    // bandwidth (H100: 2.2 against 2.75 TB/s on a bias-GELU of 4096 x 4096) ...
    double scalar_eff_4b;
    // ... 2-byte ones (half storage) this share; not recorded.
    double scalar_eff_2b;
    // A step of several elements a thread hides latency better (independent loads in flight): its
    // estimate times this; not recorded.
    double multi_elem;
    // The tiled (transposing) config's estimate: the best flat config's times this, so it ranks
    // first (the flat model does not see strided accesses) and the lab decides.
    double transposed_rank;
    // Reductions. Later passes re-read the row from L1 while the rows resident on an SM fit in
    // this many bytes, else from L2, at these bandwidths (bytes/s, whole device); not recorded.
    double red_l1_bytes, red_l1_bw, red_l2_bw;
    // A thread per position reading a row of its own (no kept inner axis) uses a fraction of
    // each transaction: its memory time times min(this, row length); not recorded.
    double red_own_row_max;
    // The dependent chain of one thread: cycles an element of its share of the row costs, and
    // per pass more where the row is cached in registers; not recorded.
    double red_elem_cycles, red_cache_pass_cycles;
    // Combining: butterfly shuffle steps and cycles a step (a warp per position); a block
    // barrier's cycles and the cycles a partial folded (split rows, a block per position); the
    // grid barrier's cycles and the cycles a block's partial folded (grid splits). Not recorded.
    double red_shuffle_steps, red_shuffle_cycles;
    double red_barrier_cycles, red_fold_cycles;
    double red_grid_barrier_cycles, red_grid_fold_cycles;
    // Grid splits: offered where the position groups fill at most 1 / red_grid_idle of the SMs,
    // each thread keeping red_grid_min_elems elements or more, at most red_grid_max blocks a
    // group; at most red_grid_configs of the configs returned (offered first they pushed proven
    // configs out: the style transfer 0.530 -> 0.560 ms, H100).
    int red_grid_idle, red_grid_min_elems, red_grid_max, red_grid_configs;
} CudaPointwiseModel;

static const CudaPointwiseModel CUDA_POINTWISE_MODEL = {
    .stream_eff = 0.85,
    .grid_rounds = 4,
    .inflight_share = 0.5,
    .digit_instr = 2.0,
    .scalar_eff_4b = 0.82,
    .scalar_eff_2b = 0.6,
    .multi_elem = 0.98,
    .transposed_rank = 0.9,
    .red_l1_bytes = 160e3,
    .red_l1_bw = 20e12,
    .red_l2_bw = 6e12,
    .red_own_row_max = 8.0,
    .red_elem_cycles = 12.0,
    .red_cache_pass_cycles = 4.0,
    .red_shuffle_steps = 5,
    .red_shuffle_cycles = 30.0,
    .red_barrier_cycles = 200.0,
    .red_fold_cycles = 10.0,
    .red_grid_barrier_cycles = 2000.0,
    .red_grid_fold_cycles = 20.0,
    .red_grid_idle = 4,
    .red_grid_min_elems = 4,
    .red_grid_max = 1024,
    .red_grid_configs = 2,
};

// ---- matmul and convolution kernels (emit_linear_cuda.c; target_cuda.c's library order) ----

typedef struct CudaMatmulModel {
    // The fraction of the FMA peak a SIMT thread tile TM x TN reaches with enough warps resident,
    // by its FMAs per shared-memory read r = TM*TN / (TM + TN): tile_eff_hi from r >= tile_r_hi
    // (8 x 8), tile_eff_mid from r >= tile_r_mid (8 x 4), tile_eff_lo below (4 x 4). Calibrated
    // on an H100 on a 1024^3 matmul and a 3x3 64 -> 64 convolution at 56 x 56.
    double tile_r_hi, tile_r_mid, tile_eff_hi, tile_eff_mid, tile_eff_lo;
    // How much of the SM a block's warps keep busy: min(1, warp_eff0 + warps / warp_eff_warps)
    // (the same H100 calibration).
    double warp_eff0, warp_eff_warps;
    // Compute and memory time overlap but for this share of the shorter; not recorded.
    double overlap;
    // Tensor cores: the speed-up per SM over float32 FMAs of TF32 and of FP16 / BF16 (half the
    // operand bytes through shared memory and twice TF32's rate), their kernels' efficiency and
    // registers a thread; not recorded.
    double tc_tf32, tc_half, tc_eff;
    int tc_regs;
    // K slices thinner than bk_thin pay twice the barriers per K: efficiency times bk_thin_eff;
    // not recorded.
    int bk_thin;
    double bk_thin_eff;
    // The implicit-GEMM patch gather's index arithmetic: the compute time of a convolution that
    // cannot read its patches in place times this; not recorded.
    double gather;
    // Operands whose bytes fit in this share of L2 are re-read from L2, else from DRAM, where
    // the re-reads count this share (the rest hits L2); not recorded.
    double l2_fit, dram_reread;
    // Split-K: the partial tiles' synchronisation (seconds), and the share of an SM's part of
    // the L2 bandwidth the summing block reads its S partials at (tensor cores; the SIMT choices
    // were measured without it on an H100). Not recorded.
    double split_sync_s, split_sum_l2_share;
    // Split-K copies of a config: up to about split_waves waves of blocks, each split over at
    // least split_slices_simt (SIMT) or split_slices_tc (tensor cores) K slices, S up to
    // split_max. Chosen (ResNet-18 fp32, H100: layer4's 3x3 convolutions 0.27 -> 0.035 ms).
    double split_waves;
    int split_slices_simt, split_slices_tc, split_max;
    // GEMV (M <= 8): the share of the FMA peak it computes at, the memory time of a B read
    // against its layout (lanes on the wrong axis) times gemv_uncoalesced, blocks an SM; not
    // recorded.
    double gemv_peak, gemv_uncoalesced;
    int gemv_bpsm;
    // Direct convolution (a thread per pixel): lane instructions of a window element's patch
    // gather beside the M FMAs, and the share of the lane rate the integer work leaves; not
    // recorded.
    double direct_gather_instr, direct_rate;
    // Depthwise convolution: the share of the FMA peak, the traffic over the unique bytes,
    // output elements a block and blocks an SM; not recorded.
    double dw_peak, dw_traffic, dw_block;
    int dw_bpsm;
    // Tensor-core direct convolution (score_tcconv): an m16n8k16's issue cycles on a
    // sub-partition (as the attention model takes it: the MLP kernels' H100 measurement of
    // m16n8k8 TF32); the cycles of an ldmatrix.x4 of the input tile per 16 pixels, tap and 16
    // channels (twice at stride 2, whose rows share banks) and of a B fragment's reads; the bytes
    // a cycle cp.async stages from L2; lane instructions an element copied takes (affine input,
    // affine weights, through cexpr); the fixed cycles of a staging; the efficiency
    // min(1, tcc_eff0 + resident warps / tcc_eff_warps); at most tcc_hide resident blocks hide
    // a block's staging. Not recorded.
    double tcc_mma_cycles, tcc_ldsm_cycles, tcc_bfrag_cycles, tcc_cp_bytes_cycle;
    double tcc_copy_x_instr, tcc_copy_w_instr, tcc_copy_cexpr_instr, tcc_stage_cycles;
    double tcc_eff0, tcc_eff_warps, tcc_hide;
    // A LINEAR's library configs lead its list from this many multiply-adds on (cuBLASLt's first
    // algorithm beats the best SIMT GEMM by 1.3-4x at 128x768x768 and up on an H100), ours below
    // (a tiny BERT layer compiled 8% slower with the library first).
    double blaslt_first_macs;
} CudaMatmulModel;

static const CudaMatmulModel CUDA_MATMUL_MODEL = {
    .tile_r_hi = 4,
    .tile_r_mid = 2.5,
    .tile_eff_hi = 0.77,
    .tile_eff_mid = 0.70,
    .tile_eff_lo = 0.44,
    .warp_eff0 = 0.45,
    .warp_eff_warps = 24.0,
    .overlap = 0.25,
    .tc_tf32 = 4.0,
    .tc_half = 6.0,
    .tc_eff = 0.5,
    .tc_regs = 96,
    .bk_thin = 16,
    .bk_thin_eff = 0.9,
    .gather = 1.5,
    .l2_fit = 0.5,
    .dram_reread = 0.5,
    .split_sync_s = 2e-6,
    .split_sum_l2_share = 0.5,
    .split_waves = 2.0,
    .split_slices_simt = 8,
    .split_slices_tc = 4,
    .split_max = 32,
    .gemv_peak = 0.25,
    .gemv_uncoalesced = 4.0,
    .gemv_bpsm = 8,
    .direct_gather_instr = 10.0,
    .direct_rate = 0.5,
    .dw_peak = 0.3,
    .dw_traffic = 1.5,
    .dw_block = 256.0,
    .dw_bpsm = 8,
    .tcc_mma_cycles = 4.7,
    .tcc_ldsm_cycles = 4.0,
    .tcc_bfrag_cycles = 2.0,
    .tcc_cp_bytes_cycle = 64.0,
    .tcc_copy_x_instr = 8.0,
    .tcc_copy_w_instr = 12.0,
    .tcc_copy_cexpr_instr = 30.0,
    .tcc_stage_cycles = 400.0,
    .tcc_eff0 = 0.35,
    .tcc_eff_warps = 16.0,
    .tcc_hide = 2.0,
    .blaslt_first_macs = 1 << 22,
};

// ---- MLP chains (emit_mlp_cuda.c) ----

typedef struct CudaMlpModel {
    // ALU instructions of one element of an epilogue's op (ew_cost): plain arithmetic; exp, log,
    // sqrt, rsqrt, reciprocal and division; erf, tanh, sigmoid, sin and cos; the other
    // transcendentals and pow (CUDA's accurate math); under fast math the prelude's
    // special-function-unit exp, sigmoid and sin / cos. Not recorded.
    double ew_plain, ew_div, ew_transc, ew_costly, ew_fast_exp, ew_fast_sigmoid, ew_fast_trig;
    // Block kernel (score): instructions an input or weight element staged takes, a weight load
    // through the read-only cache against one from shared memory, an epilogue element, the fixed
    // instructions of a layer's weight staging and of its barrier; the resident warps an SM
    // needs for its full issue rate. Not recorded.
    double blk_stage_instr, blk_wload_cache, blk_wload_smem, blk_epi_instr, blk_wstage_fixed,
        blk_barrier_instr, blk_full_warps;
    // The block kernel's estimate times this: scaled to what it measured against the persistent
    // kernels (device not recorded).
    double blk_scale;
    // The share of the DRAM bandwidth the chain's input and output cross at (both designs); not
    // recorded.
    double dram_eff;
    // Persistent kernels (persist_time), a sum fitted to H100 measurements (6 layers 64 wide at
    // 65536 rows: the parts barely overlap): the issue efficiency of long independent FMA
    // streams, min(1, fma_eff0 + fma_eff_wps * warps a scheduler), and of the epilogues'
    // dependent chains, min(1, epi_eff_wps * warps a scheduler) (about 4 warps saturate one).
    double fma_eff0, fma_eff_wps, epi_eff_wps;
    // Blocks an SM the persistent kernels' launch bounds promise at most; registers the warp
    // kernel's estimate takes; chosen.
    int persist_max_bps, warp_regs;
    // The warp kernel's instructions a row of the input staged; not recorded.
    double warp_in_instr;
    // Tensor cores: one mma.sync's issue cycles on a sub-partition on sm_90 (H100: m16n8k8 TF32
    // measured at 4.7) and before (not recorded); one m16n8k16 DMMA's (2048 double MACs at the
    // FP64 tensor cores' 62-65 TFLOP/s on an H200).
    double mma_cycles_sm90, mma_cycles_sm80, dmma_cycles;
    // The independent chains a warp's epilogue offers the scheduler: through shared memory
    // ilp_smem0 + ilp_smem_mt * (MT - 1), in registers (one long unrolled stream)
    // ilp_reg0 + ilp_reg_mt * (MT - 1). Not recorded.
    double ilp_smem0, ilp_smem_mt, ilp_reg0, ilp_reg_mt;
    // The share of the epilogues' time epi=ilv hides under the tensor cores' (or theirs under
    // the epilogues'). H200, 6 x 64 sin*sigmoid chain, 65536 rows, one run each: f64 w=12 116.8
    // against 127.3 us through P; f16 w=16 44.2 against 42.5 (where its code is small, the
    // unrolled k loop of P does as well).
    double ilv_overlap;
    // The same for f64's m16n8k16 DMMAs, which leave the issue slots to float work beside them
    // (lab/dmma_cvt.cu, H200: 128 FMAs a k step of 4 cost 7%, against 90% beside m16n8k4 DMMAs);
    // in the 6 x 64 sin*sigmoid kernel less of it shows (H200, one run: w=16 ilvx 102.4 us,
    // w=12 ilv 108.3, w=8 ilvx 110.4, w=12 through P 130.2): this keeps that order.
    double f64_overlap;
    // The f64 kernel's estimate times this: on an H100 the 6 x 64 sin*sigmoid chain at 65536 rows
    // measured 117 us against 166 us estimated (ReLU: 70-79 us against 85-107 us).
    double f64_scale;
    // A register epilogue (epi=reg) is offered up to this many instructions an element under
    // fast math and reg_epi_max otherwise: beyond, its unrolled code leaves the instruction
    // cache (H100, 6 x 64 sin*sigmoid: 127 us in registers, 75 us through shared memory; ReLU
    // 26 and 33 us; H200, half storage, fast math: f16 w=16 32.7 us in registers, 37.8 through
    // shared memory).
    double reg_epi_max_fast, reg_epi_max;
    // Tensor-core configs estimated above this many registers a thread are not offered; chosen.
    int tc_max_regs;
} CudaMlpModel;

static const CudaMlpModel CUDA_MLP_MODEL = {
    .ew_plain = 1.5,
    .ew_div = 10,
    .ew_transc = 22,
    .ew_costly = 30,
    .ew_fast_exp = 2,
    .ew_fast_sigmoid = 7,
    .ew_fast_trig = 6,
    .blk_stage_instr = 2,
    .blk_wload_cache = 1.5,
    .blk_wload_smem = 1.0,
    .blk_epi_instr = 12,
    .blk_wstage_fixed = 40,
    .blk_barrier_instr = 20,
    .blk_full_warps = 16.0,
    .blk_scale = 2.2,
    .dram_eff = 0.8,
    .fma_eff0 = 0.25,
    .fma_eff_wps = 0.2,
    .epi_eff_wps = 0.21,
    .persist_max_bps = 8,
    .warp_regs = 128,
    .warp_in_instr = 1.5,
    .mma_cycles_sm90 = 4.7,
    .mma_cycles_sm80 = 8,
    .dmma_cycles = 69,
    .ilp_smem0 = 1.0,
    .ilp_smem_mt = 0.25,
    .ilp_reg0 = 1.5,
    .ilp_reg_mt = 0.5,
    .ilv_overlap = 0.1,
    .f64_overlap = 0.3,
    .f64_scale = 0.7,
    .reg_epi_max_fast = 16,
    .reg_epi_max = 8,
    .tc_max_regs = 224,
};

// ---- fused attention (emit_attention_cuda.c) ----

typedef struct CudaAttnModel {
    // Lane instructions an element of a key or value tile staged takes: through cexpr (float32;
    // half, converting in software), by 16-byte cp.async, by other copies. Not recorded.
    double stage_cexpr, stage_cexpr_half, stage_cp16, stage_copy;
    // SIMT (score): full issue rate once the resident warps times the register tile's
    // independent FMAs reach fma_chains, in proportion below; SM cycles a warp-wide float4
    // shared-memory read of the products costs (fitted on an H100, where the configs with the
    // fewest such reads per FMA won: TM x TN = 4 x 8 at 198 us against 2 x 8 at 262 us on
    // 8 x 12 heads of 512 x 512 x 64; the model came within 3% on those).
    double fma_chains, lds_cycles;
    // Cycles a key tile's synchronous global loads stall a block unless other resident blocks
    // cover them (both designs); not recorded.
    double tile_stall_cycles;
    // The share of the DRAM bandwidth Q, K, V and O cross at, and L2's bandwidth as a multiple of
    // DRAM's for the key and value tiles each query tile re-reads; not recorded.
    double dram_eff, l2_over_dram;
    // Key splits: the partials' fence, atomic and second L2 crossing, seconds: SIMT (about 2 us;
    // not recorded), tensor cores (about 3 us on an H100's 12 x 512 x 512 x 64 heads in float16).
    double split_sync_s, tc_split_sync_s;
    // Tensor cores (score_tc): an mma.sync's issue cycles on a sub-partition on sm_90 (m16n8k8
    // TF32 measured at 4.7 on an H100 by the MLP kernels; m16n8k16 taken as the same) and before
    // (not recorded); the cycles a lone warp waits on its own latencies a key tile (shuffles,
    // exponentials, the mma results; not recorded).
    double mma_cycles_sm90, mma_cycles_sm80, tile_latency_cycles;
    // Configs offered: SIMT blocks of simt_min_threads to simt_max_threads threads, row groups of
    // at least simt_min_cg threads, at most simt_max_regs estimated registers a thread; tensor-
    // core configs of at most tc_max_regs. Chosen.
    int simt_min_threads, simt_max_threads, simt_min_cg, simt_max_regs, tc_max_regs;
} CudaAttnModel;

static const CudaAttnModel CUDA_ATTN_MODEL = {
    .stage_cexpr = 12,
    .stage_cexpr_half = 30,
    .stage_cp16 = 2,
    .stage_copy = 8,
    .fma_chains = 64.0,
    .lds_cycles = 2.0,
    .tile_stall_cycles = 700.0,
    .dram_eff = 0.8,
    .l2_over_dram = 2.0,
    .split_sync_s = 2e-6,
    .tc_split_sync_s = 3e-6,
    .mma_cycles_sm90 = 4.7,
    .mma_cycles_sm80 = 8,
    .tile_latency_cycles = 600,
    .simt_min_threads = 64,
    .simt_max_threads = 256,
    .simt_min_cg = 4,
    .simt_max_regs = 200,
    .tc_max_regs = 232,
};

#endif
