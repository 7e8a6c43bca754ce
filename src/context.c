/*
 * context.c — an execution context: a small pool of worker threads that
 * wait on a condition variable, and workspaces reused across calls: one for
 * the kernels, one for a composite call (the layer's backward) that keeps
 * buffers while it calls other library functions, one for the panel of
 * widened 16-bit weights the layer's products use.
 *
 * ra_parallel_for publishes a job (fn, arg, n_tasks) under a new generation
 * number and opens it; every thread, the caller included, claims task
 * indices from an atomic counter until none are left.  A worker joins the
 * open job (joined + 1) before it claims anything and leaves (left + 1)
 * after; the caller, out of tasks, closes the job and waits only until every
 * worker that joined has left.  A worker that wakes late finds the job
 * closed and claims nothing, so a short job never waits for a worker that
 * is asleep or descheduled.  (joined is counted before the worker reads
 * `open`, and the caller closes before it reads joined: one of the two sees
 * the other.)  Workers and the caller spin briefly (about SPIN_ROUNDS
 * pauses, tens of microseconds) before sleeping on the condition variables,
 * so that back-to-back calls — decoding, layer after layer — do not pay a
 * sleep and a wake-up each time.
 */
#include <pthread.h>
#include <stdatomic.h>
#include <unistd.h>

#include "fault.h"
#include "parallel.h"

struct ra_context {
    int n_threads;
    pthread_t *workers; /* n_threads - 1 */
    int n_started;

    pthread_mutex_t lock;
    pthread_cond_t wake; /* a new generation or stop */
    pthread_cond_t idle; /* the workers that joined have all left */
    atomic_uint_fast64_t generation;
    atomic_int open;                    /* the current job takes helpers */
    atomic_uint_fast64_t joined, left; /* workers into and out of jobs, ever */
    atomic_int stop;
    int sleepers; /* workers waiting on wake (under lock) */

    ra_task_fn fn;
    void *arg;
    int64_t n_tasks;
    atomic_int_fast64_t next_task;

    void *workspace[RA_SCRATCH_SLOTS];
    size_t workspace_bytes[RA_SCRATCH_SLOTS];
};

typedef struct worker_start {
    ra_context *ctx;
    int thread;
} worker_start;

static void run_tasks(ra_context *ctx, int thread)
{
    for (;;) {
        int64_t task = atomic_fetch_add(&ctx->next_task, 1);
        if (task >= ctx->n_tasks) return;
        ctx->fn(ctx->arg, task, thread);
    }
}

enum { SPIN_ROUNDS = 4000 };

static inline void cpu_relax(void)
{
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#elif defined(__aarch64__)
    __asm__ volatile("yield");
#endif
}

/* Waits for a generation other than `seen` (or stop): spin, then sleep. */
static uint64_t wait_for_work(ra_context *ctx, uint64_t seen)
{
    for (int i = 0; i < SPIN_ROUNDS; i++) {
        if (atomic_load(&ctx->generation) != seen || atomic_load(&ctx->stop)) break;
        cpu_relax();
    }
    if (atomic_load(&ctx->generation) == seen && !atomic_load(&ctx->stop)) {
        pthread_mutex_lock(&ctx->lock);
        ctx->sleepers++;
        while (atomic_load(&ctx->generation) == seen && !atomic_load(&ctx->stop))
            pthread_cond_wait(&ctx->wake, &ctx->lock);
        ctx->sleepers--;
        pthread_mutex_unlock(&ctx->lock);
    }
    return atomic_load(&ctx->generation);
}

static void *worker_main(void *p)
{
    ra_context *ctx = ((worker_start *)p)->ctx;
    int thread = ((worker_start *)p)->thread;
    ra_free(p);
    uint64_t seen = 0;
    for (;;) {
        seen = wait_for_work(ctx, seen);
        if (atomic_load(&ctx->stop)) break;
        atomic_fetch_add(&ctx->joined, 1);
        if (atomic_load(&ctx->open)) run_tasks(ctx, thread);
        if (atomic_fetch_add(&ctx->left, 1) + 1 == atomic_load(&ctx->joined)) { /* last out */
            pthread_mutex_lock(&ctx->lock);
            pthread_cond_signal(&ctx->idle);
            pthread_mutex_unlock(&ctx->lock);
        }
    }
    return NULL;
}

static void stop_workers(ra_context *ctx)
{
    pthread_mutex_lock(&ctx->lock);
    atomic_store(&ctx->stop, 1);
    pthread_cond_broadcast(&ctx->wake);
    pthread_mutex_unlock(&ctx->lock);
    for (int i = 0; i < ctx->n_started; i++) pthread_join(ctx->workers[i], NULL);
    ctx->n_started = 0;
}

