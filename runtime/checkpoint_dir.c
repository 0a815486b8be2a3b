/* SPDX-License-Identifier: MIT */
/* The checkpoint root folder and its `latest` list (see checkpoint_dir.h). */
#include "runtime/checkpoint_dir.h"
#include "runtime/config.h"
#include "core/log.h"
#include "core/test_hooks.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define LIST_FILE "latest"
#define PARTIAL_PREFIX ".partial-"
#define REMOVING_PREFIX ".removing-"
#define REUSE_FOLDER \
    ".reuse"          /* a removed checkpoint's files, kept for the next save to overwrite */
#define LIST_MAX 1024 /* entries read from `latest`; ztier.checkpoint_keep is at most 1000 */
#define PATH_LEN (ZT_PATH_MAX + 2 * ZT_CKPT_NAME_MAX)

typedef struct ckpt_list {
    char names[LIST_MAX][ZT_CKPT_NAME_MAX];
    int n;
} ckpt_list;

int zt_fsync_path(const char *path)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return -errno;
    int rc = fsync(fd) == 0 ? 0 : -errno;
    close(fd);
    return rc;
}

/* step-<digits> with an optional .<digits> suffix: the only folder names ztier creates. */
static int valid_name(const char *s)
{
    if (strncmp(s, "step-", 5) != 0 || !s[5] || strlen(s) >= ZT_CKPT_NAME_MAX)
        return 0;
    int dots = 0;
    for (const char *p = s + 5; *p; p++) {
        if (*p == '.' && p[1] && p[-1] != '.' && !dots++)
            continue;
        if (*p < '0' || *p > '9')
            return 0;
    }
    return 1;
}

static zt_status read_list(const char *root, ckpt_list *l, zt_error *err)
{
    char path[PATH_LEN];
    snprintf(path, sizeof path, "%s/" LIST_FILE, root);
    l->n = 0;
    FILE *f = fopen(path, "r");
    if (!f)
        return errno == ENOENT
                   ? ZT_OK
                   : ZT_ERR(err, ZT_ERR_IO, "cannot read '%s': %s", path, strerror(errno));
    char line[256];
    zt_status st = ZT_OK;
    while (st == ZT_OK && l->n < LIST_MAX && fgets(line, sizeof line, f)) {
        line[strcspn(line, "\r\n")] = '\0';
        if (!*line)
            continue;
        if (!valid_name(line))
            st = ZT_ERR(err, ZT_ERR_CORRUPT,
                        "'%s' is damaged: line %d is \"%.80s\", not a checkpoint folder name "
                        "(step-NNNNNNNN); restore it or move it away to start a new list",
                        path, l->n + 1, line);
        else /* valid_name checked the length */
            memcpy(l->names[l->n++], line, strlen(line) + 1);
    }
    fclose(f);
    return st;
}

static int list_has(const ckpt_list *l, const char *name)
{
    for (int i = 0; i < l->n; i++)
        if (strcmp(l->names[i], name) == 0)
            return 1;
    return 0;
}

/* Replaces `latest` with the first n names of l, atomically and durably. */
static zt_status write_list(const char *root, const ckpt_list *l, int n, zt_error *err)
{
    char path[PATH_LEN], tmp[PATH_LEN];
    snprintf(path, sizeof path, "%s/" LIST_FILE, root);
    snprintf(tmp, sizeof tmp, "%s/" LIST_FILE ".tmp", root);
    FILE *f = fopen(tmp, "w");
    if (!f)
        return ZT_ERR(err, zt_status_from_errno(errno), "cannot write '%s': %s", tmp,
                      strerror(errno));
    int ok = 1;
    for (int i = 0; i < n && i < l->n; i++)
        ok = ok && fprintf(f, "%s\n", l->names[i]) > 0;
    ok = ok && fflush(f) == 0 && fsync(fileno(f)) == 0;
    int e = errno;
    ok = fclose(f) == 0 && ok;
    zt_test_crash_point("latest.tmp written");
    if (!ok || rename(tmp, path) != 0) {
        e = ok ? errno : e;
        unlink(tmp);
        return ZT_ERR(err, zt_status_from_errno(e), "cannot write '%s': %s", path, strerror(e));
    }
    zt_test_crash_point("latest renamed");
    int rc = zt_fsync_path(root);
    if (rc != 0)
        return ZT_ERR(err, zt_status_from_errno(rc), "syncing folder '%s': %s", root,
                      strerror(-rc));
    return ZT_OK;
}

/* Removes a checkpoint folder: the files ztier writes into it, then the folder. Anything
 * else found inside stays, and so does the folder (with a warning). */
static int ends_with(const char *s, const char *tail)
{
    size_t n = strlen(s), t = strlen(tail);
    return n >= t && strcmp(s + n - t, tail) == 0;
}

