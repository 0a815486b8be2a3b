/* SPDX-License-Identifier: MIT */
/* The machine's cost of touching fresh memory, apart from ztier: maps N bytes (anonymous, huge
 * pages advised as the host tier does), writes every byte once in one thread (the first touch:
 * the kernel, and on a VM maybe the hypervisor, backs each page), then once more (the pages
 * now backed: the memory's own speed). bench/checkpoints.sh runs it after dropping the page
 * cache, beside the resume, so the reader sees which part of a slow start is the machine's.
 *   first_touch <bytes>      prints: first_touch_gbps=<first pass> rewrite_gbps=<second pass>
 */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

int main(int argc, char **argv)
{
    unsigned long long n = argc > 1 ? strtoull(argv[1], NULL, 10) : 0;
    if (n == 0) {
        fprintf(stderr, "usage: first_touch <bytes>\n");
        return 2;
    }
    char *p = mmap(NULL, n, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED) {
        perror("first_touch: mmap");
        return 1;
    }
    (void)madvise(p, n, MADV_HUGEPAGE);
    double t0 = now_s();
    memset(p, 1, n);
    double t1 = now_s();
    memset(p, 2, n);
    double t2 = now_s();
    printf("first_touch_gbps=%.3f rewrite_gbps=%.3f bytes=%llu\n", (double)n / (t1 - t0) / 1e9,
           (double)n / (t2 - t1) / 1e9, n);
    return p[n - 1] == 2 ? 0 : 1;
}
