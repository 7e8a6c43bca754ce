/*
 * fault.c — the counter behind fault.h, compiled only with
 * -DRA_FAULT_INJECTION (`make alloc-test`); in every other build this file
 * is empty on purpose, so that release libraries carry no hook.
 */
#ifdef RA_FAULT_INJECTION
#include <stdatomic.h>

#include "fault.h"

static atomic_int_fast64_t fail_at;  /* 0: nothing fails */
static atomic_int_fast64_t acquired; /* acquisitions since ra_fault_fail_at */

int ra_fault_next(void)
{
    int64_t n = atomic_fetch_add(&acquired, 1) + 1;
    return n == atomic_load(&fail_at);
}

void ra_fault_fail_at(int64_t n)
{
    atomic_store(&fail_at, n);
    atomic_store(&acquired, 0);
}

int64_t ra_fault_count(void) { return atomic_load(&acquired); }
#endif
