/* threadpool.c - persistent worker threads for the CPU backend's row-parallel ops. */
#include "nn/threadpool.h"

struct _ClThreadPool {
    int n_threads;     /* the caller included */
    GThread **workers; /* (n_threads − 1) */
    GMutex run_lock;   /* one job at a time */
    GMutex lock;       /* guards everything below */
    GCond wake;        /* workers wait here for a new generation */
    GCond done;        /* the caller waits here for pending == 0 */
    guint64 generation;
    int pending;  /* workers still busy with this generation's job */
    int n_chunks; /* threads taking part in this job (chunk 0 is the caller's) */
    gboolean quit;
    ClParallelFn fn;
    void *ctx;
    int n_items;
    int sleeping;           /* workers waiting on `wake` (not polling): only they need the futex */
    gboolean caller_asleep; /* the caller waits on `done` */
};

typedef struct {
    ClThreadPool *pool;
    int index; /* 1 .. n_threads − 1 */
} Worker;

/* A job that follows another within this many microseconds finds its workers awake: after a job
 * a worker (and the caller, for the job's end) polls for this long before sleeping on the
 * condition variable. A decode step is hundreds of small jobs back to back, and a sleep and
 * wake-up (futex, 10-40 µs on a VM) per job would cost more than the work; a bounded poll keeps
 * the core only briefly when nothing follows. */
#define SPIN_US 200

static inline void cpu_relax(void)
{
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#endif
}

/* Polls *v (read without the lock) until it differs from `seen` or *quit is set, for SPIN_US at
 * most; TRUE when it changed. */
static gboolean spin_while_u64(const guint64 *v, guint64 seen, const gboolean *quit)
{
    gint64 until = g_get_monotonic_time() + SPIN_US;
    for (int i = 0;; i++) {
        if (__atomic_load_n(v, __ATOMIC_ACQUIRE) != seen || __atomic_load_n(quit, __ATOMIC_ACQUIRE))
            return TRUE;
        cpu_relax();
        if ((i & 255) == 255 && g_get_monotonic_time() > until)
            return FALSE;
    }
}

/* Polls *v until it is 0, for SPIN_US at most. */
static gboolean spin_until_zero(const int *v)
{
    gint64 until = g_get_monotonic_time() + SPIN_US;
    for (int i = 0;; i++) {
        if (__atomic_load_n(v, __ATOMIC_ACQUIRE) == 0)
            return TRUE;
        cpu_relax();
        if ((i & 255) == 255 && g_get_monotonic_time() > until)
            return FALSE;
    }
}

static void chunk_bounds(int n_items, int n_chunks, int c, int *begin, int *end)
{
    *begin = (int)((gint64)n_items * c / n_chunks);
    *end = (int)((gint64)n_items * (c + 1) / n_chunks);
}

static gpointer worker_main(gpointer data)
{
    Worker *w = data;
    ClThreadPool *pool = w->pool;
    guint64 seen = 0;
    g_mutex_lock(&pool->lock);
    for (;;) {
        gboolean polled = FALSE;
        while (pool->generation == seen && !pool->quit) {
            if (!polled) { /* first a bounded poll, without the lock */
                polled = TRUE;
                g_mutex_unlock(&pool->lock);
                spin_while_u64(&pool->generation, seen, &pool->quit);
                g_mutex_lock(&pool->lock);
                continue;
            }
            pool->sleeping++;
            g_cond_wait(&pool->wake, &pool->lock);
            pool->sleeping--;
        }
        if (pool->quit)
            break;
        seen = pool->generation;
        if (w->index >= pool->n_chunks)
            continue; /* not needed for this (small) job */
        ClParallelFn fn = pool->fn;
        void *ctx = pool->ctx;
        int begin, end;
        chunk_bounds(pool->n_items, pool->n_chunks, w->index, &begin, &end);
        g_mutex_unlock(&pool->lock);
        if (end > begin)
            fn(ctx, begin, end);
        g_mutex_lock(&pool->lock);
        __atomic_store_n(&pool->pending, pool->pending - 1, __ATOMIC_RELEASE);
        if (pool->pending == 0 && pool->caller_asleep)
            g_cond_signal(&pool->done);
    }
    g_mutex_unlock(&pool->lock);
    g_free(w);
    return NULL;
}

ClThreadPool *cl_threadpool_new(int n_threads)
{
    if (n_threads <= 0)
        n_threads = (int)g_get_num_processors();
    n_threads = CLAMP(n_threads, 1, 256);
    ClThreadPool *pool = g_new0(ClThreadPool, 1);
    pool->n_threads = n_threads;
    g_mutex_init(&pool->run_lock);
    g_mutex_init(&pool->lock);
    g_cond_init(&pool->wake);
    g_cond_init(&pool->done);
    pool->workers = g_new0(GThread *, n_threads);
    for (int i = 1; i < n_threads; i++) {
        Worker *w = g_new(Worker, 1);
        w->pool = pool;
        w->index = i;
        g_autofree char *name = g_strdup_printf("cl-worker-%d", i);
        GError *err = NULL;
        pool->workers[i - 1] = g_thread_try_new(name, worker_main, w, &err);
        if (!pool->workers[i - 1]) {
            /* fewer threads than asked: keep what started */
            g_clear_error(&err);
            g_free(w);
            pool->n_threads = i;
            break;
        }
    }
    return pool;
}

int cl_threadpool_size(const ClThreadPool *pool)
{
    return pool->n_threads;
}

void cl_threadpool_run(ClThreadPool *pool, int n_items, int grain, ClParallelFn fn, void *ctx)
{
    if (n_items <= 0)
        return;
    grain = MAX(grain, 1);
    int n_chunks = MIN(pool->n_threads, (n_items + grain - 1) / grain);
    if (n_chunks <= 1) {
        fn(ctx, 0, n_items);
        return;
    }
    g_mutex_lock(&pool->run_lock);
    g_mutex_lock(&pool->lock);
    pool->fn = fn;
    pool->ctx = ctx;
    pool->n_items = n_items;
    pool->n_chunks = n_chunks;
    pool->pending = n_chunks - 1;
    __atomic_store_n(&pool->generation, pool->generation + 1, __ATOMIC_RELEASE);
    if (pool->sleeping > 0) /* polling workers see the generation change by themselves */
        g_cond_broadcast(&pool->wake);
    g_mutex_unlock(&pool->lock);

    int begin, end;
    chunk_bounds(n_items, n_chunks, 0, &begin, &end);
    fn(ctx, begin, end);

    /* the workers usually finish within microseconds of the caller: poll before sleeping */
    spin_until_zero(&pool->pending);
    g_mutex_lock(&pool->lock);
    while (pool->pending > 0) {
        pool->caller_asleep = TRUE;
        g_cond_wait(&pool->done, &pool->lock);
        pool->caller_asleep = FALSE;
    }
    g_mutex_unlock(&pool->lock);
    g_mutex_unlock(&pool->run_lock);
}

void cl_threadpool_free(ClThreadPool *pool)
{
    if (!pool)
        return;
    g_mutex_lock(&pool->lock);
    pool->quit = TRUE;
    g_cond_broadcast(&pool->wake);
    g_mutex_unlock(&pool->lock);
    for (int i = 0; i < pool->n_threads - 1; i++)
        if (pool->workers[i])
            g_thread_join(pool->workers[i]);
    g_free(pool->workers);
    g_mutex_clear(&pool->run_lock);
    g_mutex_clear(&pool->lock);
    g_cond_clear(&pool->wake);
    g_cond_clear(&pool->done);
    g_free(pool);
}
