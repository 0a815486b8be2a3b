/* SPDX-License-Identifier: MIT */
#include "core/log.h"
#include "core/error.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char *const level_names[] = {"error", "warn", "info", "debug"};

static int g_level = -1;
static zt_log_fn g_fn;
static void *g_user;

int zt_log_level_parse(const char *s)
{
    if (!s || !*s)
        return -1;
    for (int i = 0; i < 4; i++)
        if (strcmp(s, level_names[i]) == 0)
            return i;
    if (s[0] >= '0' && s[0] <= '3' && s[1] == '\0')
        return s[0] - '0';
    return -1;
}

int zt_log_level(void)
{
    if (g_level < 0) {
        int env = zt_log_level_parse(getenv("ZT_LOG"));
        g_level = env >= 0 ? env : ZT_LOG_WARN;
    }
    return g_level;
}

void zt_log_configure(int level, zt_log_fn fn, void *user)
{
    if (level >= 0)
        g_level = level > ZT_LOG_DEBUG ? ZT_LOG_DEBUG : level;
    else
        g_level = -1, (void)zt_log_level();
    g_fn = fn;
    g_user = user;
}

void zt_log_write(int level, const char *subsys, const char *fmt, ...)
{
    char msg[4096];
    int n = snprintf(msg, sizeof msg, "ztier %s [%s] ", level_names[level & 3], subsys);
    va_list ap;
    va_start(ap, fmt);
    if (n > 0 && (size_t)n < sizeof msg)
        vsnprintf(msg + n, sizeof msg - (size_t)n, fmt, ap);
    va_end(ap);
    zt_text_shorten(msg, 1535); /* long paths lose their middle, not the message's end */
    if (g_fn)
        g_fn(g_user, level, msg);
    else
        fprintf(stderr, "%s\n", msg);
}
