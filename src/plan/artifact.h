// The compiled artefact: one file holding everything `orch run MODEL.orch` needs. A header (what
// built it, for which machine and model, and the shape sets it serves) and checksummed sections:
// the ONNX model bytes (stored once whatever the number of plans; a session re-imports them and
// re-runs fission, which recomputes the folded constants), from format 7 on the weights (the
// large initializers' bytes, which the ONNX section refers to and sessions use in place from a
// mapping of the file), then per shape set
// its plan (plan.h), its module of generated kernels (a shared object; a packed cubin) and, from
// format 6 on, the source the module was built from where the target keeps it (the CPU's C, for
// orch export; empty otherwise).
//
// Layout (little-endian):
//   magic "\x89ORCHART" (8) | format version u32 | header bytes u32 (from offset 0 to the end of
//   the header checksum) | strings (u32 length + bytes): orch version, target, precision (format
//   2 on; format 1 files were all "fp32" and are still read), device fingerprint |
//   formats 1 to 4: input shapes, float32 tensors (format 3 on) | model hash u64 | load flags u32
//   | compile flags u32 (format 4 on) | threads i32 | kernels i32 | predicted seconds f64 |
//   sections u32 (3) ...
//   format 5: model hash u64 | compile flags u32 | threads i32 | plans u32 (1 to
//   ARTIFACT_MAX_PLANS), per plan: input shapes, float32 tensors (strings), load flags u32,
//   kernels i32, predicted seconds f64 | sections u32 (1 + 2 x plans) ...
//   format 6: as format 5 but sections u32 (1 + 3 x plans), a source section after each plan's
//   shared object.
//   format 7: as format 6 but sections u32 (2 + 3 x plans), a weights section after the ONNX
//   model's (empty where no initializer is large enough), and the model hash covers both
//   (artifact_model_hash).
//   each section: kind u32 (1 onnx, 2 plan, 3 shared object, 4 source, 5 weights; in the order
//   onnx, weights, then plan, shared object (and source) per plan), offset u64, size u64,
//   checksum u64 | header checksum u64 | the sections' bytes, in order, each starting 64-byte
//   aligned, a non-empty weights section page-aligned (4096).
//   The weights section (artifact.c shows its layout): an index (per tensor: offset, length,
//   checksum, name) and the payload, page-aligned, each tensor 64-byte aligned; the ONNX section's
//   initializers refer to it as external data (location ONNX_WEIGHTS_LOCATION, offset and length
//   in the payload).
// Needs: nothing. Guarantees: artifact_read accepts only a file artifact_write wrote (this format
// version or an older one, every size and checksum right, a precision and flags it knows, shape
// sets that differ, a consistent weights index); a newer format is refused by its version number;
// every other input gets one message in words naming the file (and, for damaged or missing
// weights, the tensor), never a crash. Comparing the device fingerprint is the session's job.
#ifndef ORCH_ARTIFACT_H
#define ORCH_ARTIFACT_H

#include "../base/common.h"
#include "../onnx/load.h"
#include "plan.h"

#define ARTIFACT_FORMAT_VERSION 7
#define ARTIFACT_OLDEST_VERSION                                                                    \
    1                             // read as well: no precision field (fp32), no float32 tensors
                                  // (format 1), no compile flags (formats 1 to 3), one plan
                                  // (formats 1 to 4)
#define ARTIFACT_MAX_PLANS 16     // shape sets one artefact serves
#define ARTIFACT_MAX_SHAPES 4096  // bytes of the input shapes string, NUL included
#define ARTIFACT_MAX_WIDE 16384   // bytes of the float32 tensors string, NUL included
// Initializers of at least this many bytes go into the weights section (smaller ones stay in the
// ONNX section, where the 64-byte alignment would cost more than it saves).
#define ARTIFACT_WEIGHTS_MIN_BYTES 1024

// ARTIFACT_STORE_F16 / _BF16: the primitive graph was retyped by pass_store_reduced (fp16 / bf16
// storage): loading the artefact applies the same pass before reading the plan.
// ARTIFACT_LAYOUT_NHWC: pass_channels_last ran after it (its channels-last layout pairs), and
// loading runs it again.
enum {
    ARTIFACT_ATTENTION_REWRITE = 1u << 0,
    ARTIFACT_NO_CLEANUP = 1u << 1,
    ARTIFACT_STORE_F16 = 1u << 2,
    ARTIFACT_STORE_BF16 = 1u << 3,
    ARTIFACT_LAYOUT_NHWC = 1u << 4,
    ARTIFACT_KNOWN_FLAGS = 31u,
};

