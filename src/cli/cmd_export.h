// `orch export MODEL.orch DIR`: an artefact's plan as a standalone source tree (cmd_export.c).
#ifndef ORCH_CMD_EXPORT_H
#define ORCH_CMD_EXPORT_H

int cli_export_main(int argc, char **argv);

#endif
