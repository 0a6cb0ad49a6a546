// Reading user files: regular files only, a size limit checked before reading, errors that
// name the path.
#ifndef ORCH_FILE_H
#define ORCH_FILE_H

#include "common.h"

// Reads the whole file into a malloc'd buffer (*data, *size); fails with ST_INVALID when it
// cannot be opened, is not a regular file or is larger than max bytes.
int file_read_all(const char *path, int64_t max, uint8_t **data, size_t *size, Err *e);

#endif
