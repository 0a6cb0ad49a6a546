// Clean-up passes on the primitive graph, run after fission: constant folding, BatchNorm folding
// into convolutions, dead convolution taps dropped, identity-layout removal, layout chain
// composition, scalar factors of MatMul operands hoisted after the product, elementwise chain
// merging (canonicalised programs), common subexpression elimination and dead primitive
// elimination.
// Needs: a verified primitive graph. Guarantees: a verified graph computing the same outputs (the
// same graph inputs and output tensors, names included), with no dead primitives in the list.
#ifndef ORCH_PASSES_H
#define ORCH_PASSES_H

#include "../prim/prim.h"

// What the passes changed; each pass adds to its own counter.
typedef struct CleanupStats {
    int iterations; // rounds of all passes run by fission_cleanup
    int prims_before, prims_after;
    int folded;           // primitives replaced by a constant
    int bn_folded;        // conv + per-channel affine chains folded into the weights
    int taps_trimmed;     // convolutions whose dead leading/trailing kernel taps were dropped
    int identities;       // identity layouts/copies bypassed, identity stages dropped
    int layouts_composed; // layout chains joined into their consumer, stages merged
    int ew_merged;        // elementwise primitives inlined into their consumer
    int ew_canonicalised; // programs rewritten into canonical form
    int scales_hoisted;   // scalar factors of MatMul operands moved after the product
    int cse;              // primitives and constants replaced by an identical earlier one
    int dead;             // primitives no graph output needs
} CleanupStats;

// Every pass returns ST_OK (or an error for a failed allocation) and leaves the graph compacted.

// A non-opaque primitive whose inputs are all constants becomes a constant (at most 256 MiB, and
// not when it would expand small constants into a large one, e.g. a broadcast).
int pass_fold_constants(PrimGraph *pg, CleanupStats *st, Err *e);
// LIN_CONV followed by single-consumer ADD/SUB/MUL/DIV by per-channel constants (conv bias,
// BatchNorm): the scale goes into the weights, one ADD of the combined bias remains.
int pass_fold_batchnorm(PrimGraph *pg, CleanupStats *st, Err *e);
// Dead convolution taps (passes_conv_taps.c): per spatial axis of a LIN_CONV, the leading and
// trailing kernel taps that read only padding at every output position are dropped (a dilated
// 3x3 whose dilation reaches past the map is a 1x1): the weight is sliced (a new constant, or a
// slice primitive for a computed weight), pad_begin moves by the dropped span and pad_end is
// recomputed for the same output. Interior dead taps stay; so does a convolution with an axis
// where no tap is live (its product is zero), and a trim that would need a negative pad.
int pass_trim_conv_taps(PrimGraph *pg, CleanupStats *st, Err *e);
// The tap arithmetic of one spatial axis: input length `in`, output length `out`, kernel `k`.
// Taps [*first, *last] are the live span (tap j reads row y*stride - pad_begin + j*dil, live when
// that is in [0, in) for some y in [0, out)); false when no tap is live (then 0 and k - 1).
bool pass_conv_live_taps(int64_t in, int64_t out, int64_t k, int64_t stride, int64_t dil,
                         int64_t pad_begin, int64_t *first, int64_t *last);
// The trim of one axis: keep taps [first, first + k) with these pads (pad_end the smallest >= 0
// giving `out`). Leading taps stay where dropping them would make pad_begin negative, trailing
// ones where no pad_end >= 0 gives `out` without them. False when no tap is live (t is then the
// whole kernel).
typedef struct ConvAxisTrim {
    int64_t first, k, pad_begin, pad_end;
} ConvAxisTrim;
bool pass_conv_trim_axis(int64_t in, int64_t out, int64_t k, int64_t stride, int64_t dil,
                         int64_t pad_begin, ConvAxisTrim *t);
