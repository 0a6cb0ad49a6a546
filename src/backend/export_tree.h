// What orch export's source trees share whatever the target (docs/export.md): opening a plan for
// export (import, refusals, packed constants, the folder), the weights file's checksum and the
// code model_init reads it with, C spellings of ONNX names, model.h, the tensor tables, the
// runner main.c, and writing the files. Each target's exporter (export_cpu.c, export_cuda.c)
// writes its own model source and Makefile around these.
// Needs: a one-plan view of an artefact (artifact_plan_view). Guarantees: export_open refuses,
// naming the launch, op and ONNX nodes, a plan with a launch on orch's interpreters, and an
// artefact whose generated kernels came without their source; nothing is written before it
// succeeds.
#ifndef ORCH_EXPORT_TREE_H
#define ORCH_EXPORT_TREE_H

#include "../base/strbuf.h"
#include "../plan/artifact.h"
#include "../plan/plan.h"

#include <stdio.h>

// One plan opened for export.
typedef struct ExportPlan {
    const char *path; // the artefact's, for messages
    Graph *g;
    PrimGraph *pg;
    Plan *P;
    uint8_t *blob;  // the constants as the sessions pack them (P->const_bytes, 64-byte aligned)
    bool generated; // some launch runs a generated kernel (the artefact's source is needed)
} ExportPlan;

// Imports the plan of a, refuses what no tree can run (interpreted launches; generated kernels
// without the artefact's source) and packs the constants. export_close frees what it made (also
// after a failure).
int export_open(const ArtifactContents *a, ExportPlan *x, Err *e);
void export_close(ExportPlan *x);
// Makes dir a folder for the tree (created if missing).
int export_make_dir(const char *dir, Err *e);

// The hash model_init checks weights.bin against (64-bit FNV-1a).
uint64_t export_fnv1a64(const uint8_t *p, size_t n);
// s as a C string literal; as the text of a // comment (one line, at most 160 characters).
void export_c_string(StrBuf *b, const char *s);
void export_c_comment(StrBuf *b, const char *s);
// A launch's ONNX nodes, ", "-separated (malloc'd).
char *export_nodes_text(const PlanLaunch *L);
// Whether every output of L is empty (nothing to compute).
bool export_launch_empty(const PrimGraph *pg, const PlanLaunch *L);

// model.h: the API every tree has; extra (NULL: none) is one more declaration line.
void export_model_h(StrBuf *b, const char *extra);
// The first lines of the model source: which artefact and shapes, what follows (`what`, one or
// more comment lines without the leading "// ").
void export_model_intro(StrBuf *b, const ArtifactContents *a, const char *what);
// model_num_inputs / model_num_outputs and the model_inputs / model_outputs tables.
void export_tensor_tables(StrBuf *b, const PrimGraph *pg);
// The defines WEIGHTS_BYTES and WEIGHTS_FNV1A, and a function
//     static const char *read_weights(const char *path, uint8_t *buf)
// that reads the file into buf (WEIGHTS_BYTES) and checks its size and checksum: NULL, or why not.
void export_read_weights(StrBuf *b, const ExportPlan *x);
// The runner (main.c): ./model [-r N] WEIGHTS IN... OUT...
extern const char export_main_c[];

// One file of a tree: its name in the folder and its bytes.
typedef struct ExportFile {
    const char *name;
    const void *data;
    size_t size;
} ExportFile;
// Writes the files into dir in order (each a regular file or none before: file_check_output's
// rule); the first failure stops it.
int export_write_files(const char *dir, const ExportFile *files, int n, Err *e);

#endif