RA_API ra_status ra_context_create(ra_context **out, int n_threads)
{
    ra_error_reset();
    if (!out) return ra_fail(RA_ERR_NULL, "out is NULL");
    *out = NULL;
    if (n_threads < 0 || n_threads > 4096)
        return ra_fail(RA_ERR_ARGUMENT, "n_threads %d is not in [0, 4096]", n_threads);
    if (n_threads == 0) {
        long online = sysconf(_SC_NPROCESSORS_ONLN);
        n_threads = online > 0 ? (online > 4096 ? 4096 : (int)online) : 1;
    }
    ra_context *ctx = ra_calloc(1, sizeof *ctx);
    if (!ctx) return ra_fail(RA_ERR_NOMEM, "allocating the context");
    ctx->n_threads = n_threads;
    if (pthread_mutex_init(&ctx->lock, NULL) != 0) {
        ra_free(ctx);
        return ra_fail(RA_ERR_THREAD, "initializing the context's mutex");
    }
    if (pthread_cond_init(&ctx->wake, NULL) != 0) {
        pthread_mutex_destroy(&ctx->lock);
        ra_free(ctx);
        return ra_fail(RA_ERR_THREAD, "initializing the context's condition variables");
    }
    if (pthread_cond_init(&ctx->idle, NULL) != 0) {
        pthread_cond_destroy(&ctx->wake);
        pthread_mutex_destroy(&ctx->lock);
        ra_free(ctx);
        return ra_fail(RA_ERR_THREAD, "initializing the context's condition variables");
    }
    ra_status status = RA_OK;
    if (n_threads > 1) {
        ctx->workers = ra_calloc((size_t)n_threads - 1, sizeof *ctx->workers);
        if (!ctx->workers) status = ra_fail(RA_ERR_NOMEM, "allocating %d workers", n_threads - 1);
    }
    for (int i = 1; i < n_threads && status == RA_OK; i++) {
        worker_start *start = ra_malloc(sizeof *start);
        if (!start) {
            status = ra_fail(RA_ERR_NOMEM, "allocating worker %d of %d", i, n_threads - 1);
            break;
        }
        start->ctx = ctx;
        start->thread = i;
        int failed = ra_fault_next() ||
                     pthread_create(&ctx->workers[i - 1], NULL, worker_main, start) != 0;
        if (failed) {
            ra_free(start);
            status = ra_fail(RA_ERR_THREAD, "starting worker %d of %d", i, n_threads - 1);
            break;
        }
        ctx->n_started++;
    }
    if (status != RA_OK) {
        ra_context_destroy(ctx);
        return status;
    }
    *out = ctx;
    return RA_OK;
}

RA_API void ra_context_destroy(ra_context *ctx)
{
    if (!ctx) return;
    stop_workers(ctx);
    pthread_cond_destroy(&ctx->idle);
    pthread_cond_destroy(&ctx->wake);
    pthread_mutex_destroy(&ctx->lock);
    ra_free(ctx->workers);
    for (int slot = 0; slot < RA_SCRATCH_SLOTS; slot++) ra_free(ctx->workspace[slot]);
    ra_free(ctx);
}

RA_API int ra_context_threads(const ra_context *ctx) { return ctx ? ctx->n_threads : 0; }

int ra_parallel_threads(const ra_context *ctx) { return ctx ? ctx->n_threads : 1; }

void ra_parallel_for(ra_context *ctx, int64_t n_tasks, ra_task_fn fn, void *arg)
{
    if (n_tasks <= 0) return;
    if (!ctx || ctx->n_started == 0 || n_tasks == 1) {
        for (int64_t t = 0; t < n_tasks; t++) fn(arg, t, 0);
        return;
    }
    ctx->fn = fn;
    ctx->arg = arg;
    ctx->n_tasks = n_tasks;
    atomic_store(&ctx->next_task, 0);
    atomic_store(&ctx->open, 1);
    pthread_mutex_lock(&ctx->lock);
    atomic_fetch_add(&ctx->generation, 1); /* publishes the job to spinning workers */
    if (ctx->sleepers) pthread_cond_broadcast(&ctx->wake);
    pthread_mutex_unlock(&ctx->lock);

    run_tasks(ctx, 0);

    /* Every task is claimed; those claimed by workers end before they leave. */
    atomic_store(&ctx->open, 0);
    for (int i = 0; i < SPIN_ROUNDS && atomic_load(&ctx->left) != atomic_load(&ctx->joined); i++)
        cpu_relax();
    if (atomic_load(&ctx->left) != atomic_load(&ctx->joined)) {
        pthread_mutex_lock(&ctx->lock);
        while (atomic_load(&ctx->left) != atomic_load(&ctx->joined))
            pthread_cond_wait(&ctx->idle, &ctx->lock);
        pthread_mutex_unlock(&ctx->lock);
    }
}

static ra_status acquire(ra_context *ctx, int slot, size_t bytes, ra_scratch *out)
{
    out->data = NULL;
    out->owned = 0;
    if (bytes == 0) bytes = 64;
    if (!ctx) {
        out->data = ra_alloc(bytes);
        out->owned = 1;
        if (!out->data) return ra_fail(RA_ERR_NOMEM, "allocating %zu bytes of scratch", bytes);
        return RA_OK;
    }
    if (ctx->workspace_bytes[slot] < bytes) {
        void *grown = ra_alloc(bytes);
        if (!grown) return ra_fail(RA_ERR_NOMEM, "allocating %zu bytes of scratch", bytes);
        ra_free(ctx->workspace[slot]);
        ctx->workspace[slot] = grown;
        ctx->workspace_bytes[slot] = bytes;
    }
    out->data = ctx->workspace[slot];
    return RA_OK;
}

ra_status ra_scratch_acquire(ra_context *ctx, size_t bytes, ra_scratch *out)
{
    return acquire(ctx, 0, bytes, out);
}

ra_status ra_scratch_acquire_outer(ra_context *ctx, size_t bytes, ra_scratch *out)
{
    return acquire(ctx, 1, bytes, out);
}

ra_status ra_scratch_acquire_panel(ra_context *ctx, size_t bytes, ra_scratch *out)
{
    return acquire(ctx, 2, bytes, out);
}

void ra_scratch_release(ra_scratch *scratch)
{
    if (scratch->owned) ra_free(scratch->data);
    scratch->data = NULL;
    scratch->owned = 0;
}
