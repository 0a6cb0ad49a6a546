// The compile-side commands of the CLI: `orch compile` (cmd_compile.c) and `orch bench`
// (cmd_bench.c), which compiles an ONNX model first when given one.
#ifndef ORCH_CMD_COMPILE_H
#define ORCH_CMD_COMPILE_H

#include "../compile/compile.h"

// Parses compile's flags (bench shares them); out_required: -o must be given.
int cli_compile_args(int argc, char **argv, CompileOptions *o, const char **model,
                     const char **out, bool *quiet, bool out_required);
int cli_compile_main(int argc, char **argv);

#endif
