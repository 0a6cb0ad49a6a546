// User files: read only when they are regular files (opened without blocking, so a FIFO or a
// device cannot hang orch), a size limit checked before reading; outputs written only as regular
// files and never over an input of the same command; errors that name the path.
#ifndef ORCH_FILE_H
#define ORCH_FILE_H

#include "common.h"

#include <stdio.h>

// Reads the whole file into a malloc'd buffer (*data, *size); fails with ST_INVALID when it
// cannot be opened, is not a regular file or is larger than max bytes.
int file_read_all(const char *path, int64_t max, uint8_t **data, size_t *size, Err *e);

// Opens path for reading ("rb") when it is a regular file: the open itself does not block (a
// FIFO with no writer), and anything else is refused. NULL with e set (ST_INVALID) otherwise.
FILE *file_open_regular(const char *path, Err *e);

// Whether path may receive an output of a command whose inputs are inputs[0..n): it does not
// exist, or is a regular file (not a symlink, device, FIFO or directory, which orch never writes
// through or replaces) that is none of the inputs; and its folder exists. ST_USAGE with e set
// otherwise.
int file_check_output(const char *path, const char *const *inputs, int n, Err *e);

#endif
