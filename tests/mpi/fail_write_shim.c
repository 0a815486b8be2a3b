/* SPDX-License-Identifier: MIT */
/* LD_PRELOAD module for save_failure.sh: fwrite, write and pwrite (the thread-pool I/O
 * engine's; the test runs with ztier.io_engine "threads") to a file whose path contains
 * $ZT_FAIL_WRITE_MATCH fail with ENOSPC, as on a full disk, in this process only (the test
 * sets the variable for one rank). Everything else goes to the C library. */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <dlfcn.h>
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define SHIM __attribute__((visibility("default")))

static int matches(int fd)
{
    const char *want = getenv("ZT_FAIL_WRITE_MATCH");
    char link[64], path[PATH_MAX];
    if (!want || !*want || fd < 0)
        return 0;
    snprintf(link, sizeof link, "/proc/self/fd/%d", fd);
    ssize_t n = readlink(link, path, sizeof path - 1);
    if (n <= 0)
        return 0;
    path[n] = '\0';
    return strstr(path, want) != NULL;
}

SHIM size_t fwrite(const void *p, size_t size, size_t n, FILE *f)
{
    static size_t (*real)(const void *, size_t, size_t, FILE *);
    if (!real)
        real = (size_t(*)(const void *, size_t, size_t, FILE *))dlsym(RTLD_NEXT, "fwrite");
    if (size && n && matches(fileno(f))) {
        errno = ENOSPC;
        return 0;
    }
    return real(p, size, n, f);
}

SHIM ssize_t pwrite(int fd, const void *p, size_t n, off_t at)
{
    static ssize_t (*real)(int, const void *, size_t, off_t);
    if (!real)
        real = (ssize_t(*)(int, const void *, size_t, off_t))dlsym(RTLD_NEXT, "pwrite");
    if (n && matches(fd)) {
        errno = ENOSPC;
        return -1;
    }
    return real(fd, p, n, at);
}

SHIM ssize_t pwrite64(int fd, const void *p, size_t n, off_t at)
{
    static ssize_t (*real)(int, const void *, size_t, off_t);
    if (!real)
        real = (ssize_t(*)(int, const void *, size_t, off_t))dlsym(RTLD_NEXT, "pwrite64");
    if (n && matches(fd)) {
        errno = ENOSPC;
        return -1;
    }
    return real(fd, p, n, at);
}

SHIM ssize_t write(int fd, const void *p, size_t n)
{
    static ssize_t (*real)(int, const void *, size_t);
    if (!real)
        real = (ssize_t(*)(int, const void *, size_t))dlsym(RTLD_NEXT, "write");
    if (n && matches(fd)) {
        errno = ENOSPC;
        return -1;
    }
    return real(fd, p, n);
}
