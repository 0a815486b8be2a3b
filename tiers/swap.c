/* SPDX-License-Identifier: MIT */
/* NVMe swap space (see nvme.h). Block b of the space lives in folder b % n_paths at file
 * offset (b / n_paths) * block_size, so every large transfer is spread over all folders.
 *
 * Buffers the caller registers (zt_swap_register_buffers) are used with fixed reads and
 * writes; any other buffer works through plain O_DIRECT reads and writes. */
#include "tiers/swap.h"
#include "core/align.h"
#include "core/time.h"
#include "core/trace.h"
#include "core/log.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <time.h>
#include <unistd.h>
#include <zlib.h>

typedef struct swap_file {
    char path[ZT_PATH_MAX + 64];
    char lock_path[ZT_PATH_MAX + 64];
    int fd, lock_fd;
} swap_file;

struct zt_swap {
    zt_swap_config cfg;
    swap_file files[ZT_MAX_NVME_PATHS];
    int fds[ZT_MAX_NVME_PATHS];
    int n_files;
    uint64_t total_blocks, next_block;
    const zt_io_iface *engine_iface;
    zt_io_engine *engine;
    uint32_t *crc, *crc_len; /* per block, with verify_checksums */
    pthread_mutex_t lock;
    pthread_cond_t done;
    int inflight;
    zt_swap_stats stats;
};

uint64_t zt_swap_footprint(uint64_t bytes, uint64_t block_size)
{
    uint64_t blocks = (bytes + block_size - 1) / block_size;
    return (blocks ? blocks : 1) * block_size;
}

/* ---- files and locks ---- */

static zt_status check_folder(const char *dir, zt_error *err)
{
    struct stat sb;
    char q[ZT_QUOTE_MAX];
    if (stat(dir, &sb) != 0)
        return ZT_ERR(err, ZT_ERR_CONFIG,
                      "NVMe swap folder %s cannot be used: %s; create it, or set nvme_path to "
                      "a folder on a fast local disk",
                      zt_text_quote(q, sizeof q, dir, '\''), strerror(errno));
    if (!S_ISDIR(sb.st_mode))
        return ZT_ERR(err, ZT_ERR_CONFIG,
                      "NVMe swap path %s is not a folder; nvme_path must name a folder",
                      zt_text_quote(q, sizeof q, dir, '\''));
    return ZT_OK;
}

static void name_files(swap_file *f, const char *dir, const zt_swap_config *cfg)
{
    snprintf(f->path, sizeof f->path, "%s/ztier-%s-r%d.swap", dir, cfg->tag, cfg->rank);
    snprintf(f->lock_path, sizeof f->lock_path, "%s/ztier-%s-r%d.lock", dir, cfg->tag, cfg->rank);
}

/* The pid the lock holder wrote, or -1 where it has not written it yet (it takes the lock
 * first) or the file holds something else. */
static long read_lock_pid(int fd)
{
    char text[32];
    ssize_t n = pread(fd, text, sizeof text - 1, 0);
    if (n <= 0)
        return -1;
    text[n] = '\0';
    char *end = NULL;
    long pid = strtol(text, &end, 10);
    while (end && (*end == '\n' || *end == ' ' || *end == '\t' || *end == '\r'))
        end++;
    return end != text && end && *end == '\0' && pid > 0 ? pid : -1;
}

/* Whether this process has the lock file open through a descriptor other than fd, i.e. the
 * lock is held by another ztier runtime of this process. The recorded pid alone cannot tell:
 * a process in another PID namespace (a container sharing the folder) may have our number.
 * -1 where /proc is not mounted. */
static int lock_held_here(int fd)
{
    struct stat mine, sb;
    DIR *d = opendir("/proc/self/fd");
    if (!d)
        return -1;
    int found = fstat(fd, &mine) == 0 ? 0 : -1;
    for (struct dirent *e; found == 0 && (e = readdir(d));) {
        int other = atoi(e->d_name);
        found = e->d_name[0] != '.' && other != fd && other != dirfd(d) && fstat(other, &sb) == 0 &&
                sb.st_dev == mine.st_dev && sb.st_ino == mine.st_ino;
    }
    closedir(d);
    return found;
}