static void remove_folder(const char *path)
{
    DIR *d = opendir(path);
    if (!d)
        return;
    struct dirent *e;
    while ((e = readdir(d))) {
        const char *n = e->d_name;
        int ours = !strcmp(n, "manifest.json") ||
                   (!strncmp(n, "rank-", 5) && (ends_with(n, ".zts") || ends_with(n, ".zts.tmp")));
        char file[PATH_LEN + 256];
        snprintf(file, sizeof file, "%s/%s", path, n);
        if (ours)
            unlink(file);
    }
    closedir(d);
    if (rmdir(path) != 0)
        ZT_LOGW("checkpoint", "could not remove '%s' (%s); remove it by hand", path,
                strerror(errno));
}

/* Partial folders are never loadable: whatever an interrupted save left goes, and so does
 * an older checkpoint set aside for removal whose removal a kill cut short. */
static void remove_partials(const char *root)
{
    DIR *d = opendir(root);
    if (!d)
        return;
    struct dirent *e;
    while ((e = readdir(d))) {
        if (strncmp(e->d_name, PARTIAL_PREFIX, strlen(PARTIAL_PREFIX)) != 0 &&
            strncmp(e->d_name, REMOVING_PREFIX, strlen(REMOVING_PREFIX)) != 0)
            continue;
        char path[PATH_LEN + 256];
        snprintf(path, sizeof path, "%s/%s", root, e->d_name);
        ZT_LOGI("checkpoint", "removing '%s', left by an interrupted save", path);
        remove_folder(path);
    }
    closedir(d);
}

/* Complete checkpoint folders `latest` does not list are never loaded through it: a save
 * killed between its folder's rename and the list's update, or an older checkpoint whose
 * removal was cut short. They go (each one a whole checkpoint of disk); only the files ztier
 * writes are removed, so a folder holding anything else stays (with a warning). */
static void remove_unlisted(const char *root, const ckpt_list *l)
{
    DIR *d = opendir(root);
    if (!d)
        return;
    struct dirent *e;
    while ((e = readdir(d))) {
        if (!valid_name(e->d_name) || list_has(l, e->d_name))
            continue;
        char path[PATH_LEN + 256];
        snprintf(path, sizeof path, "%s/%s", root, e->d_name);
        ZT_LOGW("checkpoint",
                "removing '%s': a checkpoint folder '%s/" LIST_FILE "' does not list (a save or "
                "a removal was interrupted); the checkpoints it lists are kept",
                path, root);
        remove_folder(path);
    }
    closedir(d);
}

static int exists(const char *root, const char *name)
{
    char path[PATH_LEN];
    snprintf(path, sizeof path, "%s/%s", root, name);
    return access(path, F_OK) == 0;
}

void zt_ckpt_partial_path(const char *root, const char *name, char *out, size_t len)
{
    snprintf(out, len, "%s/" PARTIAL_PREFIX "%s", root, name);
}

static zt_status make_root(const char *root, zt_error *err)
{
    struct stat sb;
    if (mkdir(root, 0755) != 0 && errno != EEXIST)
        return ZT_ERR(err, zt_status_from_errno(errno), "cannot create checkpoint folder '%s': %s",
                      root, strerror(errno));
    if (stat(root, &sb) != 0 || !S_ISDIR(sb.st_mode))
        return ZT_ERR(err, ZT_ERR_ARGUMENT, "checkpoint path '%s' is not a folder", root);
    return ZT_OK;
}

/* ---- older checkpoints removed behind the save ----
 * Freeing a checkpoint's blocks takes as long as writing a good part of one (0.2 s for the
 * 1.49 GB of d12 on the development VM's ext4, mounted with `discard`: a quarter of the save;
 * docs/benchmarks.md, "Checkpoints"), and training need not wait for it. The commit renames
 * the folders beyond `keep` out of the checkpoint names (root/.removing-<name>: no longer
 * listed, counted or loadable) and one thread of the process unlinks them; the next save and
 * zt_runtime_destroy wait for it, and a save's begin removes what a kill left half-removed. */

typedef struct removal {
    int n;
    char paths[][PATH_LEN];
} removal;

static pthread_mutex_t removal_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_t removal_thread;
static int removal_running;
static pthread_once_t removal_once = PTHREAD_ONCE_INIT;

/* A child of fork has no removal thread to wait for (what it was removing stays until a save's
 * begin removes it). */
static void removal_forget(void) { removal_running = 0; }
static void removal_fork_handler(void) { pthread_atfork(NULL, NULL, removal_forget); }

static void *remove_all(void *arg)
{
    removal *r = arg;
    zt_test_delay_point("older checkpoint removal"); /* a slow disk, in tests */
    for (int i = 0; i < r->n; i++)
        remove_folder(r->paths[i]);
    free(r);
    return NULL;
}

