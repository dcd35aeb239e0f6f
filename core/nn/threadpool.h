/* threadpool.h - a small persistent pool that splits a loop over rows; idle workers sleep. */
#pragma once

#include <glib.h>

G_BEGIN_DECLS

typedef struct _ClThreadPool ClThreadPool;

/* Processes items [begin, end) of a loop; `ctx` is the caller's argument block. */
typedef void (*ClParallelFn)(void *ctx, int begin, int end);

/* `n_threads` threads in all, the caller's included (so n_threads − 1 workers); 0 = one per
 * core. After a job the workers poll for the next one for a fraction of a millisecond (a decode
 * step is hundreds of small jobs back to back), then block on a condition variable: the cores
 * belong to whatever runs next (in the CPU backend, also the products: OpenBLAS runs
 * single-threaded inside the pool's tasks). */
ClThreadPool *cl_threadpool_new(int n_threads);
int cl_threadpool_size(const ClThreadPool *pool);
/* Runs fn over [0, n_items) cut into one contiguous chunk per thread (the caller takes the
 * first) and returns when every chunk is done. Loops of fewer than `grain` items per thread run
 * on fewer threads (all on the caller when n_items <= grain), so small ops do not pay for a
 * wake-up. One job at a time: concurrent calls are serialised; `fn` must not call back into the
 * same pool. */
void cl_threadpool_run(ClThreadPool *pool, int n_items, int grain, ClParallelFn fn, void *ctx);
void cl_threadpool_free(ClThreadPool *pool);

G_END_DECLS
