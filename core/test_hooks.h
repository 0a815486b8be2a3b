/* Fault points for tests of crash safety. In builds with ZT_TEST_HOOKS, a process whose
 * $ZT_TEST_CRASH_AT is n kills itself with SIGKILL at the n-th crash point it passes (counting
 * from 1), as `kill -9` would at that moment. Other builds compile the calls away. */
#ifndef ZT_CORE_TEST_HOOKS_H
#define ZT_CORE_TEST_HOOKS_H

#ifdef ZT_TEST_HOOKS
void zt_test_crash_point(const char *where);
#else
#define zt_test_crash_point(where) ((void)0)
#endif

#endif
