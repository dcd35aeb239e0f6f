/* test-casedb-kill.c - a writer SIGKILLed at random points (while it creates the database, or
 * within its first few edits) never loses an edit it saw committed and never leaves a damaged
 * database. The writer is a forked child that reports each commit on a pipe (write(2):
 * unbuffered, and atomic below PIPE_BUF); the parent then reopens the file (recovering the
 * WAL), checks its integrity and looks for every reported edit with its exact text. */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

#include "casedb/casedb.h"
#include "fixtures.h"

#define ITERATIONS 120
#define FRESH_EVERY 10 /* every 10th writer also creates the database: kills during migration */

/* The child: (create and) open, then edit until killed. Reports "case ID" once and
 * "VERSION_ID N" after each commit. Never returns. */
static void writer(const char *path, gint64 case_id, guint64 first_n, int fd)
{
    GError *err = NULL;
    ClCaseDb *db = cl_casedb_open(path, CL_CASEDB_OPEN_DEFAULT, &err);
    if (!db)
        _exit(2);
    char line[96];
    int len;
    if (!case_id) {
        if (!cl_casedb_case_new(db, "killed writer", &case_id, &err))
            _exit(3);
        len = g_snprintf(line, sizeof line, "case %" G_GINT64_FORMAT "\n", case_id);
        if (write(fd, line, (size_t)len) != len)
            _exit(4);
    }
    for (guint64 n = first_n;; n++) {
        char text[64];
        g_snprintf(text, sizeof text, "edit %" G_GUINT64_FORMAT, n);
        gint64 version_id = 0;
        if (!cl_casedb_description_edit(db, case_id, text, "writer", 0, &version_id, &err))
            _exit(5);
        len = g_snprintf(line, sizeof line, "%" G_GINT64_FORMAT " %" G_GUINT64_FORMAT "\n",
                         version_id, n);
        if (write(fd, line, (size_t)len) != len)
            _exit(6);
    }
}

typedef struct {
    guint kills, fresh, committed, verified, lost;
} Totals;

/* Reads what a writer of an existing case reported (one line per commit) until it has reported
 * `commits` edits, or closed the pipe. */
static void read_commits(int fd, GString *out, guint commits)
{
    guint seen = 0;
    char buf[256];
    ssize_t n;
    while (seen < commits && ((n = read(fd, buf, sizeof buf)) > 0 || (n < 0 && errno == EINTR))) {
        for (ssize_t i = 0; i < n; i++)
            seen += buf[i] == '\n';
        if (n > 0)
            g_string_append_len(out, buf, n);
    }
}

/* Forks a writer and kills it, returns what it reported. A writer that creates the database
 * dies 1-30 ms after it starts (during creation and migration, or its first edits); one of the
 * main database after its 1st to 4th reported commit and then 0-10 ms more, at any point of a
 * later edit. Counting commits rather than time keeps the kills on real work however slowly the
 * disk syncs the reviewer's edits (synchronous=FULL) on a loaded machine. */
static char *run_writer(const char *path, gint64 case_id, guint64 first_n, gboolean fresh)
{
    int fds[2];
    g_assert_cmpint(pipe(fds), ==, 0);
    pid_t pid = fork();
    g_assert_cmpint(pid, >=, 0);
    if (pid == 0) {
        close(fds[0]);
        writer(path, case_id, first_n, fds[1]);
    }
    close(fds[1]);
    GString *out = g_string_new(NULL);
    if (fresh) {
        g_usleep((gulong)g_test_rand_int_range(1, 31) * 1000);
    } else {
        read_commits(fds[0], out, (guint)g_test_rand_int_range(1, 5));
        g_usleep((gulong)g_test_rand_int_range(0, 10001));
    }
    kill(pid, SIGKILL);
    int status = 0;
    while (waitpid(pid, &status, 0) < 0 && errno == EINTR)
        ;
    /* it must have died by our signal, not given up by itself */
    if (!WIFSIGNALED(status))
        g_error("the writer exited by itself with status %d", WEXITSTATUS(status));
    char buf[4096];
    ssize_t n;
    while ((n = read(fds[0], buf, sizeof buf)) > 0 || (n < 0 && errno == EINTR))
        if (n > 0)
            g_string_append_len(out, buf, n);
    close(fds[0]);
    return g_string_free(out, FALSE);
}