void zt_ckpt_removals_wait(void)
{
    pthread_mutex_lock(&removal_lock);
    if (removal_running)
        pthread_join(removal_thread, NULL);
    removal_running = 0;
    pthread_mutex_unlock(&removal_lock);
}

/* Removes r's folders on the removal thread (r is its own then), or here where no thread
 * starts. */
static void remove_behind(removal *r)
{
    zt_ckpt_removals_wait(); /* one at a time: at most one thread, never two on one folder */
    pthread_once(&removal_once, removal_fork_handler);
    pthread_mutex_lock(&removal_lock);
    removal_running = r->n > 0 && pthread_create(&removal_thread, NULL, remove_all, r) == 0;
    pthread_mutex_unlock(&removal_lock);
    if (!removal_running)
        remove_all(r);
}

/* With reuse, the newest checkpoint beyond keep becomes root/.reuse (1: it did); one left
 * there already (the next save's begin takes it, so only after a failed save) goes first. */
static int set_aside_for_reuse(const char *root, const char *name)
{
    char final[PATH_LEN], spare[PATH_LEN];
    snprintf(final, sizeof final, "%s/%s", root, name);
    snprintf(spare, sizeof spare, "%s/" REUSE_FOLDER, root);
    if (access(spare, F_OK) == 0)
        remove_folder(spare);
    return rename(final, spare) == 0;
}

/* Sets the checkpoints list->names[keep..] aside for removal (renamed to root/.removing-) and
 * removes them behind the caller; one that cannot be renamed, here and now. With reuse the
 * newest of them is kept as root/.reuse instead (zt_ckpt_begin). */
static void remove_older(const char *root, const ckpt_list *list, int keep, int reuse)
{
    if (list->n <= keep)
        return;
    removal *r = malloc(sizeof *r + (size_t)(list->n - keep) * PATH_LEN);
    if (r)
        r->n = 0;
    char final[PATH_LEN];
    for (int i = keep; i < list->n; i++) {
        if (i == keep && reuse && set_aside_for_reuse(root, list->names[i]))
            continue;
        snprintf(final, sizeof final, "%s/%s", root, list->names[i]);
        char *aside = r ? r->paths[r->n] : NULL;
        if (aside)
            snprintf(aside, PATH_LEN, "%s/" REMOVING_PREFIX "%s", root, list->names[i]);
        if (aside && rename(final, aside) == 0)
            r->n++;
        else
            remove_folder(final);
    }
    if (r)
        remove_behind(r);
}

/* Whether a file of a reused folder is one this save overwrites: rank-R-of-W.zts of this
 * world. The rest (the manifest, another world's files) goes. */
static int reusable_file(const char *file, int world)
{
    int rank = -1;
    char want[64];
    if (sscanf(file, "rank-%d-", &rank) != 1 || rank < 0 || rank >= world)
        return 0;
    snprintf(want, sizeof want, "rank-%05d-of-%05d.zts", rank, world); /* zt_ckpt_shard_name */
    return strcmp(file, want) == 0;
}

/* Makes root/.reuse (if there) the save's partial folder, holding only the files the save
 * overwrites in place: 1 if it did. Without reuse (reuse_world 0) a .reuse folder a run with
 * reuse left is removed. */
static int take_reused(const char *root, const char *partial, int reuse_world)
{
    char spare[PATH_LEN];
    snprintf(spare, sizeof spare, "%s/" REUSE_FOLDER, root);
    DIR *d = opendir(spare);
    if (!d)
        return 0;
    if (reuse_world <= 0) {
        closedir(d);
        remove_folder(spare);
        return 0;
    }
    struct dirent *e;
    while ((e = readdir(d))) {
        char file[PATH_LEN + 256];
        snprintf(file, sizeof file, "%s/%s", spare, e->d_name);
        if (e->d_name[0] != '.' && !reusable_file(e->d_name, reuse_world))
            unlink(file);
    }
    closedir(d);
    return rename(spare, partial) == 0;
}

zt_status zt_ckpt_begin(const char *root, int64_t step, int reuse_world, char *name, zt_error *err)
{
    static ckpt_list list;   /* rank 0's saves run one at a time (the API is not reentrant) */
    zt_ckpt_removals_wait(); /* the previous save's: remove_partials must not race it */
    zt_status st = make_root(root, err);
    if (st == ZT_OK)
        st = read_list(root, &list, err);
    if (st != ZT_OK)
        return st;
    remove_partials(root);
    if (exists(root, LIST_FILE)) /* a root `latest` manages: what it does not list is ours */
        remove_unlisted(root, &list);
    snprintf(name, ZT_CKPT_NAME_MAX, "step-%08lld", (long long)step);
    for (int k = 1; exists(root, name) || list_has(&list, name); k++)
        snprintf(name, ZT_CKPT_NAME_MAX, "step-%08lld.%d", (long long)step, k);
    char partial[PATH_LEN];
    zt_ckpt_partial_path(root, name, partial, sizeof partial);
    if (!take_reused(root, partial, reuse_world) && mkdir(partial, 0755) != 0)
        return ZT_ERR(err, zt_status_from_errno(errno), "cannot create folder '%s': %s", partial,
                      strerror(errno));
    zt_test_crash_point("partial folder created");
    return ZT_OK;
}

