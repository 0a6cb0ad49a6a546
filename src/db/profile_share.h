// Sharing profile databases between machines: merging another database file, and exporting and
// importing the measurements as JSON lines (the format is docs/profile-db.md's, version
// PDB_EXPORT_VERSION), so a fleet tunes once. Rows keep their keys (signature, target, device
// fingerprint, config text with the code's hash), so a row only ever serves the device and the
// code it timed; pdb_merge_row's rule decides between two rows of one key.
// Needs: open databases (profile_db.h). Guarantees: an import reads and checks the whole file
// before it writes anything, and refuses a newer format or a malformed line naming the line.
#ifndef ORCH_PROFILE_SHARE_H
#define ORCH_PROFILE_SHARE_H

#include "profile_db.h"

#define PDB_EXPORT_VERSION 1

typedef struct PdbShareStats {
    int64_t rows;                  // measurement rows read from the other side
    int64_t added, replaced, kept; // what pdb_merge_row did with them
    int64_t values, values_added;  // device constants read / added
} PdbShareStats;

// Writes every finished measurement and device constant of db to f (pdb_each_row's rows).
int pdb_export(ProfileDb *db, FILE *f, PdbShareStats *st, Err *e);
// Merges the JSON lines of path (name: how messages call it) into db, in transactions of a few
// hundred rows.
int pdb_import(ProfileDb *db, const char *path, PdbShareStats *st, Err *e);
// Merges the rows of other (opened read-only) into db.
int pdb_merge(ProfileDb *db, ProfileDb *other, PdbShareStats *st, Err *e);

#endif