/* Reopens the database and checks every committed edit the writer reported. */
static void verify(const char *path, gint64 *case_id, const char *report, Totals *t)
{
    g_autoptr(GError) err = NULL;
    g_autoptr(ClCaseDb) db = cl_casedb_open(path, CL_CASEDB_OPEN_DEFAULT, &err);
    g_assert_no_error(err);
    g_assert_cmpint(cl_casedb_user_version(db), ==, cl_casedb_schema_version());
    if (!cl_casedb_check_integrity(db, &err))
        g_error("after a kill: %s", err->message);

    g_auto(GStrv) lines = g_strsplit(report, "\n", -1);
    for (guint i = 0; lines[i]; i++)
        if (g_str_has_prefix(lines[i], "case "))
            *case_id = g_ascii_strtoll(lines[i] + 5, NULL, 10);
    if (!*case_id)
        return; /* killed before the case was made: nothing was promised */

    g_autoptr(ClCase) c = cl_casedb_get_case(db, *case_id, CL_CASE_GET_DEFAULT, &err);
    g_assert_no_error(err);
    g_autoptr(GHashTable) texts = g_hash_table_new(g_int64_hash, g_int64_equal);
    for (guint i = 0; i < c->descriptions->len; i++) {
        ClCaseDescVersion *v = g_ptr_array_index(c->descriptions, i);
        g_assert_cmpuint(v->version, ==, i + 1); /* no holes: versions are whole or absent */
        g_hash_table_insert(texts, &v->id, v->text);
    }
    for (guint i = 0; lines[i]; i++) {
        if (!*lines[i] || g_str_has_prefix(lines[i], "case "))
            continue;
        char *end = NULL;
        gint64 id = g_ascii_strtoll(lines[i], &end, 10);
        g_autofree char *want = g_strdup_printf("edit %s", end + 1);
        const char *got = g_hash_table_lookup(texts, &id);
        t->committed++;
        if (g_strcmp0(got, want) == 0)
            t->verified++;
        else
            t->lost++;
    }
    /* the search index agrees with the current version */
    const ClCaseDescVersion *cur = cl_case_current_description(c);
    if (cur) {
        g_autoptr(GPtrArray) hits = cl_casedb_search(db, cur->text + 5, 5, &err);
        g_assert_no_error(err);
        g_assert_cmpuint(hits->len, ==, 1);
        g_assert_cmpint(((ClCaseSearchHit *)g_ptr_array_index(hits, 0))->case_id, ==, *case_id);
    }
}

static void test_kill(void)
{
    g_autofree char *dir = cl_fixture_tmpdir("casedb-kill");
    g_autofree char *main_path = g_build_filename(dir, "cases.db", NULL);
    gint64 main_case = 0;
    {
        g_autoptr(GError) err = NULL;
        g_autoptr(ClCaseDb) db = cl_casedb_open(main_path, CL_CASEDB_OPEN_DEFAULT, &err);
        g_assert_no_error(err);
        g_assert_true(cl_casedb_case_new(db, "kill target", &main_case, &err));
    }
    Totals t = { 0 };
    gint64 start = g_get_monotonic_time();
    for (guint i = 0; i < ITERATIONS; i++) {
        gboolean fresh = i % FRESH_EVERY == FRESH_EVERY - 1;
        g_autofree char *fresh_path = g_strdup_printf("%s/fresh-%u.db", dir, i);
        const char *path = fresh ? fresh_path : main_path;
        gint64 case_id = fresh ? 0 : main_case;
        /* unique texts: an edit committed but not reported must not be mistaken for another */
        g_autofree char *report = run_writer(path, case_id, (guint64)i * 1000000 + 1, fresh);
        t.kills++;
        if (fresh) {
            t.fresh++;
            if (!g_file_test(path, G_FILE_TEST_EXISTS))
                continue;
        }
        verify(path, &case_id, report, &t);
    }
    double secs = (double)(g_get_monotonic_time() - start) / 1e6;
    g_test_message("%u kills (%u while creating the database), %u committed edits verified of "
                   "%u reported, %u lost, %.1f s",
                   t.kills, t.fresh, t.verified, t.committed, t.lost, secs);
    g_assert_cmpuint(t.lost, ==, 0);
    g_assert_cmpuint(t.verified, ==, t.committed);
    /* the kills must have interrupted real work, not idle writers */
    g_assert_cmpuint(t.committed, >, ITERATIONS);
    cl_fixture_rmdir(dir);
}

int main(int argc, char **argv)
{
    g_test_init(&argc, &argv, NULL);
    g_test_add_func("/casedb/kill", test_kill);
    return g_test_run();
}
