/* SPDX-License-Identifier: MIT */
/* The machine's cost of touching fresh memory, apart from ztier: maps N bytes (anonymous, huge
 * pages advised as the host tier does), writes every byte once in one thread (the first touch:
 * the kernel, and on a VM maybe the hypervisor, backs each page), then once more (the pages
 * now backed: the memory's own speed). Then it frees them and at once maps and touches N bytes
 * again (the kernel hands back the pages just freed), frees those and, 4 s later, does it a
 * third time. On a VM whose balloon reports free pages to the host (virtio-balloon's free page
 * reporting), pages free for about 2 s are given back to the host and the next touch of each
 * waits for the host to back it again: the third touch is then as slow as the first and the
 * second fast. bench/checkpoints.sh runs it after dropping the page cache, beside the resume,
 * so the reader sees which part of a slow start is the machine's.
 *   first_touch <bytes>   prints: first_touch_gbps=<first pass> rewrite_gbps=<second pass>
 *                                 refreed_gbps=<pages freed just before> after_4s_gbps=<...>
 */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static char *map(unsigned long long n)
{
    char *p = mmap(NULL, n, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED) {
        perror("first_touch: mmap");
        exit(1);
    }
    (void)madvise(p, n, MADV_HUGEPAGE);
    return p;
}

/* GB/s of one pass writing c over [p, p + n) */
static double pass(char *p, unsigned long long n, int c)
{
    double t0 = now_s();
    memset(p, c, n);
    double t = now_s() - t0;
    if (p[n - 1] != (char)c)
        exit(1);
    return (double)n / t / 1e9;
}

/* GB/s of the first touch of n freshly mapped bytes, unmapped after */
static double fresh(unsigned long long n)
{
    char *p = map(n);
    double g = pass(p, n, 3);
    munmap(p, n);
    return g;
}

int main(int argc, char **argv)
{
    unsigned long long n = argc > 1 ? strtoull(argv[1], NULL, 10) : 0;
    if (n == 0) {
        fprintf(stderr, "usage: first_touch <bytes>\n");
        return 2;
    }
    char *p = map(n);
    double first = pass(p, n, 1), rewrite = pass(p, n, 2);
    munmap(p, n);
    double refreed = fresh(n);
    sleep(4);
    double later = fresh(n);
    printf(
        "first_touch_gbps=%.3f rewrite_gbps=%.3f refreed_gbps=%.3f after_4s_gbps=%.3f bytes=%llu\n",
        first, rewrite, refreed, later, n);
    return 0;
}
