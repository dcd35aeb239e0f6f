/* mpi.c - the trainer's sums across MPI ranks (mpi.h). */
#include "train/mpi.h"

#include <limits.h>
#include <stdlib.h>

#include "cl-config.h"
#include "train/trainer.h"

/* the engine-only programs (core/meson.build's engine_only_lib) are built without MPI */
#if CL_HAVE_MPI && !defined(CL_ENGINE_ONLY)
#include <mpi.h>

gboolean cl_train_mpi_available(void)
{
    return TRUE;
}

gboolean cl_train_mpi_init(ClTrainComm *comm, GError **error)
{
    int provided = 0;
    /* the trainer runs on its own thread, the command line's main loop on the first */
    if (MPI_Init_thread(NULL, NULL, MPI_THREAD_SERIALIZED, &provided) != MPI_SUCCESS) {
        g_set_error_literal(error, CL_TRAINER_ERROR, CL_TRAINER_ERROR_OPTIONS,
                            "--mpi: MPI did not start (run the command under mpirun)");
        return FALSE;
    }
    if (provided < MPI_THREAD_SERIALIZED) {
        g_set_error(error, CL_TRAINER_ERROR, CL_TRAINER_ERROR_OPTIONS,
                    "--mpi: this MPI library cannot be called from the training thread "
                    "(thread level %d)",
                    provided);
        MPI_Finalize();
        return FALSE;
    }
    MPI_Comm_rank(MPI_COMM_WORLD, &comm->rank);
    MPI_Comm_size(MPI_COMM_WORLD, &comm->size);
    return TRUE;
}

void cl_train_mpi_finalize(void)
{
    int done = 0;
    MPI_Finalized(&done);
    if (!done)
        MPI_Finalize();
}

void cl_train_mpi_abort(int code)
{
    MPI_Abort(MPI_COMM_WORLD, code);
}

/* MPI counts are ints: large buffers go in pieces */
#define PIECE ((size_t)1 << 28)

void cl_train_comm_sum_floats(const ClTrainComm *comm, float *buf, size_t n)
{
    if (!comm || comm->size <= 1)
        return;
    for (size_t at = 0; at < n; at += PIECE)
        MPI_Allreduce(MPI_IN_PLACE, buf + at, (int)MIN(PIECE, n - at), MPI_FLOAT, MPI_SUM,
                      MPI_COMM_WORLD);
}

void cl_train_comm_sum_doubles(const ClTrainComm *comm, double *buf, size_t n)
{
    if (!comm || comm->size <= 1)
        return;
    for (size_t at = 0; at < n; at += PIECE)
        MPI_Allreduce(MPI_IN_PLACE, buf + at, (int)MIN(PIECE, n - at), MPI_DOUBLE, MPI_SUM,
                      MPI_COMM_WORLD);
}

int cl_train_comm_max_int(const ClTrainComm *comm, int v)
{
    if (!comm || comm->size <= 1)
        return v;
    int out = v;
    MPI_Allreduce(&v, &out, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
    return out;
}

#else

gboolean cl_train_mpi_available(void)
{
    return FALSE;
}

gboolean cl_train_mpi_init(ClTrainComm *comm, GError **error)
{
    comm->rank = 0, comm->size = 1;
#ifdef CL_ENGINE_ONLY
    g_set_error_literal(error, CL_TRAINER_ERROR, CL_TRAINER_ERROR_OPTIONS,
                        "--mpi: the engine-only programs have no MPI (changelens-cli has)");
#else
    g_set_error_literal(error, CL_TRAINER_ERROR, CL_TRAINER_ERROR_OPTIONS,
                        "--mpi: this build has no MPI (install libopenmpi-dev and rebuild)");
#endif
    return FALSE;
}

void cl_train_mpi_finalize(void) {}

void cl_train_mpi_abort(int code)
{
    exit(code);
}

void cl_train_comm_sum_floats(const ClTrainComm *comm, float *buf, size_t n)
{
    (void)comm, (void)buf, (void)n;
}

void cl_train_comm_sum_doubles(const ClTrainComm *comm, double *buf, size_t n)
{
    (void)comm, (void)buf, (void)n;
}

int cl_train_comm_max_int(const ClTrainComm *comm, int v)
{
    (void)comm;
    return v;
}

#endif
