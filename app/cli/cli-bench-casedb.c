/* cli-bench-casedb.c - `changelens-cli bench --casedb`: fills a fresh case database with N cases
 * of three images each (metadata, a run, a generated description, heatmaps, some edits and
 * reviews, notes), then times full-text searches. Reports inserts/s and search latency
 * percentiles; the target is p95 under 50 ms at 10,000 cases. */
#include <glib/gstdio.h>
#include "jsonnum.h"
#include <json-glib/json-glib.h>
#include <math.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "casedb/casedb.h"
#include "cli.h"

#define PROG CL_CLI_NAME " bench --casedb"

/* Words the generated texts are made of: the three domains' vocabularies, so searches hit a
 * realistic spread of common and rare terms. */
static const char *const subjects[] = {
    "building",     "road",        "roof",     "parking lot", "tree line",     "field",
    "pond",         "opacity",     "effusion", "nodule",      "consolidation", "cardiomegaly",
    "pneumothorax", "atelectasis", "edema",    "catheter",    "lamp",          "chair",
    "vase",         "logo",        "sky",      "shadow",      "car",           "fence",
    "bridge",       "warehouse",   "runway",
};
static const char *const verbs[] = {
    "appeared",          "was removed",        "grew",           "shrank",
    "moved to the left", "moved to the right", "changed colour", "is unchanged",
    "was replaced",      "resolved",           "worsened",       "is new",
};
static const char *const places[] = {
    "in the upper left",         "in the lower right",      "near the centre",
    "along the northern edge",   "in the right lower lobe", "in the left upper lobe",
    "at the costophrenic angle", "next to the river",       "behind the house",
    "in the background",         "at the crossing",
};
static const char *const surnames[] = {
    "Okafor", "Lindqvist", "Tanaka",  "Moreau", "Kowalski", "Haddad", "Nguyen", "Schmidt",
    "Rossi",  "Fernandes", "Ivanova", "Mbeki",  "Larsen",   "Dubois", "Yilmaz", "Novak",
};
static const char *const modalities[] = { "DX", "CR", "TIFF", "PNG" };

#define PICK(r, a) (a[g_rand_int_range((r), 0, (gint32)G_N_ELEMENTS(a))])