/* The lock is taken: says who holds it, so the user knows which run to stop or move. */
static zt_status lock_conflict(const swap_file *f, const char *dir, zt_error *err)
{
    long pid = read_lock_pid(f->lock_fd);
    int here = lock_held_here(f->lock_fd);
    if (here < 0)
        here = pid == (long)getpid();
    if (here)
        return ZT_ERR(err, ZT_ERR_CONFIG,
                      "NVMe swap folder '%s' is in use by another ztier runtime in this process: "
                      "destroy the first runtime before creating the next, or give each its own "
                      "nvme_path",
                      dir);
    if (pid < 0)
        return ZT_ERR(err, ZT_ERR_CONFIG,
                      "NVMe swap folder '%s' is in use by another ztier process (its pid could "
                      "not be read from '%s'): give each run its own nvme_path",
                      dir, f->lock_path);
    return ZT_ERR(err, ZT_ERR_CONFIG,
                  "NVMe swap folder '%s' is in use by another ztier process (pid %ld%s): give "
                  "each run its own nvme_path",
                  dir, pid,
                  pid == (long)getpid() ? " in another PID namespace, such as another container"
                                        : "");
}

static zt_status take_lock(swap_file *f, const char *dir, zt_error *err)
{
    char q[ZT_QUOTE_MAX];
    f->lock_fd = open(f->lock_path, O_RDWR | O_CREAT | O_CLOEXEC, 0644);
    if (f->lock_fd < 0)
        return ZT_ERR(err, errno == EROFS || errno == EACCES ? ZT_ERR_CONFIG : ZT_ERR_IO,
                      "NVMe swap folder %s is not writable (%s): point nvme_path to a "
                      "writable folder",
                      zt_text_quote(q, sizeof q, dir, '\''), strerror(errno));
    if (flock(f->lock_fd, LOCK_EX | LOCK_NB) != 0) {
        zt_status st = lock_conflict(f, dir, err);
        close(f->lock_fd);
        f->lock_fd = -1;
        return st;
    }
    char pid[32];
    int len = snprintf(pid, sizeof pid, "%ld\n", (long)getpid());
    if (ftruncate(f->lock_fd, 0) != 0 || pwrite(f->lock_fd, pid, (size_t)len, 0) != len)
        ZT_LOGD("nvme", "could not record the pid in %s", f->lock_path);
    return ZT_OK;
}

/* With our lock granted, a swap file of our name was left by a run of this tag and rank that
 * died before its destroy (kill -9, the OOM killer): nobody else can own it, and it would be
 * truncated anyway, so its space is given back before the space check counts it as used.
 * Truncating frees the blocks even while a dead process's io_uring still holds the file;
 * removing the name keeps "a failure leaves nothing behind". */
static void reclaim_stale_swap(const swap_file *f)
{
    struct stat sb;
    if (lstat(f->path, &sb) != 0 || !S_ISREG(sb.st_mode))
        return; /* none; anything else is left for open_swap_file to report */
    if (truncate(f->path, 0) != 0 || unlink(f->path) != 0) {
        ZT_LOGD("nvme", "could not reclaim stale swap file %s: %s", f->path, strerror(errno));
        return;
    }
    ZT_LOGI("nvme",
            "reclaimed stale swap file '%s' (%llu bytes) left by an earlier run that did "
            "not shut down",
            f->path, (unsigned long long)sb.st_blocks * 512);
}

static int is_swap_name(const char *name)
{
    size_t len = strlen(name);
    return strncmp(name, "ztier-", 6) == 0 && len > 11 && strcmp(name + len - 5, ".swap") == 0;
}

/* The swap files this process has open (device and inode): live for certain, so never
 * counted among the other swap files whose space may be free. */
#define ZT_OWN_SWAP_MAX 256
static pthread_mutex_t own_lock = PTHREAD_MUTEX_INITIALIZER;
static struct {
    dev_t dev;
    ino_t ino;
} own_files[ZT_OWN_SWAP_MAX];
static int n_own_files;

static void own_add(int fd)
{
    struct stat sb;
    if (fstat(fd, &sb) != 0)
        return;
    pthread_mutex_lock(&own_lock);
    if (n_own_files < ZT_OWN_SWAP_MAX)
        own_files[n_own_files].dev = sb.st_dev, own_files[n_own_files++].ino = sb.st_ino;
    pthread_mutex_unlock(&own_lock);
}

