/* SPDX-License-Identifier: MIT */
/* The checkpoint root folder: one sub-folder per complete checkpoint and a `latest` file
 * that lists the committed ones, newest first:
 *
 *   root/latest              "step-00000020\nstep-00000010\n"
 *   root/step-00000020/      manifest.json, rank-00000-of-00001.zts, ...
 *   root/.partial-step-00000030/   a save in progress (never loaded)
 *
 * A save writes into a .partial- folder, renames it to its final name once every file is
 * written and synced, and commits it by replacing `latest` atomically (write, fsync, rename,
 * fsync of the root). Until that rename the previous checkpoint stays the one `latest`
 * names, so a save interrupted at any point (kill -9, a full disk) leaves it loadable.
 * Only rank 0 changes folders; every function here is local (no collectives). */
#ifndef ZT_RUNTIME_CHECKPOINT_DIR_H
#define ZT_RUNTIME_CHECKPOINT_DIR_H

#include "core/error.h"

#include <stddef.h>
#include <stdint.h>

#define ZT_CKPT_NAME_MAX 64

/* Starts a save of `step` in root (created if needed): removes what interrupted saves left
 * behind, picks a free folder name (step-%08lld, or with a suffix when that step was saved
 * before) into name[ZT_CKPT_NAME_MAX] and creates root/.partial-<name>. reuse_world > 0
 * (ztier.checkpoint_reuse_files, the save's world): where the last commit set a removed
 * checkpoint aside as root/.reuse, that folder becomes the partial one, keeping only its
 * rank-R-of-<reuse_world>.zts files, which the save's writers then overwrite in place (an
 * overwrite of written blocks is faster than writing a new file: docs/benchmarks.md).
 * reuse_world 0 removes a .reuse folder left by a run with reuse. */
zt_status zt_ckpt_begin(const char *root, int64_t step, int reuse_world, char *name, zt_error *err);

/* The folder a save of `name` writes into (root/.partial-<name>). */
void zt_ckpt_partial_path(const char *root, const char *name, char *out, size_t len);

/* Makes the save of `name` the latest checkpoint: syncs and renames its folder, rewrites
 * `latest` atomically, then removes the committed checkpoints beyond the newest `keep`: each
 * renamed to root/.removing-<name> at once (out of `latest`'s names), its files unlinked by a
 * thread while the caller goes on (zt_ckpt_removals_wait). With reuse the newest of them is
 * renamed root/.reuse instead, for the next save (zt_ckpt_begin): only after `latest` no
 * longer names it, so the checkpoints `latest` lists are never written into. */
zt_status zt_ckpt_commit(const char *root, const char *name, int keep, int reuse, zt_error *err);

/* Waits until the older checkpoints the last commit set aside are removed (the next save's
 * begin and zt_runtime_destroy call it). */
void zt_ckpt_removals_wait(void);

/* Removes what a failed save of `name` left (its partial folder, or its renamed folder if
 * the commit did not get to `latest`). Never touches a committed checkpoint. */
void zt_ckpt_abort(const char *root, const char *name);

/* The folder to load for `dir`: the newest checkpoint `latest` names when dir is a root, or
 * dir itself when it holds a manifest.json (one checkpoint folder). A checkpoint that is not
 * there (no such folder, no `latest` and no manifest.json, or `latest` naming a folder that is
 * gone) is ZT_ERR_IO naming the path; a damaged `latest` ZT_ERR_CORRUPT. */
zt_status zt_ckpt_resolve(const char *dir, char *folder, size_t len, zt_error *err);

/* fsync of a file or folder by path; 0 or -errno. */
int zt_fsync_path(const char *path);

#endif
