// `orch db stats|check|clear|merge|export|import`: the profile database from the command line
// (see cmd_db.c).
#ifndef ORCH_CLI_CMD_DB_H
#define ORCH_CLI_CMD_DB_H

// argv[0] is "db". Returns the exit status (ST_* from base/common.h).
int cli_db_main(int argc, char **argv);

#endif
