/* SPDX-License-Identifier: MIT */
#include "scratch.h"

#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

void scratch_make(const char *name, char *dir, size_t len)
{
    const char *base = getenv("ZT_TEST_TMPDIR") ? getenv("ZT_TEST_TMPDIR") : "/tmp";
    snprintf(dir, len, "%s/%s-%d", base, name, (int)getpid());
    mkdir(dir, 0755);
}

int scratch_remove(const char *dir)
{
    char cmd[1200];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    return system(cmd) == 0 ? 0 : -1;
}