// Compile flags: the orch compile options that shaped the selection and are not otherwise in the
// artefact, for readers (orch info, orch run); loading does not act on them. Zero: every option
// at its default. ARTIFACT_COMPILE_NO_MLP_CHAINS / _NO_ATTENTION: --no-mlp-chains /
// --no-attention (no MLP chain / fused attention candidates were offered). _LAYOUT_NCHW /
// _LAYOUT_NHWC: --layout nchw / nhwc (no channels-last layouts / channels-last layouts even
// without cuDNN; under half storage only, whether any were made is ARTIFACT_LAYOUT_NHWC).
// _STRICT: --strict (every kernel of the plan is generated; no interpreter runs any).
enum {
    ARTIFACT_COMPILE_NO_MLP_CHAINS = 1u << 0,
    ARTIFACT_COMPILE_NO_ATTENTION = 1u << 1,
    ARTIFACT_COMPILE_LAYOUT_NCHW = 1u << 2,
    ARTIFACT_COMPILE_LAYOUT_NHWC = 1u << 3,
    ARTIFACT_COMPILE_STRICT = 1u << 4,
    ARTIFACT_COMPILE_KNOWN_FLAGS = 31u,
};

typedef struct ArtifactHeader {
    uint32_t format_version; // read: the file's; write: ignored (ARTIFACT_FORMAT_VERSION)
    char orch_version[32];   // ORCH_VERSION of the build that compiled it
    char target[16];         // "cpu", "cuda"
    char precision[8];       // linear kernels' arithmetic: "fp32" (empty on write: fp32), "tf32",
                             // "fp16", "bf16" (orch compile --precision)
    char fingerprint[512];   // HwInfo.fingerprint of the machine it was compiled for
    uint64_t model_hash;     // artifact_hash(onnx bytes)
    char input_shapes[ARTIFACT_MAX_SHAPES]; // every graph input's shape, parse_input_shapes form
    // Under fp16 storage: the tensors pass_store_reduced kept float32 for their range
    // (storage_wide_format's ids; empty: none), replayed when loading.
    char wide_tensors[ARTIFACT_MAX_WIDE];
    uint32_t load_flags;                    // ARTIFACT_* flags above
    uint32_t compile_flags;                 // ARTIFACT_COMPILE_* flags above
    int threads;                            // OpenMP threads it was tuned with (0: all cores)
    int kernels;              // kernels of the selection (Plan.n_kernels; copies excluded)
    double predicted_seconds; // the selection's predicted time
} ArtifactHeader;

// One shape set's plan: the header fields that differ per plan, and its sections.
typedef struct ArtifactPlan {
    char input_shapes[ARTIFACT_MAX_SHAPES];
    char wide_tensors[ARTIFACT_MAX_WIDE];
    uint32_t load_flags;
    int kernels;
    double predicted_seconds;
    const uint8_t *plan, *so;
    size_t plan_size, so_size;
    // The module's source (format 6 on; the C target's translation unit, NUL not included):
    // empty where the target keeps none or the file is older.
    const uint8_t *src;
    size_t src_size;
} ArtifactPlan;

// The file's bytes, reference-counted: a session that uses weights in place keeps them
// (artifact_file_retain) after the contents are freed.
typedef struct ArtifactFile ArtifactFile;

// h, plan, so and src describe the first plan (every reader of a one-plan artefact uses them);
// plans[0..n_plans) all of them, in the order they were compiled.
typedef struct ArtifactContents {
    char *path; // the file (or the name given for memory), for messages
    ArtifactHeader h;
    uint8_t *data; // the whole file (file's); the sections point into it
    size_t size;
    bool mapped; // data is a private mapping of the file (artifact_read of a large file)
    ArtifactFile *file; // one reference, dropped by artifact_contents_free
    const uint8_t *onnx, *plan, *so, *src;
    size_t onnx_size, plan_size, so_size, src_size;
    // The weights section whole (NULL and 0 where empty or older than format 7), and its payload:
    // what ONNX_WEIGHTS_LOCATION offsets count from (LoadOptions.weights).
    const uint8_t *weights_section, *weights;
    size_t weights_section_size, weights_size;
    int n_plans;
    ArtifactPlan *plans; // owned
} ArtifactContents;

