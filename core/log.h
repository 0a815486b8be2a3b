/* SPDX-License-Identifier: MIT */
/* Leveled logging with subsystem names. The level comes from zt_options, else $ZT_LOG
 * (error|warn|info|debug), else warn. Messages go to the caller's callback or stderr. */
#ifndef ZT_CORE_LOG_H
#define ZT_CORE_LOG_H

#include "core/export.h"
#include "ztier.h"

enum { ZT_LOG_ERROR = 0, ZT_LOG_WARN = 1, ZT_LOG_INFO = 2, ZT_LOG_DEBUG = 3 };

/* Process-wide sink; the runtime installs its options' sink at create. */
void zt_log_configure(int level, zt_log_fn fn, void *user);
ZT_MODULE_API int zt_log_level(void);
/* Parses "error|warn|info|debug" (or 0..3); returns -1 if unknown. */
int zt_log_level_parse(const char *s);

ZT_MODULE_API void zt_log_write(int level, const char *subsys, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

#define ZT_LOG(level, subsys, ...)                        \
    do {                                                  \
        if ((level) <= zt_log_level())                    \
            zt_log_write((level), (subsys), __VA_ARGS__); \
    } while (0)
#define ZT_LOGE(subsys, ...) ZT_LOG(ZT_LOG_ERROR, subsys, __VA_ARGS__)
#define ZT_LOGW(subsys, ...) ZT_LOG(ZT_LOG_WARN, subsys, __VA_ARGS__)
#define ZT_LOGI(subsys, ...) ZT_LOG(ZT_LOG_INFO, subsys, __VA_ARGS__)
#define ZT_LOGD(subsys, ...) ZT_LOG(ZT_LOG_DEBUG, subsys, __VA_ARGS__)

#endif