static void own_remove(int fd)
{
    struct stat sb;
    if (fstat(fd, &sb) != 0)
        return;
    pthread_mutex_lock(&own_lock);
    for (int i = 0; i < n_own_files; i++)
        if (own_files[i].dev == sb.st_dev && own_files[i].ino == sb.st_ino) {
            own_files[i] = own_files[--n_own_files];
            break;
        }
    pthread_mutex_unlock(&own_lock);
}

static int is_own(const struct stat *sb)
{
    int found = 0;
    pthread_mutex_lock(&own_lock);
    for (int i = 0; i < n_own_files && !found; i++)
        found = own_files[i].dev == sb->st_dev && own_files[i].ino == sb->st_ino;
    pthread_mutex_unlock(&own_lock);
    return found;
}

/* Bytes held by other ztier swap files in the folder: other tags or ranks, live or left by a
 * killed run; not this process's own. Their locks are not tried, as holding one even briefly
 * would make a rank that is starting up fail with "in use"; so whether this space is free is
 * not known. */
static uint64_t other_swap_bytes(const char *dir)
{
    DIR *d = opendir(dir);
    if (!d)
        return 0;
    uint64_t bytes = 0;
    struct stat sb;
    for (struct dirent *e; (e = readdir(d));)
        if (is_swap_name(e->d_name) &&
            fstatat(dirfd(d), e->d_name, &sb, AT_SYMLINK_NOFOLLOW) == 0 && S_ISREG(sb.st_mode) &&
            !is_own(&sb))
            bytes += (uint64_t)sb.st_blocks * 512;
    closedir(d);
    return bytes;
}

/* Free bytes in the folder's filesystem; 0 (false) where it keeps no account (ramfs). */
static int free_bytes(const char *dir, uint64_t *out)
{
    struct statvfs vfs;
    if (statvfs(dir, &vfs) != 0 || vfs.f_blocks == 0)
        return 0;
    *out = (uint64_t)vfs.f_bavail * vfs.f_frsize;
    return 1;
}

/* An early, clear refusal. Other swap files count as free here, since they may be stale; the
 * preallocation is the final judge. */
static zt_status check_space(const char *dir, uint64_t need, zt_error *err)
{
    uint64_t avail = 0;
    if (!free_bytes(dir, &avail))
        return ZT_OK; /* fallocate will tell */
    uint64_t others = other_swap_bytes(dir);
    if (avail + others >= need)
        return ZT_OK;
    char note[160] = "";
    if (others)
        snprintf(note, sizeof note,
                 " (counting the %llu bytes of other ztier swap files there "
                 "as free)",
                 (unsigned long long)others);
    return ZT_ERR(err, ZT_ERR_NOSPACE,
                  "not enough space for the NVMe swap in '%s': %llu bytes needed, %llu free%s; "
                  "free space, add folders to nvme_path, or offload less",
                  dir, (unsigned long long)need, (unsigned long long)(avail + others), note);
}

uint64_t zt_swap_file_bytes(const zt_swap_config *cfg, uint64_t capacity)
{
    uint64_t blocks = (capacity + cfg->block_size - 1) / cfg->block_size;
    uint64_t per_file = (blocks + (uint64_t)cfg->n_paths - 1) / (uint64_t)cfg->n_paths;
    return (per_file ? per_file : 1) * cfg->block_size;
}

/* One filesystem of a run's swap folders: what the run puts there, per swap space. */
typedef struct run_fs {
    dev_t dev;
    const char *dir;  /* its first folder, for the message */
    uint64_t part[8]; /* per need (at most 8) */
    uint64_t others;  /* other ztier swap files in its folders (counted as free) */
} run_fs;

static void describe_parts(const run_fs *fs, const zt_swap_need *needs, int n, int copies,
                           char *out, size_t len)
{
    size_t used = 0;
    out[0] = '\0';
    for (int k = 0; k < n && used < len; k++) {
        if (!fs->part[k])
            continue;
        int w = snprintf(out + used, len - used, "%s%s %llu", used ? " + " : "", needs[k].what,
                         (unsigned long long)fs->part[k]);
        used += w > 0 ? (size_t)w : 0;
    }
    if (used < len && copies > 1)
        snprintf(out + used, len - used, " bytes per rank, %d ranks on this node", copies);
    else if (used < len)
        snprintf(out + used, len - used, " bytes");
}

