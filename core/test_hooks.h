/* SPDX-License-Identifier: MIT */
/* Fault points for tests of crash safety. In the tests' archive (ztier_test, whose objects
 * that call hooks are compiled with ZT_TEST_HOOKS; zt_test_hooks in CMakeLists.txt), a
 * process whose $ZT_TEST_CRASH_AT is n kills itself with SIGKILL at the n-th crash point it
 * passes (counting from 1), as `kill -9` would at that moment; a process whose
 * $ZT_TEST_DELAY_AT names a delay point sleeps $ZT_TEST_DELAY_S seconds there each time it
 * passes it (a rank that stalls, or that its peers cannot reach for that long). The shipped
 * libraries (ztier, ztier_static) compile the calls away and have no such function. */
#ifndef ZT_CORE_TEST_HOOKS_H
#define ZT_CORE_TEST_HOOKS_H

#ifdef ZT_TEST_HOOKS
void zt_test_crash_point(const char *where);
void zt_test_delay_point(const char *where);
#else
#define zt_test_crash_point(where) ((void)0)
#define zt_test_delay_point(where) ((void)0)
#endif

#endif
