/* mpi.h - data-parallel training across processes over MPI (Open MPI from Debian): the ranks of
 * one `mpirun` each take every size-th sample of a step's batch, and their gradients and losses
 * are summed across the ranks before each identical AdamW update, so every rank holds the same
 * parameters. Rank 0 alone writes checkpoints, the log and the model. Without MPI in the build,
 * cl_train_mpi_init refuses with a reason and everything else runs as one rank. */
#pragma once

#include <glib.h>

G_BEGIN_DECLS

/* This process's place: rank 0 of 1 without MPI. */
typedef struct {
    int rank, size;
} ClTrainComm;

/* Whether this build has MPI. */
gboolean cl_train_mpi_available(void);
/* Joins the job mpirun started (MPI_Init_thread, any one thread at a time); *comm gets the rank
 * and the size. FALSE and an error: no MPI in this build, or MPI would not start. */
gboolean cl_train_mpi_init(ClTrainComm *comm, GError **error);
/* Ends it (after the last collective call). */
void cl_train_mpi_finalize(void);
/* Ends every rank's process at once (one rank failed alone: the others would wait for it). */
void cl_train_mpi_abort(int code);

/* In-place sums across every rank of the communicator: each rank gets the same totals. A no-op
 * for one rank. */
void cl_train_comm_sum_floats(const ClTrainComm *comm, float *buf, size_t n);
void cl_train_comm_sum_doubles(const ClTrainComm *comm, double *buf, size_t n);
/* The largest of each rank's v. */
int cl_train_comm_max_int(const ClTrainComm *comm, int v);

G_END_DECLS