zt_status zt_ckpt_commit(const char *root, const char *name, int keep, int reuse, zt_error *err)
{
    static ckpt_list list;
    char partial[PATH_LEN], final[PATH_LEN];
    zt_ckpt_partial_path(root, name, partial, sizeof partial);
    snprintf(final, sizeof final, "%s/%s", root, name);
    int rc = zt_fsync_path(partial);
    if (rc != 0)
        return ZT_ERR(err, zt_status_from_errno(rc), "syncing folder '%s': %s", partial,
                      strerror(-rc));
    if (rename(partial, final) != 0)
        return ZT_ERR(err, zt_status_from_errno(errno), "renaming '%s' to '%s': %s", partial, final,
                      strerror(errno));
    zt_test_crash_point("checkpoint folder renamed");
    if ((rc = zt_fsync_path(root)) != 0)
        return ZT_ERR(err, zt_status_from_errno(rc), "syncing folder '%s': %s", root,
                      strerror(-rc));
    zt_status st = read_list(root, &list, err);
    if (st != ZT_OK)
        return st;
    /* the new list: this checkpoint, then the older ones */
    int old = list.n < LIST_MAX - 1 ? list.n : LIST_MAX - 1;
    memmove(list.names[1], list.names[0], (size_t)old * ZT_CKPT_NAME_MAX);
    snprintf(list.names[0], ZT_CKPT_NAME_MAX, "%s", name);
    list.n = old + 1;
    if ((st = write_list(root, &list, keep, err)) != ZT_OK)
        return st;
    remove_older(root, &list, keep, reuse);
    zt_test_crash_point("older checkpoints removed");
    return ZT_OK;
}

void zt_ckpt_abort(const char *root, const char *name)
{
    static ckpt_list list;
    char path[PATH_LEN];
    zt_ckpt_partial_path(root, name, path, sizeof path);
    remove_folder(path);
    zt_error ignored = {0};
    if (read_list(root, &list, &ignored) == ZT_OK && !list_has(&list, name)) {
        snprintf(path, sizeof path, "%s/%s", root, name);
        remove_folder(path);
    }
}

zt_status zt_ckpt_resolve(const char *dir, char *folder, size_t len, zt_error *err)
{
    static ckpt_list list;
    char path[PATH_LEN];
    struct stat sb;
    if (stat(dir, &sb) != 0)
        return ZT_ERR(err, ZT_ERR_IO,
                      "no checkpoint at '%s': %s (a wrong path, or a folder on a disk this node "
                      "does not have: every rank loads from the same folder)",
                      dir, strerror(errno));
    if (!S_ISDIR(sb.st_mode))
        return ZT_ERR(err, ZT_ERR_ARGUMENT,
                      "checkpoint path '%s' is not a folder: give the checkpoint root or one "
                      "step folder in it",
                      dir);
    snprintf(path, sizeof path, "%s/" LIST_FILE, dir);
    if (access(path, F_OK) == 0) {
        zt_status st = read_list(dir, &list, err);
        if (st != ZT_OK)
            return st;
        if (list.n == 0)
            return ZT_ERR(err, ZT_ERR_CORRUPT, "'%s' lists no checkpoint", path);
        snprintf(folder, len, "%s/%s", dir, list.names[0]);
        snprintf(path, sizeof path, "%s/manifest.json", folder);
        if (access(path, F_OK) != 0)
            return ZT_ERR(err, ZT_ERR_IO,
                          "the latest checkpoint of '%s' is '%s', but '%s' is missing (was the "
                          "folder removed?); pass an older checkpoint's folder to load it",
                          dir, list.names[0], path);
        return ZT_OK;
    }
    snprintf(path, sizeof path, "%s/manifest.json", dir);
    if (access(path, F_OK) == 0) {
        snprintf(folder, len, "%s", dir);
        return ZT_OK;
    }
    return ZT_ERR(err, ZT_ERR_IO,
                  "no checkpoint in '%s': it has neither a 'latest' file nor a manifest.json "
                  "(not a ztier checkpoint folder, its first save was interrupted before it "
                  "finished, or it is on a disk of another node: every rank loads from the "
                  "same folder)",
                  dir);
}