// Layout stages that map every index to itself are dropped; a primitive left without stages (or
// an elementwise copy to the same dtype and shape, a one-input concat) is bypassed.
int pass_remove_identities(PrimGraph *pg, CleanupStats *st, Err *e);
// A single-input layout chain whose input is another chain with no other consumer, or only
// layout consumers (each composes it; it dies with the last), absorbs it; adjacent reshapes
// collapse, adjacent transposes compose, transposes of unit axes are reshapes.
int pass_compose_layouts(PrimGraph *pg, CleanupStats *st, Err *e);
// A MatMul operand that is a scalar multiple of a tensor (one MUL or DIV by a scalar constant,
// read by the MatMul alone) is read unscaled, and the product is multiplied by the factors'
// product instead (PyTorch's attention export scales Q and K^T each by sqrt(scale)): the fused
// attention then reads Q and K^T in place (passes_scale.c).
int pass_hoist_scales(PrimGraph *pg, CleanupStats *st, Err *e);
// An elementwise primitive absorbs elementwise producers it alone consumes (when their output is
// not broadcast, so no work is repeated); every program is then put in canonical form.
int pass_merge_elementwise(PrimGraph *pg, CleanupStats *st, Err *e);
// Identical primitives (kind, parameters, inputs) and identical small constants become one.
int pass_cse(PrimGraph *pg, CleanupStats *st, Err *e);
// Drops primitives whose outputs no graph output needs.
int pass_dead_code(PrimGraph *pg, CleanupStats *st, Err *e);

// Runs the passes in order until nothing changes (bounded), verifying the graph after each.
int fission_cleanup(PrimGraph *pg, CleanupStats *st, Err *e);

// Reduced-precision storage (passes_storage.c), run by the compile driver under fp16 / bf16 on
// the CUDA target after the clean-up: every float32 tensor (activations and constant weights,
// whose data is converted) becomes `to` (DT_FLOAT16 or DT_BFLOAT16) except the graph's inputs and
// outputs and what OPAQUE primitives touch; elementwise arithmetic on float32 becomes arithmetic
// on `to`, and CAST primitives join the two where a layout, reduction or linear primitive meets a
// float32 tensor. The graph then computes the model with half tensors (prim_interp's semantics).
//
// wide (NULL: none) marks the tensors whose range float16 cannot hold (storage_range_wide): each
// stays float32, and so does every layout, product or min/max reduction that reads or writes one
// (all its float tensors stay float32 and it computes in float32), as timm's EfficientViT
// computes its linear attention in float32 under autocast.
typedef struct StorageStats {
    int retyped;         // tensors now stored in the reduced type
    int casts;           // CAST primitives added at the float32 boundary
    int64_t const_bytes; // float32 bytes of the converted constants (half of it after)
    int wide_tensors;    // tensors kept float32 for their range (wide)
    int wide_prims;      // layouts, products and min/max reductions kept in float32 for them
} StorageStats;
int pass_store_reduced(PrimGraph *pg, DType to, const bool *wide, StorageStats *st, Err *e);
// The tensors float16 storage cannot be trusted with, from their float32 values (values from the
// interpreter on the float32 graph, before pass_store_reduced; constants from their data): one
// with a |value| above `high` or a non-finite one (overflow), and one whose largest |value| is
// nonzero but below `low` (underflow: its values would round to subnormals or flush to zero). The
// compile driver passes STORAGE_F16_HIGH and STORAGE_F16_LOW (passes_storage.c derives them);
// low = 0 keeps the overflow rule alone. wide[n_tensors] is filled; returns how many are set.
#define STORAGE_F16_HIGH (65504.0 / 64.0)
#define STORAGE_F16_LOW 0x1p-11
typedef struct RangeStats {
    int overflow, underflow; // wide tensors of each kind
    double peak;             // the largest finite |value| among the tensors not wide
    int peak_tensor;         // its tensor (-1: none)
    double smallest;         // the smallest largest-|value| of an underflowing tensor
    int smallest_tensor;     // its tensor (-1: none)
} RangeStats;
int storage_range_wide(const PrimGraph *pg, void *const *values, double high, double low,
                       bool *wide, RangeStats *rs);
