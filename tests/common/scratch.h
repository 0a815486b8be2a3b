/* SPDX-License-Identifier: MIT */
/* A scratch folder per test process: <$ZT_TEST_TMPDIR or /tmp>/<name>-<pid>. */
#ifndef ZT_TESTS_SCRATCH_H
#define ZT_TESTS_SCRATCH_H

#include <stddef.h>

/* Writes the folder's path into dir and creates it (an existing one is reused). */
void scratch_make(const char *name, char *dir, size_t len);
/* Removes the folder and everything in it; 0 on success. */
int scratch_remove(const char *dir);

#endif