static char *make_description(GRand *r)
{
    GString *s = g_string_new(NULL);
    int n = g_rand_int_range(r, 1, 4);
    for (int i = 0; i < n; i++) {
        const char *subj = PICK(r, subjects);
        g_string_append_printf(s, "%sThe %s %s %s (%d px).", i ? " " : "", subj, PICK(r, verbs),
                               PICK(r, places), g_rand_int_range(r, 4, 400));
    }
    return g_string_free(s, FALSE);
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static double percentile(const double *sorted, int n, double p)
{
    if (n == 0)
        return 0;
    double pos = p * (n - 1);
    int lo = (int)floor(pos), hi = (int)ceil(pos);
    return sorted[lo] + (sorted[hi] - sorted[lo]) * (pos - lo);
}

static gboolean insert_case(ClCaseDb *db, GRand *r, int k, int n_images, int grid, GError **error)
{
    const char *surname = PICK(r, surnames);
    const char *mod = PICK(r, modalities);
    g_autofree char *name = g_strdup_printf("Case %05d %s follow-up", k, surname);
    gint64 id = 0;
    if (!cl_casedb_case_new(db, name, &id, error))
        return FALSE;
    g_autoptr(GPtrArray) imgs = g_ptr_array_new_with_free_func((GDestroyNotify)cl_case_image_free);
    for (int i = 0; i < n_images; i++) {
        ClCaseImage *img = g_new0(ClCaseImage, 1);
        img->position = (guint)i;
        img->path = g_strdup_printf("/data/studies/%05d/image-%d.%s", k, i + 1,
                                    strcmp(mod, "PNG") == 0    ? "png"
                                    : strcmp(mod, "TIFF") == 0 ? "tif"
                                                               : "dcm");
        GChecksum *ck = g_checksum_new(G_CHECKSUM_SHA256);
        g_checksum_update(ck, (const guchar *)img->path, -1);
        img->sha256 = g_strdup(g_checksum_get_string(ck));
        g_checksum_free(ck);
        img->file_size = g_rand_int_range(r, 100000, 20000000);
        img->file_mtime = 1700000000 + k;
        gboolean dicom = mod[0] == 'D' || mod[0] == 'C';
        img->format = g_strdup(dicom ? "DICOM" : mod);
        img->modality = dicom ? g_strdup(mod) : NULL;
        img->width = img->height = 2048;
        img->n_frames = 1;
        img->acquired_at =
            g_strdup_printf("2026%02d%02d101500", 1 + (k + i) % 12, 1 + (k * 7 + i) % 28);
        img->metadata_json =
            dicom ? g_strdup_printf("{\"PatientName\": \"%s^Alex\", \"PatientID\": \"P%06d\", "
                                    "\"StudyDescription\": \"Chest %s follow-up %d\", "
                                    "\"InstitutionName\": \"General Hospital\"}",
                                    surname, k, mod, i + 1)
                  : g_strdup_printf("{\"Software\": \"Editor %d\", \"Tile\": \"T%05d\"}", i, k);
        g_ptr_array_add(imgs, img);
    }
    g_autoptr(GArray) ids = g_array_new(FALSE, FALSE, sizeof(gint64));
    if (!cl_casedb_images_add(db, id, imgs, ids, error))
        return FALSE;

    ClCaseRun run = {
        .model_name = "bench model",
        .model_sha256 = "0000000000000000000000000000000000000000000000000000000000000000",
        .model_config_json = "{\"preset\": \"tiny\"}",
        .device = "cpu (2 threads)",
        .settings_json = "{\"beam_size\": 1}",
        .seed = (guint64)k,
        .encode_ms = 60,
        .prefill_ms = 30,
        .decode_ms = 500,
        .total_ms = 600,
        .n_tokens = 64,
    };
    g_autoptr(GPtrArray) heat =
        g_ptr_array_new_with_free_func((GDestroyNotify)cl_case_heatmap_free);
    for (int i = 1; i < n_images; i++) {
        ClCaseHeatmap *h = g_new0(ClCaseHeatmap, 1);
        h->image_id = g_array_index(ids, gint64, i);
        h->layer = -1;
        h->kind = g_strdup("update_norm");
        h->input_size = grid * 16;
        h->grid_w = h->grid_h = (guint)grid;
        h->data = g_new(float, grid * grid);
        for (int j = 0; j < grid * grid; j++)
            h->data[j] = (float)g_rand_double(r);
        g_ptr_array_add(heat, h);
    }
    g_autofree char *text = make_description(r);
    if (!cl_casedb_run_record(db, id, &run, text, heat, NULL, NULL, error))
        return FALSE;
    /* a reviewer edits every fourth case and accepts every third; some get a note */
    if (k % 4 == 0) {
        g_autofree char *edited =
            g_strdup_printf("%s Reviewed against the prior of %s.", text, PICK(r, surnames));
        if (!cl_casedb_description_edit(db, id, edited, "reviewer", 0, NULL, error))
            return FALSE;
    }
    if (k % 3 == 0 &&
        !cl_casedb_description_set_status(db, id, CL_DESC_ACCEPTED, "reviewer", 0, NULL, error))
        return FALSE;
    if (k % 5 == 0) {
        g_autofree char *note =
            g_strdup_printf("Compare with the %s study next time.", PICK(r, subjects));
        if (!cl_casedb_note_add(db, id, 0, note, NULL, error))
            return FALSE;
    }
    return TRUE;
}

static char *make_query(GRand *r, int i)
{
    switch (i % 5) {
    case 0: return g_strdup(PICK(r, subjects));
    case 1: return g_strdup_printf("%s %s", PICK(r, subjects), PICK(r, verbs));
    case 2: return g_strdup(PICK(r, surnames));
    case 3: { /* a prefix, as someone typing */
        const char *w = PICK(r, subjects);
        return g_strndup(w, MIN(strlen(w), 4));
    }
    default: return g_strdup_printf("%s %s", PICK(r, places), PICK(r, subjects));
    }
}

typedef struct {
    gboolean json, keep;
    gint64 n_cases, n_images, n_queries, grid, seed;
    char *db_path;
    char *server; /* --postgresql: a PostgreSQL server to benchmark beside SQLite */
} CasedbArgs;

/* What the benchmark measured on one engine. */
typedef struct {
    double insert_s;
    double p50, p95, pmax; /* search latency, ms */
    guint64 total_hits;
    int with_hits;
    double list_ms;
    guint listed;
    double db_mb;
} CasedbTimes;

/* One engine under test: its database (made for the run), its own stream of generated cases
 * (the same seed for each: the same cases), its figures. */
typedef struct {
    const char *label; /* "sqlite", "postgresql" */
    char *location;
    char *tmpdir; /* SQLite: the temporary folder (NULL with --db) */
    char *made;   /* PostgreSQL: the database made on the server */
    ClCaseDb *db;
    GRand *r;
    double *lat;
    CasedbTimes t;
} Engine;

/* Returns -1 to go on, else the exit status. */
static int parse_casedb_args(int argc, char **argv, CasedbArgs *a)
{
    gboolean casedb = FALSE;
    a->n_cases = 10000, a->n_images = 3, a->n_queries = 250, a->grid = 10, a->seed = 1;
    const ClCliIntOption ints[] = {
        { "cases", 'n', 1, G_MAXINT, &a->n_cases },     { "images", 0, 2, 64, &a->n_images },
        { "queries", 'q', 1, G_MAXINT, &a->n_queries }, { "grid", 0, 1, 256, &a->grid },
        { "seed", 0, 0, G_MAXINT64, &a->seed },         { NULL },
    };
    GOptionEntry entries[] = {
        { "casedb", 0, 0, G_OPTION_ARG_NONE, &casedb, "Benchmark the case database", NULL },
        CL_CLI_INT_ENTRY("cases", 'n', "Cases to insert (10000)", "N"),
        CL_CLI_INT_ENTRY("images", 0, "Images per case (3)", "N"),
        CL_CLI_INT_ENTRY("queries", 'q', "Searches to time (250)", "N"),
        CL_CLI_INT_ENTRY("grid", 0, "Heatmap grid side (10, the tiny model's)", "N"),
        CL_CLI_INT_ENTRY("seed", 0, "Seed of the generated cases (1)", "N"),
        { "db", 0, 0, G_OPTION_ARG_FILENAME, &a->db_path,
          "SQLite file to create (default: a temporary one, deleted afterwards)", "PATH" },
        { "postgresql", 0, 0, G_OPTION_ARG_STRING, &a->server,
          "Also benchmark PostgreSQL, side by side: a database made on this server "
          "(postgresql://USER@HOST:PORT/DB, a user who may create databases), dropped afterwards",
          "ADDRESS" },
        { "keep", 0, 0, G_OPTION_ARG_NONE, &a->keep, "Keep the databases made for the run", NULL },
        { "json", 0, 0, G_OPTION_ARG_NONE, &a->json, "Print one JSON object", NULL },
        { NULL },
    };
    g_autoptr(GOptionContext) ctx =
        g_option_context_new("- case database inserts and search latency");
    cl_cli_add_entries(ctx, entries, ints);
    if (!cl_cli_parse_options(ctx, PROG, &argc, &argv))
        return CL_CLI_EXIT_USAGE;
    if (argc > 1)
        return cl_cli_usage_error(PROG, "unexpected argument '%s'", argv[1]);
    if (a->db_path && cl_casedb_is_server(a->db_path))
        return cl_cli_usage_error(PROG, "--db is the SQLite file; give a PostgreSQL server with "
                                        "--postgresql ADDRESS");
    if (a->server && !cl_casedb_is_server(a->server))
        return cl_cli_usage_error(PROG, "--postgresql takes a postgresql:// address, not '%s'",
                                  a->server);
    return -1;
}

/* Inserts the cases, with a progress line on stderr (text output only). */
static gboolean time_inserts(Engine *e, const CasedbArgs *a, GError **error)
{
    const int n_cases = (int)a->n_cases;
    gint64 t0 = g_get_monotonic_time(), last = t0;
    gboolean progress_shown = FALSE;
    for (int k = 1; k <= n_cases; k++) {
        if (!insert_case(e->db, e->r, k, (int)a->n_images, (int)a->grid, error)) {
            g_prefix_error(error, "%s, case %d: ", cl_casedb_engine(e->db), k);
            return FALSE;
        }
        gint64 now = g_get_monotonic_time();
        if (!a->json && now - last > 1000000) {
            double rate = k / ((now - t0) / 1e6);
            fprintf(stderr, "\r%s: %s: inserted %d of %d cases (%.0f/s, %.0f s left)   ", PROG,
                    cl_casedb_engine(e->db), k, n_cases, rate, (n_cases - k) / rate);
            last = now;
            progress_shown = TRUE;
        }
    }
    e->t.insert_s = (g_get_monotonic_time() - t0) / 1e6;
    if (progress_shown)
        fprintf(stderr, "\r%80s\r", "");
    return TRUE;
}

/* The same searches on every engine, the engines' turns alternating query by query; then the
 * latency percentiles, and listing the whole database as the app's case list does. */
static gboolean time_searches(Engine *engines, guint n_engines, const CasedbArgs *a, GError **error)
{
    const int n_queries = (int)a->n_queries;
    GRand *qr = g_rand_new_with_seed((guint32)a->seed ^ 0x5eedu);
    for (guint e = 0; e < n_engines; e++)
        engines[e].lat = g_new(double, n_queries);
    for (int i = 0; i < n_queries; i++) {
        g_autofree char *q = make_query(qr, i);
        for (guint k = 0; k < n_engines; k++) {
            Engine *e = &engines[i % 2 ? n_engines - 1 - k : k];
            gint64 s0 = g_get_monotonic_time();
            g_autoptr(GPtrArray) hits = cl_casedb_search(e->db, q, 50, error);
            e->lat[i] = (g_get_monotonic_time() - s0) / 1000.0;
            if (!hits) {
                g_prefix_error(error, "%s, search '%s': ", cl_casedb_engine(e->db), q);
                g_rand_free(qr);
                return FALSE;
            }
            e->t.total_hits += hits->len;
            e->t.with_hits += hits->len > 0;
        }
    }
    g_rand_free(qr);
    for (guint k = 0; k < n_engines; k++) {
        Engine *e = &engines[k];
        qsort(e->lat, n_queries, sizeof *e->lat, cmp_double);
        e->t.p50 = percentile(e->lat, n_queries, 0.50),
        e->t.p95 = percentile(e->lat, n_queries, 0.95);
        e->t.pmax = e->lat[n_queries - 1];
        gint64 l0 = g_get_monotonic_time();
        g_autoptr(GPtrArray) all = cl_casedb_list(e->db, error);
        e->t.list_ms = (g_get_monotonic_time() - l0) / 1000.0;
        if (!all) {
            g_prefix_error(error, "%s, list: ", cl_casedb_engine(e->db));
            return FALSE;
        }
        e->t.listed = all->len;
        gint64 size = cl_casedb_size(e->db);
        e->t.db_mb = size > 0 ? size / 1048576.0 : 0;
    }
    return TRUE;
}

/* One engine's figures as members of the object being built. */
static void add_times_json(JsonBuilder *b, const CasedbArgs *a, const Engine *e)
{
    const CasedbTimes *t = &e->t;
    const int n_cases = (int)a->n_cases, n_queries = (int)a->n_queries;
#define JD(k, v)                                                                                   \
    (json_builder_set_member_name(b, k), json_builder_add_double_value(b, cl_json_double(v)))
#define JI(k, v) (json_builder_set_member_name(b, k), json_builder_add_int_value(b, v))
    json_builder_set_member_name(b, "engine");
    json_builder_add_string_value(b, cl_casedb_engine(e->db));
    JI("cases", n_cases);
    JI("images_per_case", a->n_images);
    JI("heatmap_grid", a->grid);
    JD("insert_s", t->insert_s);
    JD("insert_cases_per_s", n_cases / t->insert_s);
    JD("insert_images_per_s", (double)n_cases * a->n_images / t->insert_s);
    JI("search_queries", n_queries);
    JI("search_queries_with_hits", t->with_hits);
    JD("search_mean_hits", (double)t->total_hits / n_queries);
    JD("search_p50_ms", t->p50);
    JD("search_p95_ms", t->p95);
    JD("search_max_ms", t->pmax);
    JD("search_p95_target_ms", 50);
    JD("list_ms", t->list_ms);
    JI("listed_cases", t->listed);
    JD("db_mb", t->db_mb);
#undef JD
#undef JI
}

/* SQLite's figures at the top level (as before); PostgreSQL's under "postgresql". */
static void print_casedb_json(const CasedbArgs *a, const Engine *engines, guint n_engines)
{
    g_autoptr(JsonBuilder) b = json_builder_new();
    json_builder_begin_object(b);
    add_times_json(b, a, &engines[0]);
    if (n_engines > 1) {
        json_builder_set_member_name(b, "postgresql");
        json_builder_begin_object(b);
        add_times_json(b, a, &engines[1]);
        json_builder_end_object(b);
    }
    json_builder_end_object(b);
    cl_cli_print_json(b);
}

static void print_casedb_text(const CasedbArgs *a, const Engine *engines, guint n_engines)
{
    const int n_cases = (int)a->n_cases, n_images = (int)a->n_images, grid = (int)a->grid;
    const int n_queries = (int)a->n_queries;
    if (n_engines == 1) {
        const CasedbTimes *t = &engines[0].t;
        printf("ChangeLens bench: case database (%s, WAL, FTS5), %s\n",
               cl_casedb_engine(engines[0].db), engines[0].location);
        printf("  inserted %d cases × %d images (run, description, %d heatmaps of %d×%d, "
               "edits, reviews, notes)\n",
               n_cases, n_images, n_images - 1, grid, grid);
        printf("  inserts            %.1f s   %.0f cases/s   %.0f images/s\n", t->insert_s,
               n_cases / t->insert_s, (double)n_cases * n_images / t->insert_s);
        printf("  search (%d queries, %d with hits, %.1f hits on average, limit 50)\n", n_queries,
               t->with_hits, (double)t->total_hits / n_queries);
        printf("    p50 %.2f ms   p95 %.2f ms   max %.2f ms   (target p95 < 50 ms: %s)\n", t->p50,
               t->p95, t->pmax, t->p95 < 50 ? "met" : "NOT met");
        printf("  list of all %u cases  %.1f ms;  database %.1f MB\n", t->listed, t->list_ms,
               t->db_mb);
        return;
    }
    const CasedbTimes *l = &engines[0].t, *p = &engines[1].t;
    printf("ChangeLens bench: case database, %s beside %s (the same %d cases × %d images, the "
           "same %d searches, turns alternating)\n",
           cl_casedb_engine(engines[1].db), cl_casedb_engine(engines[0].db), n_cases, n_images,
           n_queries);
    printf("  %-26s %16s %16s %12s\n", "", "SQLite (file)", "PostgreSQL", "PG / SQLite");
#define ROW(name, fmt, x, y) printf("  %-26s %16" fmt " %16" fmt " %12.2f\n", name, x, y, (y) / (x))
    ROW("inserts, cases/s", ".0f", n_cases / l->insert_s, n_cases / p->insert_s);
    ROW("search p50, ms", ".2f", l->p50, p->p50);
    ROW("search p95, ms", ".2f", l->p95, p->p95);
    ROW("search max, ms", ".2f", l->pmax, p->pmax);
    ROW("search hits, mean", ".1f", (double)l->total_hits / n_queries,
        (double)p->total_hits / n_queries);
    ROW("list of all cases, ms", ".1f", l->list_ms, p->list_ms);
    ROW("database, MB", ".1f", l->db_mb, p->db_mb);
#undef ROW
    printf("  target p95 < 50 ms: SQLite %s, PostgreSQL %s\n", l->p95 < 50 ? "met" : "NOT met",
           p->p95 < 50 ? "met" : "NOT met");
}

/* Makes the engine's database: SQLite's file (a temporary one unless --db), PostgreSQL's on the
 * server. */
static gboolean engine_open(Engine *e, const CasedbArgs *a, GError **error)
{
    if (g_str_equal(e->label, "postgresql")) {
        g_autofree char *name = g_strdup_printf("changelens_bench_%d_%" G_GINT64_FORMAT,
                                                (int)getpid(), g_get_real_time() % 1000000);
        if (!cl_casedb_server_create_database(a->server, name, &e->location, error))
            return FALSE;
        e->made = g_steal_pointer(&name);
    } else if (a->db_path) {
        if (g_file_test(a->db_path, G_FILE_TEST_EXISTS)) {
            g_set_error(error, G_FILE_ERROR, G_FILE_ERROR_EXIST,
                        "%s exists; the benchmark fills a new database (give another path)",
                        a->db_path);
            return FALSE;
        }
        e->location = g_strdup(a->db_path);
    } else {
        e->tmpdir = g_dir_make_tmp("changelens-bench-XXXXXX", error);
        if (!e->tmpdir)
            return FALSE;
        e->location = g_build_filename(e->tmpdir, "cases.db", NULL);
    }
    e->db = cl_casedb_open(e->location, CL_CASEDB_OPEN_DEFAULT, error);
    if (!e->db)
        return FALSE;
    cl_casedb_set_actor(e->db, "bench");
    e->r = g_rand_new_with_seed((guint32)a->seed);
    return TRUE;
}

/* Closes it; what was made for the run goes, unless --keep. */
static void engine_close(Engine *e, const CasedbArgs *a)
{
    g_clear_pointer(&e->db, cl_casedb_close);
    if (e->r)
        g_rand_free(e->r);
    g_free(e->lat);
    if (e->made && !a->keep) {
        g_autoptr(GError) err = NULL;
        if (!cl_casedb_server_drop_database(a->server, e->made, &err))
            fprintf(stderr, "%s: %s\n", PROG, err->message);
    } else if (e->made) {
        fprintf(stderr, "%s: kept %s\n", PROG, e->location);
    }
    if (e->tmpdir && !a->keep) {
        const char *suffixes[] = { "", "-wal", "-shm", "-journal" };
        for (guint i = 0; i < G_N_ELEMENTS(suffixes); i++) {
            g_autofree char *p = g_strconcat(e->location, suffixes[i], NULL);
            g_unlink(p);
        }
        g_rmdir(e->tmpdir);
    } else if (e->tmpdir) {
        fprintf(stderr, "%s: kept %s\n", PROG, e->location);
    }
    g_free(e->tmpdir);
    g_free(e->made);
    g_free(e->location);
}

int cl_cli_bench_casedb(int argc, char **argv)
{
    CasedbArgs a = { 0 };
    int rc = parse_casedb_args(argc, argv, &a);
    g_autofree char *db_path = a.db_path, *server = a.server;
    if (rc >= 0)
        return rc;
    Engine engines[2] = { { .label = "sqlite" }, { .label = "postgresql" } };
    guint n_engines = a.server ? 2 : 1;
    g_autoptr(GError) err = NULL;
    gboolean ok = TRUE;
    for (guint i = 0; ok && i < n_engines; i++)
        ok = engine_open(&engines[i], &a, &err) && time_inserts(&engines[i], &a, &err);
    ok = ok && time_searches(engines, n_engines, &a, &err);
    if (ok && a.json)
        print_casedb_json(&a, engines, n_engines);
    else if (ok)
        print_casedb_text(&a, engines, n_engines);
    else
        fprintf(stderr, "%s: %s\n", PROG, err->message);
    for (guint i = 0; i < n_engines; i++)
        engine_close(&engines[i], &a);
    return ok ? 0 : 1;
}
