// ONNX import: ModelProto (parsed by protobuf-c code generated from the official onnx.proto) into
// a Graph. Needs nothing; guarantees a graph in topological order whose every tensor name is
// defined, constants (initializers, Constant nodes) loaded with data, graph inputs bound to
// static shapes. Shapes of computed tensors come later from graph_infer_and_fold().
#ifndef ORCH_ONNX_LOAD_H
#define ORCH_ONNX_LOAD_H

#include "../ir/graph.h"

#define ORCH_MIN_OPSET 11
#define ORCH_MAX_OPSET 21

// A binding of a graph input's shape, from --input-shapes name:1x3x224x224.
typedef struct InputShape {
    const char *name;
    int rank;
    int64_t dims[ORCH_MAX_RANK];
    const char *source; // where the binding came from, for messages; NULL: "--input-shapes"
} InputShape;

// The symbolic dimensions of graph inputs a load left unbound (orch info describes a model
// without binding them): each one's input, axis and symbol ("?" where the model names none).
#define LOAD_MAX_SYMBOLS 64
typedef struct LoadSymbols {
    int n;
    struct {
        char input[128], name[128];
        int axis;
    } s[LOAD_MAX_SYMBOLS];
} LoadSymbols;

// The location an orch artefact's ONNX section gives initializers whose bytes lie in its weights
// section (external data with offset and length into that section's payload, each offset a
// multiple of ONNX_WEIGHTS_ALIGN).
#define ONNX_WEIGHTS_LOCATION "orch:weights"
#define ONNX_WEIGHTS_ALIGN 64

// weights: an artefact's weights payload (ONNX_WEIGHTS_LOCATION references resolve into it, in
// place: the graph borrows those bytes, which must outlive it); NULL: such references are errors.
// weights_mapped: they are a private read-only mapping of a file, whose pages may be given back
// (graph_release_borrowed).
typedef struct LoadOptions {
    const InputShape *shapes;
    int n_shapes;
    const uint8_t *weights;
    size_t weights_size;
    bool weights_mapped;
} LoadOptions;

// Loads a model file. External data is read relative to the file's folder.
int onnx_load_file(const char *path, const LoadOptions *opt, Graph **out, Err *e);
// As onnx_load_file, but a symbolic dimension of a graph input that no binding gives is taken as
// 1 (so that the graph's other shapes can be inferred) and recorded in *symbols instead of being
// an error (orch info describes such a model without binding it).
int onnx_load_file_symbols(const char *path, const LoadOptions *opt, LoadSymbols *symbols,
                           Graph **out, Err *e);
// Loads from memory; `name` is used in messages, `base_dir` for external data (NULL: none allowed).
int onnx_load_memory(const void *data, size_t size, const char *name, const char *base_dir,
                     const LoadOptions *opt, Graph **out, Err *e);

// Returns in *out (malloc'd) the model with every external-data initializer read (from base_dir,
// as the loader reads them) and stored inline, so the bytes are self-contained; *out stays NULL
// when the model has no external data.
int onnx_inline_external_data(const void *data, size_t size, const char *name,
                              const char *base_dir, uint8_t **out, size_t *out_size, Err *e);

// Moves the raw payload of every graph initializer (the main graph's and its bodies') of at least
// min_bytes into *weights (malloc'd, each payload at a multiple of ONNX_WEIGHTS_ALIGN, the gaps
// zero) and returns in *out (malloc'd) the model with those initializers referring to it
// (ONNX_WEIGHTS_LOCATION, offset, length). refs receives, per moved tensor in payload order, its
// name (malloc'd), offset and length. *out stays NULL when nothing moves.
typedef struct OnnxWeightRef {
    char *name;
    uint64_t offset, length;
} OnnxWeightRef;
int onnx_split_weights(const void *data, size_t size, const char *name, size_t min_bytes,
                       uint8_t **out, size_t *out_size, uint8_t **weights, size_t *weights_size,
                       OnnxWeightRef **refs, int *n_refs, Err *e);
void onnx_weight_refs_free(OnnxWeightRef *refs, int n);

// Reads a serialized TensorProto file (ONNX test data *.pb): dtype, shape and a malloc'd copy
// of the data (little-endian, row-major). The caller frees *data.
int onnx_read_tensor_file(const char *path, DType *dtype, int *rank, int64_t *dims, void **data,
                          Err *e);

// Parses "a:1x3x224x224,b:1x128" (several may be given) into shapes; names point into spec.
int parse_input_shapes(char *spec, InputShape *shapes, int max, int *count, Err *e);

#endif
