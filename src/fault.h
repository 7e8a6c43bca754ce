/*
 * fault.h — failure injection for the allocation-failure test (internal).
 *
 * Every resource the library acquires — each allocation (memory.c) and each
 * worker thread (context.c) — first asks ra_fault_next().  In a release
 * build that is a constant 0 and compiles away.  Built with
 * -DRA_FAULT_INJECTION (`make alloc-test` only; never in the installed
 * library), src/fault.c counts the acquisitions, and a test can make the
 * n-th one fail:
 *
 *   ra_fault_fail_at(n);     the n-th acquisition from now fails (n >= 1;
 *                            0: none), every other one succeeds
 *   ...call the library...
 *   ra_fault_count();        acquisitions since ra_fault_fail_at; fewer
 *                            than n means the call never reached the n-th
 *
 * The counter is atomic, so acquisitions on other threads count too.
 */
#ifndef RA_FAULT_H
#define RA_FAULT_H

#include <stdint.h>

#ifdef RA_FAULT_INJECTION
int ra_fault_next(void); /* 1: the acquisition about to happen must fail */
void ra_fault_fail_at(int64_t n);
int64_t ra_fault_count(void);
#else
static inline int ra_fault_next(void) { return 0; }
#endif

#endif