// A reference to a's bytes (NULL where a has none), valid until artifact_file_release; thread-safe.
ArtifactFile *artifact_file_retain(const ArtifactContents *a);
void artifact_file_release(ArtifactFile *f); // accepts NULL
// Gives the whole pages of [p, p + n) back to the system where a's file is mapped and the range
// lies in its weights (a no-op otherwise): a session calls it for weights it has copied (packed,
// reordered, uploaded) rather than used in place. The bytes stay readable: touched again, they
// are read from the file.
void artifact_release_weights(const ArtifactContents *a, const void *p, size_t n);
// The weights index's per-tensor checksums as content hashes (plan_read's known; malloc'd into
// *out, sorted by address); returns their count. The section checksum covers them: a plan read
// with them does not read the weights.
int artifact_weights_hashes(const ArtifactContents *a, PlanKnownHash **out);
// Whether p points into a's weights payload (a constant imported in place).
bool artifact_in_weights(const ArtifactContents *a, const void *p);
// The weights section for the payload and the tensors onnx_split_weights moved into it
// (malloc'd into *out); ST_RUNTIME when memory runs out.
int artifact_weights_section(const uint8_t *payload, size_t payload_size,
                             const OnnxWeightRef *refs, int n, uint8_t **out, size_t *out_size);
// The header's model hash: the ONNX section's hash, combined with the weights section's where
// that is not empty.
uint64_t artifact_model_hash(const void *onnx, size_t onnx_size, const void *weights,
                             size_t weights_size);

// Gives the pages of the model section back to the system where data maps the file (a no-op
// otherwise): a session that has imported the model does not read it again (before format 7 the
// section held the weights, unpacked by the import beside it). The section stays readable: a
// later reader (the next plan's import) has its pages read from the file again.
void artifact_release_model(const ArtifactContents *a);
// Test hook: artifact_read maps files of at least `bytes` (<= 0: the default, 1 MiB).
void artifact_set_map_threshold(int64_t bytes);

// The compile flags as the orch compile options that set them ("--no-mlp-chains --layout
// nchw"; "" for none) into buf.
void artifact_compile_flags_text(uint32_t compile_flags, char *buf, size_t n);

// The 64-bit hash the header's model hash and the checksums use.
uint64_t artifact_hash(const void *data, size_t n);

// Writes path.tmp.XXXXXX next to path, syncs it and renames it over path (atomic: a reader sees
// the old file or the new one, never a part). so may be empty (no generated kernels); the source
// and weights sections are empty (artifact_write_plans writes them).
int artifact_write(const char *path, const ArtifactHeader *h, const void *onnx, size_t onnx_size,
                   const void *plan, size_t plan_size, const void *so, size_t so_size, Err *e);

// Several shape sets' plans into one artefact: h's shared fields (its per-plan fields are
// ignored), the ONNX bytes and the weights section (artifact_weights_section; may be empty) once,
// plans[0..n) with their sections (1 <= n <= ARTIFACT_MAX_PLANS; their input shapes distinct).
// h->model_hash must be artifact_model_hash of the two. Atomic as artifact_write.
int artifact_write_plans(const char *path, const ArtifactHeader *h, const void *onnx,
                         size_t onnx_size, const void *weights, size_t weights_size,
                         const ArtifactPlan *plans, int n, Err *e);

// A view of plan k of a as a one-plan artefact (*view's header and sections those of plan k;
// view->plans NULL): it borrows a's bytes, so it must not be freed and must not outlive a.
void artifact_plan_view(const ArtifactContents *a, int k, ArtifactContents *view);

// Reads and validates the file: magic, format version, sizes, checksums. On success *out owns
// the bytes (free with artifact_contents_free). A mapped file's weights section is read-only, and
// its pages are given back once checked (touched again, they are read from the file).
int artifact_read(const char *path, ArtifactContents *out, Err *e);
// Whether path is for artifact_read rather than the ONNX reader: it starts with the artefact's
// magic, or it is named *.orch and too short to hold the magic (empty, or cut before it), which
// the artefact reader reports as such where the ONNX reader could only say "not a model".
bool artifact_probe(const char *path);
// The same from memory; data is copied. name is used in messages.
int artifact_read_memory(const void *data, size_t size, const char *name, ArtifactContents *out,
                         Err *e);
void artifact_contents_free(ArtifactContents *a); // accepts NULL and zeroed contents

#endif
