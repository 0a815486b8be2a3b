/* SPDX-License-Identifier: MIT */
/* zt_stats_format and its field list (core/stats_fields.h):
 *  - the list covers every byte of zt_stats, in order (a counter added to the struct and not
 *    to the list leaves a gap wider than alignment, and fails here);
 *  - JSON: every counter once, with its value, read back by jansson;
 *  - text: a line per counter, its name first;
 *  - a short buffer gets a terminated prefix and the whole length; an older caller's shorter
 *    struct gets only its fields; bad arguments return -1. */
#include "core/stats_fields.h"

#include <jansson.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

static int n_fields(void)
{
    int n = 0;
    while (zt_stats_fields[n].name)
        n++;
    return n;
}

static void test_list_covers_the_struct(void **state)
{
    (void)state;
    size_t end = sizeof(size_t); /* struct_size comes first and is not a counter */
    for (const zt_stats_field *f = zt_stats_fields; f->name; f++) {
        size_t size = zt_stats_field_size(f->kind);
        assert_true(f->offset >= end);       /* in the struct's order, no overlap */
        assert_true(f->offset - end < size); /* nothing skipped but alignment */
        assert_int_equal(f->offset % size, 0);
        end = f->offset + size;
    }
    assert_true(sizeof(zt_stats) - end < 8); /* only the tail padding is left */
}

/* A struct whose counter i holds a value made from i. */
static void distinct_values(zt_stats *s)
{
    memset(s, 0, sizeof *s);
    s->struct_size = sizeof *s;
    int i = 0;
    for (const zt_stats_field *f = zt_stats_fields; f->name; f++, i++) {
        char *p = (char *)s + f->offset;
        if (f->kind == ZT_STAT_F64) {
            double v = i + 0.25;
            memcpy(p, &v, sizeof v);
        } else if (f->kind == ZT_STAT_U32) {
            uint32_t v = (uint32_t)(1000 + i);
            memcpy(p, &v, sizeof v);
        } else {
            uint64_t v = ((uint64_t)1 << 40) + (uint64_t)i;
            memcpy(p, &v, sizeof v);
        }
    }
}

static void test_json_has_every_counter(void **state)
{
    (void)state;
    zt_stats s;
    distinct_values(&s);
    int need = zt_stats_format(&s, ZT_STATS_JSON, NULL, 0);
    assert_true(need > 0);
    char *buf = malloc((size_t)need + 1);
    assert_int_equal(zt_stats_format(&s, ZT_STATS_JSON, buf, (size_t)need + 1), need);
    json_error_t e;
    json_t *o = json_loads(buf, 0, &e);
    if (!o)
        fail_msg("not JSON (%s): %s", e.text, buf);
    assert_int_equal((int)json_object_size(o), n_fields());
    int i = 0;
    for (const zt_stats_field *f = zt_stats_fields; f->name; f++, i++) {
        json_t *v = json_object_get(o, f->name);
        assert_non_null(v);
        if (f->kind == ZT_STAT_F64)
            assert_true(json_real_value(v) == i + 0.25);
        else if (f->kind == ZT_STAT_U32)
            assert_int_equal(json_integer_value(v), 1000 + i);
        else
            assert_int_equal(json_integer_value(v),
                             (json_int_t)(((uint64_t)1 << 40) + (uint64_t)i));
    }
    json_decref(o);
    free(buf);
}

static void test_text_has_a_line_per_counter(void **state)
{
    (void)state;
    zt_stats s;
    distinct_values(&s);
    char buf[8192];
    int n = zt_stats_format(&s, ZT_STATS_TEXT, buf, sizeof buf);
    assert_true(n > 0 && n < (int)sizeof buf);
    const char *line = buf;
    int lines = 0;
    for (const zt_stats_field *f = zt_stats_fields; f->name; f++, lines++) {
        assert_int_equal(strncmp(line, f->name, strlen(f->name)), 0);
        assert_true(line[strlen(f->name)] == ' ');
        assert_non_null(strstr(line, f->what));
        line = strchr(line, '\n');
        assert_non_null(line);
        line++;
    }
    assert_int_equal(lines, n_fields());
    assert_int_equal(*line, '\0');
    assert_non_null(strstr(buf, "steps "));
}

static void test_short_buffer_and_older_struct(void **state)
{
    (void)state;
    zt_stats s;
    distinct_values(&s);
    char full[8192], part[20];
    int n = zt_stats_format(&s, ZT_STATS_JSON, full, sizeof full);
    assert_int_equal(zt_stats_format(&s, ZT_STATS_JSON, part, sizeof part), n);
    assert_int_equal(strlen(part), sizeof part - 1);
    assert_memory_equal(part, full, sizeof part - 1);
    /* a caller built against the first two counters only */
    s.struct_size = offsetof(zt_stats, device_bytes_peak) + sizeof(uint64_t);
    assert_true(zt_stats_format(&s, ZT_STATS_JSON, full, sizeof full) > 0);
    json_t *o = json_loads(full, 0, NULL);
    assert_non_null(o);
    assert_int_equal((int)json_object_size(o), 2);
    json_decref(o);
    s.struct_size = 0;
    assert_int_equal(zt_stats_format(&s, ZT_STATS_JSON, full, sizeof full), -1);
    assert_int_equal(zt_stats_format(NULL, ZT_STATS_TEXT, full, sizeof full), -1);
    s.struct_size = sizeof s;
    assert_int_equal(zt_stats_format(&s, (zt_stats_format_kind)7, full, sizeof full), -1);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_list_covers_the_struct),
        cmocka_unit_test(test_json_has_every_counter),
        cmocka_unit_test(test_text_has_a_line_per_counter),
        cmocka_unit_test(test_short_buffer_and_older_struct),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