/* The filesystem of `dir` in fs[0..*n), added when new; NULL where the folder cannot be
 * read (zt_swap_create names that) or a ninth filesystem would be needed. */
static run_fs *fs_of(run_fs *fs, int *n, int cap, const char *dir)
{
    struct stat sb;
    if (stat(dir, &sb) != 0)
        return NULL;
    for (int i = 0; i < *n; i++)
        if (fs[i].dev == sb.st_dev)
            return &fs[i];
    if (*n == cap)
        return NULL;
    fs[*n] = (run_fs){.dev = sb.st_dev, .dir = dir};
    return &fs[(*n)++];
}

static int seen_folder(const zt_swap_need *needs, int k, int i)
{
    for (int k2 = 0; k2 <= k; k2++)
        for (int i2 = 0; i2 < (k2 == k ? i : needs[k2].cfg->n_paths); i2++)
            if (!strcmp(needs[k2].cfg->paths[i2], needs[k].cfg->paths[i]))
                return 1;
    return 0;
}

zt_status zt_swap_check_run(const zt_swap_need *needs, int n, int copies, zt_error *err)
{
    enum { CAP = 3 * ZT_MAX_NVME_PATHS };
    run_fs fs[CAP];
    int n_fs = 0;
    n = n < 8 ? n : 8;
    copies = copies > 0 ? copies : 1;
    for (int k = 0; k < n; k++) {
        const zt_swap_config *c = needs[k].cfg;
        if (!needs[k].capacity || c->n_paths < 1 || c->block_size % ZT_PAGE_BYTES || !c->block_size)
            continue; /* nothing to create, or zt_swap_create refuses the configuration */
        uint64_t per_file = zt_swap_file_bytes(c, needs[k].capacity);
        for (int i = 0; i < c->n_paths && i < ZT_MAX_NVME_PATHS; i++) {
            run_fs *f = fs_of(fs, &n_fs, CAP, c->paths[i]);
            if (!f)
                continue;
            f->part[k] += per_file;
            if (!seen_folder(needs, k, i))
                f->others += other_swap_bytes(c->paths[i]);
        }
    }
    for (int j = 0; j < n_fs; j++) {
        uint64_t need = 0, avail = 0;
        for (int k = 0; k < n; k++)
            need += fs[j].part[k] * (uint64_t)copies;
        if (!free_bytes(fs[j].dir, &avail) || avail + fs[j].others >= need)
            continue; /* no account kept (ramfs: the preallocation tells), or enough */
        char parts[320], note[160] = "";
        describe_parts(&fs[j], needs, n, copies, parts, sizeof parts);
        if (fs[j].others)
            snprintf(note, sizeof note,
                     " (counting the %llu bytes of other ztier swap files there as free)",
                     (unsigned long long)fs[j].others);
        return ZT_ERR(err, ZT_ERR_NOSPACE,
                      "not enough space for this run's NVMe swap on the filesystem of '%s': the "
                      "run needs %llu bytes there (%s), %llu free%s; free space, add folders on "
                      "other disks to nvme_path, or offload less",
                      fs[j].dir, (unsigned long long)need, parts,
                      (unsigned long long)(avail + fs[j].others), note);
    }
    return ZT_OK;
}

