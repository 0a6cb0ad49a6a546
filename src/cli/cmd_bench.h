// `orch bench`: latency and per-kernel report of a compiled model (cmd_bench.c).
#ifndef ORCH_CMD_BENCH_H
#define ORCH_CMD_BENCH_H

int cli_bench_main(int argc, char **argv);

#endif