// The artefact's record of a wide set: tensor ids, ascending, as comma-separated ids and ranges
// ("3,17-19"). Writes at most cap bytes (NUL included); false when they do not fit.
bool storage_wide_format(const bool *wide, int n_tensors, char *buf, size_t cap);
// Parses storage_wide_format's text into wide[n_tensors] (zeroed first); an id out of range, a
// descending list or any other text is an error naming what is wrong.
int storage_wide_parse(const char *text, int n_tensors, bool *wide, Err *e);
// pass_store_reduced with the wide set a text of storage_wide_format's ("": none), as loading
// an artefact replays it (path: the artefact, for messages).
int pass_store_reduced_listed(PrimGraph *pg, DType to, const char *wide_text, const char *path,
                              Err *e);
// Range headroom of float16 storage on given values (values[t]: tensor t's data, NULL where
// absent): the largest |value| held by a float16 tensor, finite or not, and its tensor (-1: none).
// A half model's values near float16's 65504 on a check's inputs warn that other inputs may
// overflow where the float32 model does not.
double storage_f16_peak(const PrimGraph *pg, void *const *values, int *tensor);
// Half storage's own effect on a model's outputs on one set of inputs: f32[i] and half[i], output
// i of pg as the float32 graph and the half graph (pass_store_reduced) compute it. Returns the
// largest over pg's float outputs of max|half - f32| / max|f32| - scaled by the float32 output,
// never the half one, which is 0 where the half model lost its values (an element finite in
// float32 but not in half counts as infinite; an output that is 0 everywhere in float32 has no
// scale and is skipped). *output: the output it was found on (-1: none), *scale its max|f32|.
double storage_deviation(const PrimGraph *pg, void *const *f32, void *const *half, int *output,
                         double *scale);
// The most storage_deviation may be for a compile under half storage to proceed (passes_storage.c
// says why 0.5).
#define STORAGE_DEVIATION_LIMIT 0.5
// ST_OK where dev is within STORAGE_DEVIATION_LIMIT; else ST_UNSUPPORTED with a message naming
// output (an index into pg's outputs), the deviation and what to do under storage type `to`.
int storage_deviation_verdict(const PrimGraph *pg, DType to, double dev, int output, double scale,
                              Err *e);

// Channels-last layout pairs (passes_nhwc.c), run by the compile driver after the clean-up and
// the storage pass under half storage on the CUDA target: every activation a 2-D convolution
// reads, and the end of each one's elementwise epilogue chain, is also written transposed to
// NHWC, and its readers read that back through private transposes; the convolutions' weights
// become KRSC constants read through a private transpose. The graph computes the same values;
// kernels that read and write channels-last tensors (cuDNN's NHWC calls) absorb the pairs.
typedef struct NhwcStats {
    int convs;           // 2-D convolutions served
    int tensors;         // activations paired (an NHWC twin each)
    int readers;         // private transposes back to NCHW
    int weights;         // weights stored KRSC
    int biases_combined; // residual sums whose two per-channel constants became one
} NhwcStats;
int pass_channels_last(PrimGraph *pg, NhwcStats *st, Err *e);

// ---- for the pass files ----

// Consumers of each tensor, counted once per primitive, and its producer; graph outputs are
// marked.
typedef struct PassUses {
    int *count;    // distinct consumer primitives
    int *consumer; // index in pg->prims of the last consumer
    int *producer; // index in pg->prims of the producer (dead ones too); -1: input or constant
    bool *is_output;
} PassUses;

void pass_uses_build(const PrimGraph *pg, PassUses *u);
void pass_uses_free(PassUses *u);

// Replacements recorded during a pass (tensor -> tensor), applied to the inputs of each primitive
// as the pass reaches it in topological order. Keys are tensors that existed when it was made.
typedef struct PassRepl {
    int *to; // -1: not replaced
    int n;
} PassRepl;

void pass_repl_init(const PrimGraph *pg, PassRepl *r);
void pass_repl_free(PassRepl *r);
int pass_repl_resolve(const PassRepl *r, int t);
void pass_repl_inputs(const PassRepl *r, Prim *p);

// Compacts the graph when primitives were marked dead.
void pass_finish(PrimGraph *pg, int killed);

bool pass_same_dims(const Tensor *a, const Tensor *b);

// Stable topological order: each primitive after the producers of its inputs, otherwise in the
// order it had (for passes that append primitives feeding earlier ones). Tensor.producer
// indices are stale until prim_graph_compact.
void pass_sort_topologically(PrimGraph *pg);

#endif