static zt_status open_swap_file(swap_file *f, const char *dir, const zt_swap_config *cfg,
                                zt_error *err)
{
    f->fd = open(f->path, O_RDWR | O_CREAT | O_TRUNC | O_DIRECT | O_CLOEXEC, 0600);
    if (f->fd < 0 && errno == EINVAL) { /* the filesystem has no O_DIRECT (tmpfs, ...) */
        if (!cfg->allow_buffered) {
            unlink(f->path);
            return ZT_ERR(err, ZT_ERR_UNSUPPORTED,
                          "the filesystem of NVMe swap folder '%s' does not support O_DIRECT; "
                          "use a folder on a local disk, or set ztier.allow_buffered_io to use "
                          "the page cache",
                          dir);
        }
        ZT_LOGW("nvme",
                "'%s' has no O_DIRECT; using buffered I/O as ztier.allow_buffered_io "
                "permits",
                dir);
        f->fd = open(f->path, O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    }
    if (f->fd < 0)
        return ZT_ERR(err, ZT_ERR_IO, "cannot create NVMe swap file '%s': %s", f->path,
                      strerror(errno));
    own_add(f->fd);
    return ZT_OK;
}

/* The no-space failure of the preallocation: check_space let it through counting other swap
 * files as free, so they are named as the likely cause. */
static zt_status no_space(swap_file *f, const char *dir, uint64_t bytes, int rc, zt_error *err)
{
    if (ftruncate(f->fd, 0) != 0) /* give back a partial allocation before measuring */
        ZT_LOGD("nvme", "could not truncate %s: %s", f->path, strerror(errno));
    uint64_t avail = 0, others = other_swap_bytes(dir);
    char free_text[48] = "", note[200] = "";
    if (free_bytes(dir, &avail))
        snprintf(free_text, sizeof free_text, ", %llu free", (unsigned long long)avail);
    if (others)
        snprintf(note, sizeof note,
                 "; other ztier swap files there hold %llu bytes: remove "
                 "those whose run is gone",
                 (unsigned long long)others);
    return ZT_ERR(err, ZT_ERR_NOSPACE,
                  "not enough space for the NVMe swap in '%s': %llu bytes needed%s (%s)%s; free "
                  "space, add folders to nvme_path, or offload less",
                  dir, (unsigned long long)bytes, free_text, strerror(rc), note);
}

static zt_status preallocate(swap_file *f, const char *dir, uint64_t bytes, zt_error *err)
{
    int rc = posix_fallocate(f->fd, 0, (off_t)bytes);
    if (rc == 0)
        return ZT_OK;
    if (rc == ENOSPC || rc == EDQUOT || rc == EFBIG)
        return no_space(f, dir, bytes, rc, err);
    return ZT_ERR(err, ZT_ERR_IO, "preallocating NVMe swap file '%s': %s", f->path, strerror(rc));
}

static void close_file(swap_file *f)
{
    if (f->fd >= 0) {
        own_remove(f->fd);
        close(f->fd);
        unlink(f->path);
    }
    if (f->lock_fd >= 0) {
        unlink(f->lock_path);
        close(f->lock_fd);
    }
    f->fd = f->lock_fd = -1;
}

static zt_status open_folder(zt_swap *sw, int i, uint64_t per_file, zt_error *err)
{
    const char *dir = sw->cfg.paths[i];
    swap_file *f = &sw->files[i];
    f->fd = f->lock_fd = -1;
    name_files(f, dir, &sw->cfg);
    zt_status st = check_folder(dir, err);
    if (st == ZT_OK)
        st = take_lock(f, dir, err);
    if (st == ZT_OK) {
        reclaim_stale_swap(f);
        st = check_space(dir, per_file, err);
    }
    if (st == ZT_OK)
        st = open_swap_file(f, dir, &sw->cfg, err);
    if (st == ZT_OK)
        st = preallocate(f, dir, per_file, err);
    if (st != ZT_OK)
        close_file(f);
    sw->fds[i] = f->fd;
    return st;
}

/* ---- engine ---- */

static zt_status start_engine(zt_swap *sw, zt_error *err)
{
    char why[256] = "";
    int threads = sw->cfg.threads > 0 ? sw->cfg.threads : 1;
    if (sw->cfg.engine != ZT_IO_ENGINE_THREADS) {
        int rc = zt_io_uring_engine.create(sw->fds, sw->n_files, sw->cfg.queue_depth, threads,
                                           &sw->engine, why, sizeof why);
        if (rc == 0) {
            sw->engine_iface = &zt_io_uring_engine;
            return ZT_OK;
        }
        if (sw->cfg.engine == ZT_IO_ENGINE_URING)
            return ZT_ERR(err, ZT_ERR_UNSUPPORTED,
                          "ztier.io_engine is \"io_uring\" but io_uring cannot be set up here "
                          "(%s); use \"auto\" or \"threads\"",
                          why);
        ZT_LOGW("nvme", "io_uring is unavailable (%s); using the thread-pool I/O engine", why);
    }
    int rc = zt_io_threads_engine.create(sw->fds, sw->n_files, sw->cfg.queue_depth,
                                         threads < 8 ? 8 : threads, &sw->engine, why, sizeof why);
    if (rc != 0)
        return ZT_ERR(err, ZT_ERR_IO, "cannot start the thread-pool I/O engine: %s", strerror(-rc));
    sw->engine_iface = &zt_io_threads_engine;
    return ZT_OK;
}

zt_status zt_swap_create(const zt_swap_config *cfg, uint64_t capacity, zt_swap **out, zt_error *err)
{
    if (cfg->n_paths < 1 || cfg->n_paths > ZT_MAX_NVME_PATHS || cfg->block_size % ZT_PAGE_BYTES)
        return ZT_ERR(err, ZT_ERR_CONFIG,
                      "NVMe swap: %d folders (1..%d) and block size %llu "
                      "(a multiple of 4096) are required",
                      cfg->n_paths, ZT_MAX_NVME_PATHS, (unsigned long long)cfg->block_size);
    zt_swap *sw = calloc(1, sizeof *sw);
    if (!sw)
        return ZT_ERR(err, ZT_ERR_NOMEM, "out of memory creating the NVMe swap");
    sw->cfg = *cfg;
    sw->total_blocks = (capacity + cfg->block_size - 1) / cfg->block_size;
    uint64_t per_file = zt_swap_file_bytes(cfg, capacity);
    pthread_mutex_init(&sw->lock, NULL);
    pthread_cond_init(&sw->done, NULL);
    zt_status st = ZT_OK;
    for (int i = 0; st == ZT_OK && i < cfg->n_paths; i++) {
        st = open_folder(sw, i, per_file, err);
        if (st == ZT_OK)
            sw->n_files = i + 1;
    }
    if (st == ZT_OK && cfg->verify_checksums &&
        (!(sw->crc = calloc(sw->total_blocks + 1, sizeof *sw->crc)) ||
         !(sw->crc_len = calloc(sw->total_blocks + 1, sizeof *sw->crc_len))))
        st = ZT_ERR(err, ZT_ERR_NOMEM, "out of memory for NVMe block checksums");
    if (st == ZT_OK)
        st = start_engine(sw, err);
    if (st != ZT_OK) {
        zt_swap_destroy(sw);
        return st;
    }
    sw->stats.capacity = sw->total_blocks * cfg->block_size;
    ZT_LOGI("nvme", "%s swap: %llu bytes over %d folder(s), %s engine, queue depth %d", cfg->tag,
            (unsigned long long)sw->stats.capacity, cfg->n_paths, sw->engine_iface->name,
            cfg->queue_depth);
    *out = sw;
    return ZT_OK;
}

zt_status zt_swap_alloc(zt_swap *sw, uint64_t bytes, const char *owner, zt_swap_extent *out,
                        zt_error *err)
{
    uint64_t blocks = zt_swap_footprint(bytes, sw->cfg.block_size) / sw->cfg.block_size;
    if (sw->next_block + blocks > sw->total_blocks)
        return ZT_ERR(err, ZT_ERR_INTERNAL,
                      "NVMe swap '%s' full placing '%s' (%llu blocks, %llu of %llu used): the "
                      "placement plan undercounted",
                      sw->cfg.tag, owner, (unsigned long long)blocks,
                      (unsigned long long)sw->next_block, (unsigned long long)sw->total_blocks);
    *out = (zt_swap_extent){sw->next_block, blocks, owner};
    sw->next_block += blocks;
    sw->stats.used = sw->next_block * sw->cfg.block_size;
    return ZT_OK;
}

const char *zt_swap_locate(const zt_swap *sw, const zt_swap_extent *x, uint64_t offset,
                           uint64_t *file_offset)
{
    uint64_t b = x->first_block + offset / sw->cfg.block_size;
    int file = (int)(b % (uint64_t)sw->n_files);
    *file_offset = (b / (uint64_t)sw->n_files) * sw->cfg.block_size + offset % sw->cfg.block_size;
    return sw->files[file].path;
}

/* ---- transfers ---- */

static void piece_done(zt_io_piece *p, int result)
{
    zt_swap_io *io = p->user;
    zt_swap *sw = io->sw;
    uint64_t k = (uint64_t)(p - io->pieces), b = io->x->first_block + io->first_block + k;
    if (result == 0 && sw->crc) {
        uint32_t crc = (uint32_t)crc32(0L, p->buf, p->len);
        if (io->op == ZT_IO_WRITE)
            sw->crc[b] = crc, sw->crc_len[b] = p->len;
        else if (sw->crc_len[b] == p->len && sw->crc[b] != crc)
            result = -EBADMSG;
    }
    pthread_mutex_lock(&sw->lock);
    if (result < 0 && io->error == 0) {
        io->error = result;
        io->bad_offset = (io->first_block + k) * sw->cfg.block_size;
    }
    sw->inflight--;
    int last = --io->pending == 0;
    /* the span's name is made before the waiter, woken below, may reuse io or free the
     * extent's owner */
    char span[160] = "";
    double t0 = io->t_start;
    if (last && zt_trace_on())
        snprintf(span, sizeof span, "NVMe %s '%s' %.2f MB", io->op == ZT_IO_READ ? "read" : "write",
                 io->x->owner, (double)io->bytes / 1e6);
    if (last)
        pthread_cond_broadcast(&sw->done);
    pthread_mutex_unlock(&sw->lock);
    if (span[0])
        zt_trace_async("nvme", t0, "%s", span);
}

static zt_status start_io(zt_swap *sw, int op, const zt_swap_extent *x, uint64_t offset, void *buf,
                          uint64_t len, zt_swap_io *io, zt_error *err)
{
    uint64_t bs = sw->cfg.block_size, total = zt_round_up(len, ZT_PAGE_BYTES);
    if (offset % bs || offset + total > x->n_blocks * bs || ((uintptr_t)buf % ZT_PAGE_BYTES) != 0)
        return ZT_ERR(err, ZT_ERR_INTERNAL,
                      "NVMe %s of '%s': %llu bytes at %p does not fit its extent or alignment",
                      op == ZT_IO_READ ? "read" : "write", x->owner, (unsigned long long)len, buf);
    int n = (int)((total + bs - 1) / bs);
    memset(io, 0, sizeof *io);
    io->sw = sw, io->op = op, io->x = x, io->n_pieces = n, io->pending = n;
    io->first_block = offset / bs;
    io->bytes = len;
    io->t_start = zt_now_s();
    if (!(io->pieces = calloc((size_t)n, sizeof *io->pieces)))
        return ZT_ERR(err, ZT_ERR_NOMEM, "out of memory for an NVMe transfer of '%s'", x->owner);
    pthread_mutex_lock(&sw->lock);
    sw->inflight += n;
    if (sw->inflight > sw->stats.max_inflight)
        sw->stats.max_inflight = sw->inflight;
    pthread_mutex_unlock(&sw->lock);
    for (int k = 0; k < n; k++) {
        uint64_t b = x->first_block + io->first_block + (uint64_t)k, off = (uint64_t)k * bs;
        zt_io_piece *p = &io->pieces[k];
        p->op = op;
        p->file = (int)(b % (uint64_t)sw->n_files);
        p->offset = (b / (uint64_t)sw->n_files) * bs;
        p->buf = (char *)buf + off;
        p->len = (uint32_t)(total - off < bs ? total - off : bs);
        p->buf_index = -1;
        p->on_done = piece_done;
        p->user = io;
        sw->engine_iface->submit(sw->engine, p);
    }
    return ZT_OK;
}

zt_status zt_swap_read(zt_swap *sw, const zt_swap_extent *x, void *buf, uint64_t len,
                       zt_swap_io *io, zt_error *err)
{
    return start_io(sw, ZT_IO_READ, x, 0, buf, len, io, err);
}

zt_status zt_swap_write(zt_swap *sw, const zt_swap_extent *x, const void *buf, uint64_t len,
                        zt_swap_io *io, zt_error *err)
{
    return start_io(sw, ZT_IO_WRITE, x, 0, (void *)buf, len, io, err);
}

zt_status zt_swap_read_at(zt_swap *sw, const zt_swap_extent *x, uint64_t offset, void *buf,
                          uint64_t len, zt_swap_io *io, zt_error *err)
{
    return start_io(sw, ZT_IO_READ, x, offset, buf, len, io, err);
}

zt_status zt_swap_write_at(zt_swap *sw, const zt_swap_extent *x, uint64_t offset, const void *buf,
                           uint64_t len, zt_swap_io *io, zt_error *err)
{
    return start_io(sw, ZT_IO_WRITE, x, offset, (void *)buf, len, io, err);
}

uint64_t zt_swap_block_size(const zt_swap *sw) { return sw->cfg.block_size; }

int zt_swap_done(zt_swap *sw, const zt_swap_io *io)
{
    if (!io->pieces)
        return 1;
    pthread_mutex_lock(&sw->lock);
    int done = io->pending == 0;
    pthread_mutex_unlock(&sw->lock);
    return done;
}

zt_status zt_swap_wait(zt_swap *sw, zt_swap_io *io, zt_error *err)
{
    if (!io->pieces)
        return ZT_OK;
    pthread_mutex_lock(&sw->lock);
    while (io->pending > 0)
        pthread_cond_wait(&sw->done, &sw->lock);
    double dt = zt_now_s() - io->t_start;
    uint64_t bytes = 0;
    for (int k = 0; k < io->n_pieces; k++)
        bytes += io->pieces[k].len;
    if (io->op == ZT_IO_READ)
        sw->stats.read_bytes += bytes, sw->stats.read_s += dt;
    else
        sw->stats.write_bytes += bytes, sw->stats.write_s += dt;
    pthread_mutex_unlock(&sw->lock);
    free(io->pieces);
    io->pieces = NULL;
    if (io->error == 0)
        return ZT_OK;
    uint64_t foff = 0;
    const char *file = zt_swap_locate(sw, io->x, io->bad_offset, &foff);
    if (io->error == -EBADMSG)
        return ZT_ERR(err, ZT_ERR_CORRUPT,
                      "NVMe data of '%s' is corrupted at byte %llu of the tensor (file '%s', "
                      "offset %llu): the checksum does not match what was written",
                      io->x->owner, (unsigned long long)io->bad_offset, file,
                      (unsigned long long)foff);
    return ZT_ERR(
        err, zt_status_from_errno(io->error) == ZT_ERR_NOSPACE ? ZT_ERR_NOSPACE : ZT_ERR_IO,
        "NVMe %s of '%s' failed at byte %llu of the tensor (file '%s', offset %llu): %s",
        io->op == ZT_IO_READ ? "read" : "write", io->x->owner, (unsigned long long)io->bad_offset,
        file, (unsigned long long)foff, strerror(-io->error));
}

int zt_swap_register_buffers(zt_swap *sw, void *const *bufs, const size_t *lens, int n)
{
    if (!sw->engine_iface->register_buffers || n == 0)
        return 0;
    int rc = sw->engine_iface->register_buffers(sw->engine, bufs, lens, n);
    if (rc < 0)
        ZT_LOGI("nvme", "buffers not registered with io_uring (%s); transfers still work",
                strerror(-rc));
    return rc;
}

void zt_swap_get_stats(zt_swap *sw, zt_swap_stats *out)
{
    pthread_mutex_lock(&sw->lock);
    *out = sw->stats;
    pthread_mutex_unlock(&sw->lock);
    if (sw->engine_iface == &zt_io_uring_engine)
        out->fixed_ios = zt_io_uring_fixed_ios(sw->engine);
}

const char *zt_swap_engine_name(const zt_swap *sw) { return sw->engine_iface->name; }

void zt_swap_destroy(zt_swap *sw)
{
    if (!sw)
        return;
    if (sw->engine)
        sw->engine_iface->destroy(sw->engine);
    for (int i = 0; i < ZT_MAX_NVME_PATHS && i < sw->cfg.n_paths; i++)
        if (i < sw->n_files)
            close_file(&sw->files[i]);
    free(sw->crc);
    free(sw->crc_len);
    pthread_mutex_destroy(&sw->lock);
    pthread_cond_destroy(&sw->done);
    free(sw);
}
